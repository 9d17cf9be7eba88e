//! One relay, over a WebSocket (NIP-01): publishing an event (`["EVENT", <event>]` →
//! `["OK", <id>, <bool>, "<prefix>: <text>"]`) and reading one back by its id (`["REQ", <sub>,
//! {"ids": [<id>]}]` → `EVENT`s, then `EOSE`). Each exchange is a connection of its own, under
//! its budget (`tokio::time::timeout`), and says what it means for the event
//! ([`Published`]): taken, refused, never sent, or sent without a clear answer.
//!
//! What relays really answer (API-NOTES "Nostr"): a repeat is `duplicate: …` with `true`
//! (NIP-01) or `false` (the Python nostr-relay 1.14): the prefix decides, whatever the boolean.
//! The Python relay answers refusals with an **empty** id (`["OK","",false,"invalid: …"]`), so
//! an `OK` with an empty id on this connection is taken as the answer too. TLS (`wss://`) is
//! rustls on *ring*, with a client configuration of our own (never the process default).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::event::Event;
use crate::vars::{bad, ConfigError};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What one relay made of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// `OK true`: stored now.
    Accepted,
    /// `duplicate: …` (either boolean): it already had this very event.
    Duplicate(String),
    /// `OK false` with another prefix: not stored. `transient` for `rate-limited:` and
    /// `error:` (the same event later may be taken).
    Refused { message: String, transient: bool },
    /// The event never left (connect refused, handshake refused, TLS): not stored.
    NotSent(String),
    /// The event was sent and no clear answer came (connection lost, no `OK` in time): it
    /// may be stored.
    NoAnswer(String),
}

impl Published {
    /// Whether the relay holds the event.
    pub fn holds(&self) -> bool {
        matches!(self, Self::Accepted | Self::Duplicate(_))
    }

    /// For people and logs.
    pub fn describe(&self) -> String {
        match self {
            Self::Accepted => "accepted".into(),
            Self::Duplicate(m) => format!("already had it ({m})"),
            Self::Refused { message, .. } => format!("refused ({message})"),
            Self::NotSent(m) => format!("not sent ({m})"),
            Self::NoAnswer(m) => format!("no clear answer ({m})"),
        }
    }
}

/// The TLS client configuration for `wss://`: rustls on *ring*, the webpki roots.
static TLS: LazyLock<Option<Arc<rustls::ClientConfig>>> =
    LazyLock::new(|| crate::tls::client_config().ok().map(Arc::new));

/// Opens the WebSocket to `url` (`ws://` or `wss://`, checked by the configuration).
async fn connect(url: &str) -> Result<Socket, String> {
    let connector = if url.starts_with("wss://") {
        Connector::Rustls(TLS.clone().ok_or("TLS could not be set up")?)
    } else {
        Connector::Plain
    };
    match tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector)).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(resp)) => Err(format!(
            "the relay refused the WebSocket with HTTP {}",
            resp.status().as_u16()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The next JSON array the relay sends; `None` when the connection ended.
async fn next_array(socket: &mut Socket) -> Option<Result<Vec<Value>, String>> {
    loop {
        match socket.next().await? {
            Ok(Message::Text(text)) => {
                if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text.as_str()) {
                    return Some(Ok(items));
                }
            }
            Ok(Message::Close(_)) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(e.to_string())),
        }
    }
}

/// How an `OK`'s message reads: a duplicate, or a refusal (transient or not).
pub fn read_ok(accepted: bool, message: &str) -> Published {
    if message.starts_with("duplicate:") {
        return Published::Duplicate(message.to_owned());
    }
    if accepted {
        return Published::Accepted;
    }
    let transient = message.starts_with("rate-limited:") || message.starts_with("error:");
    Published::Refused {
        message: if message.is_empty() {
            "no reason given".to_owned()
        } else {
            message.to_owned()
        },
        transient,
    }
}

/// Sends `event` to the relay at `url` and waits for its `OK` (the event's id, or an empty
/// one), all within `budget`.
pub async fn publish(url: &str, event: &Event, budget: Duration) -> Published {
    let started = Instant::now();
    let mut socket = match timeout(budget, connect(url)).await {
        Ok(Ok(socket)) => socket,
        Ok(Err(e)) => return Published::NotSent(e),
        Err(_) => return Published::NotSent(format!("no connection within {budget:?}")),
    };
    let frame = json!(["EVENT", event.to_json()]).to_string();
    let left = budget.saturating_sub(started.elapsed());
    let exchange = async {
        if let Err(e) = socket.send(Message::text(frame)).await {
            return Published::NoAnswer(format!("the connection failed while sending: {e}"));
        }
        while let Some(item) = next_array(&mut socket).await {
            let items = match item {
                Ok(items) => items,
                Err(e) => return Published::NoAnswer(format!("the connection failed: {e}")),
            };
            if items.first().and_then(Value::as_str) != Some("OK") {
                continue;
            }
            let id = items.get(1).and_then(Value::as_str).unwrap_or("");
            if id != event.id && !id.is_empty() {
                continue;
            }
            let accepted = items.get(2).and_then(Value::as_bool).unwrap_or(false);
            let message = items.get(3).and_then(Value::as_str).unwrap_or("");
            return read_ok(accepted, message);
        }
        Published::NoAnswer("the relay closed the connection before its OK".into())
    };
    let answer = timeout(left, exchange)
        .await
        .unwrap_or_else(|_| Published::NoAnswer(format!("no OK within {budget:?}")));
    let _ = timeout(Duration::from_millis(200), socket.close(None)).await;
    answer
}

/// Reads the event `id` back from the relay at `url` within `budget`: `Ok(Some)` the event
/// (its id checked here against its parts; the caller compares the signature with its own), `Ok(None)` the relay answered `EOSE` without it.
///
/// # Errors
/// Not reached, refused (`CLOSED`), or no `EOSE` in time.
pub async fn fetch(url: &str, id: &str, budget: Duration) -> Result<Option<Event>, String> {
    let sub = format!("postonce-{:08x}", rand::random::<u32>());
    let exchange = async {
        let mut socket = connect(url).await?;
        let req = json!(["REQ", sub, {"ids": [id]}]).to_string();
        socket
            .send(Message::text(req))
            .await
            .map_err(|e| e.to_string())?;
        let mut found = None;
        while let Some(item) = next_array(&mut socket).await {
            let items = item?;
            let same_sub = items.get(1).and_then(Value::as_str) == Some(sub.as_str());
            match items.first().and_then(Value::as_str) {
                Some("EVENT") if same_sub => {
                    let event = items
                        .get(2)
                        .cloned()
                        .and_then(|v| serde_json::from_value::<Event>(v).ok());
                    if let Some(event) = event.filter(|e| e.id == id && e.id_matches()) {
                        found = Some(event);
                    }
                }
                Some("EOSE") if same_sub => {
                    let close = json!(["CLOSE", sub]).to_string();
                    let _ = socket.send(Message::text(close)).await;
                    let _ = socket.close(None).await;
                    return Ok(found);
                }
                Some("CLOSED") if same_sub => {
                    let why = items.get(2).and_then(Value::as_str).unwrap_or("");
                    return Err(format!("the relay refused the read: {why}"));
                }
                _ => {}
            }
        }
        Err("the relay closed the connection before EOSE".to_owned())
    };
    timeout(budget, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("no EOSE within {budget:?}")))
}

/// Connects and closes: whether the relay takes a WebSocket (doctor, `auth nostr`).
///
/// # Errors
/// Why it could not.
pub async fn reach(url: &str, budget: Duration) -> Result<(), String> {
    match timeout(budget, connect(url)).await {
        Ok(Ok(mut socket)) => {
            let _ = timeout(Duration::from_millis(200), socket.close(None)).await;
            Ok(())
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no connection within {budget:?}")),
    }
}

// ---------------------------------------------------------------------------------------------
// What `NOSTR_RELAYS` may name (the configuration and `postonce auth nostr` check it here).

/// The most relays a note goes to.
pub const MAX_RELAYS: usize = 16;

/// Checks one relay URL: `wss://` or `ws://`, a host, no user or password, no query or
/// fragment, nothing but printable ASCII.
///
/// # Errors
/// Why it is not a relay URL (for `NOSTR_RELAYS`).
pub fn parse_relay(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("an empty relay URL".into());
    }
    if v.len() > 256 || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{:?} holds spaces, control or non-ASCII characters, or is too long", v.chars().take(60).collect::<String>()));
    }
    let url = url::Url::parse(v).map_err(|e| format!("{v:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(format!("{v:?} must start with wss:// (or ws:// for a local relay)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{v:?} names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{v:?} carries a user or password"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{v:?} carries a query or fragment"));
    }
    Ok(v.to_owned())
}

/// Checks `NOSTR_RELAYS`: one to [`MAX_RELAYS`] relay URLs, each once.
///
/// # Errors
/// A [`ConfigError`] naming `NOSTR_RELAYS`.
pub fn parse_relays(value: &str) -> Result<Vec<String>, ConfigError> {
    let mut relays: Vec<String> = Vec::new();
    for part in value.split(',') {
        let relay = parse_relay(part).map_err(|e| bad("NOSTR_RELAYS", e))?;
        if relays.contains(&relay) {
            return Err(bad("NOSTR_RELAYS", format!("{relay:?} is listed twice")));
        }
        relays.push(relay);
    }
    if relays.len() > MAX_RELAYS {
        return Err(bad(
            "NOSTR_RELAYS",
            format!("{} relays; at most {MAX_RELAYS}", relays.len()),
        ));
    }
    Ok(relays)
}

//! Nostr fakes that speak the real wire formats: a relay (NIP-01 over a WebSocket, in process)
//! and a Blossom media server (BUD-02 `PUT /upload`, through wiremock).
//!
//! The relay keeps every event it took, by id: an event it already has is answered
//! `["OK",<id>,false,"duplicate: exists"]` (the Python nostr-relay 1.14's words) and not stored
//! again, while a *different* event (another `created_at`, another signature of other bytes)
//! is stored as a second note — so a client that re-signs on a retry shows up as a duplicate
//! post. It checks each event's id (recomputed) and signature, refuses a bad one as the Python
//! relay does (`["OK","",false,"invalid: …"]`, an empty id), and answers `REQ` by ids with the
//! stored events then `EOSE`. Its modes: lose the `OK` of an event it stored (the answer comes
//! after the client's budget), rate-limited, `error:`, and `restricted:` (the key refused).
//!
//! The Blossom fake stores blobs by SHA-256: `201` new, `200` already there, `401` without a
//! valid `Authorization: Nostr <base64url kind 24242 event>` (signed, `t upload`, the blob's
//! `x`, an expiration ahead), `409` when the bytes do not hash to `X-SHA-256`, `413` over its
//! size limit, each with an `X-Reason`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use postonce::networks::nostr::event::Event;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;

/// How the fake relay answers an `EVENT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stores it and answers at once.
    Normal,
    /// Stores it, and answers only after this long (the client gave up by then).
    AcceptThenHang(Duration),
    /// `rate-limited:`; stores nothing.
    RateLimited,
    /// `error:`; stores nothing.
    Error,
    /// `restricted:` with an empty id: this key may not write here; stores nothing.
    Restricted,
    /// Closes the connection on the event without storing it or answering (a relay that
    /// fell over mid-request: the client cannot tell).
    CloseWithoutAnswer,
}

#[derive(Default)]
struct State {
    /// Every event taken, in order.
    events: Vec<Event>,
    mode: Option<Mode>,
}

/// A relay in this process.
#[derive(Clone)]
pub struct FakeRelay {
    url: String,
    state: Arc<Mutex<State>>,
    frames: Arc<AtomicU64>,
    event_frames: Arc<AtomicU64>,
}

impl FakeRelay {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake relay");
        let url = format!("ws://{}", listener.local_addr().expect("address"));
        let relay = Self {
            url,
            state: Arc::new(Mutex::new(State::default())),
            frames: Arc::new(AtomicU64::new(0)),
            event_frames: Arc::new(AtomicU64::new(0)),
        };
        let r = relay.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let r = r.clone();
                tokio::spawn(async move {
                    if let Ok(ws) = tokio_tungstenite::accept_async(tcp).await {
                        r.serve(ws).await;
                    }
                });
            }
        });
        relay
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state.lock().expect("lock").mode = Some(mode);
    }

    /// Every event stored.
    pub fn events(&self) -> Vec<Event> {
        self.state.lock().expect("lock").events.clone()
    }

    /// The stored notes whose content holds `needle`.
    pub fn notes_with(&self, needle: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind == 1 && e.content.contains(needle))
            .collect()
    }

    /// `EVENT` frames received (the creates).
    pub fn event_frames(&self) -> u64 {
        self.event_frames.load(Ordering::SeqCst)
    }

    /// Every frame received, of any kind (and every connection counted as one).
    pub fn requests(&self) -> u64 {
        self.frames.load(Ordering::SeqCst)
    }

    async fn serve(&self, ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) {
        self.frames.fetch_add(1, Ordering::SeqCst);
        let (mut tx, mut rx) = ws.split();
        while let Some(Ok(msg)) = rx.next().await {
            let Message::Text(text) = msg else { continue };
            self.frames.fetch_add(1, Ordering::SeqCst);
            let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            let answers = match items.first().and_then(Value::as_str) {
                Some("EVENT") => {
                    self.event_frames.fetch_add(1, Ordering::SeqCst);
                    let (answer, hang) = self.take(items.get(1).cloned().unwrap_or(Value::Null));
                    if let Some(hang) = hang {
                        tokio::time::sleep(hang).await;
                    }
                    if answer.is_null() {
                        return;
                    }
                    vec![answer]
                }
                Some("REQ") => self.query(&items),
                _ => vec![],
            };
            for a in answers {
                if tx.send(Message::text(a.to_string())).await.is_err() {
                    return;
                }
            }
        }
    }

    /// An `EVENT`'s answer, and how long to hold it.
    fn take(&self, v: Value) -> (Value, Option<Duration>) {
        let Ok(event) = serde_json::from_value::<Event>(v) else {
            return (json!(["OK", "", false, "invalid: Bad JSON"]), None);
        };
        if !event.is_valid() {
            return (json!(["OK", "", false, "invalid: Bad signature"]), None);
        }
        let mut s = self.state.lock().expect("lock");
        match s.mode.unwrap_or(Mode::Normal) {
            Mode::RateLimited => {
                return (
                    json!(["OK", event.id, false, "rate-limited: slow down"]),
                    None,
                )
            }
            Mode::Error => {
                return (
                    json!(["OK", event.id, false, "error: could not save"]),
                    None,
                )
            }
            Mode::Restricted => {
                return (
                    json!([
                        "OK",
                        "",
                        false,
                        "restricted: this pubkey may not write here"
                    ]),
                    None,
                )
            }
            Mode::CloseWithoutAnswer => return (Value::Null, None),
            Mode::Normal | Mode::AcceptThenHang(_) => {}
        }
        if s.events.iter().any(|e| e.id == event.id) {
            return (json!(["OK", event.id, false, "duplicate: exists"]), None);
        }
        let hang = match s.mode {
            Some(Mode::AcceptThenHang(d)) => Some(d),
            _ => None,
        };
        let id = event.id.clone();
        s.events.push(event);
        (json!(["OK", id, true, ""]), hang)
    }

    /// A `REQ` by ids: the stored events, then `EOSE`.
    fn query(&self, items: &[Value]) -> Vec<Value> {
        let sub = items.get(1).cloned().unwrap_or(Value::Null);
        let ids: Vec<String> = items
            .iter()
            .skip(2)
            .filter_map(|f| f.get("ids").and_then(Value::as_array))
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let mut out: Vec<Value> = self
            .events()
            .into_iter()
            .filter(|e| ids.contains(&e.id))
            .map(|e| json!(["EVENT", sub, e]))
            .collect();
        out.push(json!(["EOSE", sub]));
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Blossom.

/// The Blossom fake's size limit (413 above it).
pub const BLOSSOM_MAX: usize = 10 * 1024 * 1024;

#[derive(Default)]
struct Blobs {
    stored: BTreeMap<String, Received>,
    uploads: u64,
    heads: u64,
    refusals: Vec<(u16, String)>,
    /// Only these pubkeys may upload (`None`: anyone).
    allowed: Option<Vec<String>>,
    /// The size limit (`None`: [`BLOSSOM_MAX`]).
    max: Option<usize>,
    /// Hashes what it received with a byte flipped, as a transfer that changed the bytes.
    corrupt: bool,
}

/// A Blossom server.
pub struct BlossomFake {
    server: MockServer,
    blobs: Arc<Mutex<Blobs>>,
}

struct Upload {
    base: String,
    blobs: Arc<Mutex<Blobs>>,
}

impl Upload {
    fn refuse(&self, status: u16, reason: &str) -> ResponseTemplate {
        let mut b = self.blobs.lock().expect("lock");
        b.refusals.push((status, reason.to_owned()));
        ResponseTemplate::new(status).insert_header("X-Reason", reason)
    }

    /// `Authorization: Nostr <base64url event>`: a signed kind 24242, `t upload`, `x` the blob.
    fn authorized(&self, req: &Request, sha: &str) -> Result<(), &'static str> {
        let header = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .ok_or("Missing Authorization header")?;
        let b64 = header
            .strip_prefix("Nostr ")
            .ok_or("Authorization is not Nostr")?;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(b64.trim_end_matches('='))
            .map_err(|_| "Authorization is not base64url")?;
        let event: Event =
            serde_json::from_slice(&json).map_err(|_| "Authorization is not an event")?;
        let tag = |name: &str| {
            event
                .tags
                .iter()
                .find(|t| t.first().map(String::as_str) == Some(name))
                .and_then(|t| t.get(1).cloned())
        };
        let now = u64::try_from(postonce::record::now_s()).unwrap_or(0);
        let expires = tag("expiration")
            .and_then(|e| e.parse::<u64>().ok())
            .unwrap_or(0);
        if !event.is_valid() || event.kind != 24242 {
            return Err("Invalid auth event");
        }
        if tag("t").as_deref() != Some("upload")
            || tag("x").as_deref() != Some(sha)
            || expires <= now
        {
            return Err("Auth event does not allow this upload");
        }
        let allowed = self.blobs.lock().expect("lock").allowed.clone();
        if allowed.is_some_and(|a| !a.contains(&event.pubkey)) {
            return Err("Pubkey not allowed to upload here");
        }
        Ok(())
    }
}

impl Respond for Upload {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.blobs.lock().expect("lock").uploads += 1;
        let claimed = req
            .headers
            .get("x-sha-256")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if let Err(why) = self.authorized(req, &claimed) {
            return self.refuse(401, why);
        }
        let (max, corrupt) = {
            let b = self.blobs.lock().expect("lock");
            (b.max.unwrap_or(BLOSSOM_MAX), b.corrupt)
        };
        if req.body.len() > max {
            return self.refuse(413, "File too large");
        }
        let mut body = req.body.clone();
        if corrupt {
            if let Some(b) = body.first_mut() {
                *b ^= 1;
            }
        }
        let sha = hex::encode(Sha256::digest(&body));
        if sha != claimed {
            return self.refuse(409, "Hash mismatch");
        }
        let declared = req
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut b = self.blobs.lock().expect("lock");
        let status = if b.stored.contains_key(&sha) {
            200
        } else {
            201
        };
        b.stored
            .entry(sha.clone())
            .or_insert_with(|| Received::of(&req.body, &declared));
        ResponseTemplate::new(status).set_body_json(json!({
            "url": format!("{}/{sha}", self.base),
            "sha256": sha,
            "size": req.body.len(),
            "type": declared,
            "uploaded": postonce::record::now_s(),
        }))
    }
}

/// `HEAD /<sha256>` (BUD-01): 200 with the blob's type and length when stored, else 404.
struct Has {
    blobs: Arc<Mutex<Blobs>>,
}

impl Respond for Has {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut b = self.blobs.lock().expect("lock");
        b.heads += 1;
        let sha = req.url.path().trim_start_matches('/');
        match b.stored.get(sha) {
            Some(blob) => ResponseTemplate::new(200)
                .insert_header(
                    "Content-Type",
                    blob.format.unwrap_or("application/octet-stream"),
                )
                .insert_header("Content-Length", blob.bytes.to_string().as_str()),
            None => ResponseTemplate::new(404).insert_header("X-Reason", "Blob not found"),
        }
    }
}

impl BlossomFake {
    pub async fn start() -> Self {
        let server = MockServer::start().await;
        let blobs = Arc::new(Mutex::new(Blobs::default()));
        Mock::given(method("PUT"))
            .and(path("/upload"))
            .respond_with(Upload {
                base: server.uri(),
                blobs: blobs.clone(),
            })
            .mount(&server)
            .await;
        Mock::given(method("HEAD"))
            .respond_with(Has {
                blobs: blobs.clone(),
            })
            .mount(&server)
            .await;
        Self { server, blobs }
    }

    /// Drops the blob stored under `sha256` (a server that expired or deleted it).
    pub fn forget(&self, sha256: &str) {
        self.blobs.lock().expect("lock").stored.remove(sha256);
    }

    /// The `HEAD` requests asking for a blob.
    pub fn heads(&self) -> u64 {
        self.blobs.lock().expect("lock").heads
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// The blob stored under `sha256`.
    pub fn blob(&self, sha256: &str) -> Option<Received> {
        self.blobs.lock().expect("lock").stored.get(sha256).cloned()
    }

    /// Every blob stored.
    pub fn blobs(&self) -> Vec<Received> {
        self.blobs
            .lock()
            .expect("lock")
            .stored
            .values()
            .cloned()
            .collect()
    }

    /// Only `pubkeys` (hex) may upload from now on; others get 401.
    pub fn allow_only(&self, pubkeys: &[&str]) {
        self.blobs.lock().expect("lock").allowed =
            Some(pubkeys.iter().map(|p| (*p).to_owned()).collect());
    }

    /// The size limit from now on (413 above it).
    pub fn set_max(&self, bytes: usize) {
        self.blobs.lock().expect("lock").max = Some(bytes);
    }

    /// Whether the bytes are changed on the way in (409: the hash does not match).
    pub fn set_corrupt(&self, on: bool) {
        self.blobs.lock().expect("lock").corrupt = on;
    }

    pub fn uploads(&self) -> u64 {
        self.blobs.lock().expect("lock").uploads
    }

    /// Every refusal answered: (status, X-Reason).
    pub fn refusals(&self) -> Vec<(u16, String)> {
        self.blobs.lock().expect("lock").refusals.clone()
    }
}

/// The image hashes (`x`) a note's `imeta` tags name.
pub fn imeta_hashes(e: &Event) -> Vec<String> {
    e.tags
        .iter()
        .filter(|t| t.first().map(String::as_str) == Some("imeta"))
        .flat_map(|t| t.iter().skip(1))
        .filter_map(|f| f.strip_prefix("x ").map(str::to_owned))
        .collect()
}

//! A real Nostr relay for the tests: PyPI `nostr-relay` 1.14 (the Python relay; gunicorn, SQLite),
//! installed by `scripts/test.sh` into `.tools/nostr-relay` (a virtualenv). Each relay runs on a
//! port of its own with a temporary SQLite file, loopback only; a test stops it, kills it
//! (`SIGKILL`, its worker too) and restarts it on the same port with the same database. A
//! missing install is a loud failure naming the install step, never a skip.
//!
//! [`WsProxy`] stands in front of a relay to lose answers: it forwards every frame, and, by
//! mode, drops the relay's `OK`s (the event stored, the answer lost), closes the client's
//! connection once the event went through (the relay stored it; the client sees a dropped
//! connection), or refuses every event itself with an empty id as the Python relay words a
//! refusal. [`count_notes`] asks any relay directly how many notes of an author hold a text.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use super::services::restartable_port;

/// Where `scripts/test.sh` installs the relay.
pub fn relay_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/nostr-relay/bin/nostr-relay")
}

/// The install step a missing relay names.
pub const INSTALL: &str = "run scripts/test.sh once (it installs it), or: python3 -m venv .tools/nostr-relay && .tools/nostr-relay/bin/pip install nostr-relay==1.14";

/// A Python nostr-relay process.
pub struct RealRelay {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RealRelay {
    /// Starts a relay on a free port with a fresh SQLite database; ready when its NIP-11
    /// document answers.
    pub fn start() -> Self {
        let bin = relay_bin();
        assert!(
            bin.exists(),
            "the Python nostr-relay is not installed at {}: {INSTALL}",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let port = restartable_port();
        let config = format!(
            "DEBUG: false\nstorage:\n  sqlalchemy.url: sqlite+aiosqlite:///{}/nostr.sqlite3\n  validators:\n    - nostr_relay.validators.is_not_too_large\n    - nostr_relay.validators.is_signed\n    - nostr_relay.validators.is_recent\ngunicorn:\n  bind: 127.0.0.1:{port}\n  workers: 1\n  loglevel: warning\n  reload: false\n",
            dir.path().display()
        );
        std::fs::write(dir.path().join("config.yaml"), config).expect("write config");
        let mut r = Self {
            port,
            dir,
            child: None,
        };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("relay.log")).expect("log");
        let child = Command::new(relay_bin())
            .args(["-c", "config.yaml", "serve"])
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start nostr-relay: {e}; {INSTALL}"));
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir.path().join("relay.log")).unwrap_or_default();
        panic!(
            "nostr-relay did not start on port {} within 30 s:\n{log}",
            self.port
        );
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// The gunicorn worker's pid (the master's child).
    fn worker(&self) -> Option<u32> {
        let pid = self.child.as_ref()?.id();
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// `SIGKILL` to the worker and the master: a crash, nothing flushed or closed cleanly.
    pub fn kill(&mut self) {
        if let Some(w) = self.worker() {
            let _ = Command::new("kill").args(["-9", &w.to_string()]).status();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.wait_port_free();
    }

    /// `SIGTERM` to the master (it stops its worker), waited for.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.wait_port_free();
    }

    fn wait_port_free(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until
            && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts it again on the same port, with the same database.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for RealRelay {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What [`WsProxy`] does with the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProxyMode {
    /// Forwards everything both ways.
    Forward = 0,
    /// Forwards the event; drops the relay's `OK` (the event is stored, the answer lost).
    DropOk = 1,
    /// Forwards the event, waits for the relay's `OK`, then closes the client's connection
    /// without passing it on.
    CloseAfterEvent = 2,
    /// Answers every event itself, `["OK","",false,"blocked: …"]`, forwarding nothing.
    Refuse = 3,
}

/// A WebSocket proxy in front of a relay.
pub struct WsProxy {
    url: String,
    mode: Arc<AtomicU8>,
}

impl WsProxy {
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let mode = Arc::new(AtomicU8::new(ProxyMode::Forward as u8));
        let m = mode.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (upstream, m) = (upstream.clone(), m.clone());
                tokio::spawn(async move {
                    let Ok(client) = tokio_tungstenite::accept_async(tcp).await else {
                        return;
                    };
                    let Ok((relay, _)) = tokio_tungstenite::connect_async(upstream.as_str()).await
                    else {
                        return;
                    };
                    pipe(client, relay, m).await;
                });
            }
        });
        Self { url, mode }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn set_mode(&self, mode: ProxyMode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }
}

async fn pipe<C, R>(client: C, relay: R, mode: Arc<AtomicU8>)
where
    C: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + futures_util::Sink<Message>
        + Unpin,
    R: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + futures_util::Sink<Message>
        + Unpin,
{
    let (mut ctx, mut crx) = client.split();
    let (mut rtx, mut rrx) = relay.split();
    loop {
        tokio::select! {
            from_client = crx.next() => {
                let Some(Ok(msg)) = from_client else { return };
                let is_event = matches!(&msg, Message::Text(t) if t.as_str().starts_with("[\"EVENT\""));
                if is_event && mode.load(Ordering::SeqCst) == ProxyMode::Refuse as u8 {
                    let no = json!(["OK", "", false, "blocked: not on this relay's list"]).to_string();
                    if ctx.send(Message::text(no)).await.is_err() { return; }
                    continue;
                }
                if rtx.send(msg).await.is_err() { return; }
            }
            from_relay = rrx.next() => {
                let Some(Ok(msg)) = from_relay else { return };
                let is_ok = matches!(&msg, Message::Text(t) if t.as_str().starts_with("[\"OK\""));
                if is_ok {
                    match mode.load(Ordering::SeqCst) {
                        m if m == ProxyMode::DropOk as u8 => continue,
                        m if m == ProxyMode::CloseAfterEvent as u8 => return,
                        _ => {}
                    }
                }
                if ctx.send(msg).await.is_err() { return; }
            }
        }
    }
}

/// How many notes of `author` (hex) whose content holds `needle` the relay at `url` has,
/// asked directly (`REQ` by author and kind, until `EOSE`).
pub async fn count_notes(url: &str, author: &str, needle: &str) -> usize {
    notes(url, author)
        .await
        .iter()
        .filter(|e| e["content"].as_str().is_some_and(|c| c.contains(needle)))
        .count()
}

/// Every note of `author` on the relay at `url`.
pub async fn notes(url: &str, author: &str) -> Vec<Value> {
    let (mut ws, _) = tokio::time::timeout(
        Duration::from_secs(5),
        tokio_tungstenite::connect_async(url),
    )
    .await
    .expect("the relay answers within 5 s")
    .unwrap_or_else(|e| panic!("cannot reach the relay {url} to count: {e}"));
    let req = json!(["REQ", "count", {"authors": [author], "kinds": [1]}]).to_string();
    ws.send(Message::text(req)).await.expect("send REQ");
    let mut out = Vec::new();
    let read = async {
        while let Some(Ok(Message::Text(t))) = ws.next().await {
            let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
            match v[0].as_str() {
                Some("EVENT") => out.push(v[2].clone()),
                Some("EOSE") => return,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("EOSE within 5 s");
    out
}

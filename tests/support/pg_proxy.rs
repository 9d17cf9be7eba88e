//! A TCP proxy in front of a PostgreSQL server that reads the wire protocol (v3) both ways and,
//! when armed, drops a connection after the server has committed a chosen statement but before
//! the client hears the answer: the client sees the connection end while its write's outcome is
//! unknown, exactly as when a network path or a NAT drops a connection at the wrong moment.
//!
//! The proxy learns each connection's prepared statements from the client's `Parse` messages
//! (name → SQL) and watches its `Bind`s (and simple `Query`s). When a statement whose SQL
//! contains the armed text is bound, it holds back everything the server answers from then on;
//! at the server's `ReadyForQuery` — sent only after the implicit transaction ended — it checks
//! that the statement completed (`CommandComplete`, no `ErrorResponse`, status idle: committed)
//! and closes both sides without passing any of it on. Without TLS only: connect with
//! `sslmode=disable` ([`PgProxy::url`]).
//!
//! It can also black-hole a connection ([`PgProxy::black_hole`]), as an idle NAT or VPC flow
//! that was dropped, or a paused server, does: from the chosen statement on, nothing passes
//! either way and nothing is closed; only the client can end it.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A connection cut by the proxy: the armed text and the server's command tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub armed: String,
    pub tag: String,
}

#[derive(Default)]
struct Shared {
    /// The text a bound statement's SQL must contain to be cut (one cut, then disarmed).
    armed: Option<String>,
    cuts: Vec<Cut>,
    /// The first line of every statement bound through the proxy, in order (what it saw).
    seen: Vec<String>,
    /// The text a statement's SQL must contain to black-hole its connection (once).
    hole: Option<String>,
    /// Connections black-holed so far, and how many of them the client has closed since.
    holes: usize,
    holes_closed: usize,
    /// Connections accepted.
    accepted: usize,
}

pub struct PgProxy {
    port: u16,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:`upstream`.
    pub async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let s = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                s.lock().expect("lock").accepted += 1;
                let s = s.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        connection(client, server, s).await;
                    }
                });
            }
        });
        Self { port, shared, task }
    }

    /// The URL through the proxy for `user:password@…/database` (no TLS).
    pub fn url(&self, credentials: &str, database: &str) -> String {
        format!(
            "postgres://{credentials}@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    /// Cuts the next connection that binds a statement whose SQL contains `sql`, once it has
    /// committed.
    pub fn arm(&self, sql: &str) {
        self.shared.lock().expect("lock").armed = Some(sql.to_owned());
    }

    /// Disarms; returns the cuts made so far.
    pub fn disarm(&self) -> Vec<Cut> {
        let mut s = self.shared.lock().expect("lock");
        s.armed = None;
        s.cuts.clone()
    }

    /// Black-holes the next connection that sends a statement whose SQL contains `sql`: that
    /// statement and everything after it, either way, go nowhere, and the connection stays open.
    pub fn black_hole(&self, sql: &str) {
        self.shared.lock().expect("lock").hole = Some(sql.to_owned());
    }

    /// (connections black-holed, of them closed by the client).
    pub fn black_holes(&self) -> (usize, usize) {
        let s = self.shared.lock().expect("lock");
        (s.holes, s.holes_closed)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.lock().expect("lock").accepted
    }

    /// The first line of every statement bound so far.
    pub fn seen(&self) -> Vec<String> {
        self.shared.lock().expect("lock").seen.clone()
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One message: its type byte (0 for the untyped start-up message) and its whole bytes.
async fn message(r: &mut OwnedReadHalf, typed: bool) -> Option<(u8, Vec<u8>)> {
    let kind = if typed { r.read_u8().await.ok()? } else { 0 };
    let len = r.read_u32().await.ok()?;
    let body_len = usize::try_from(len).ok()?.checked_sub(4)?;
    let mut bytes = Vec::with_capacity(body_len + 5);
    if typed {
        bytes.push(kind);
    }
    bytes.extend_from_slice(&len.to_be_bytes());
    let start = bytes.len();
    bytes.resize(start + body_len, 0);
    r.read_exact(&mut bytes[start..]).await.ok()?;
    Some((kind, bytes))
}

/// The NUL-terminated strings at the start of a message body.
fn cstrings(body: &[u8], n: usize) -> Vec<String> {
    body.split(|b| *b == 0)
        .take(n)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Whether the connection is holding back the answer to an armed statement (its armed text).
type Cutting = Arc<Mutex<Option<String>>>;

/// Whether the connection is black-holed.
type Hole = Arc<std::sync::atomic::AtomicBool>;

async fn connection(client: TcpStream, server: TcpStream, shared: Arc<Mutex<Shared>>) {
    let (mut client_r, client_w) = client.into_split();
    let (server_r, mut server_w) = server.into_split();
    let cutting: Cutting = Arc::new(Mutex::new(None));
    let hole: Hole = Arc::default();
    let back = tokio::spawn(answers(
        server_r,
        client_w,
        cutting.clone(),
        hole.clone(),
        shared.clone(),
    ));
    let mut statements = std::collections::HashMap::<String, String>::new();
    // The start-up message has no type byte; an SSLRequest would be answered with one byte
    // this proxy does not parse, hence sslmode=disable.
    let Some((_, startup)) = message(&mut client_r, false).await else {
        return;
    };
    assert_ne!(
        startup.get(4..8),
        Some(&[0x04, 0xd2, 0x16, 0x2f][..]),
        "the PostgreSQL proxy speaks no TLS: connect with sslmode=disable"
    );
    if server_w.write_all(&startup).await.is_err() {
        return;
    }
    while let Some((kind, bytes)) = message(&mut client_r, true).await {
        let body = &bytes[5..];
        let sql = match kind {
            b'P' => {
                let [name, sql] = <[String; 2]>::try_from(cstrings(body, 2)).unwrap_or_default();
                statements.insert(name, sql);
                None
            }
            b'B' => cstrings(body, 2)
                .get(1)
                .and_then(|name| statements.get(name).cloned()),
            b'Q' => cstrings(body, 1).into_iter().next(),
            _ => None,
        };
        if let Some(sql) = sql {
            let mut s = shared.lock().expect("lock");
            s.seen
                .push(sql.trim().lines().next().unwrap_or("").trim().to_owned());
            if s.armed.as_ref().is_some_and(|a| sql.contains(a.as_str())) {
                // Before the statement reaches the server, so its whole answer is held back.
                *cutting.lock().expect("lock") = s.armed.take();
            }
            if s.hole.as_ref().is_some_and(|h| sql.contains(h.as_str())) {
                s.hole = None;
                s.holes += 1;
                hole.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        if hole.load(std::sync::atomic::Ordering::SeqCst) {
            // Swallowed, as by a dropped flow; keep reading to see the client close.
            continue;
        }
        if server_w.write_all(&bytes).await.is_err() {
            break;
        }
    }
    if hole.load(std::sync::atomic::Ordering::SeqCst) {
        shared.lock().expect("lock").holes_closed += 1;
    }
    // The client left, or the answer side cut the connection: the server sees it end.
    let _ = server_w.shutdown().await;
    let _ = back.await;
}

/// The server's side: passes messages on, except the held-back answer of an armed statement,
/// which ends in the cut.
async fn answers(
    mut server_r: OwnedReadHalf,
    mut client_w: OwnedWriteHalf,
    cutting: Cutting,
    hole: Hole,
    shared: Arc<Mutex<Shared>>,
) {
    let mut held: Vec<u8> = Vec::new();
    let (mut tag, mut failed) = (None, false);
    while let Some((kind, bytes)) = message(&mut server_r, true).await {
        if hole.load(std::sync::atomic::Ordering::SeqCst) {
            continue;
        }
        let armed = cutting.lock().expect("lock").clone();
        let Some(armed) = armed else {
            if client_w.write_all(&bytes).await.is_err() {
                return;
            }
            continue;
        };
        match kind {
            b'C' => tag = cstrings(&bytes[5..], 1).into_iter().next(),
            b'E' => failed = true,
            _ => {}
        }
        held.extend_from_slice(&bytes);
        if kind != b'Z' {
            continue;
        }
        let idle = bytes.get(5) == Some(&b'I');
        match tag.take() {
            Some(tag) if idle && !failed => {
                // Committed, and the client has heard nothing of it: cut both sides.
                shared.lock().expect("lock").cuts.push(Cut { armed, tag });
                let _ = client_w.shutdown().await;
                drop(client_w);
                drop(server_r);
                return;
            }
            _ => {
                // The statement failed (nothing committed): pass it on, stay armed.
                shared.lock().expect("lock").armed = Some(armed);
                *cutting.lock().expect("lock") = None;
                failed = false;
                if client_w
                    .write_all(&std::mem::take(&mut held))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

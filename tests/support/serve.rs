//! A real `postonce serve` child process on a free port, for the tests that kill, signal or
//! race it. Killed and reaped on drop if a test ends before it exits.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::services::free_port;

pub struct ServeProcess {
    pub child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl ServeProcess {
    /// Starts `postonce serve` with exactly `vars` (and `PATH`), logging off, and waits up to
    /// 30 s for `GET /healthz`. `stderr_piped`: keep what it prints for the test to read (a few
    /// lines, far below a pipe's capacity, so the child never blocks on it).
    pub async fn start(vars: &HashMap<String, String>, stderr_piped: bool) -> Self {
        Self::start_on(free_port(), vars, stderr_piped).await
    }

    /// [`Self::start`] on `port` (a test that must name the address before it starts, as
    /// `POSTONCE_PUBLIC_URL` does).
    pub async fn start_on(port: u16, vars: &HashMap<String, String>, stderr_piped: bool) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_postonce"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "off")
            .envs(vars)
            .stdout(Stdio::null())
            .stderr(if stderr_piped {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start postonce serve");
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let begun = Instant::now();
        while begun.elapsed() < Duration::from_secs(30) {
            if reqwest::get(format!("{}/healthz", server.base))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("postonce serve did not come up on {}", server.base);
    }

    /// Its stderr, line by line as it comes (started with `stderr_piped`).
    pub fn stderr_lines(&mut self) -> StderrLines {
        let stderr = self.child.stderr.take().expect("stderr piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        StderrLines {
            rx,
            seen: Vec::new(),
        }
    }

    /// `POST /ci` with `body`, signed with the environments' webhook secret: (status, body).
    pub async fn ci(&self, body: serde_json::Value) -> (u16, String) {
        let raw = serde_json::to_vec(&body).expect("json");
        let resp = reqwest::Client::new()
            .post(format!("{}/ci", self.base))
            .header("X-Hub-Signature-256", super::env::sign(&raw))
            .body(raw)
            .send()
            .await
            .expect("serve answers");
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("body"))
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a `serve` printed on stderr, read as it comes.
pub struct StderrLines {
    rx: mpsc::Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
}

impl StderrLines {
    /// Waits up to `within` for a line that holds `needle`; panics with what it said if none.
    pub fn wait_for(&mut self, needle: &str, within: Duration) {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!("serve never said {needle:?}; it said: {:#?}", self.seen),
            }
        }
    }
}

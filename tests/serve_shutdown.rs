//! `postonce serve` on SIGTERM (issue 8, point 8): it stops accepting, lets every in-flight run
//! finish and its answer reach the client, within a bound, then exits 0. The server is the real
//! binary as a child process, over redis-server and DynamoDB Local, with LinkedIn a fake whose
//! create-post is slow enough for the signal to land while the run is in it. And what `serve`
//! prints: one line per log event (a log shipper splits on newlines).

use crate::support;

use support::env::sign;

use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use postonce::key::PostKey;
use serde_json::{json, Value};
use support::env::{Env, Stores};
use support::linkedin::Mode;
use support::serve::ServeProcess;

/// How long create-post takes to answer, after it has created the post: the window in which
/// the signal lands. Well inside the LinkedIn budget below, so the run ends `posted`.
const CREATE_TAKES: Duration = Duration::from_secs(6);

/// The run deadline the server gets (`POSTONCE_FUNCTION_TIMEOUT_S`); the server's grace period
/// is this plus its 5 s margin.
const FUNCTION_TIMEOUT_S: u64 = 20;

/// Slack for a slow, shared machine on top of any bound the server promises.
const SLACK: Duration = Duration::from_secs(15);

fn ci_body(env: &Env, key: &PostKey) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": key.kind(), "slug": key.slug(),
        "caption": format!("Finished before shutdown: {key}"),
        "image_url": env.images.url("/cover.png")
    }))
    .expect("json")
}

/// A `postonce serve` child process, with what the drain prints kept for the test.
struct Server(ServeProcess);

impl std::ops::Deref for Server {
    type Target = ServeProcess;
    fn deref(&self) -> &ServeProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut ServeProcess {
        &mut self.0
    }
}

impl Server {
    async fn start(vars: &HashMap<String, String>) -> Self {
        Self(ServeProcess::start(vars, true).await)
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits up to `bound` for the process to exit; returns its status, how long it took and
    /// what it printed on stderr.
    async fn wait_exit(&mut self, bound: Duration) -> (ExitStatus, Duration, String) {
        let begun = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return (status, begun.elapsed(), stderr);
            }
            assert!(
                begun.elapsed() < bound,
                "postonce serve was still running {bound:?} after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn slow_env() -> Env {
    let timeout = FUNCTION_TIMEOUT_S.to_string();
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", &timeout),
            ("POSTONCE_CLAIM_TTL_S", "40"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "12000"),
        ],
    )
    .await;
    env.linkedin
        .set_create_mode(Mode::AcceptThenHang(CREATE_TAKES));
    env
}

fn grace() -> Duration {
    postonce::serve::grace_period(Duration::from_secs(FUNCTION_TIMEOUT_S))
}

/// Waits until the run has sent create-post (the fake counts it on arrival).
async fn until_create_post_in_flight(env: &Env) {
    let begun = Instant::now();
    while env.linkedin.create_requests() == 0 {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "the run never reached create-post"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After the run: one post, a record naming it, no claim left in Redis.
async fn assert_posted_recorded_released(env: &Env, key: &PostKey, urn: Option<&str>) {
    assert_eq!(env.linkedin.posts_created(), 1, "exactly one post");
    let status = env.status(key).await;
    let record = status
        .snapshot
        .record
        .expect("the posted record exists: the run was not cut off before recording");
    let created = env.linkedin.posts()[0].urn.clone();
    assert_eq!(record.post_id.as_deref(), Some(created.as_str()));
    if let Some(urn) = urn {
        assert_eq!(urn, created, "the client was told the URN of the post");
    }
    assert!(
        status.claim.is_none(),
        "the claim was released, not left to its TTL: {:?}",
        status.claim
    );
    assert_eq!(
        env.redis().cli(&["EXISTS", &format!("claim:{key}")]),
        "0",
        "claim:{key} is gone from Redis"
    );
}

/// SIGTERM while create-post is in flight: the process keeps serving that request, the client
/// gets `posted`, the record is written and the claim released, new connections are refused,
/// and the process exits 0 within the grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_run_in_flight_and_answers_its_client() {
    let env = slow_env().await;
    let mut server = Server::start(&env.vars).await;
    let key = env.key();
    let body = ci_body(&env, &key);
    let url = format!("{}/ci", server.base);
    let client = tokio::spawn(async move {
        let resp = reqwest::Client::new()
            .post(url)
            .header("X-Hub-Signature-256", sign(&body))
            .body(body)
            .send()
            .await?;
        let status = resp.status().as_u16();
        Ok::<_, reqwest::Error>((status, resp.json::<Value>().await?))
    });
    until_create_post_in_flight(&env).await;
    let signalled = Instant::now();
    server.terminate();

    // Stop accepting: a new connection is refused while the run is still going. Seen before the
    // run's answer arrives (create-post still has most of CREATE_TAKES to go).
    let mut refused = false;
    while !client.is_finished() && server.exited().is_none() {
        if reqwest::get(format!("{}/healthz", server.base))
            .await
            .is_err_and(|e| e.is_connect())
        {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (status, outcome) = client
        .await
        .expect("client task")
        .expect("the client got its answer: the in-flight run was not dropped by the shutdown");
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["outcome"], "posted", "{outcome}");
    let (exit, took, stderr) = server.wait_exit(grace() + SLACK).await;
    println!(
        "serve shutdown: run in flight at SIGTERM, answered `posted`; process exited {exit} {:.1}s after the signal (waited {:.1}s in wait_exit; grace {}s)",
        signalled.elapsed().as_secs_f64(),
        took.as_secs_f64(),
        grace().as_secs()
    );
    print!("{stderr}");
    assert!(refused, "a new connection was still accepted after SIGTERM");
    assert_eq!(exit.code(), Some(0), "exit status; stderr:\n{stderr}");
    assert!(
        stderr.contains("waiting up to") && stderr.contains("1 run(s) in flight"),
        "the drain says what it waited for:\n{stderr}"
    );
    assert!(
        stderr.contains("every run finished"),
        "the drain says the bound was not hit:\n{stderr}"
    );
    assert_posted_recorded_released(&env, &key, outcome["urn"].as_str()).await;
}

/// The CI client hangs up (GitHub stops waiting after 10 s) while create-post is in flight, then
/// SIGTERM: the run, which no connection waits for any more, still finishes and records before
/// the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_a_run_whose_client_hung_up() {
    let env = slow_env().await;
    let mut server = Server::start(&env.vars).await;
    let key = env.key();
    let body = ci_body(&env, &key);
    let url = format!("{}/ci", server.base);
    let client = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .header("X-Hub-Signature-256", sign(&body))
            .body(body)
            .send()
            .await
    });
    until_create_post_in_flight(&env).await;
    // Dropping the request closes its connection: the server's connection task ends, the run's
    // own task goes on.
    client.abort();
    let _ = client.await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.terminate();
    let (exit, took, stderr) = server.wait_exit(grace() + SLACK).await;
    println!(
        "serve shutdown, client gone: process exited {exit} {:.1}s after SIGTERM (grace {}s)",
        took.as_secs_f64(),
        grace().as_secs()
    );
    assert_eq!(exit.code(), Some(0), "exit status; stderr:\n{stderr}");
    assert_posted_recorded_released(&env, &key, None).await;
    assert!(
        stderr.contains("1 run(s) in flight") && stderr.contains("every run finished"),
        "{stderr}"
    );
}

/// Nothing in flight, one idle keep-alive connection open: SIGTERM ends the process at once
/// (well before the grace period), with exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_nothing_in_flight_exits_promptly() {
    let env = slow_env().await;
    let mut server = Server::start(&env.vars).await;
    // A pooled client keeps its connection open after the answer: an idle connection must
    // not hold the shutdown.
    let client = reqwest::Client::new();
    let health = client
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .expect("healthz");
    assert!(health.status().is_success());
    server.terminate();
    // Far below the grace period: waiting it out would fail this.
    let prompt = Duration::from_secs(10);
    assert!(prompt < grace());
    let (exit, took, stderr) = server.wait_exit(prompt).await;
    println!(
        "serve shutdown, idle: exited {exit} {:.2}s after SIGTERM (grace {}s)",
        took.as_secs_f64(),
        grace().as_secs()
    );
    assert_eq!(exit.code(), Some(0), "exit status; stderr:\n{stderr}");
    assert!(
        stderr.contains("0 run(s) in flight") && stderr.contains("every run finished"),
        "{stderr}"
    );
    drop(client);
}

/// A request that never finishes (its body never arrives) cannot hold the process forever: the
/// wait stops at the grace period, says so, and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_is_bounded_by_the_grace_period() {
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
            ("POSTONCE_CLAIM_TTL_S", "6"),
        ],
    )
    .await;
    let grace = postonce::serve::grace_period(Duration::from_secs(3));
    let mut server = Server::start(&env.vars).await;
    let addr = server.base.trim_start_matches("http://").to_owned();
    let mut stalled = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    // Headers promise a body that never comes.
    tokio::io::AsyncWriteExt::write_all(
        &mut stalled,
        b"POST /ci HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"kind\":",
    )
    .await
    .expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.terminate();
    let (exit, took, stderr) = server.wait_exit(grace + SLACK).await;
    println!(
        "serve shutdown, stalled request: exited {exit} {:.1}s after SIGTERM (grace {}s)",
        took.as_secs_f64(),
        grace.as_secs()
    );
    assert_eq!(exit.code(), Some(0), "exit status; stderr:\n{stderr}");
    assert!(
        stderr.contains("grace period ran out"),
        "the drain says the bound was hit:\n{stderr}"
    );
    assert!(
        took + Duration::from_millis(500) >= grace,
        "it did wait for the request, up to the bound ({took:?} < {grace:?})"
    );
    drop(stalled);
}

/// `serve`'s log holds one line per event, a dry run's shown requests and the owner's report
/// (a message of several lines) included: a log shipper that splits on newlines keeps each
/// event whole, and no line of a request body goes out without its timestamp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_one_line_per_event_a_dry_runs_requests_included() {
    let env = Env::start().await;
    let mut vars = env.vars.clone();
    // No LinkedIn token: a dry run, which shows its requests. No Telegram: the report is logged.
    vars.retain(|k, _| !k.starts_with("LINKEDIN_") && !k.starts_with("TELEGRAM_"));
    vars.insert("RUST_LOG".into(), "postonce=info,warn".into());
    let mut server = ServeProcess::start(&vars, true).await;
    let mut lines = server.stderr_lines();
    let key = env.key();
    let (status, body) = server
        .ci(json!({
            "kind": key.kind(), "slug": key.slug(),
            "caption": format!("One line\n\nper event {key}"),
            "image_url": env.images.url("/cover.png"),
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"dry_run\":true"), "a dry run: {body}");
    lines.wait_for("report:", std::time::Duration::from_secs(20));
    let seen = &lines.seen;
    let stamped = |l: &str| {
        let b = l.as_bytes();
        b.len() > 20 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && l.contains("Z ")
    };
    // The banner `serve` prints for a person first is not a log event.
    for line in seen
        .iter()
        .filter(|l| !l.starts_with("postonce listening on "))
    {
        assert!(
            stamped(line),
            "a line without its timestamp: {line:?}\nall: {seen:#?}"
        );
    }
    let shown: Vec<&String> = seen.iter().filter(|l| l.contains("would send ")).collect();
    assert_eq!(shown.len(), 3, "LinkedIn's three requests: {seen:#?}");
    let create = shown
        .iter()
        .find(|l| l.contains("/rest/posts"))
        .unwrap_or_else(|| panic!("the create request: {seen:#?}"));
    assert!(
        create.contains("One line\\n\\nper event")
            && create.contains("Bearer <LINKEDIN_ACCESS_TOKEN>"),
        "the create's body, compact, on its line, the token a placeholder: {create}"
    );
    let report = seen.iter().find(|l| l.contains("report:")).expect("report");
    assert!(
        report.contains(" / "),
        "the report's lines joined: {report}"
    );
}

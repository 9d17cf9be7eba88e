//! Secrets never reach the logs: every log line of a run of representative scenarios (success,
//! refusals, failures, Telegram, doctor) is captured at TRACE level, for every crate, and
//! searched for the recognisable test secrets.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use postonce::budget::Deadline;
use postonce::triggers::{HttpRequest, Router};
use support::env::{Env, CI_SECRET, LI_TOKEN, OWNER, TG_SECRET, TG_TOKEN};
use support::linkedin::Mode;
use support::serve::ServeProcess;
use support::telegram::{callback_update, TgMode};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn request(path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        path: path.into(),
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: bytes::Bytes::copy_from_slice(body),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_logs() {
    let capture = Capture::default();
    let writer = capture.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();

    let mut env = Env::start().await;
    let router = Router::new(env.app.clone());
    let dl = || Deadline::after(std::time::Duration::from_secs(20));
    let key = env.key();
    env.post(&key, "Logged success").await;
    env.linkedin.set_create_mode(Mode::Status(401));
    env.post(&env.key(), "Logged refusal").await;
    env.linkedin.set_create_mode(Mode::Normal);
    env.telegram.set_mode(TgMode::Down);
    env.post(&env.key(), "Logged without Telegram").await;
    env.telegram.set_mode(TgMode::Normal);
    router
        .handle(
            request("/ci", &[("x-hub-signature-256", "sha256=00")], b"{}"),
            dl(),
            "r1".into(),
        )
        .await;
    let update = serde_json::to_vec(&callback_update(9, OWNER, 1, 1, &format!("retry:{key}")))
        .expect("json");
    router
        .handle(
            request(
                "/telegram",
                &[("x-telegram-bot-api-secret-token", "wrong")],
                &update,
            ),
            dl(),
            "r2".into(),
        )
        .await;
    router
        .handle(
            request(
                "/telegram",
                &[("x-telegram-bot-api-secret-token", TG_SECRET)],
                &update,
            ),
            dl(),
            "r3".into(),
        )
        .await;
    let mut vars = env.vars.clone();
    vars.insert("TELEGRAM_BOT_TOKEN".into(), format!("{TG_TOKEN}x"));
    postonce::doctor::doctor(&support::env::build(&vars).await).await;
    if let Some(r) = env.redis.as_mut() {
        r.kill();
    }
    env.post(&env.key(), "Logged with Redis down").await;
    // Only DATABASE_URL, whose password is SECRET5: runs, doctor, and runs with it down.
    let mut pg = Env::with(support::env::Stores::Postgres, &[]).await;
    pg.post(&pg.key(), "Logged on PostgreSQL").await;
    postonce::doctor::doctor(&pg.app).await;
    if let Some(server) = pg.postgres.as_mut() {
        server.kill();
    }
    pg.post(&pg.key(), "Logged with PostgreSQL down").await;
    postonce::doctor::doctor(&pg.app).await;

    let logs =
        String::from_utf8_lossy(&capture.0.lock().unwrap_or_else(|p| p.into_inner())).to_string();
    println!("captured {} bytes of logs", logs.len());
    assert!(logs.len() > 10_000, "the capture saw the runs");
    for secret in [
        LI_TOKEN, TG_TOKEN, TG_SECRET, CI_SECRET, "SECRET1", "SECRET2", "SECRET3", "SECRET4",
        "SECRET5",
    ] {
        assert!(!logs.contains(secret), "{secret} appeared in the logs");
    }
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
        .ci(serde_json::json!({
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

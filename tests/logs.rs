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
        // The fields as postonce's own log writes them (src/log_line.rs).
        .fmt_fields(postonce::log_line::LineFields)
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

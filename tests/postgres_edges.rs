//! PostgreSQL at the edges of the pool and the schema: a connection black-holed mid-statement
//! is closed, not reused; the schema's version is checked when the database first answers and
//! again when a running process meets a schema migrated past it; `db migrate` refuses a newer
//! schema and gives up on a lock it cannot get. Only `DATABASE_URL` is set (no Redis, no
//! DynamoDB); LinkedIn's duplicate check is off, so a second create-post shows as a duplicate.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use postonce::config::Secret;
use postonce::networks::Network;
use postonce::outcome::OutcomeKind;
use postonce::stores::postgres::migrate::LATEST;
use postonce::stores::postgres::Database;
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck;
use support::pg_proxy::PgProxy;
use support::services::PostgresServer;

const PASSWORD: &str = "pg-SECRET5-password";

async fn env() -> Env {
    let env = Env::with(Stores::Postgres, &[]).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env
}

/// Runs the binary with only `vars` (and PATH); a run still going after `bound` is killed and
/// reported as such (a wait that never ends is the failure this file looks for, not a time).
fn binary(vars: &[(&str, String)], args: &[&str], bound: Duration) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run postonce");
    let begun = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if begun.elapsed() > bound {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            return (
                None,
                format!(
                    "still running after {bound:?}, killed: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// One pooled connection (pool size 1, budget 1 s) black-holed by the proxy mid-statement, as
/// an idle NAT flow dropped or a paused server does: that statement times out at its budget,
/// and the pool heals at once. The next five statements all answer (each would have waited its
/// whole budget and failed on the old connection), through one fresh connection, and the
/// abandoned one is closed by the client rather than kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_connection_is_closed_at_its_budget_and_the_pool_heals() {
    let pg = PostgresServer::start();
    support::env::migrate(&pg.url()).await;
    let proxy = PgProxy::start(pg.port()).await;
    let url = proxy.url(&format!("postonce:{PASSWORD}"), "postgres");
    let db = Database::new(&Secret::new(url), Duration::from_millis(1000), 1).expect("url");
    let probe = |sql: &'static str| {
        db.with("probe", move |c| async move {
            c.simple_query(sql).await.map(|_| ())
        })
    };
    probe("SELECT 1")
        .await
        .expect("the first statement answers");
    assert_eq!(proxy.accepted(), 1);
    proxy.black_hole("SELECT 'into the hole'");
    let lost = probe("SELECT 'into the hole'")
        .await
        .expect_err("a black-holed statement gets no answer");
    assert!(
        lost.unknown && lost.message.contains("no answer within 1000 ms"),
        "{lost}"
    );
    assert_eq!(
        proxy.black_holes().0,
        1,
        "the proxy black-holed the connection"
    );
    let mut failures = Vec::new();
    for _ in 0..5 {
        if let Err(e) = probe("SELECT 1").await {
            failures.push(e.to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "after one timeout every statement answers through a fresh connection: {failures:#?}"
    );
    assert_eq!(
        proxy.accepted(),
        2,
        "one fresh connection replaced the abandoned one"
    );
    // Closed by the client (its socket ended), not left open beside the pool.
    let begun = Instant::now();
    while proxy.black_holes().1 == 0 && begun.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        proxy.black_holes(),
        (1, 1),
        "the abandoned connection is closed"
    );
}

/// PostgreSQL down while the process starts (the start-up check cannot run), then up with a
/// schema never migrated: the first run refuses naming `postonce db migrate`, sending nothing;
/// after the migrate, the same running process posts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_unreachable_at_start_is_checked_when_it_answers_and_again_after_a_migrate() {
    let mut env = env().await;
    let url = env.postgres.as_ref().expect("postgres").database("late");
    env.postgres.as_mut().expect("postgres").kill();
    let app = env.app_with(&[("DATABASE_URL", &url)]).await;
    env.postgres.as_mut().expect("postgres").restart();
    let key = env.key();
    let run = || {
        app.pipeline.run(
            env.request(&key, Some(env.content(&format!("Late {key}")))),
            env.deadline(),
        )
    };
    let behind = run().await;
    assert_eq!(behind.outcome, OutcomeKind::Failed, "{}", behind.detail);
    assert!(behind.retryable, "a migrate fixes it: {}", behind.detail);
    assert!(
        behind.detail.contains("postonce db migrate") && behind.detail.contains("version 0"),
        "the refusal names the schema and the fix: {}",
        behind.detail
    );
    assert!(!behind.detail.contains(PASSWORD), "{}", behind.detail);
    assert_eq!(env.linkedin.create_requests(), 0, "nothing is sent");
    support::env::migrate(&url).await;
    let after = run().await;
    assert_eq!(after.outcome, OutcomeKind::Posted, "{}", after.detail);
    assert_eq!(env.posts_on(&key, Network::Linkedin).len(), 1);
}

/// A running process whose schema is migrated past it (a newer postonce's migration renamed a
/// column its statements use): the run that meets it refuses naming both versions and the fix
/// ("upgrade postonce"), not the missing column, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_process_refuses_a_schema_migrated_past_it() {
    let env = env().await;
    let first = env.key();
    let o = env.post(&first, &format!("First {first}")).await;
    assert_eq!(o.outcome, OutcomeKind::Posted, "{}", o.detail);
    let newer = LATEST + 1;
    env.postgres.as_ref().expect("postgres").psql(
        "postgres",
        &format!(
            "ALTER TABLE postonce_drafts RENAME COLUMN caption TO caption_text; \
             INSERT INTO postonce_schema (version, name) VALUES ({newer}, 'a newer postonce')"
        ),
    );
    let key = env.key();
    let o = env.post(&key, &format!("After {key}")).await;
    assert_eq!(o.outcome, OutcomeKind::Failed, "{}", o.detail);
    assert!(
        o.detail.contains(&format!(
            "version {newer}, newer than this postonce knows ({LATEST})"
        )) && o.detail.contains("upgrade postonce"),
        "the refusal names both versions and the fix: {}",
        o.detail
    );
    assert!(env.posts_on(&key, Network::Linkedin).is_empty());
}

/// `postonce db migrate` on a schema newer than it knows exits 2 naming both versions and
/// "upgrade postonce" (never "nothing to do"), and changes nothing.
#[test]
fn db_migrate_refuses_a_schema_newer_than_it_knows() {
    let pg = PostgresServer::start();
    let vars = [("DATABASE_URL", pg.url())];
    let bound = Duration::from_secs(60);
    let (code, text) = binary(&vars, &["db", "migrate"], bound);
    assert_eq!(code, Some(0), "{text}");
    let newer = LATEST + 1;
    pg.psql(
        "postgres",
        &format!(
            "INSERT INTO postonce_schema (version, name) VALUES ({newer}, 'a newer postonce')"
        ),
    );
    let (code, text) = binary(&vars, &["db", "migrate"], bound);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(&format!(
            "version {newer}, newer than this postonce knows ({LATEST})"
        )) && text.contains("upgrade postonce")
            && !text.contains("nothing to do"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
    assert_eq!(
        pg.psql("postgres", "SELECT max(version) FROM postonce_schema"),
        newer.to_string()
    );
}

/// Another session holds a table the migration must write (a long transaction): `db migrate`
/// gives up after its lock timeout (half the 1 s budget) with exit 1, saying what happened and
/// what to do, and leaves nothing of the migration behind; once the table is free it migrates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_that_cannot_get_its_lock_gives_up_and_says_why() {
    let pg = PostgresServer::start();
    pg.psql(
        "postgres",
        "CREATE TABLE postonce_schema (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    let (holder, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    holder
        .batch_execute("BEGIN; LOCK TABLE postonce_schema IN EXCLUSIVE MODE")
        .await
        .expect("hold the table");
    let vars = vec![
        ("DATABASE_URL", pg.url()),
        ("POSTONCE_DATABASE_TIMEOUT_MS", "1000".to_owned()),
    ];
    let bound = Duration::from_secs(30);
    let v = vars.clone();
    let (code, text) = tokio::task::spawn_blocking(move || binary(&v, &["db", "migrate"], bound))
        .await
        .expect("join");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("migration 1 (")
            && text.contains("waited 500 ms")
            && text.contains("run `postonce db migrate` again"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
    assert_eq!(
        pg.psql(
            "postgres",
            "SELECT count(*) FROM pg_tables WHERE tablename = 'postonce_records'"
        ),
        "0",
        "nothing of the migration is left"
    );
    holder.batch_execute("COMMIT").await.expect("release");
    let (code, text) =
        tokio::task::spawn_blocking(move || binary(&vars, &["db", "migrate"], bound))
            .await
            .expect("join");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        pg.psql("postgres", "SELECT max(version) FROM postonce_schema"),
        LATEST.to_string()
    );
}

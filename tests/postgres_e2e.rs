//! Self-hosting on one PostgreSQL, end to end: only `DATABASE_URL` is set (no Redis, no
//! DynamoDB, nothing durable in POSTONCE_DATA_DIR). The LinkedIn fake's duplicate check is off:
//! every create-post that reaches it is a post, so a second one for a key shows as a duplicate.

use crate::support;

use std::process::Command;
use std::time::Duration;

use postonce::budget::Deadline;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::record::{now_s, DraftStatus, DraftUpdate};
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck;
use support::services::PostgresServer;

const PASSWORD: &str = "pg-SECRET5-password";

async fn env(extra: &[(&str, &str)]) -> Env {
    let env = Env::with(Stores::Postgres, extra).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env
}

fn binary(vars: &[(String, String)], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run postonce")
}

/// An unknown scheme, and DATABASE_URL with POSTONCE_TABLE, are configuration errors (exit 2)
/// naming the variables, never showing the password.
#[test]
fn configuration_errors_name_the_variables() {
    let url = |u: &str| vec![("DATABASE_URL".to_owned(), u.to_owned())];
    let out = binary(&url(&format!("mysql://u:{PASSWORD}@h/db")), &["sweep"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("DATABASE_URL") && !err.contains(PASSWORD),
        "{err}"
    );
    let mut both = url(&format!("postgres://u:{PASSWORD}@h/db"));
    both.push(("POSTONCE_TABLE".into(), "postonce".into()));
    both.push(("REDIS_URL".into(), "redis://127.0.0.1:1".into()));
    let out = binary(&both, &["sweep"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("DATABASE_URL") && err.contains("POSTONCE_TABLE"),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
}

/// A `post` before the first migrate exits 2 naming `postonce db migrate` and sends nothing;
/// two migrates at once both succeed; then the post goes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_behind_exits_2_and_two_migrates_at_once_are_safe() {
    let env = Env::with(Stores::Local, &[]).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let pg = PostgresServer::start();
    let mut vars: Vec<(String, String)> = env
        .vars
        .iter()
        .filter(|(k, _)| *k != "POSTONCE_DATA_DIR")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.push(("DATABASE_URL".into(), pg.url()));
    let image = format!("{}/cover.png", env.images.uri());
    let post = [
        "post",
        "--kind",
        "blog",
        "--slug",
        "behind",
        "--caption",
        "Hello",
        "--image",
        &image,
    ];
    let out = binary(&vars, &post);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("postonce db migrate"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    assert_eq!(env.linkedin.create_requests(), 0, "nothing is sent");
    let (v1, v2) = (vars.clone(), vars.clone());
    let a = std::thread::spawn(move || binary(&v1, &["db", "migrate"]));
    let b = std::thread::spawn(move || binary(&v2, &["db", "migrate"]));
    for out in [a.join().expect("a"), b.join().expect("b")] {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{text}");
    }
    assert_eq!(
        pg.psql("postgres", "SELECT count(*) FROM postonce_schema"),
        postonce::stores::postgres::migrate::LATEST.to_string(),
        "one row per migration"
    );
    let again = binary(&vars, &["db", "migrate"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to do"));
    let out = binary(&vars, &post);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(env.linkedin.posts_created(), 1, "{text}");
    // A scheduled draft: `schedule list` shows it, `status --all` reads the same due queue.
    let at = postonce::record::rfc3339(now_s() + 3_600);
    let later = [
        "post",
        "--kind",
        "blog",
        "--slug",
        "later",
        "--caption",
        "Later",
        "--image",
        &image,
        "--at",
        &at,
    ];
    let out = binary(&vars, &later);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = binary(&vars, &["schedule", "list", "--json"]);
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    assert_eq!(list.status.code(), Some(0), "{text}");
    assert!(
        text.contains("blog-later") && !text.contains("blog-behind"),
        "{text}"
    );
    let all = binary(&vars, &["status", "--all"]);
    assert_eq!(
        all.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    assert_eq!(env.linkedin.posts_created(), 1, "the scheduled draft waits");
    let doctor = binary(&vars, &["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout).to_string();
    let connected = format!(
        "✓ PostgreSQL: connected; schema version {}; clock skew",
        postonce::stores::postgres::migrate::LATEST
    );
    assert!(text.lines().any(|l| l.starts_with(&connected)), "{text}");
    // The claims live in the database too (REDIS_URL unset): the line names it, not files.
    assert!(
        text.lines().any(|l| l
            .starts_with("✓ claims (PostgreSQL): claims in PostgreSQL (REDIS_URL unset)")),
        "{text}"
    );
    assert!(!text.contains("claims (files)"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
}

/// 12 racing runs of each of 8 new drafts, from 4 processes' worth of clients: 8 posts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twelve_racing_runs_of_each_of_eight_drafts_give_eight_posts() {
    let env = env(&[]).await;
    let mut apps = vec![env.app.clone()];
    for _ in 0..3 {
        apps.push(env.another_app().await);
    }
    let keys: Vec<PostKey> = (0..8).map(|_| env.key()).collect();
    let mut runs = Vec::new();
    for key in &keys {
        for i in 0..12 {
            let app = apps[i % apps.len()].clone();
            let req = env.request(key, Some(env.content(&format!("Storm {key}"))));
            runs.push(tokio::spawn(async move {
                let dl = Deadline::after(app.config.function_timeout);
                app.pipeline.run(req, dl).await
            }));
        }
    }
    for r in runs {
        r.await.expect("run");
    }
    for key in &keys {
        assert_eq!(env.posts_on(key, Network::Linkedin).len(), 1, "{key}");
        let st = env.status(key).await;
        assert!(st.snapshot.record.is_some(), "{key} is recorded");
        assert_eq!(
            st.snapshot.draft.map(|d| d.status),
            Some(DraftStatus::Posted)
        );
    }
    assert_eq!(env.linkedin.posts_created(), 8);
    assert_eq!(env.linkedin.duplicated_texts(), 0);
    assert!(
        std::fs::metadata("/proc/postonce-nothing-durable-here").is_err(),
        "nothing durable lives in POSTONCE_DATA_DIR"
    );
}

/// 4 racing sweeps over 10 due drafts: 10 posts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_racing_sweeps_over_ten_due_drafts_give_ten_posts() {
    let env = env(&[]).await;
    let records = env.app.pipeline.records.clone();
    let keys: Vec<PostKey> = (0..10).map(|_| env.key()).collect();
    for key in &keys {
        records
            .save_draft(key, &env.content(&format!("Due {key}")), "ci", now_s() - 60)
            .await
            .expect("save");
        let failed = DraftUpdate::Failed {
            error: "earlier failure".into(),
            retryable: true,
            next_retry_at: Some(now_s() - 1),
        };
        assert!(records
            .update_draft(key, &failed, &[], now_s() - 30)
            .await
            .expect("due"));
    }
    let mut sweeps = Vec::new();
    for _ in 0..4 {
        let app = env.another_app().await;
        sweeps.push(tokio::spawn(async move {
            let dl = Deadline::after(app.config.function_timeout);
            app.pipeline.sweep(&dl).await
        }));
    }
    for s in sweeps {
        s.await.expect("join").expect("sweep");
    }
    for key in &keys {
        assert_eq!(env.posts_on(key, Network::Linkedin).len(), 1, "{key}");
    }
    assert_eq!(env.linkedin.posts_created(), 10);
}

/// PostgreSQL's statements per run (issue 34: the floor), with the claims there too: counted as
/// the statements bound through a proxy in front of the server (`support::pg_proxy`), once
/// connections are warm (statements prepared, the schema's version checked):
/// - a new draft: 3 (its save and the claim; the intent, whose conditions are the record's
///   check under the claim; the record and the claim's release);
/// - the same draft sent again once posted: 1 (its save finds the record's copy: no claim);
/// - a due draft in a sweep: 3 (the claim and the attempt's start; the intent; the record and
///   the release), beside the sweep's own listing, which does not grow with the due drafts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_per_run_are_at_the_floor() {
    let env = env(&[]).await;
    let pg = env.postgres.as_ref().expect("postgres");
    let proxy = support::pg_proxy::PgProxy::start(pg.port()).await;
    let through = env
        .app_with(&[(
            "DATABASE_URL",
            &proxy.url(&format!("postonce:{PASSWORD}"), "postgres"),
        )])
        .await;
    let run = async |content: bool, key: &PostKey| {
        let req = env.request(key, content.then(|| env.content(&format!("Counted {key}"))));
        let n0 = proxy.seen().len();
        let o = through.pipeline.run(req, env.deadline()).await;
        (o.outcome, proxy.seen()[n0..].to_vec())
    };
    let due = async |n: usize| {
        let records = env.app.pipeline.records.clone();
        for _ in 0..n {
            let key = env.key();
            records
                .save_draft(
                    &key,
                    &env.content(&format!("Due {key}")),
                    "ci",
                    now_s() - 60,
                )
                .await
                .expect("save");
            let failed = DraftUpdate::Failed {
                error: "earlier failure".into(),
                retryable: true,
                next_retry_at: Some(now_s() - 1),
            };
            assert!(records
                .update_draft(&key, &failed, &[], now_s() - 30)
                .await
                .expect("due"));
        }
    };
    let sweep = async || {
        let n0 = proxy.seen().len();
        let report = through
            .pipeline
            .sweep(&env.deadline())
            .await
            .expect("sweep");
        (report.runs.len(), proxy.seen()[n0..].to_vec())
    };
    // Warm: every statement a run and a sweep make prepared on the pool's connections, and the
    // schema's version checked (again only after a minute); the expired drafts' clean-up runs
    // with the first sweep (then at most every 30 s).
    for _ in 0..2 {
        let key = env.key();
        run(true, &key).await;
        run(true, &key).await;
        due(2).await;
        sweep().await;
    }
    let key = env.key();
    let (new, new_seen) = run(true, &key).await;
    let (again, again_seen) = run(true, &key).await;
    due(2).await;
    let (two, two_seen) = sweep().await;
    due(5).await;
    let (five, five_seen) = sweep().await;
    println!("a new draft, {} statements: {new_seen:#?}", new_seen.len());
    println!(
        "sent again once posted, {} statements: {again_seen:#?}",
        again_seen.len()
    );
    println!(
        "a sweep of 2 due drafts, {} statements: {two_seen:#?}",
        two_seen.len()
    );
    println!("a sweep of 5 due drafts, {} statements", five_seen.len());
    assert_eq!(new, postonce::outcome::OutcomeKind::Posted);
    assert_eq!(again, postonce::outcome::OutcomeKind::AlreadyPosted);
    assert_eq!((two, five), (2, 5), "the sweeps ran every due draft");
    assert!(new_seen.len() <= 3, "a new draft: {new_seen:#?}");
    assert_eq!(
        again_seen.len(),
        1,
        "sent again once posted: {again_seen:#?}"
    );
    // The sweep's own statements (its listings) are the same for 2 due drafts as for 5.
    let per_due = (five_seen.len() - two_seen.len()) as f64 / 3.0;
    println!(
        "per due draft in a sweep: {per_due} statements; the sweep's own: {}",
        two_seen.len() as f64 - 2.0 * per_due
    );
    assert!(
        per_due <= 3.0,
        "{per_due} statements per due draft in a sweep"
    );
}

/// The due index on PostgreSQL: 100,000 done drafts and 10,000 scheduled far ahead stored,
/// 100 due; the sweep's listing reads (as the server's plan counts rows) at most 2× the due.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweep_over_100000_stored_drafts_reads_only_the_due_ones() {
    const DUE: usize = 100;
    let env = env(&[]).await;
    let pg = env.postgres.as_ref().expect("postgres");
    let seeding = std::time::Instant::now();
    pg.psql(
        "postgres",
        "INSERT INTO postonce_drafts (ns, key, caption, image, status, created_at, updated_at, expires_at, record)
         SELECT '', 'blog-old-' || i, 'c', 'https://img.example/a.png', 'posted', 1, 1, 4000000000, '{}'::jsonb
         FROM generate_series(1, 100000) i;
         INSERT INTO postonce_drafts (ns, key, caption, image, status, created_at, updated_at, publish_at, due_at)
         SELECT '', 'blog-later-' || i, 'c', 'https://img.example/a.png', 'scheduled', 1, 1, 4000000000, 4000000000
         FROM generate_series(1, 10000) i;
         ANALYZE postonce_drafts;",
    );
    let seeded_in = seeding.elapsed();
    let keys: Vec<PostKey> = (0..DUE).map(|_| env.key()).collect();
    let records = env.app.pipeline.records.clone();
    for key in &keys {
        records
            .save_draft(key, &env.content(&format!("Due {key}")), "ci", now_s() - 60)
            .await
            .expect("save");
        let failed = DraftUpdate::Failed {
            error: "earlier failure".into(),
            retryable: true,
            next_retry_at: Some(now_s() - 1),
        };
        assert!(records
            .update_draft(key, &failed, &[], now_s() - 30)
            .await
            .expect("due"));
    }
    // The listing's statement, as the server runs it: rows its scans return or discard.
    let plan = pg.psql(
        "postgres",
        &format!(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT to_jsonb(d) FROM postonce_drafts d
             WHERE d.ns = '' AND d.status = ANY(ARRAY['new','failed','unknown','needs_review','scheduled'])
               AND d.due_at IS NOT NULL AND d.due_at <= {}
             ORDER BY d.due_at, d.key",
            now_s()
        ),
    );
    let mut read = 0u64;
    for line in plan.lines() {
        let number = |after: &str| {
            line.split(after).nth(1).and_then(|r| {
                r.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse::<u64>()
                    .ok()
            })
        };
        if line.contains("Scan") && line.contains("postonce_drafts") {
            read += number("rows=").unwrap_or(0);
        }
        if line.contains("Rows Removed by") {
            read += number(": ").unwrap_or(0);
        }
    }
    // A posted draft past its expiry (DynamoDB's TTL would remove it): the sweep deletes it,
    // and keeps its record.
    let gone = env.key();
    env.post(&gone, &format!("Expired {gone}")).await;
    pg.psql(
        "postgres",
        &format!("UPDATE postonce_drafts SET expires_at = 1 WHERE key = '{gone}'"),
    );
    let report = env.sweep().await;
    let left = pg.psql(
        "postgres",
        &format!(
            "SELECT (SELECT count(*) FROM postonce_drafts WHERE key = '{gone}') || ' ' || (SELECT count(*) FROM postonce_records WHERE key = '{gone}')"
        ),
    );
    assert_eq!(left, "0 1", "the expired draft is deleted, its record kept");
    println!(
        "due index on PostgreSQL: {} drafts stored, {DUE} due; the listing's plan read {read} rows; seeded in {seeded_in:?}\n{plan}",
        110_000 + DUE
    );
    assert_eq!(
        report.examined, DUE,
        "the sweep examined the due drafts only"
    );
    for key in &keys {
        assert_eq!(env.posts_on(key, Network::Linkedin).len(), 1, "{key}");
    }
    assert!(
        plan.contains("postonce_drafts_due"),
        "the listing uses the due index:\n{plan}"
    );
    assert!(read >= DUE as u64, "the plan read nothing:\n{plan}");
    assert!(
        read <= 2 * DUE as u64,
        "the listing read {read} rows for {DUE} due:\n{plan}"
    );
}

/// PostgreSQL paused (SIGSTOP to the postmaster and its backends): a run fails within its
/// budget, retryable, having sent nothing; resumed, the draft posts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_paused_fails_closed_within_the_budget() {
    let env = env(&[("POSTONCE_DATABASE_TIMEOUT_MS", "1000")]).await;
    let warm = env.key();
    env.post(&warm, "Warm the pool").await;
    let key = env.key();
    let pg = env.postgres.as_ref().expect("postgres");
    pg.pause();
    let begun = std::time::Instant::now();
    let paused = env.post(&key, &format!("Paused {key}")).await;
    let took = begun.elapsed();
    pg.resume();
    println!(
        "paused: {:?} in {took:?}: {}",
        paused.outcome, paused.detail
    );
    assert_eq!(
        paused.outcome,
        postonce::outcome::OutcomeKind::Failed,
        "{}",
        paused.detail
    );
    assert!(paused.retryable, "{}", paused.detail);
    assert!(
        took < Duration::from_secs(10),
        "the run ended within its budgets: {took:?}"
    );
    assert!(
        env.posts_on(&key, Network::Linkedin).is_empty(),
        "nothing was posted"
    );
    let again = env.post(&key, &format!("Paused {key}")).await;
    assert_eq!(
        again.outcome,
        postonce::outcome::OutcomeKind::Posted,
        "{}",
        again.detail
    );
    assert_eq!(env.posts_on(&key, Network::Linkedin).len(), 1);
    assert!(!format!("{paused:?}").contains(PASSWORD));
}

/// TLS through rustls with libpq's sslmode: `require` encrypts (the server sees TLS),
/// `verify-full` checks the chain and the name, `verify-ca` the chain only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_libpq_sslmodes() {
    use postonce::config::Secret;
    use postonce::stores::postgres::Database;
    let (pg, ca) = PostgresServer::start_tls();
    let open =
        |url: String| Database::new(&Secret::new(url), Duration::from_secs(5), 1).expect("url");
    let base = |host: &str| {
        format!(
            "postgres://postonce:{PASSWORD}@{host}:{}/postgres",
            pg.port()
        )
    };
    let require = open(format!("{}?sslmode=require", base("127.0.0.1")));
    require.migrate().await.expect("migrate over TLS");
    let ssl = pg.psql("postgres", "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE s.ssl AND a.application_name = 'postonce'");
    assert_eq!(ssl, "1", "the connection is encrypted");
    let ca = ca.display();
    let full = open(format!(
        "{}?sslmode=verify-full&sslrootcert={ca}",
        base("localhost")
    ));
    use postonce::stores::postgres::migrate::LATEST;
    assert_eq!(full.schema_version().await.expect("verify-full"), LATEST);
    let chain = open(format!(
        "{}?sslmode=verify-ca&sslrootcert={ca}",
        base("localhost")
    ));
    assert_eq!(chain.schema_version().await.expect("verify-ca"), LATEST);
    // The Mozilla roots do not know the test CA: verify-full refuses, without the password.
    let unknown = open(format!("{}?sslmode=verify-full", base("localhost")));
    let e = unknown
        .schema_version()
        .await
        .expect_err("an unknown CA is refused");
    assert!(!e.to_string().contains(PASSWORD), "{e}");
    // Several hosts, tried in turn as libpq does: the first refuses, the second answers, and
    // verify-full checks the second one's name.
    let dead = support::services::free_port();
    let several = open(format!(
        "postgres://postonce:{PASSWORD}@127.0.0.1:{dead},localhost:{}/postgres?sslmode=verify-full&sslrootcert={ca}",
        pg.port()
    ));
    assert_eq!(
        several.schema_version().await.expect("several hosts"),
        LATEST
    );
    // The default (prefer) meets the TLS server.
    let prefer = open(base("127.0.0.1"));
    assert_eq!(prefer.schema_version().await.expect("prefer"), LATEST);
}

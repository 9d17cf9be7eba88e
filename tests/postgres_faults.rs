//! PostgreSQL's faults while runs are in flight, with only `DATABASE_URL` set (no Redis, no
//! DynamoDB): the fault matrix of the DynamoDB path (tests/faults.rs, tests/chaos.rs) on
//! PostgreSQL, where records, drafts and claims share one server.
//! - the server killed with -9 (postmaster and backends) and restarted;
//! - the server paused (SIGSTOP to the postmaster and its backends, found by their data folder)
//!   past the database budget, then resumed;
//! - a connection dropped after the server committed a write but before the client heard the
//!   answer ([`support::pg_proxy`]), for each write a run makes.
//!
//! The crash proofs use the realistic LinkedIn fake: its duplicate check sees a post only once
//! it has been processed, so two creates within that time are two posts. When a crash loses
//! both the record and the claim, only the intent is left, and the re-send after the quiet
//! period rests on LinkedIn's duplicate answer: those proofs say so in their names. The proof
//! with the duplicate check off leaves such drafts `unknown` and tells the owner.
//!
//! Verdict, counted at the fake per key: 0 duplicates, and 0 drafts lost: every draft ends
//! posted and recorded, or told to the owner.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use postonce::app::App;
use postonce::claim::ClaimValue;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind};
use postonce::record::DraftStatus;
use support::chaos::verdict;
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck;
use support::pg_proxy::PgProxy;

/// Short budgets, so that claims expire and faults outlast the database budget within moments.
fn budgets(quiet_s: &'static str) -> [(&'static str, &'static str); 5] {
    [
        ("POSTONCE_RECONCILE_AFTER_S", quiet_s),
        ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
        ("POSTONCE_CLAIM_TTL_S", "4"),
        ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1500"),
        ("POSTONCE_DATABASE_TIMEOUT_MS", "1500"),
    ]
}

/// LinkedIn's real race: a post is seen by the duplicate check only after its processing.
fn realistic_linkedin(env: &Env) {
    env.linkedin.set_duplicate_check(DuplicateCheck::Racy {
        processing: Duration::from_millis(400),
        window: None,
    });
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// kill -9, down for 500 ms, restarted (crash recovery runs).
    Kill,
    /// SIGSTOP for 2.5 s (past the 1.5 s database budget), then SIGCONT.
    Pause,
}

fn caption(key: &PostKey) -> String {
    format!("In flight {key}")
}

/// One round: 8 new drafts, 3 racing runs each from two processes' worth of clients, and
/// `fault` landing `after` the runs began (LinkedIn takes 150 ms a step, so the stages fall
/// before, at and after the intents and the creates). Returns the keys once every run answered,
/// the longest a run took, and how many runs the fault hit (answered failed, unknown or
/// posted but not recorded).
async fn round(
    env: &mut Env,
    apps: &[Arc<App>],
    fault: Fault,
    after: u64,
) -> (Vec<PostKey>, Duration, usize) {
    env.linkedin.set_delay(Duration::from_millis(150));
    let keys: Vec<PostKey> = (0..8).map(|_| env.key()).collect();
    let mut runs = Vec::new();
    for (n, key) in keys.iter().enumerate() {
        for i in 0..3 {
            let app = apps[(n + i) % apps.len()].clone();
            let req = env.request(key, Some(env.content(&caption(key))));
            runs.push(tokio::spawn(async move {
                let begun = Instant::now();
                let dl = postonce::budget::Deadline::after(app.config.function_timeout);
                (app.pipeline.run(req, dl).await, begun.elapsed())
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(after)).await;
    let pg = env.postgres.as_mut().expect("postgres");
    match fault {
        Fault::Kill => {
            pg.kill();
            tokio::time::sleep(Duration::from_millis(500)).await;
            pg.restart();
        }
        Fault::Pause => {
            pg.pause();
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            pg.resume();
        }
    }
    let mut longest = Duration::ZERO;
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    for r in runs {
        let (o, took) = r.await.expect("run");
        longest = longest.max(took);
        *tally.entry(o.outcome.as_str()).or_default() += 1;
    }
    println!("  {fault:?} at {after} ms: runs answered {tally:?}, the longest in {longest:?}");
    env.linkedin.set_delay(Duration::ZERO);
    let hit = ["failed", "unknown", "posted_not_recorded"]
        .iter()
        .filter_map(|k| tally.get(k))
        .sum();
    (keys, longest, hit)
}

/// Sends every key's draft again (as CI's redelivery would), all at once, until each answers
/// posted or already posted (at most 40 s). Returns how many passes that took, and the keys
/// posted once and recorded whose kept claim was left beside the record.
///
/// A paused server runs what it had not read yet once it wakes, after the run gave up on it:
/// a run's record write *and* its keep of the claim (`posted:<urn>`, for
/// POSTONCE_POSTED_CLAIM_TTL_S) can both land. Every later run answers from the record and none
/// drops that claim (neither a redelivery nor a Retry): by design it is left to its TTL, since
/// every run meets the record first (RELIABILITY.md, "The kept-claim clean-up on a Retry").
/// Such keys are checked here (one post, recorded with the claim's URN, draft posted) and
/// counted apart.
async fn settle(env: &Env, keys: &[PostKey]) -> (usize, Vec<PostKey>) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut open: Vec<PostKey> = keys.to_vec();
    let mut passes = 0;
    while !open.is_empty() && Instant::now() < deadline {
        passes += 1;
        let runs: Vec<_> = open
            .iter()
            .map(|key| {
                let (app, req) = (
                    env.app.clone(),
                    env.request(key, Some(env.content(&caption(key)))),
                );
                tokio::spawn(async move {
                    let dl = postonce::budget::Deadline::after(app.config.function_timeout);
                    app.pipeline.run(req, dl).await
                })
            })
            .collect();
        let mut still = Vec::new();
        for (key, run) in open.iter().zip(runs) {
            let o = run.await.expect("run");
            if !matches!(o.outcome, OutcomeKind::Posted | OutcomeKind::AlreadyPosted) {
                still.push(key.clone());
            }
        }
        open = still;
        if !open.is_empty() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    // A paused server also runs a claim's acquire that arrived while it slept, after its run
    // gave up and released nothing: that claim names a run that is over, and holds only until
    // its TTL (4 s here). Wait it out, so the verdict sees what a later run would meet.
    let expired = Instant::now() + Duration::from_secs(5);
    for key in keys {
        while Instant::now() < expired
            && matches!(env.status(key).await.claim, Some((ClaimValue::Run(_), _)))
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut kept = Vec::new();
    for key in keys {
        let st = env.status(key).await;
        let Some((ClaimValue::Posted(urn), _)) = st.claim else {
            continue;
        };
        let posts = env.posts_on(key, Network::Linkedin);
        let recorded = st.snapshot.record.and_then(|r| r.post_id);
        let posted = st.snapshot.draft.map(|d| d.status) == Some(DraftStatus::Posted);
        if posts == [urn.clone()] && recorded.as_ref() == Some(&urn) && posted {
            kept.push(key.clone());
        }
    }
    (passes, kept)
}

/// The server killed -9 at three stages of 8 drafts × 3 racing runs, and restarted; then
/// every draft is sent again until it settles, past the 4 s quiet period, which **relies on
/// LinkedIn's duplicate answer** for a draft whose record and claim the kill lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_killed_mid_way_settles_every_draft_relying_on_linkedins_duplicate_answer() {
    let mut env = Env::with(Stores::Postgres, &budgets("4")).await;
    realistic_linkedin(&env);
    let apps = [env.app.clone(), env.another_app().await];
    let begun = Instant::now();
    let (mut keys, mut hit) = (Vec::new(), 0);
    for after in [300, 700, 1_100] {
        let (batch, _, h) = round(&mut env, &apps, Fault::Kill, after).await;
        keys.extend(batch);
        hit += h;
    }
    let (passes, kept) = settle(&env, &keys).await;
    let rest: Vec<PostKey> = keys.iter().filter(|k| !kept.contains(k)).cloned().collect();
    let v = verdict(&env, &rest).await;
    let what = format!(
        "PostgreSQL killed -9 three times (LinkedIn duplicate check RACY, 400 ms processing; quiet period {:?}): {} drafts, {hit} runs hit, settled in {passes} passes ({} of them posted once and recorded with a kept claim left beside the record), {:?} in all",
        env.quiet_period(),
        keys.len(),
        kept.len(),
        begun.elapsed()
    );
    v.print(&what, &env);
    assert!(hit > 0, "the fault hit no run: the proof proved nothing");
    v.assert_all_posted_once(&env, &rest);
}

/// The same kills against a LinkedIn with **no duplicate check** and a quiet period that
/// outlasts the test: nothing may be re-sent on a guess. After each round the claims expire,
/// every draft is sent again once and the sweeper runs. Every draft ends posted and recorded
/// (once), or waits `unknown` with the owner told.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_killed_mid_way_with_no_duplicate_check_duplicates_nothing_and_tells_the_owner() {
    let mut env = Env::with(Stores::Postgres, &budgets("3000")).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let apps = [env.app.clone(), env.another_app().await];
    let (mut keys, mut hit) = (Vec::new(), 0);
    for after in [400, 800, 1_200] {
        let (batch, _, h) = round(&mut env, &apps, Fault::Kill, after).await;
        hit += h;
        // The claims of runs that could not release them (the database was down) expire.
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        for key in &batch {
            env.post(key, &caption(key)).await;
        }
        env.sweep().await;
        keys.extend(batch);
    }
    let told: Vec<String> = env
        .telegram
        .requests_for("sendMessage")
        .iter()
        .map(|m| m.to_string())
        .collect();
    let v = verdict(&env, &keys).await;
    let what = format!(
        "PostgreSQL killed -9 three times (LinkedIn duplicate check OFF, quiet period 3000 s): {} drafts, {hit} runs hit, each sent again once after its round, then swept",
        keys.len()
    );
    v.print(&what, &env);
    assert!(hit > 0, "the fault hit no run: the proof proved nothing");
    assert_eq!(v.duplicates, 0, "{:#?}", v.lost);
    assert!(v.lost.is_empty(), "{:#?}", v.lost);
    assert_eq!(env.linkedin.duplicated_texts(), 0);
    for key in &keys {
        let posts = env.posts_on(key, Network::Linkedin);
        if env.status(key).await.snapshot.record.is_none() {
            assert!(
                told.iter().any(|m| m.contains(&key.to_string())),
                "{key} ({} posts) is neither recorded nor told to the owner",
                posts.len()
            );
        }
    }
}

/// The server paused (SIGSTOP) for 2.5 s at two stages of 8 drafts × 3 racing runs, past the
/// 1.5 s database budget, then resumed: runs fail within their budgets (none waits for the
/// server), and statements the paused server had not read yet run when it wakes. Then every
/// draft is sent again until it settles, past the quiet period, which **relies on LinkedIn's
/// duplicate answer** where an attempt's answer was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_paused_mid_way_settles_every_draft_relying_on_linkedins_duplicate_answer() {
    let mut env = Env::with(Stores::Postgres, &budgets("4")).await;
    realistic_linkedin(&env);
    let apps = [env.app.clone(), env.another_app().await];
    // Warm pools: the pause then meets open connections as well as new ones.
    let mut keys = Vec::new();
    for app in &apps {
        let key = env.key();
        let req = env.request(&key, Some(env.content(&caption(&key))));
        let o = app.pipeline.run(req, env.deadline()).await;
        assert_eq!(o.outcome, OutcomeKind::Posted, "{}", o.detail);
        keys.push(key);
    }
    let (mut longest, mut hit) = (Duration::ZERO, 0);
    for after in [300, 650] {
        let (batch, took, h) = round(&mut env, &apps, Fault::Pause, after).await;
        keys.extend(batch);
        longest = longest.max(took);
        hit += h;
    }
    let (passes, kept) = settle(&env, &keys).await;
    let rest: Vec<PostKey> = keys.iter().filter(|k| !kept.contains(k)).cloned().collect();
    let v = verdict(&env, &rest).await;
    let what = format!(
        "PostgreSQL paused 2.5 s twice (2 drafts posted before, to warm the pools; LinkedIn duplicate check RACY; the longest run {longest:?}): {} drafts, {hit} runs hit, settled in {passes} passes ({} of them posted once and recorded with a kept claim left beside the record)",
        keys.len(),
        kept.len()
    );
    v.print(&what, &env);
    assert!(hit > 0, "the fault hit no run: the proof proved nothing");
    v.assert_all_posted_once(&env, &rest);
    // POSTONCE_FUNCTION_TIMEOUT_S=3: a run ends within its own budget (with a little room for
    // a loaded machine), never waiting for the paused server.
    assert!(
        longest < Duration::from_millis(4_500),
        "a run took {longest:?}"
    );
}

/// The writes a run of a new draft makes, each as a text of its SQL: the connection is cut
/// after the server committed it, before the client heard the answer. With the claims in the
/// database, the claim goes with the draft's save and its release with the record (issue 34):
/// three statements.
const WRITES: [(&str, &str); 3] = [
    (
        "save draft and claim",
        "claim AS (INSERT INTO postonce_claims",
    ),
    ("intent", "WITH u AS (UPDATE postonce_drafts"),
    (
        "record and release claim",
        "DELETE FROM postonce_claims WHERE name = $13 AND value = $14",
    ),
];

/// What the first run answered must be what is stored and what LinkedIn has: `failed`
/// ("nothing was posted") with no post, `posted` with the post recorded, never
/// `posted_not_recorded` when the record is there.
async fn answer_is_what_is_stored(
    env: &Env,
    write: &str,
    key: &PostKey,
    o: &Outcome,
) -> Result<(), String> {
    let posts = env.posts_on(key, Network::Linkedin);
    let st = env.status(key).await;
    let recorded = st.snapshot.record.as_ref().map(|r| r.post_id.clone());
    let fine = match o.outcome {
        OutcomeKind::Failed | OutcomeKind::BeingPosted => posts.is_empty(),
        OutcomeKind::Posted => posts.len() == 1 && recorded == Some(Some(posts[0].clone())),
        OutcomeKind::PostedNotRecorded => posts.len() == 1 && recorded.is_none(),
        _ => false,
    };
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{write}: answered {:?} ({}), but LinkedIn has {} posts and the record is {recorded:?}",
            o.outcome,
            o.detail,
            posts.len()
        ))
    }
}

/// A connection dropped after the commit but before the answer, for each write of a run (the
/// draft and the claim, the intent, the record and the claim's release), against a LinkedIn with
/// **no duplicate check**: the run's answer is what is stored (a lost record write is answered
/// by reading it back, never guessed), and every draft then settles posted exactly once, with
/// one create-post per draft. A lost intent leaves the draft `unknown` until its quiet period
/// (3 s) ends; nothing was sent, so its re-send is the only create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_after_the_commit_answers_what_is_stored_and_posts_once() {
    let env = Env::with(Stores::Postgres, &budgets("3")).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let pg = env.postgres.as_ref().expect("postgres");
    let proxy = PgProxy::start(pg.port()).await;
    let url = proxy.url("postonce:pg-SECRET5-password", "postgres");
    let through = env.app_with(&[("DATABASE_URL", &url)]).await;
    let mut keys = Vec::new();
    let mut wrong = Vec::new();
    let mut answers = Vec::new();
    for (n, (write, sql)) in WRITES.iter().enumerate() {
        let key = env.key();
        proxy.arm(sql);
        let req = env.request(&key, Some(env.content(&caption(&key))));
        let o = through.pipeline.run(req, env.deadline()).await;
        let cuts = proxy.disarm();
        assert_eq!(
            cuts.len(),
            n + 1,
            "{write}: no connection was cut after {sql:?} (has the SQL changed?); statements seen: {:#?}",
            proxy.seen()
        );
        answers.push(format!(
            "{write} (cut after {:?}): {:?}",
            cuts[n].tag, o.outcome
        ));
        if let Err(e) = answer_is_what_is_stored(&env, write, &key, &o).await {
            wrong.push(e);
        }
        keys.push(key);
    }
    let (passes, kept) = settle(&env, &keys).await;
    let rest: Vec<PostKey> = keys.iter().filter(|k| !kept.contains(k)).cloned().collect();
    let v = verdict(&env, &rest).await;
    let what = format!(
        "a connection dropped after the commit, before the answer (LinkedIn duplicate check OFF, quiet period 3 s; first answers {answers:?}): {} drafts, settled in {passes} passes ({} of them posted once and recorded with a kept claim left beside the record)",
        keys.len(),
        kept.len()
    );
    v.print(&what, &env);
    assert!(
        wrong.is_empty(),
        "answers that are not what is stored: {wrong:#?}"
    );
    v.assert_all_posted_once(&env, &rest);
}

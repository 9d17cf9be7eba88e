//! Proof by crashes and by load, through the HTTP routes:
//! - crash chaos: `postonce serve` as a child process is SIGKILLed at random moments while runs
//!   are in flight, restarted, and the triggers repeated until every draft settles;
//! - storm: many keys, each hit by many concurrent triggers mixed across the CI webhook, the
//!   Telegram Retry button and the `postonce post` CLI.
//!
//! Every verdict counts posts created at the fakes, per key (and per network for the
//! five-target proofs). LinkedIn's and X's fakes run with no duplicate check (a second create
//! is a second post), except in the proof whose name says it relies on LinkedIn's duplicate
//! answer, where it has LinkedIn's real race; Mastodon's and Bluesky's fakes keep their own
//! idempotency (key, record key), as the real networks do.
//!
//! Sizes: `POSTONCE_CHAOS_TRIALS` (default 200, per chaos proof), `POSTONCE_STORM_KEYS` ×
//! `POSTONCE_STORM_TRIGGERS` (default 100 × 60). All print their figures, per network.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::record::DraftStatus;
use support::chaos::{
    crash_chaos, crash_chaos_settling_by_linkedins_duplicate_answer, sized,
    storm_of_mixed_triggers, verdict, verdict_per_target, NETWORKS,
};
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck;

/// Crash chaos against a LinkedIn with **no duplicate check**: every create-post that reaches
/// it makes a post, so a second create-post for a key shows as a duplicate. No run may re-send
/// within the quiet period, which here outlasts the test: drafts whose run died after its
/// intent stay `unknown`, waiting (the sweeper reconciles them after the quiet period, or the
/// owner decides). Verdict: 0 duplicates, 0 lost; every key posted once or waiting; after
/// sweeps, every key not posted is told once or due for the sweeper ([`told_or_due`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_chaos_no_duplicates_no_lost_drafts() {
    let trials = sized("POSTONCE_CHAOS_TRIALS", 200);
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
            ("POSTONCE_CLAIM_TTL_S", "4"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1500"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1500"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "800"),
            ("POSTONCE_RECONCILE_AFTER_S", "3000"),
        ],
    )
    .await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let begun = Instant::now();
    let (keys, kills) = crash_chaos(&env, trials, true, Duration::from_millis(400)).await;
    let v = verdict(&env, &keys).await;
    println!(
        "crash chaos (LinkedIn duplicate check OFF, quiet period {:?}): {} keys, {kills} SIGKILLs of postonce serve, settled in {:?}: {} create-post requests, {} posts; posted once and recorded {}, waiting (unknown, quiet period) {} ({} of them on LinkedIn, {} not), duplicates {}, lost {}",
        env.quiet_period(),
        keys.len(),
        begun.elapsed(),
        env.linkedin.create_requests(),
        env.linkedin.posts_created(),
        v.posted_once,
        v.waiting_with_post + v.waiting_without_post,
        v.waiting_with_post,
        v.waiting_without_post,
        v.duplicates,
        v.lost.len()
    );
    assert_eq!(v.duplicates, 0, "{:#?}", v.lost);
    assert!(v.lost.is_empty(), "{:#?}", v.lost);
    assert_eq!(
        v.posted_once + v.waiting_with_post + v.waiting_without_post,
        keys.len()
    );
    assert_eq!(env.linkedin.duplicated_texts(), 0);
    let told = told_or_due(&env, &keys, &[Network::Linkedin]).await;
    println!("not posted, per network: (told once, due for the sweeper) {told:?}");
}

/// [`crash_chaos_settling_by_linkedins_duplicate_answer`] on Redis and DynamoDB Local.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_chaos_settles_every_draft_relying_on_linkedins_duplicate_answer() {
    crash_chaos_settling_by_linkedins_duplicate_answer(
        Stores::Real,
        sized("POSTONCE_CHAOS_TRIALS", 200),
    )
    .await;
}

/// The rule of issue 20, after the chaos: every target that is not posted is in front of its
/// owner (told exactly once by the sweeper, shown in `status --all`), or due for a run the
/// sweeper will make (`unknown`, still retryable, attempts left: its quiet period, which here
/// outlasts the test, has not ended). Sweeps run in-process over the same stores with a budget
/// that fits a run, once no run of the chaos can be live; then two more must say nothing.
/// Returns (told, due) per network.
async fn told_or_due(
    env: &Env,
    keys: &[PostKey],
    networks: &[Network],
) -> BTreeMap<Network, (usize, usize)> {
    let app = env
        .app_with(&[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "8"),
            ("POSTONCE_CLAIM_TTL_S", "9"),
        ])
        .await;
    // Every claim of the chaos (4 s) has run out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let sweep = || async {
        app.pipeline
            .sweep(&postonce::budget::Deadline::after(Duration::from_secs(8)))
            .await
            .expect("sweep")
    };
    for _ in 0..60 {
        let r = sweep().await;
        if r.runs.is_empty() && r.reminded.is_empty() && r.left_for_later == 0 {
            break;
        }
    }
    let messages = env.telegram.requests_for("sendMessage").len();
    sweep().await;
    sweep().await;
    assert_eq!(
        env.telegram.requests_for("sendMessage").len(),
        messages,
        "sweeps that change nothing say nothing"
    );
    let waiting = app
        .pipeline
        .waiting(&postonce::budget::Deadline::after(Duration::from_secs(8)))
        .await
        .expect("waiting");
    let texts: Vec<String> = env
        .telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect();
    let max = env.app.config.max_attempts;
    let mut out: BTreeMap<Network, (usize, usize)> = BTreeMap::new();
    let mut untold = Vec::new();
    for key in keys {
        for n in networks {
            let target = key.on(*n);
            let st = env.status(&target).await;
            let Some(d) = st.snapshot.draft else {
                untold.push(format!("{target}: no draft"));
                continue;
            };
            if d.status == DraftStatus::Posted {
                continue;
            }
            let told = texts
                .iter()
                .filter(|t| {
                    t.starts_with(&format!("Reminder: {target} "))
                        || t.starts_with(&format!("{target} needs you"))
                })
                .count();
            let shown = waiting.iter().any(|w| w.key == target.to_string());
            let e = out.entry(*n).or_default();
            if told == 1 && shown {
                e.0 += 1;
            } else if told == 0
                && !shown
                && matches!(d.status, DraftStatus::Unknown | DraftStatus::Failed)
                && d.retryable
                && d.attempts < max
                // A channel's `unknown` is never retried: it must be in front of the owner.
                && !(*n == Network::Telegram && d.status == DraftStatus::Unknown)
            {
                e.1 += 1;
            } else {
                untold.push(format!(
                    "{target}: {:?}, retryable {}, attempts {}, told {told}, in status --all {shown}",
                    d.status, d.retryable, d.attempts
                ));
            }
        }
    }
    assert!(untold.is_empty(), "neither told once nor due: {untold:#?}");
    out
}

/// Crash chaos with every draft going to five targets (LinkedIn, X, the Telegram channel,
/// Mastodon, Bluesky), their lanes running concurrently in each `postonce serve` that is
/// SIGKILLed. LinkedIn's and X's duplicate checks are **off** (a second create is a second post;
/// the channel has none); Mastodon's fake honours `Idempotency-Key` and Bluesky's fake record
/// keys, as the real ones do (that is their primitive). Each step at LinkedIn and X takes 60 ms;
/// the channel, Mastodon and Bluesky make the post 60 ms before they answer; kills land within
/// 1.2 s of the triggers (a five-target run in a fresh process takes about a second), so they
/// land before, during and after each network's create. The quiet period outlasts the test.
/// Verdict per network: every (key, target) posted once and recorded, or waiting `unknown` with
/// at most one post; 0 duplicates, 0 lost. Then, after sweeps: every target not posted was
/// told exactly once and shows in `status --all` (every channel one: nothing can check it),
/// or is due for the sweeper's check after the quiet period ([`told_or_due`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_chaos_five_targets_no_duplicates_no_lost_per_target() {
    let trials = sized("POSTONCE_CHAOS_TRIALS", 200);
    let env = Env::with_five_targets(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
            ("POSTONCE_CLAIM_TTL_S", "4"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1500"),
            ("POSTONCE_X_TIMEOUT_MS", "1500"),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", "1500"),
            ("POSTONCE_MASTODON_TIMEOUT_MS", "1500"),
            ("POSTONCE_BLUESKY_TIMEOUT_MS", "1500"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1500"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "800"),
            ("POSTONCE_RECONCILE_AFTER_S", "3000"),
        ],
    )
    .await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env.x().set_duplicate_check(support::x::DuplicateCheck::Off);
    env.x().set_delay(Duration::from_millis(60));
    env.channel()
        .set_mode(support::tg_channel::ChannelMode::AcceptThenHang(
            Duration::from_millis(60),
        ));
    env.mastodon()
        .set_create_mode(support::mastodon::Mode::AcceptThenHang(
            Duration::from_millis(60),
        ));
    env.bluesky()
        .set_put_mode(support::bluesky::Mode::AcceptThenHang(
            Duration::from_millis(60),
        ));
    let begun = Instant::now();
    let (keys, kills) = crash_chaos(&env, trials, true, Duration::from_millis(1200)).await;
    let verdicts = verdict_per_target(&env, &keys).await;
    println!(
        "crash chaos, 5 targets (LinkedIn and X duplicate checks OFF; Mastodon and Bluesky keyed by their own idempotency; quiet period {:?}): {} keys, each to linkedin+x+telegram+mastodon+bluesky, {kills} SIGKILLs of postonce serve, settled in {:?}",
        env.quiet_period(),
        keys.len(),
        begun.elapsed()
    );
    for (n, v) in &verdicts {
        let (creates, posts) = env.fake_totals(*n);
        println!(
            "  {:>8}: create requests {creates}, posts {posts}; posted once and recorded {}, waiting (unknown) {} ({} with the post on {}, {} without), duplicates {}, lost {}",
            n.as_str(),
            v.posted_once,
            v.waiting_with_post + v.waiting_without_post,
            v.waiting_with_post,
            n.as_str(),
            v.waiting_without_post,
            v.duplicates,
            v.lost.len()
        );
        for l in &v.lost {
            println!("    lost: {l}");
        }
    }
    assert_eq!(
        verdicts.keys().copied().collect::<Vec<_>>(),
        NETWORKS.to_vec()
    );
    for (n, v) in &verdicts {
        assert_eq!(v.duplicates, 0, "{}: {:#?}", n.as_str(), v.lost);
        assert!(v.lost.is_empty(), "{}: {:#?}", n.as_str(), v.lost);
        assert_eq!(
            v.posted_once + v.waiting_with_post + v.waiting_without_post,
            keys.len(),
            "{}",
            n.as_str()
        );
    }
    assert_eq!(env.linkedin.duplicated_texts(), 0);
    assert!(env.x().max_posts_per_text() <= 1, "no duplicate at X");
    assert!(
        env.mastodon().max_posts_per_text() <= 1,
        "no duplicate at Mastodon"
    );
    assert!(
        env.bluesky().max_posts_per_text() <= 1,
        "no duplicate at Bluesky"
    );
    // Every target not posted is told (the channel: at once, nothing can check it) or due.
    let told = told_or_due(&env, &keys, &NETWORKS).await;
    println!("not posted, per network: (told once, due for the sweeper) {told:?}");
}

/// [`storm_of_mixed_triggers`] on Redis and DynamoDB Local.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_of_mixed_triggers_posts_each_key_once_per_target() {
    storm_of_mixed_triggers(
        Stores::Real,
        sized("POSTONCE_STORM_KEYS", 100),
        sized("POSTONCE_STORM_TRIGGERS", 60),
    )
    .await;
}

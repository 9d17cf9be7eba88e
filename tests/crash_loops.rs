//! Issue 30, finding 3: a run that kills its process the same way every time (a cover too
//! large for the memory, say) neither loops for ever nor takes the sweep's other drafts down
//! with it. The write that starts an attempt (the draft's save, or the sweep's read of the
//! draft under the claim) marks it started before the risky phases; a mark that outlives any
//! claim is a run that died, counted as an attempt: after `POSTONCE_MAX_ATTEMPTS` of them the
//! draft is `needs_review`, its owner told once, and a sweep runs the drafts whose last run
//! died after the others.
//!
//! Real redis-server and DynamoDB Local; LinkedIn and Telegram are wire-format fakes, counted
//! there. A kill is the run dropped while the fail point `before-cover` holds it, just before
//! its cover is fetched and decoded (as a process that dies there leaves it: nothing after the
//! mark is written). Fail points are process-wide, so the tests take turns.

mod support;

use std::time::Duration;

use postonce::key::PostKey;
use postonce::outcome::OutcomeKind;
use postonce::record::{now_s, Draft, DraftStatus};
use support::env::{Env, Stores};
use tokio::sync::Mutex;

static TURN: Mutex<()> = Mutex::const_new(());

/// A claim's time of 9 s (just above the 8 s function timeout, which leaves a sweep the time
/// one run needs): a mark older than that is a run that died.
const SHORT: [(&str, &str); 2] = [
    ("POSTONCE_FUNCTION_TIMEOUT_S", "8"),
    ("POSTONCE_CLAIM_TTL_S", "9"),
];

/// Past a claim's time since the last write: no run of the draft can be live.
async fn past_a_claim() {
    tokio::time::sleep(Duration::from_secs(10)).await;
}

async fn stored(env: &Env, key: &PostKey) -> Option<Draft> {
    env.status(key).await.snapshot.draft
}

/// Waits until `key`'s draft is marked started by a write after `after` (Unix seconds, the
/// draft's last `updated_at` before), then drops `run`: the kill.
async fn kill_once_started(
    env: &Env,
    key: &PostKey,
    after: Option<i64>,
    run: tokio::task::JoinHandle<()>,
) {
    // A bound only so that a run that never starts fails loudly instead of hanging the suite.
    for tries in 0.. {
        let d = stored(env, key).await;
        if d.as_ref()
            .is_some_and(|d| d.started && after.is_none_or(|a| d.updated_at > a))
        {
            break;
        }
        assert!(tries < 1500, "{key} was never started again: {d:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort();
    let _ = run.await;
}

fn spawn_sweep(env: &Env) -> tokio::task::JoinHandle<()> {
    let app = env.app.clone();
    let dl = env.deadline();
    tokio::spawn(async move {
        let _ = app.pipeline.sweep(&dl).await;
    })
}

/// The sweeper's messages about `key` that put it in front of its owner.
fn told(env: &Env, key: &PostKey) -> usize {
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with(&format!("{key} needs you")))
        .count()
}

/// Killed in its cover phase by the trigger's run and then by two sweeps (3 =
/// `POSTONCE_MAX_ATTEMPTS`), the draft is `needs_review` after the next sweep: told exactly
/// once (counted at the Telegram fake), listed by `status --all`, never posted, and later
/// sweeps leave it alone. Without the count, that sweep runs it again (here: it posts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_the_same_way_every_time_ends_in_front_of_its_owner_once() {
    let _turn = TURN.lock().await;
    let mut vars = SHORT.to_vec();
    vars.push(("POSTONCE_MAX_ATTEMPTS", "3"));
    let env = Env::with(Stores::Real, &vars).await;
    let key = env.key();
    fail::cfg("before-cover", &format!("return(hang:{key})")).expect("fail point");
    let run = {
        let app = env.app.clone();
        let req = env.request(&key, Some(env.announcement(&key)));
        let dl = env.deadline();
        tokio::spawn(async move {
            let _ = app.pipeline.run(req, dl).await;
        })
    };
    kill_once_started(&env, &key, None, run).await;
    for _ in 0..2 {
        past_a_claim().await;
        let before = stored(&env, &key).await.map(|d| d.updated_at);
        kill_once_started(&env, &key, before, spawn_sweep(&env)).await;
    }
    fail::remove("before-cover");
    past_a_claim().await;
    let report = env.sweep().await;
    let d = stored(&env, &key).await.expect("the draft");
    assert_eq!(d.status, DraftStatus::NeedsReview, "{report:?}");
    assert_eq!((d.attempts, d.started), (3, false), "{d:?}");
    assert!(
        d.last_error.as_deref().is_some_and(|e| e.contains("died")),
        "{d:?}"
    );
    assert_eq!(env.linkedin.posts_containing(key.slug()).len(), 0);
    assert_eq!(told(&env, &key), 1, "told exactly once");
    let waiting = env
        .app
        .pipeline
        .waiting(&env.deadline())
        .await
        .expect("status --all");
    assert!(
        waiting
            .iter()
            .any(|w| w.key == key.to_string() && w.status == "needs_review"),
        "{waiting:?}"
    );
    env.sweep().await;
    assert_eq!(told(&env, &key), 1, "and not again");
    assert_eq!(env.linkedin.posts_containing(key.slug()).len(), 0);
}

/// A sweep runs the draft whose last run died after the others: here the bad draft (killed
/// once, and killing again) is due first, and the good one (scheduled, due a moment later) is
/// posted before the bad one's run starts. Without the order, the bad one starts first and
/// the good one waits behind it, and dies with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_draft_never_takes_the_sweeps_other_drafts_down_with_it() {
    let _turn = TURN.lock().await;
    let env = Env::with(Stores::Real, &SHORT).await;
    let (bad, good) = (env.key(), env.key());
    fail::cfg("before-cover", &format!("return(hang:{bad})")).expect("fail point");
    let run = {
        let app = env.app.clone();
        let req = env.request(&bad, Some(env.announcement(&bad)));
        let dl = env.deadline();
        tokio::spawn(async move {
            let _ = app.pipeline.run(req, dl).await;
        })
    };
    kill_once_started(&env, &bad, None, run).await;
    let mut req = env.request(&good, Some(env.announcement(&good)));
    req.publish_at = Some(now_s() + 2);
    let scheduled = env.app.pipeline.run(req, env.deadline()).await;
    assert_eq!(
        scheduled.outcome,
        OutcomeKind::Scheduled,
        "{}",
        scheduled.detail
    );
    past_a_claim().await;
    let before = stored(&env, &bad).await.map(|d| d.updated_at);
    kill_once_started(&env, &bad, before, spawn_sweep(&env)).await;
    fail::remove("before-cover");
    assert_eq!(
        env.linkedin.posts_containing(good.slug()).len(),
        1,
        "the good draft was posted before the bad one's run started"
    );
    assert_eq!(env.linkedin.posts_containing(bad.slug()).len(), 0);
}

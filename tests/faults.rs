//! Fail points inside the pipeline (feature `failpoints`, compiled in for tests only). Fail
//! points are process-wide, so the tests in this file take turns.

mod support;

use std::time::Duration;

use postonce::outcome::OutcomeKind;
use support::env::Env;
use tokio::sync::Mutex;

static TURN: Mutex<()> = Mutex::const_new(());

fn claim_exists(env: &Env, key: &postonce::key::PostKey) -> bool {
    env.redis().cli(&["EXISTS", &format!("claim:{key}")]) == "1"
}

/// Rule 5: a panic inside the pipeline after claiming → the claim is gone afterwards, and the
/// run answers failed (retryable) instead of crashing the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_claiming_releases_the_claim() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    for point in [
        "after-claim",
        "after-check",
        "after-image",
        "after-initialize-upload",
        "after-upload",
    ] {
        let key = env.key();
        let before = env.linkedin.create_requests();
        fail::cfg(point, "panic").expect("fail point");
        let outcome = env.post(&key, &format!("panic at {point}")).await;
        fail::remove(point);
        assert_eq!(
            (outcome.outcome, outcome.retryable),
            (OutcomeKind::Failed, true),
            "{point}: {outcome:?}"
        );
        assert!(
            !claim_exists(&env, &key),
            "{point}: claim released after the panic"
        );
        assert_eq!(
            env.linkedin.create_requests(),
            before,
            "{point}: nothing posted"
        );
        // Nothing was posted, so a retry posts.
        assert_eq!(
            env.retry(&key).await.outcome,
            OutcomeKind::Posted,
            "{point}"
        );
    }
    assert_eq!(env.linkedin.posts_created(), 5);
}

/// Rule 6 under a panic: after LinkedIn accepted, a panic keeps the claim holding the URN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_create_post_keeps_the_claim_with_the_urn() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    let key = env.key();
    fail::cfg("after-create-post", "panic").expect("fail point");
    let outcome = env.post(&key, "panic after posting").await;
    fail::remove("after-create-post");
    assert_eq!(
        outcome.outcome,
        OutcomeKind::PostedNotRecorded,
        "{outcome:?}"
    );
    let urn = outcome.urn.expect("urn");
    assert_eq!(
        env.redis().cli(&["GET", &format!("claim:{key}")]),
        format!("posted:{urn}")
    );
    let again = env.retry(&key).await;
    assert_eq!(
        again.outcome,
        OutcomeKind::AlreadyPosted,
        "repaired: {again:?}"
    );
    assert_eq!(env.linkedin.create_requests(), 1);
}

/// Rule 2: the deciding record check happens while the claim is held. Run A stops just before
/// claiming; run B posts, records and releases meanwhile; A then claims and must see B's
/// record. (A check made before claiming would have said "not posted" and A would post again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_pre_claim_view_does_not_post() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    let key = env.key();
    env.app
        .pipeline
        .records
        .save_draft(&key, &env.content("Stale view"), "test", 1)
        .await
        .expect("draft");
    // The first run to reach the point sleeps 1.5 s there; later runs pass straight through.
    fail::cfg("before-claim", "1*return(sleep:1500)").expect("fail point");
    let a = {
        let app = env.app.clone();
        let req = env.request(&key, None);
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b = env.retry(&key).await;
    assert_eq!(b.outcome, OutcomeKind::Posted, "{b:?}");
    let a = a.await.expect("run a");
    fail::remove("before-claim");
    assert_eq!(a.outcome, OutcomeKind::AlreadyPosted, "{a:?}");
    assert_eq!(env.linkedin.create_requests(), 1);
}

/// A run that dies before releasing leaves the claim to its TTL: others answer being_posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_behind_blocks_until_its_ttl() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    let key = env.key();
    env.linkedin
        .set_create_mode(support::linkedin::Mode::Status(503));
    fail::cfg("before-release", "return").expect("fail point");
    let first = env.post(&key, "left behind").await;
    fail::remove("before-release");
    assert_eq!(first.outcome, OutcomeKind::Unknown);
    assert!(claim_exists(&env, &key));
    let second = env.retry(&key).await;
    assert_eq!(second.outcome, OutcomeKind::BeingPosted, "{second:?}");
    assert_eq!(second.http_status(), 409);
    assert_eq!(env.linkedin.create_requests(), 1);
}

/// Every fail point × {error, delay past the deadline, panic}: after the faulty run and the
/// retries that follow, at most one post per key, exactly one when it ends posted, and claim,
/// record and draft agree. Prints how many combinations held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_never_duplicates_and_settles() {
    let _turn = TURN.lock().await;
    let env = Env::with(
        support::env::Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "2"),
            ("POSTONCE_CLAIM_TTL_S", "3"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1500"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "800"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1000"),
        ],
    )
    .await;
    let points = [
        "before-claim",
        "after-claim",
        "after-check",
        "after-image",
        "after-initialize-upload",
        "after-upload",
        "before-create-post",
        "after-create-post",
        "after-record",
        "before-release",
    ];
    let faults = [
        ("error", "return"),
        ("delay", "return(sleep:2500)"),
        ("panic", "panic"),
    ];
    let mut held = 0;
    let mut total = 0;
    let mut failures = Vec::new();
    for point in points {
        for (label, action) in faults {
            total += 1;
            let key = env.key();
            let caption = format!("matrix {point} {label}");
            fail::cfg(point, action).expect("fail point");
            let first = {
                let app = env.app.clone();
                let req = env.request(&key, Some(env.content(&caption)));
                let dl = env.deadline();
                tokio::spawn(async move { app.pipeline.run(req, dl).await }).await
            };
            fail::remove(point);
            let first = first
                .map(|o| o.outcome)
                .map_err(|_| "panicked out of the run");
            // Retry as the owner or the sweeper would, until it settles.
            let mut last = None;
            for _ in 0..10 {
                let o = env.retry(&key).await;
                last = Some(o.outcome);
                match o.outcome {
                    OutcomeKind::Posted | OutcomeKind::AlreadyPosted => break,
                    OutcomeKind::BeingPosted => {
                        tokio::time::sleep(Duration::from_millis(700)).await
                    }
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            let posts = env
                .linkedin
                .posts()
                .into_iter()
                .filter(|p| p.commentary == caption)
                .count();
            let st = env.status(&key).await;
            let record_urn = st.snapshot.record.as_ref().and_then(|r| r.urn.clone());
            let fake_urn = env
                .linkedin
                .posts()
                .into_iter()
                .find(|p| p.commentary == caption)
                .map(|p| p.urn);
            let ok = posts == 1
                && matches!(last, Some(OutcomeKind::Posted | OutcomeKind::AlreadyPosted))
                && record_urn == fake_urn
                && st.snapshot.draft.as_ref().map(|d| d.status)
                    == Some(postonce::record::DraftStatus::Posted)
                && st.claim.is_none();
            if ok {
                held += 1;
            } else {
                failures.push(format!("{point}/{label}: first {first:?}, last {last:?}, posts {posts}, record {record_urn:?}, claim {:?}", st.claim));
            }
        }
    }
    println!(
        "fault matrix: {total} combinations (10 fail points x error/delay/panic), {held} held"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The intent write is a second, durable lock: if a run's claim is lost while it works (Redis
/// restarted empty), a second run may get in and post, but the first cannot post again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_claim_still_cannot_lead_to_a_second_post() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    let key = env.key();
    fail::cfg("after-upload", "1*return(sleep:1500)").expect("fail point");
    let a = {
        let app = env.app.clone();
        let req = env.request(&key, Some(env.content("Claim lost mid-run")));
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    // Wait until A holds the claim and sleeps after its upload, then lose the claim.
    let begun = std::time::Instant::now();
    while env.linkedin.uploads() == 0 {
        assert!(
            begun.elapsed() < Duration::from_secs(10),
            "A never uploaded"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    env.redis().cli(&["FLUSHALL"]);
    let b = env.retry(&key).await;
    assert_eq!(b.outcome, OutcomeKind::Posted, "{b:?}");
    let a = a.await.expect("run a");
    fail::remove("after-upload");
    assert_ne!(a.outcome, OutcomeKind::Posted, "{a:?}");
    assert_eq!(
        env.linkedin.create_requests(),
        1,
        "A never sent create-post"
    );
}

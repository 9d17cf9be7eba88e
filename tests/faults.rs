//! Fail points inside the pipeline (feature `failpoints`, compiled in for tests only). Fail
//! points are process-wide, so the tests in this file take turns.
//!
//! The exactly-once verdicts count posts created at the LinkedIn fake, per key, with its
//! duplicate check off (a second create-post is a second post) or racy the way LinkedIn's is;
//! a proof that relies on LinkedIn's duplicate answer says so in its name and its figures.

mod support;

use std::time::Duration;

use std::collections::BTreeMap;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind};
use postonce::record::DraftStatus;
use support::env::Env;
use support::linkedin::DuplicateCheck;
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
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let points = ["after-claim", "after-check", "after-image", "after-upload"];
    for point in points {
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
    assert_eq!(env.linkedin.posts_created(), points.len());
}

/// Rule 6 under a panic: after LinkedIn accepted, a panic keeps the claim holding the URN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_create_post_keeps_the_claim_with_the_urn() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let key = env.key();
    fail::cfg("after-create-post", "panic").expect("fail point");
    let outcome = env.post(&key, "panic after posting").await;
    fail::remove("after-create-post");
    assert_eq!(
        outcome.outcome,
        OutcomeKind::PostedNotRecorded,
        "{outcome:?}"
    );
    let urn = outcome.post_id.expect("urn");
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
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
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
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
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

/// What the fault matrix saw, per combination and in total.
#[derive(Debug, Default)]
struct MatrixFigures {
    total: usize,
    /// Exactly one post, recorded with its URN, draft posted, no claim.
    posted_once: usize,
    /// Draft `unknown`, no record, no claim, at most one post, and the last run answered
    /// unknown (retryable) without sending anything: waiting for the quiet period / the owner.
    waiting_on_linkedin: usize,
    waiting_not_on_linkedin: usize,
    /// The combinations left waiting.
    waiting: Vec<String>,
    /// The combinations that answered unknown, waited out the quiet period and were retried.
    reconciled_after_quiet: Vec<String>,
    duplicates: usize,
    failures: Vec<String>,
}

/// Runs one key per fail point × {error, delay past the deadline, panic}, then retries each
/// key as the owner or the sweeper would. With `reconcile_later`, the keys left `unknown` are
/// retried again once their quiet period has passed. Posts are counted at the fake, per key.
async fn fault_matrix(env: &Env, reconcile_later: bool) -> MatrixFigures {
    let points = [
        "before-claim",
        "after-claim",
        "after-check",
        "after-image",
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
    // Retries a key until it is posted, or answers unknown (the quiet period), or gives up.
    async fn settle(env: &Env, key: &PostKey) -> Option<Outcome> {
        let mut last = None;
        for _ in 0..10 {
            let o = env.retry(key).await;
            let kind = o.outcome;
            last = Some(o);
            match kind {
                OutcomeKind::Posted | OutcomeKind::AlreadyPosted | OutcomeKind::Unknown => break,
                OutcomeKind::BeingPosted => tokio::time::sleep(Duration::from_millis(700)).await,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        last
    }
    let mut figures = MatrixFigures::default();
    let mut combos = Vec::new();
    for point in points {
        for (label, action) in faults {
            let key = env.key();
            fail::cfg(point, action).expect("fail point");
            let first = {
                let app = env.app.clone();
                let req = env.request(&key, Some(env.announcement(&key)));
                let dl = env.deadline();
                tokio::spawn(async move { app.pipeline.run(req, dl).await }).await
            };
            fail::remove(point);
            let first = first.map_err(|_| "panicked out of the run");
            let posts_after_first = env.linkedin.posts_containing(key.slug()).len();
            // A first answer that says nothing was posted must be true at the fake.
            if let Ok(o) = &first {
                let says_nothing_posted = o.outcome == OutcomeKind::Failed;
                if says_nothing_posted && posts_after_first != 0 {
                    figures.failures.push(format!(
                        "{point}/{label}: answered failed (\"nothing was posted\") but the fake has {posts_after_first} post(s)"
                    ));
                }
            }
            let last = settle(env, &key).await;
            combos.push((point, label, key, first.map(|o| o.outcome), last));
        }
    }
    if reconcile_later {
        for (point, label, key, _, last) in &mut combos {
            if last.as_ref().map(|o| o.outcome) == Some(OutcomeKind::Unknown) {
                figures
                    .reconciled_after_quiet
                    .push(format!("{point}/{label}"));
                env.wait_out_quiet_period(key).await;
                *last = settle(env, key).await;
            }
        }
    }
    // A run that died before releasing (before-release) leaves its claim to its TTL, and a
    // later run answers from the record without waiting for it: let those claims expire.
    tokio::time::sleep(env.app.config.claim_ttl + Duration::from_millis(500)).await;
    for (point, label, key, first, last) in combos {
        figures.total += 1;
        let posts = env.linkedin.posts_containing(key.slug());
        let st = env.status(&key).await;
        let record_urn = st.snapshot.record.as_ref().map(|r| r.post_id.clone());
        let draft = st.snapshot.draft.as_ref().map(|d| d.status);
        let last_kind = last.as_ref().map(|o| (o.outcome, o.retryable));
        if posts.len() > 1 {
            figures.duplicates += 1;
        }
        if posts.len() == 1
            && matches!(
                last_kind,
                Some((OutcomeKind::Posted | OutcomeKind::AlreadyPosted, _))
            )
            && record_urn == Some(Some(posts[0].urn.clone()))
            && draft == Some(DraftStatus::Posted)
            && st.claim.is_none()
        {
            figures.posted_once += 1;
        } else if posts.len() <= 1
            && last_kind == Some((OutcomeKind::Unknown, true))
            && record_urn.is_none()
            && draft == Some(DraftStatus::Unknown)
            && st.claim.is_none()
        {
            figures.waiting.push(format!("{point}/{label}"));
            if posts.is_empty() {
                figures.waiting_not_on_linkedin += 1;
            } else {
                figures.waiting_on_linkedin += 1;
            }
        } else {
            figures.failures.push(format!(
                "{point}/{label}: first {first:?}, last {last_kind:?}, posts {}, record {record_urn:?}, draft {draft:?}, claim {:?}",
                posts.len(),
                st.claim
            ));
        }
    }
    figures
}

fn matrix_env_vars(quiet: &'static str) -> [(&'static str, &'static str); 6] {
    [
        ("POSTONCE_FUNCTION_TIMEOUT_S", "2"),
        ("POSTONCE_CLAIM_TTL_S", "3"),
        ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1500"),
        ("POSTONCE_REDIS_TIMEOUT_MS", "800"),
        ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1000"),
        ("POSTONCE_RECONCILE_AFTER_S", quiet),
    ]
}

/// Every fail point × {error, delay past the deadline, panic}, against a LinkedIn with **no
/// duplicate check** (a second create-post would be a second post), with a quiet period longer
/// than the test: after the faulty run and the retries that follow, every key is posted exactly
/// once (record = the post's URN, draft posted, no claim), or waits `unknown` with at most one
/// post, and its retry answers unknown without sending anything. Prints the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_never_duplicates_and_settles() {
    let _turn = TURN.lock().await;
    let env = Env::with(support::env::Stores::Real, &matrix_env_vars("3000")).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let f = fault_matrix(&env, false).await;
    println!(
        "fault matrix (LinkedIn duplicate check OFF, quiet period {:?}): {} combinations (10 fail points x error/delay/panic): posted once and recorded {}, waiting (unknown, quiet period) {} ({} on LinkedIn, {} not) {:?}, create-post requests {}, posts {}, duplicates {}, lost {}",
        env.quiet_period(),
        f.total,
        f.posted_once,
        f.waiting_on_linkedin + f.waiting_not_on_linkedin,
        f.waiting_on_linkedin,
        f.waiting_not_on_linkedin,
        f.waiting,
        env.linkedin.create_requests(),
        env.linkedin.posts_created(),
        f.duplicates,
        f.failures.len()
    );
    assert_eq!(f.duplicates, 0, "{:#?}", f.failures);
    assert!(f.failures.is_empty(), "{:#?}", f.failures);
    assert_eq!(env.linkedin.duplicated_texts(), 0);
}

/// The same matrix, with the keys left `unknown` reconciled after a short quiet period, which
/// **relies on LinkedIn's duplicate answer**: the fake has LinkedIn's real race (a post is seen
/// by the duplicate check only after its processing). Every key ends posted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_settles_every_key_relying_on_linkedins_duplicate_answer() {
    let _turn = TURN.lock().await;
    let env = Env::with(support::env::Stores::Real, &matrix_env_vars("3")).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Racy {
        processing: Duration::from_millis(300),
        window: None,
    });
    let f = fault_matrix(&env, true).await;
    println!(
        "fault matrix (LinkedIn duplicate check RACY, 300 ms processing; reconciliation relies on LinkedIn's duplicate answer; quiet period {:?}): {} combinations: posted once and recorded {} ({} of them still unknown after the first retries, then retried past the quiet period: {:?}), waiting {}, create-post requests {} ({} answered DUPLICATE_POST), posts {}, duplicates {}, lost {}",
        env.quiet_period(),
        f.total,
        f.posted_once,
        f.reconciled_after_quiet.len(),
        f.reconciled_after_quiet,
        f.waiting_on_linkedin + f.waiting_not_on_linkedin,
        env.linkedin.create_requests(),
        env.linkedin.duplicate_answers(),
        env.linkedin.posts_created(),
        f.duplicates,
        f.failures.len()
    );
    assert_eq!(f.duplicates, 0, "{:#?}", f.failures);
    assert!(f.failures.is_empty(), "{:#?}", f.failures);
    assert_eq!(f.posted_once, f.total, "every key ends posted and recorded");
}

// ---------------------------------------------------------------------------------------------
// Five targets.

/// The five networks of [`Env::with_five_targets`].
const NETWORKS: &[Network] = &[
    Network::Linkedin,
    Network::X,
    Network::Telegram,
    Network::Mastodon,
    Network::Bluesky,
];

/// What the five-target fault matrix saw on one network.
#[derive(Debug, Default)]
struct NetworkFigures {
    combinations: usize,
    /// Exactly one post at the fake, recorded with its id, draft posted, no claim.
    posted_once: usize,
    /// No record, draft `unknown`, no claim, at most one post: waiting for the quiet period
    /// (LinkedIn, X) or the owner (the channel).
    waiting: Vec<String>,
    /// Of those, how many have their post on the network already.
    waiting_on_network: usize,
    /// Combinations with more than one post for the key on this network.
    duplicates: usize,
    /// Anything else, with the evidence.
    lost: Vec<String>,
}

/// Each target's outcome in a five-target run's answer.
fn per_target(o: &Outcome) -> BTreeMap<Network, OutcomeKind> {
    o.targets
        .as_ref()
        .map(|t| t.iter().map(|(n, e)| (*n, e.outcome)).collect())
        .unwrap_or_default()
}

/// Every fail point × {error, delay past the deadline, panic}, one key per combination, each
/// draft going to LinkedIn, X, the Telegram channel, Mastodon and Bluesky. Fail points are process-wide, so the
/// configured point fires in every target's lane of the run. LinkedIn's and X's duplicate
/// checks are **off** (a second create is a second post; the channel has none) and the quiet
/// period outlasts the test. After the faulty run each key is retried the way the owner's
/// Retry or the sweeper would (`retry:<key>`: every target the draft has state for) until every
/// target is posted, already posted or `unknown`. Then, per key and per target, counted at the
/// fakes: posted exactly once with the record holding that post's id, the draft posted and no
/// claim; or waiting `unknown` (no record, no claim) with at most one post. Anything else is
/// lost. Prints the figures per network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_five_targets_never_duplicate_per_target() {
    let _turn = TURN.lock().await;
    let mut vars = matrix_env_vars("3000").to_vec();
    vars.extend([
        ("POSTONCE_X_TIMEOUT_MS", "1000"),
        ("POSTONCE_TELEGRAM_TIMEOUT_MS", "1000"),
        ("POSTONCE_MASTODON_TIMEOUT_MS", "1000"),
        ("POSTONCE_BLUESKY_TIMEOUT_MS", "1000"),
    ]);
    let env = Env::with_five_targets(support::env::Stores::Real, &vars).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env.x().set_duplicate_check(support::x::DuplicateCheck::Off);
    let points = [
        "before-claim",
        "after-claim",
        "after-check",
        "after-image",
        "after-upload",
        "after-intent",
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
    let settled = |o: &Outcome| {
        let kinds = per_target(o);
        NETWORKS.iter().all(|n| {
            matches!(
                kinds.get(n),
                Some(OutcomeKind::Posted | OutcomeKind::AlreadyPosted | OutcomeKind::Unknown)
            )
        })
    };
    let began = std::time::Instant::now();
    let mut figures: BTreeMap<Network, NetworkFigures> = BTreeMap::new();
    let mut combos = Vec::new();
    for point in points {
        for (label, action) in faults {
            let key = env.key();
            fail::cfg(point, action).expect("fail point");
            let first = {
                let app = env.app.clone();
                let req = env.request_to(&key, Some(env.announcement(&key)), NETWORKS);
                let dl = env.deadline();
                tokio::spawn(async move { app.pipeline.run(req, dl).await }).await
            };
            fail::remove(point);
            let first = first.ok();
            // A target answered failed ("nothing was posted") must have nothing at its fake.
            if let Some(o) = &first {
                for (n, kind) in per_target(o) {
                    let posts = env.posts_on(&key, n).len();
                    if kind == OutcomeKind::Failed && posts != 0 {
                        figures.entry(n).or_default().lost.push(format!(
                            "{point}/{label}: the first run answered failed (\"nothing was posted\") but the fake has {posts} post(s)"
                        ));
                    }
                }
            }
            let mut last = None;
            for _ in 0..10 {
                let o = env.retry(&key).await;
                let done = settled(&o);
                let busy = per_target(&o)
                    .values()
                    .any(|k| *k == OutcomeKind::BeingPosted);
                last = Some(o);
                if done {
                    break;
                }
                let pause = if busy { 700 } else { 50 };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            combos.push((point, label, key, first.map(|o| per_target(&o)), last));
        }
    }
    // A run that died before releasing (before-release) leaves its claim to its TTL, and a
    // later run answers from the record without waiting for it: let those claims expire.
    tokio::time::sleep(env.app.config.claim_ttl + Duration::from_millis(500)).await;
    for (point, label, key, first, last) in &combos {
        let last_kinds = last.as_ref().map(per_target).unwrap_or_default();
        for &n in NETWORKS {
            let f = figures.entry(n).or_default();
            f.combinations += 1;
            let posts = env.posts_on(key, n);
            let st = env.status(&key.on(n)).await;
            let record_id = st.snapshot.record.as_ref().map(|r| r.post_id.clone());
            let draft = st.snapshot.draft.as_ref().map(|d| d.status);
            let last_kind = last_kinds.get(&n).copied();
            if posts.len() > 1 {
                f.duplicates += 1;
            }
            if posts.len() == 1
                && matches!(
                    last_kind,
                    Some(OutcomeKind::Posted | OutcomeKind::AlreadyPosted)
                )
                && record_id == Some(Some(posts[0].clone()))
                && draft == Some(DraftStatus::Posted)
                && st.claim.is_none()
            {
                f.posted_once += 1;
            } else if posts.len() <= 1
                && last_kind == Some(OutcomeKind::Unknown)
                && record_id.is_none()
                && draft == Some(DraftStatus::Unknown)
                && st.claim.is_none()
            {
                f.waiting.push(format!("{point}/{label}"));
                f.waiting_on_network += posts.len();
            } else {
                f.lost.push(format!(
                    "{point}/{label} ({}): first {:?}, last {last_kind:?}, posts {}, record {record_id:?}, draft {draft:?}, claim {:?}",
                    key.on(n),
                    first.as_ref().map(|k| k.get(&n).copied()),
                    posts.len(),
                    st.claim
                ));
            }
        }
    }
    println!(
        "fault matrix, 5 targets (LinkedIn and X duplicate checks OFF; Mastodon and Bluesky keyed by their own idempotency; quiet period {:?}): {} fail points x error/delay/panic = {} keys, each to linkedin+x+telegram+mastodon+bluesky, in {:?}",
        env.quiet_period(),
        points.len(),
        combos.len(),
        began.elapsed()
    );
    for (n, f) in &figures {
        let (creates, posts) = env.fake_totals(*n);
        println!(
            "  {:>8}: combinations {}, posted once and recorded {}, waiting (unknown) {} ({} with the post on {}, {} without) {:?}, create requests {creates}, posts {posts}, duplicates {}, lost {}",
            n.as_str(),
            f.combinations,
            f.posted_once,
            f.waiting.len(),
            f.waiting_on_network,
            n.as_str(),
            f.waiting.len() - f.waiting_on_network,
            f.waiting,
            f.duplicates,
            f.lost.len()
        );
        for l in &f.lost {
            println!("    lost: {l}");
        }
    }
    for (n, f) in &figures {
        assert_eq!(f.duplicates, 0, "{}: {:#?}", n.as_str(), f.lost);
        assert!(f.lost.is_empty(), "{}: {:#?}", n.as_str(), f.lost);
        assert_eq!(f.combinations, combos.len());
    }
    assert_eq!(env.linkedin.duplicated_texts(), 0);
    assert_eq!(env.x().max_posts_per_text(), 1);
}

/// The intent write is a second, durable lock: if a run's claim is lost while it works (Redis
/// emptied) before its intent, a second run may get in and post, but the first cannot post
/// again. Counted at a LinkedIn with no duplicate check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_claim_still_cannot_lead_to_a_second_post() {
    let _turn = TURN.lock().await;
    let env = Env::start().await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let key = env.key();
    fail::cfg("after-upload", "1*return(sleep:1500)").expect("fail point");
    let a = {
        let app = env.app.clone();
        let req = env.request(&key, Some(env.announcement(&key)));
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
    println!(
        "lost claim before the intent (LinkedIn duplicate check OFF): A {:?}, B {:?}; create-post requests {}, posts {}",
        a.outcome,
        b.outcome,
        env.linkedin.create_requests(),
        env.linkedin.posts_created()
    );
    assert_ne!(a.outcome, OutcomeKind::Posted, "{a:?}");
    assert_eq!(
        env.linkedin.create_requests(),
        1,
        "A never sent create-post"
    );
    assert_eq!(env.linkedin.posts_containing(key.slug()).len(), 1);
}

/// A claim lost **after** the intent, while run A's create-post is still being processed at
/// LinkedIn (racy fake, processing 2.5 s): the claim is deleted, or Redis restarts empty, and
/// run B gets the claim. B finds the draft `unknown` with A's attempt younger than the quiet
/// period, so it sends nothing and answers unknown (retryable); A's create-post then answers and
/// A records it. Per way of losing the claim: 1 create-post, 1 post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_lost_while_create_post_is_in_flight_sends_no_second_create_post() {
    let _turn = TURN.lock().await;
    let mut env = Env::with(
        support::env::Stores::Real,
        &[("POSTONCE_LINKEDIN_TIMEOUT_MS", "4000")],
    )
    .await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Racy {
        processing: Duration::from_millis(2500),
        window: None,
    });
    for how in ["the claim deleted", "Redis restarted empty"] {
        let key = env.key();
        let creates_before = env.linkedin.create_requests();
        let a = {
            let app = env.app.clone();
            let req = env.request(&key, Some(env.announcement(&key)));
            let dl = env.deadline();
            tokio::spawn(async move { app.pipeline.run(req, dl).await })
        };
        let begun = std::time::Instant::now();
        while env.linkedin.create_requests() == creates_before {
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "A never sent create-post"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A's create-post is at LinkedIn now, its post not yet visible to the duplicate check.
        assert!(claim_exists(&env, &key), "A holds the claim");
        if how == "the claim deleted" {
            env.redis().cli(&["DEL", &format!("claim:{key}")]);
        } else {
            env.redis.as_mut().expect("redis-server").restart();
        }
        assert!(!claim_exists(&env, &key), "the claim is lost");
        let b_started = std::time::Instant::now();
        let b = env.retry(&key).await;
        let b_creates = env.linkedin.create_requests() - creates_before;
        let a = a.await.expect("run a");
        let c = env.retry(&key).await;
        let creates = env.linkedin.create_requests() - creates_before;
        let posts = env.linkedin.posts_containing(key.slug());
        let a_post_visible = posts.first().map(|p| p.visible).expect("A's post");
        println!(
            "lost claim while create-post is in flight, {how} (LinkedIn duplicate check RACY, 2.5 s processing): B started {:?} before A's post existed; B {:?} (retryable {}), create-post requests after B {b_creates}; A {:?}; C {:?}; create-post requests {creates}, posts {}",
            a_post_visible.saturating_duration_since(b_started),
            b.outcome,
            b.retryable,
            a.outcome,
            c.outcome,
            posts.len()
        );
        assert!(
            b_started < a_post_visible,
            "{how}: B ran while A's create-post was still being processed"
        );
        assert_eq!(
            (b_creates, posts.len()),
            (1, 1),
            "{how}: B sent no create-post; one post"
        );
        assert_eq!(
            (b.outcome, b.retryable),
            (OutcomeKind::Unknown, true),
            "{how}: {b:?}"
        );
        assert_eq!(a.outcome, OutcomeKind::Posted, "{how}: {a:?}");
        assert_eq!(c.outcome, OutcomeKind::AlreadyPosted, "{how}: {c:?}");
        assert_eq!(creates, 1, "{how}");
        assert_eq!(a.post_id.as_deref(), Some(posts[0].urn.as_str()), "{how}");
    }
}

/// Found by the protocol model (`tests/protocol_model.rs`, issue 25): the quiet period runs
/// from the attempt's stamp (the intent's `at`), not from the send. A run whose claim is lost
/// after its intent and that is slow to send (here a 4 s pause after the intent, with a 2 s
/// quiet period and a 1.5 s budget) must not send once another run may re-send its attempt:
/// run B, past the quiet period, re-sends and posts; A then sends nothing. Without the check
/// in `Lane::create`, A's create-post was a second post. Counted at a LinkedIn with no
/// duplicate check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_stamped_a_quiet_period_ago_is_not_sent() {
    let _turn = TURN.lock().await;
    let env = Env::with(
        support::env::Stores::Real,
        &[("POSTONCE_RECONCILE_AFTER_S", "2")],
    )
    .await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let key = env.key();
    fail::cfg("after-intent", "1*return(sleep:4000)").expect("fail point");
    let a = {
        let app = env.app.clone();
        let req = env.request(&key, Some(env.announcement(&key)));
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    // Wait until A's intent is written (the draft says unknown), then lose A's claim.
    let begun = std::time::Instant::now();
    loop {
        let status = env
            .app
            .pipeline
            .status(&key, &env.deadline())
            .await
            .expect("status");
        if status
            .snapshot
            .draft
            .is_some_and(|d| d.status == DraftStatus::Unknown)
        {
            break;
        }
        assert!(
            begun.elapsed() < Duration::from_secs(10),
            "A never wrote its intent"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let intent_seen = std::time::Instant::now();
    env.redis().cli(&["DEL", &format!("claim:{key}")]);
    // Past the quiet period (whole seconds: more than 2 s after the stamp), A still asleep.
    tokio::time::sleep(Duration::from_millis(3200).saturating_sub(intent_seen.elapsed())).await;
    let b = env.retry(&key).await;
    let a = a.await.expect("run a");
    fail::remove("after-intent");
    let posts = env.linkedin.posts_containing(key.slug()).len();
    println!(
        "a create stamped a quiet period ago (LinkedIn duplicate check OFF): B {:?}, A {:?}; create-post requests {}, posts {posts}",
        b.outcome,
        a.outcome,
        env.linkedin.create_requests()
    );
    assert_eq!(
        b.outcome,
        OutcomeKind::Posted,
        "B re-sends past the quiet period: {b:?}"
    );
    assert_ne!(a.outcome, OutcomeKind::Posted, "{a:?}");
    assert_eq!(env.linkedin.create_requests(), 1, "A sent no create-post");
    assert_eq!(posts, 1);
}

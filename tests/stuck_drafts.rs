//! Issue 20: nothing left untold and no endless loop. Every draft that is not posted is either
//! due for a run the sweeper will make, or in front of its owner, with a bounded number of
//! automatic tries (`POSTONCE_MAX_ATTEMPTS` counts reconcile tries too); a report is sent when
//! the state changes, not at every sweep.
//!
//! Real redis-server and DynamoDB Local; every network is a wire-format fake, and every count
//! is taken at the fakes (posts per network, sendPhoto, the owner's chat). Fail points are
//! process-wide, so the tests in this file take turns.
//!
//! - one test per finding (1, 2, 3, 6, 7, 8, 9 and the doubled words), each red without its fix;
//! - the property: runs killed at every step for every network, every read failing, every image
//!   vanishing; after sweeps each target is posted once, or was told exactly once and shows in
//!   `status --all` ([`postonce::pipeline::Pipeline::waiting`]), and further sweeps say nothing.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind};
use postonce::record::DraftStatus;
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck as LinkedInCheck;
use support::x::DuplicateCheck as XCheck;
use tokio::sync::Mutex;

static TURN: Mutex<()> = Mutex::const_new(());

/// A quiet period of 2 s: above every budget these environments set (1.5 s each).
const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "2");

/// A hang long enough that the 1.5 s budget gives up first.
const HANG: Duration = Duration::from_secs(3);

async fn five(overrides: &[(&str, &str)]) -> Env {
    let env = Env::with_five_targets(Stores::Real, overrides).await;
    env.linkedin.set_duplicate_check(LinkedInCheck::Off);
    env.x().set_duplicate_check(XCheck::Off);
    env
}

/// One run of `key` for `n` only, with a fresh draft (`Some(image)`) or the stored one.
async fn run_on(env: &Env, key: &PostKey, image: Option<&str>, n: Network) -> Outcome {
    let content = image.map(|i| {
        let mut c = env.announcement(key);
        c.image = env.images.url(i);
        c
    });
    env.app
        .pipeline
        .run(env.request_to(key, content, &[n]), env.deadline())
        .await
}

fn part(o: &Outcome, n: Network) -> Outcome {
    if o.parts.is_empty() && o.network == n {
        return o.clone();
    }
    o.parts
        .iter()
        .find(|p| p.network == n)
        .cloned()
        .unwrap_or_else(|| panic!("no {} part in {o:?}", n.as_str()))
}

/// Every message to the owner's chat whose text mentions `target` (a per-target key).
fn messages_about(env: &Env, target: &PostKey) -> Vec<String> {
    let needle = format!("{target}");
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| {
            t.split(|c: char| c.is_whitespace() || c == ':' || c == ',')
                .any(|w| w == needle)
        })
        .collect()
}

/// The messages that put `target` in front of its owner: the sweeper's, or the report of a
/// run (a sweep's) that ended it refused for good, which tells the owner itself (the sweeper
/// then adds nothing: told once). Each draft here has one target.
fn told(env: &Env, target: &PostKey) -> usize {
    let refused = format!("❌ Not posted: {}", target.base());
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| {
            t.starts_with(&format!("Reminder: {target} "))
                || t.starts_with(&format!("{target} needs you"))
                || t == &refused
                || t.starts_with(&format!("{refused}\n"))
        })
        .count()
}

fn unix_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970");
    i64::try_from(since.as_secs()).expect("seconds fit")
}

async fn waiting(env: &Env) -> Vec<postonce::pipeline::Waiting> {
    env.app
        .pipeline
        .waiting(&env.deadline())
        .await
        .expect("waiting")
}

async fn draft(env: &Env, target: &PostKey) -> postonce::record::Draft {
    env.status(target).await.snapshot.draft.expect("a draft")
}

/// Runs `key` to `n` and kills it (drops the run) once its draft says `unknown` (its intent is
/// written), while the fail point `point` holds it there.
async fn kill_after_intent(env: &Env, key: &PostKey, n: Network, point: &str) {
    fail::cfg(point, "return(sleep:20000)").expect("fail point");
    let run = {
        let app = env.app.clone();
        let mut content = env.announcement(key);
        content.image = env.images.url("/cover.png");
        let req = env.request_to(key, Some(content), &[n]);
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    let target = key.on(n);
    for _ in 0..100 {
        let st = env.status(&target).await;
        if st
            .snapshot
            .draft
            .is_some_and(|d| d.status == DraftStatus::Unknown)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.abort();
    let _ = run.await;
    fail::remove(point);
    assert_eq!(draft(env, &target).await.status, DraftStatus::Unknown);
}

// ---------------------------------------------------------------------------------------------
// Finding 9: the network named after a panic.

/// A panic after X accepted the post: the posted-not-recorded detail names X, not LinkedIn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_the_create_names_the_network_that_took_the_post() {
    let _turn = TURN.lock().await;
    let env = five(&[QUIET]).await;
    for n in [Network::X, Network::Mastodon] {
        let key = env.key();
        fail::cfg("after-create-post", "panic").expect("fail point");
        let o = run_on(&env, &key, Some("/cover.png"), n).await;
        fail::remove("after-create-post");
        let p = part(&o, n);
        println!("{}: {p:?}", n.as_str());
        assert_eq!(p.outcome, OutcomeKind::PostedNotRecorded, "{o:?}");
        assert!(
            p.detail
                .starts_with(&format!("{} accepted the post", n.label())),
            "{}",
            p.detail
        );
        assert!(!p.detail.contains("LinkedIn"), "{}", p.detail);
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 6: a pacing-store error after the intent.

/// The pacing store fails after the intent: the draft is set back to `failed` (retryable), no
/// `unknown` of this run is left behind, and nothing was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pacing_store_error_after_the_intent_leaves_no_unknown_behind() {
    let _turn = TURN.lock().await;
    let env = Env::with(Stores::Real, &[("POSTONCE_MIN_GAP_S", "5")]).await;
    let key = env.key();
    fail::cfg("before-slot", "return").expect("fail point");
    let o = env.post(&key, "Paced into a store error").await;
    fail::remove("before-slot");
    println!("{o:?}");
    assert_eq!(
        (o.outcome, o.retryable),
        (OutcomeKind::Failed, true),
        "{o:?}"
    );
    assert_eq!(
        o.detail.matches("nothing was posted").count(),
        1,
        "{}",
        o.detail
    );
    let d = draft(&env, &key).await;
    assert_eq!(
        (d.status, d.retryable),
        (DraftStatus::Failed, true),
        "{d:?}"
    );
    assert!(d.pending.is_none());
    assert_eq!(env.linkedin.create_requests(), 0);
    assert_eq!(env.retry(&key).await.outcome, OutcomeKind::Posted);
}

// ---------------------------------------------------------------------------------------------
// Finding 7: a Retry during a DynamoDB blip.

/// Every load of a Retry's plan fails: nothing runs (least of all `POSTONCE_TARGETS` in place
/// of the draft's own targets), and the answer is a failed, retryable one naming the cause.
/// One load failing: that target is a failed, retryable part, not dropped from the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_during_a_store_blip_never_runs_the_default_targets() {
    let _turn = TURN.lock().await;
    let env = Env::with_targets(Stores::Real, &[]).await;
    env.x().set_duplicate_check(XCheck::Off);
    let key = env.key();
    let content = env.announcement(&key);
    env.app
        .pipeline
        .records
        .save_draft(&key.on(Network::X), &content, "test", 1)
        .await
        .expect("draft on X only");
    fail::cfg("plan-load", "return").expect("fail point");
    let o = env.retry(&key).await;
    fail::remove("plan-load");
    println!("every load fails: {o:?}");
    assert_eq!(
        (o.outcome, o.retryable),
        (OutcomeKind::Failed, true),
        "{o:?}"
    );
    for p in &o.parts {
        assert!(p.detail.contains("could not read where it stands"), "{p:?}");
    }
    assert_eq!(env.x().create_requests(), 0, "nothing ran");
    assert_eq!(env.linkedin.create_requests(), 0);
    assert!(
        env.status(&key).await.snapshot.draft.is_none(),
        "no LinkedIn state made"
    );

    // Both LinkedIn and X hold the draft; one of the two loads fails.
    let both = env.key();
    let content = env.announcement(&both);
    for n in [Network::Linkedin, Network::X] {
        env.app
            .pipeline
            .records
            .save_draft(&both.on(n), &content, "test", 1)
            .await
            .expect("draft");
    }
    fail::cfg("plan-load", "1*return").expect("fail point");
    let o = env.retry(&both).await;
    fail::remove("plan-load");
    println!("one load fails: {o:?}");
    let named: Vec<Network> = o.parts.iter().map(|p| p.network).collect();
    assert!(
        named.contains(&Network::Linkedin) && named.contains(&Network::X),
        "{o:?}"
    );
    let unread: Vec<&Outcome> = o
        .parts
        .iter()
        .filter(|p| p.detail.contains("could not read where it stands"))
        .collect();
    assert_eq!(unread.len(), 1, "{o:?}");
    assert!(unread[0].retryable && unread[0].outcome == OutcomeKind::Failed);
}

// ---------------------------------------------------------------------------------------------
// Finding 8: budget order.

/// Pacing's write takes its time after the intent: the create's whole budget is checked after
/// it, so the create is not sent with a sliver (which could turn a clean failure into an
/// `unknown`): failed, nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_create_budget_is_checked_after_pacing_took_its_time() {
    let _turn = TURN.lock().await;
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_MIN_GAP_S", "1"),
            ("POSTONCE_FUNCTION_TIMEOUT_S", "8"),
            ("POSTONCE_CLAIM_TTL_S", "20"),
        ],
    )
    .await;
    let key = env.key();
    // 8 s, 2 s reserved: after 5 s in pacing, about 0.8 s is left for a 1.5 s create.
    fail::cfg("before-slot", "return(sleep:5000)").expect("fail point");
    let o = env.post(&key, "Paced past its budget").await;
    fail::remove("before-slot");
    println!("{o:?}");
    assert_eq!(
        (o.outcome, o.retryable),
        (OutcomeKind::Failed, true),
        "{o:?}"
    );
    assert_eq!(env.linkedin.create_requests(), 0, "no create with a sliver");
    assert_eq!(draft(&env, &key).await.status, DraftStatus::Failed);
}

/// A reconcile's re-send is a post for pacing: while the network's slot is taken, nothing is
/// re-sent and the draft keeps its kept request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_resend_waits_for_the_pacing_slot() {
    let _turn = TURN.lock().await;
    let env = Env::with(Stores::Real, &[QUIET, ("POSTONCE_MIN_GAP_S", "600")]).await;
    env.linkedin.set_duplicate_check(LinkedInCheck::Off);
    let key = env.key();
    let first = env
        .post_under(support::linkedin::Mode::Hang(HANG), &key, "Paced re-send")
        .await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(env.linkedin.create_requests(), 1);
    env.wait_out_quiet_period(&key).await;
    let o = env.retry(&key).await;
    println!("{o:?}");
    assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
    assert!(o.detail.contains("POSTONCE_MIN_GAP_S"), "{}", o.detail);
    assert_eq!(
        env.linkedin.create_requests(),
        1,
        "not re-sent inside the gap"
    );
    let d = draft(&env, &key).await;
    assert_eq!(d.status, DraftStatus::Unknown);
    assert!(d.pending.is_some(), "the kept request stays");
}

// ---------------------------------------------------------------------------------------------
// Finding 3 (and 2, Bluesky): read the record first.

/// Bluesky accepted the record, answered too late, and the image is gone since: the
/// reconcile reads the record at its key (getRecord) and records it: no upload, no put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_reconcile_reads_the_record_first_even_with_the_image_gone() {
    let _turn = TURN.lock().await;
    let env = five(&[QUIET]).await;
    let b = env.bluesky();
    let key = env.key();
    let image = format!("/vanish-{}.png", key.slug());
    env.images.vanishing(&image, 1).await;
    b.set_put_mode(support::bluesky::Mode::AcceptThenHang(HANG));
    let first = run_on(&env, &key, Some(&image), Network::Bluesky).await;
    b.set_put_mode(support::bluesky::Mode::Normal);
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(b.posts_created(), 1);
    env.wait_out_quiet_period(&key.on(Network::Bluesky)).await;
    let (gets, puts, uploads) = (b.get_requests(), b.put_requests(), b.upload_requests());
    let o = run_on(&env, &key, None, Network::Bluesky).await;
    println!("{o:?}");
    println!(
        "Bluesky: getRecord +{}, putRecord +{}, uploadBlob +{}",
        b.get_requests() - gets,
        b.put_requests() - puts,
        b.upload_requests() - uploads
    );
    assert_eq!(o.outcome, OutcomeKind::AlreadyPosted, "{o:?}");
    assert!(b.get_requests() > gets, "the record was read");
    assert_eq!((b.put_requests(), b.upload_requests()), (puts, uploads));
    assert_eq!(b.posts_created(), 1);
    let rec = env.status(&key.on(Network::Bluesky)).await.snapshot.record;
    assert_eq!(
        rec.and_then(|r| r.post_id),
        Some(b.records()[0].uri.clone())
    );
}

// ---------------------------------------------------------------------------------------------
// Finding 2: reconciles that keep failing are bounded.

/// X's timeline read keeps failing (503): each sweep's check counts as an attempt, quietly;
/// at `POSTONCE_MAX_ATTEMPTS` the draft goes to the owner, who is told once; it shows in
/// `status --all`; later sweeps neither check nor tell again; nothing is re-sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_reads_that_keep_failing_end_in_front_of_the_owner_once() {
    let _turn = TURN.lock().await;
    let env = Env::with_targets(Stores::Real, &[QUIET, ("POSTONCE_MAX_ATTEMPTS", "3")]).await;
    env.x().set_duplicate_check(XCheck::Off);
    let key = env.key();
    let target = key.on(Network::X);
    env.x().set_create_mode(support::x::Mode::Hang(HANG));
    let first = run_on(&env, &key, Some("/cover.png"), Network::X).await;
    env.x().set_create_mode(support::x::Mode::Normal);
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    env.x().set_read_mode(support::x::Read::Status(503));
    env.wait_out_quiet_period(&target).await;
    let before = messages_about(&env, &target).len();
    let mut sweeps = 0;
    for _ in 0..6 {
        env.sweep().await;
        sweeps += 1;
    }
    let d = draft(&env, &target).await;
    println!(
        "after {sweeps} sweeps: {d:?}; timeline reads {}; messages about it +{}",
        env.x().timeline_requests(),
        messages_about(&env, &target).len() - before
    );
    assert_eq!(
        (d.status, d.retryable),
        (DraftStatus::Unknown, false),
        "{d:?}"
    );
    assert!(d.attempts <= 3, "{d:?}");
    assert!(d.reminded);
    assert_eq!(told(&env, &target), 1, "told once");
    assert_eq!(
        messages_about(&env, &target).len() - before,
        1,
        "one message: the state changed once"
    );
    assert!(waiting(&env)
        .await
        .iter()
        .any(|w| w.key == target.to_string()));
    let reads = env.x().timeline_requests();
    env.sweep().await;
    assert_eq!(env.x().timeline_requests(), reads, "no more checks");
    assert_eq!(env.x().create_requests(), 1, "nothing re-sent");
}

/// X's re-send is refused for good (a media id past its 24 h, or any 4xx): the check cannot
/// succeed by trying again, so the owner decides; the draft is no longer retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_x_resend_goes_to_the_owner_not_round_again() {
    let _turn = TURN.lock().await;
    let env = Env::with_targets(Stores::Real, &[QUIET]).await;
    env.x().set_duplicate_check(XCheck::Off);
    let key = env.key();
    let target = key.on(Network::X);
    env.x().set_create_mode(support::x::Mode::Hang(HANG));
    let first = run_on(&env, &key, Some("/cover.png"), Network::X).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    env.x().set_create_mode(support::x::Mode::Status(400));
    env.wait_out_quiet_period(&target).await;
    let o = run_on(&env, &key, None, Network::X).await;
    println!("{o:?}");
    assert_eq!(
        (o.outcome, o.retryable),
        (OutcomeKind::Unknown, false),
        "{o:?}"
    );
    let d = draft(&env, &target).await;
    assert_eq!(
        (d.status, d.retryable),
        (DraftStatus::Unknown, false),
        "{d:?}"
    );
    let creates = env.x().create_requests();
    env.sweep().await;
    env.sweep().await;
    assert_eq!(
        env.x().create_requests(),
        creates,
        "the sweeper does not re-send"
    );
    assert_eq!(told(&env, &target), 1);
    assert!(waiting(&env)
        .await
        .iter()
        .any(|w| w.key == target.to_string()));
}

// ---------------------------------------------------------------------------------------------
// Finding 1: the channel.

/// A channel run killed after its intent (nothing sent): once no run can be live, the sweeper
/// leaves it to the owner and tells them once; `status --all` shows it; nothing is ever sent.
/// A channel run that died after the channel took the message (its claim kept) is repaired by
/// the sweeper: recorded, one message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_run_killed_after_its_intent_reaches_the_owner_once() {
    let _turn = TURN.lock().await;
    let env = Env::with_targets(
        Stores::Real,
        &[
            QUIET,
            ("POSTONCE_FUNCTION_TIMEOUT_S", "8"),
            ("POSTONCE_CLAIM_TTL_S", "9"),
        ],
    )
    .await;
    let ch = env.channel();
    let key = env.key();
    let target = key.on(Network::Telegram);
    kill_after_intent(&env, &key, Network::Telegram, "before-create-post").await;
    assert_eq!(ch.send_photo_requests(), 0);

    let kept = env.key();
    let kept_target = kept.on(Network::Telegram);
    fail::cfg("after-create-post", "return").expect("fail point");
    let o = run_on(&env, &kept, Some("/cover.png"), Network::Telegram).await;
    fail::remove("after-create-post");
    assert_eq!(o.outcome, OutcomeKind::PostedNotRecorded, "{o:?}");
    assert_eq!(ch.messages_posted(), 1);

    // No run can be live after a claim's time.
    env.wait_until_attempt_is(&target, Duration::from_secs(10))
        .await;
    env.wait_until_attempt_is(&kept_target, Duration::from_secs(10))
        .await;
    for _ in 0..4 {
        env.sweep().await;
    }
    let d = draft(&env, &target).await;
    println!("killed after its intent: {d:?}");
    assert_eq!((d.status, d.retryable), (DraftStatus::Unknown, false));
    assert_eq!(told(&env, &target), 1, "told once");
    assert!(waiting(&env)
        .await
        .iter()
        .any(|w| w.key == target.to_string()));
    let rec = env.status(&kept_target).await.snapshot.record;
    println!("kept claim: {rec:?}");
    assert_eq!(
        rec.and_then(|r| r.post_id),
        Some(ch.messages()[0].message_id.to_string()),
        "repaired from the kept claim"
    );
    assert_eq!(ch.send_photo_requests(), 1, "never re-sent");
}

// ---------------------------------------------------------------------------------------------
// Doubled and contradictory words.

/// Each phrase is said once, by the layer that owns it: a 429 on create says "nothing was
/// posted" once; an upload-only failure never says "the post may exist"; an ambiguous create
/// says "the post may exist" once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_phrase_is_said_once_by_the_layer_that_owns_it() {
    let _turn = TURN.lock().await;
    let env = Env::with_targets(Stores::Real, &[QUIET]).await;
    let x = env.x();
    let cases = [
        ("create 429", support::x::Mode::StatusTimes(429, 1), None),
        (
            "upload 503",
            support::x::Mode::Normal,
            Some(support::x::Mode::Status(503)),
        ),
        ("create 503", support::x::Mode::Status(503), None),
    ];
    for (what, create, upload) in cases {
        let key = env.key();
        x.set_create_mode(create);
        if let Some(u) = upload {
            x.set_upload_mode(u);
        }
        let o = part(
            &run_on(&env, &key, Some("/cover.png"), Network::X).await,
            Network::X,
        );
        x.set_create_mode(support::x::Mode::Normal);
        x.set_upload_mode(support::x::Mode::Normal);
        println!("{what}: {:?}: {}", o.outcome, o.detail);
        let posted = o.detail.matches("nothing was posted").count();
        let may = o.detail.matches("may exist").count();
        match o.outcome {
            OutcomeKind::Unknown => assert_eq!((posted, may), (0, 1), "{what}: {}", o.detail),
            _ => assert_eq!((posted, may), (1, 0), "{what}: {}", o.detail),
        }
        let d = draft(&env, &key.on(Network::X)).await;
        let stored = d.last_error.unwrap_or_default();
        assert!(
            stored.matches("nothing was posted").count() <= 1,
            "{stored}"
        );
        assert!(stored.matches("may exist").count() <= 1, "{stored}");
    }
}

// ---------------------------------------------------------------------------------------------
// The property.

/// One draft of the property: its key, its network, and how it was broken.
struct Case {
    key: PostKey,
    network: Network,
    how: String,
}

/// Every network, every step a run can be killed at, every read failing, every image
/// vanishing. After sweeps (past every quiet period and claim), each target is posted once and
/// recorded, or it was told exactly once (the sweeper's message at the Telegram fake) and shows
/// in `status --all`, with at most `POSTONCE_MAX_ATTEMPTS` automatic tries; further sweeps send
/// nothing and re-send nothing. Eight networks: the five first, Discord, the Facebook Page and
/// Instagram.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stuck_draft_is_posted_or_told_once() {
    let _turn = TURN.lock().await;
    let env = Env::with_networks(Stores::Real, &STUCK_VARS, &EIGHT).await;
    // LinkedIn settles by its duplicate answer: the fake has its real race.
    env.linkedin.set_duplicate_check(LinkedInCheck::Racy {
        processing: Duration::from_millis(50),
        window: None,
    });
    env.x().set_duplicate_check(XCheck::Off);
    // The Page has no primitive: its fake takes every post, the same caption again too, so
    // only the intent and the read-back stand between a crash and a second post. Discord's
    // nonce check is as Discord has it: a repeat inside the window answered with the first
    // message; after a crash the sweeps read the channel back.
    env.facebook().set_duplicate_check(false);
    stuck_drafts_property(&env, &EIGHT).await;
}

/// The five first networks and the later ones the property runs on, killed together (one run
/// per network at once), in one environment.
const EIGHT: [Network; 8] = [
    Network::Linkedin,
    Network::X,
    Network::Telegram,
    Network::Mastodon,
    Network::Bluesky,
    Network::Discord,
    Network::Facebook,
    Network::Instagram,
];

/// What the property's environments set: a quiet period of 2 s, a 10 s function and a 12 s
/// claim, 3 automatic tries.
const STUCK_VARS: [(&str, &str); 4] = [
    QUIET,
    ("POSTONCE_FUNCTION_TIMEOUT_S", "10"),
    ("POSTONCE_CLAIM_TTL_S", "12"),
    ("POSTONCE_MAX_ATTEMPTS", "3"),
];

/// Every read `n`'s adapter makes to settle a doubt fails (`on`), or answers as usual.
fn reads_fail(env: &Env, n: Network, on: bool) {
    match n {
        Network::X => env.x().set_read_mode(if on {
            support::x::Read::Status(503)
        } else {
            support::x::Read::Normal
        }),
        Network::Bluesky => env.bluesky().set_get_mode(if on {
            support::bluesky::Mode::Status(503)
        } else {
            support::bluesky::Mode::Normal
        }),
        Network::Discord => env.discord().set_read_mode(if on {
            support::discord::Read::Refused
        } else {
            support::discord::Read::Normal
        }),
        Network::Facebook => env.facebook().set_read_refused(on),
        Network::Mastodon => env.mastodon().set_read_mode(if on {
            support::mastodon::Read::Refused
        } else {
            support::mastodon::Read::Normal
        }),
        Network::Instagram => env.instagram().set_read_mode(if on {
            support::meta::Mode::Status(503)
        } else {
            support::meta::Mode::Normal
        }),
        // LinkedIn's and the channel's adapters cannot read their posts back: their `find`
        // refuses in every world.
        _ => {}
    }
}

async fn stuck_drafts_property(env: &Env, networks: &[Network]) {
    let points = [
        "after-claim",
        "after-check",
        "after-image",
        "after-upload",
        "after-intent",
        "before-create-post",
        "after-create-post",
    ];
    let mut tally: BTreeMap<(&str, Network, &str), usize> = BTreeMap::new();
    let mut bad = Vec::new();
    let mut total = 0;
    // Reads fail last: a draft that network leaves to a retry (below) is retried only after
    // the test, never in a later world's sweeps, where it would publish unobserved.
    for world in ["as usual", "every image vanishes", "every read fails"] {
        for &n in networks {
            reads_fail(env, n, world == "every read fails");
        }
        // Killed at every step, for every network (five runs at once, one per network).
        let mut cases: Vec<Case> = Vec::new();
        for point in points {
            let mut round = Vec::new();
            for &n in networks {
                let key = env.key();
                let times = if world == "every image vanishes" {
                    1
                } else {
                    1000
                };
                // Instagram takes JPEG only (and fetches the cover itself: no rendition).
                let image = if n == Network::Instagram {
                    let image = format!("/p-{}.jpg", key.slug());
                    let jpeg = support::covers::jpeg(1080, 1080, 85);
                    env.images
                        .vanishing_as(&image, times, jpeg, "image/jpeg")
                        .await;
                    image
                } else {
                    let image = format!("/p-{}.png", key.slug());
                    env.images.vanishing(&image, times).await;
                    image
                };
                round.push((key, n, image));
            }
            fail::cfg(point, "return(sleep:30000)").expect("fail point");
            let runs: Vec<_> = round
                .iter()
                .map(|(key, n, image)| {
                    let app = env.app.clone();
                    let mut content = env.announcement(key);
                    content.image = env.images.url(image);
                    let req = env.request_to(key, Some(content), &[*n]);
                    let dl = env.deadline();
                    tokio::spawn(async move { app.pipeline.run(req, dl).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            for r in &runs {
                r.abort();
            }
            for r in runs {
                let _ = r.await;
            }
            fail::remove(point);
            for (key, n, _) in round {
                cases.push(Case {
                    key,
                    network: n,
                    how: format!("{world}, killed at {point}"),
                });
            }
        }
        total += cases.len();

        // Sweeps, a little apart (past each quiet period), until no run can be live (a
        // claim's time) and two sweeps in a row changed nothing.
        let begun = std::time::Instant::now();
        let mut calm = 0;
        let mut sweeps = 0;
        while begun.elapsed() < Duration::from_secs(120) {
            let r = env.sweep().await;
            sweeps += 1;
            let idle = r.runs.is_empty()
                && r.left_for_later == 0
                && r.reminded.is_empty()
                && r.needs_review.is_empty()
                && r.undelivered.is_empty();
            calm = if idle { calm + 1 } else { 0 };
            if calm >= 2 && begun.elapsed() > Duration::from_secs(14) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1_200)).await;
        }
        // Nothing more is said or sent by further sweeps.
        let messages = env.telegram.requests_for("sendMessage").len();
        let sent: Vec<(u64, usize)> = networks.iter().map(|n| env.fake_totals(*n)).collect();
        for _ in 0..2 {
            env.sweep().await;
        }
        assert_eq!(
            env.telegram.requests_for("sendMessage").len(),
            messages,
            "{world}: sweeps that change nothing say nothing"
        );
        let after: Vec<(u64, usize)> = networks.iter().map(|n| env.fake_totals(*n)).collect();
        assert_eq!(
            after, sent,
            "{world}: sweeps that change nothing send nothing"
        );

        let listed = waiting(env).await;
        for c in &cases {
            let target = c.key.on(c.network);
            let posts = env.posts_on(&c.key, c.network);
            let st = env.status(&target).await;
            let record = st.snapshot.record.as_ref().and_then(|r| r.post_id.clone());
            let d = st.snapshot.draft.clone();
            let status = d.as_ref().map(|d| d.status);
            let verdict = if posts.len() > 1 {
                bad.push(format!("{target} ({}): {} posts", c.how, posts.len()));
                "duplicate"
            } else if posts.len() == 1
                && record.as_deref() == Some(posts[0].as_str())
                && status == Some(DraftStatus::Posted)
            {
                "posted once"
            } else {
                let shown = listed.iter().any(|w| w.key == target.to_string());
                let told = told(env, &target);
                let attempts = d.as_ref().map_or(0, |d| d.attempts);
                // The cap, and the one note that hands it to the owner.
                // Instagram must read its container's status before it publishes: while its
                // reads fail, each attempt stops there, nothing posted, and the sweeper retries
                // after the backoff (at least half of `retry_base`, 60 s here), to the cap and its
                // one note. Its retry time may have come by the check (the sweeps can take
                // longer than the backoff): it is still the retry this run leaves pending. Only that: any other network, world or
                // cause must still be posted or told.
                let now = unix_now();
                let retry_pending = c.network == Network::Instagram
                    && world == "every read fails"
                    && d.as_ref().is_some_and(|d| {
                        d.status == DraftStatus::Failed
                            && d.retryable
                            && attempts < env.app.pipeline.settings.max_attempts
                            && d.next_retry_at.is_some_and(|at| at <= now + 6 * 3600)
                            && d.last_error.as_deref().is_some_and(|e| {
                                e.contains("could not read the status of the container")
                                    && e.contains("nothing was published")
                            })
                    });
                if shown && told == 1 && attempts <= 3 + 1 {
                    "told once"
                } else if posts.is_empty() && record.is_none() && told == 0 && retry_pending {
                    "nothing posted, its retry pending"
                } else {
                    bad.push(format!(
                        "{target} ({}): {} posts, record {record:?}, draft {status:?}, told {told}, in status --all {shown}, attempts {attempts}, last error {:?}",
                        c.how,
                        posts.len(),
                        d.as_ref().and_then(|d| d.last_error.clone())
                    ));
                    "neither"
                }
            };
            *tally.entry((world, c.network, verdict)).or_default() += 1;
        }
        println!(
            "{world}: {} drafts settled in {sweeps} sweeps ({:?})",
            cases.len(),
            begun.elapsed()
        );
    }
    println!(
        "{total} drafts ({} kill points x {} networks x 3 worlds); per world, network and verdict:",
        points.len(),
        networks.len()
    );
    for ((world, n, verdict), count) in &tally {
        println!("  {world:>20} {:>8} {verdict}: {count}", n.as_str());
    }
    for &n in networks {
        let (creates, posts) = env.fake_totals(n);
        println!(
            "  {:>8}: create requests {creates}, posts {posts}",
            n.as_str()
        );
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

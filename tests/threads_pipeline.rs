//! Threads through the whole pipeline (issue 21, item 5): real redis-server and DynamoDB Local,
//! LinkedIn and Threads as wire-format fakes ([`Env::with_threads`]); the Threads fake fetches
//! the draft's image itself, keeps each container's status, publishes a container at most once
//! and keeps every post (two containers of one draft both publish). Every count is taken at the
//! fakes:
//!
//! - posted once: the container made from the draft's own image URL, its id in the intent
//!   before `threads_publish` (seen while the run is held after the intent), the permalink
//!   reported; a second run sends nothing;
//! - the publish answer lost (accept-then-hang past the budget): `unknown`, nothing re-sent
//!   inside the quiet period; after it the container's status (`PUBLISHED`) settles it: 1 post,
//!   1 container, recorded with its permalink, no question to the owner;
//! - the publish refused while its container was published: `posted` and recorded with its
//!   permalink; a Retry, a sweep and a second post send nothing (1 container, 1 post);
//! - a publish that never landed: after the quiet period the same container is published:
//!   1 post, 1 container;
//! - the container expired meanwhile: not posted, `failed` and retryable; the retry makes a new
//!   container: 1 post;
//! - a local file as the cover: Threads `failed`, not retryable, before any Threads request;
//!   LinkedIn posts; `partial`, exit 6;
//! - a revoked token is permanent and the owner is told; the publishing quota is a rate limit.

mod support;

use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::pipeline::{PostRequest, Source};
use support::env::{Env, Stores};
use support::threads::Mode;
use tokio::sync::Mutex;

/// A quiet period of 2 s: above every budget these environments set (1.5 s each).
const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "2");

/// A hang long enough that the 1.5 s budget gives up first.
const HANG: Duration = Duration::from_secs(3);

/// Fail points are process-wide: under `cargo test` the tests of this file run one at a time
/// (nextest gives each test a process of its own).
static SERIAL: Mutex<()> = Mutex::const_new(());

fn target(o: &Outcome, n: Network) -> TargetOutcome {
    o.targets
        .as_ref()
        .and_then(|t| t.get(&n))
        .cloned()
        .unwrap_or_else(|| panic!("no {} in the outcome's targets: {o:?}", n.as_str()))
}

/// One run of `key` to Threads only, with a fresh draft (`true`) or the stored one.
async fn run(env: &Env, key: &PostKey, fresh: bool) -> Outcome {
    run_on(
        env,
        key,
        fresh.then(|| env.announcement(key)),
        Network::Threads,
    )
    .await
}

/// One run of `key` to `n` only, with `content` as its fresh draft (or the stored one).
async fn run_on(
    env: &Env,
    key: &PostKey,
    content: Option<postonce::record::DraftContent>,
    n: Network,
) -> Outcome {
    env.app
        .pipeline
        .run(env.request_to(key, content, &[n]), env.deadline())
        .await
}

/// The container id the intent of `key` on Threads keeps (`creation_id` of the kept request).
async fn kept_container(env: &Env, key: &PostKey) -> Option<String> {
    let pending = env
        .status(&key.on(Network::Threads))
        .await
        .snapshot
        .draft?
        .pending?;
    let request = pending.request?;
    request.body["creation_id"].as_str().map(str::to_owned)
}

/// Questions to the owner about `key` on Threads in the outcome (`done:` / `force:` buttons).
fn questions(key: &PostKey, o: &Outcome) -> usize {
    o.buttons()
        .into_iter()
        .filter(|b| {
            b.data == format!("done:{key}@threads") || b.data == format!("force:{key}@threads")
        })
        .count()
}

fn figures(env: &Env, what: &str) {
    let t = env.threads();
    println!(
        "{what}: containers {}, publish requests {}, posts {}, status reads {}, list reads {}",
        t.container_requests(),
        t.publish_requests(),
        t.posts_created(),
        t.status_reads(),
        t.list_reads()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_once_with_the_container_in_the_intent_before_the_publish() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();

    // Held just after the intent: the container exists and is kept; nothing is published yet.
    // Held well inside the quiet period (a hold past it makes the create refuse to send).
    fail::cfg("after-intent", "1*return(sleep:500)").expect("fail point");
    let running = {
        let app = env.app.clone();
        let req = env.request_to(&key, Some(env.announcement(&key)), &[Network::Threads]);
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    let mut kept = None;
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < give_up {
        kept = kept_container(&env, &key).await;
        if kept.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let kept = kept.expect("the intent keeps the container id");
    assert_eq!(
        t.publish_requests(),
        0,
        "the container id is stored before threads_publish"
    );
    assert_eq!(t.status(&kept), Some("FINISHED"));
    let o = running.await.expect("the run");
    fail::remove("after-intent");
    figures(&env, "posted once");

    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    let posts = t.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].container.as_deref(), Some(kept.as_str()));
    assert_eq!(th.id.as_deref(), Some(posts[0].id.as_str()));
    assert_eq!(th.url.as_deref(), Some(t.permalink(&posts[0]).as_str()));
    // The draft's own image URL, fetched by Threads itself; its alt text.
    let c = t.container(&kept).expect("the container");
    assert_eq!(
        c.image_url.as_deref(),
        Some(env.images.url("/cover.png").as_str())
    );
    assert!(c
        .alt_text
        .as_deref()
        .is_some_and(|a| a.starts_with("Cover")));
    assert_eq!(t.image_fetches(), 1);
    assert_eq!(t.bad_tokens(), 0);

    // Posted: a second run (both targets) sends nothing more to Threads.
    let again = env.post(&key, "ignored: the stored draft is posted").await;
    assert_eq!(
        target(&again, Network::Threads).outcome,
        OutcomeKind::AlreadyPosted,
        "{again:?}"
    );
    assert_eq!((t.container_requests(), t.publish_requests()), (1, 1));
    assert_eq!(env.posts_on(&key, Network::Threads).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_publish_answer_settles_after_the_quiet_period_with_one_post() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(Mode::AcceptThenHang(HANG));
    let first = run(&env, &key, true).await;
    println!("Threads publishes, then hangs past its budget: {first:?}");
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(t.posts_created(), 1, "the post exists");
    t.set_publish_mode(Mode::Normal);

    // Inside the quiet period nothing is sent, and the answer stays unknown.
    let early = run(&env, &key, false).await;
    assert_eq!(early.outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(
        t.publish_requests(),
        1,
        "no publish inside the quiet period"
    );

    env.wait_out_quiet_period(&key.on(Network::Threads)).await;
    let o = run(&env, &key, false).await;
    figures(&env, "lost publish answer, settled");
    println!("after the quiet period: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::AlreadyPosted, "{o:?}");
    assert_eq!(questions(&key, &o), 0, "no question to the owner: {o:?}");
    let post = t.posts().remove(0);
    assert_eq!(th.id.as_deref(), Some(post.id.as_str()));
    assert_eq!(
        th.url.as_deref(),
        Some(t.permalink(&post).as_str()),
        "the permalink, found through the account's list"
    );
    assert_eq!(t.posts_created(), 1, "exactly one post");
    assert_eq!(t.max_posts_per_text(), 1);
    assert_eq!(t.container_requests(), 1, "never a second container");
    assert_eq!(
        t.publish_requests(),
        1,
        "settled from the container's status"
    );
    let record = env
        .status(&key.on(Network::Threads))
        .await
        .snapshot
        .record
        .expect("recorded");
    assert_eq!(record.post_id.as_deref(), Some(post.id.as_str()));
}

/// Issue 30: `threads_publish` is refused while the container it names was in fact published
/// (the fake publishes, then answers 400 "already published"). The container is the one this
/// attempt staged, and only its kept request names it, so the post is this attempt's own:
/// `posted`, recorded with its id and permalink. Read as "already there, posted by someone
/// else" it was `failed` and unrecorded, and a Retry or a second `post` staged a second
/// container and published a second post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_publish_of_its_own_published_container_is_recorded_as_posted() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(Mode::AcceptThenRefuse);
    let o = run(&env, &key, true).await;
    t.set_publish_mode(Mode::Normal);
    figures(&env, "publish refused, container published");
    println!("the publish refused, its container published: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    let post = t.posts().remove(0);
    assert_eq!(th.id.as_deref(), Some(post.id.as_str()), "{o:?}");
    assert_eq!(
        th.url.as_deref(),
        Some(t.permalink(&post).as_str()),
        "{o:?}"
    );
    assert_eq!(questions(&key, &o), 0, "nothing to ask: {o:?}");
    let record = env
        .status(&key.on(Network::Threads))
        .await
        .snapshot
        .record
        .expect("recorded");
    assert_eq!(record.post_id.as_deref(), Some(post.id.as_str()));
    assert_eq!(record.url.as_deref(), Some(t.permalink(&post).as_str()));

    // A Retry (the report's button), a sweep and an agent posting the same draft again: none
    // stages or publishes anything more.
    let retry = PostRequest {
        source: Source::Telegram,
        ..env.request_to(&key, None, &[Network::Threads])
    };
    let again = env.app.pipeline.run(retry, env.deadline()).await;
    assert_eq!(
        target(&again, Network::Threads).outcome,
        OutcomeKind::AlreadyPosted,
        "{again:?}"
    );
    let report = env.sweep().await;
    println!("the sweep after it: {report:?}");
    let fresh = run(&env, &key, true).await;
    assert_eq!(
        target(&fresh, Network::Threads).outcome,
        OutcomeKind::AlreadyPosted,
        "{fresh:?}"
    );
    figures(&env, "after a Retry, a sweep and a second post");
    assert_eq!(t.container_requests(), 1, "no second container");
    assert_eq!(t.publish_requests(), 1, "no second publish");
    assert_eq!(t.posts_created(), 1, "exactly one post");
    assert_eq!(t.max_posts_per_text(), 1);
}

/// The same reading when a later run settles the attempt: the first publish never landed; the
/// reconcile finds the container `FINISHED` and publishes it again, and that publish is refused
/// although it published. The post is the kept attempt's: `already_posted`, recorded by the
/// reconcile with its permalink; nothing more is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_re_send_of_its_own_published_container_is_recorded_by_the_reconcile() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(Mode::Hang(HANG));
    let first = run(&env, &key, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(t.posts_created(), 0);

    t.set_publish_mode(Mode::AcceptThenRefuse);
    env.wait_out_quiet_period(&key.on(Network::Threads)).await;
    let o = run(&env, &key, false).await;
    t.set_publish_mode(Mode::Normal);
    figures(&env, "re-send refused, container published");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::AlreadyPosted, "{o:?}");
    let post = t.posts().remove(0);
    assert_eq!(th.id.as_deref(), Some(post.id.as_str()), "{o:?}");
    assert_eq!(
        th.url.as_deref(),
        Some(t.permalink(&post).as_str()),
        "{o:?}"
    );
    let record = env
        .status(&key.on(Network::Threads))
        .await
        .snapshot
        .record
        .expect("recorded");
    assert_eq!(record.post_id.as_deref(), Some(post.id.as_str()));
    assert_eq!(record.source, "reconcile");

    let again = run(&env, &key, false).await;
    assert_eq!(
        target(&again, Network::Threads).outcome,
        OutcomeKind::AlreadyPosted,
        "{again:?}"
    );
    assert_eq!(t.container_requests(), 1, "the same container");
    assert_eq!(t.publish_requests(), 2);
    assert_eq!(t.posts_created(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_that_never_landed_is_published_from_the_same_container() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(Mode::Hang(HANG));
    let first = run(&env, &key, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(t.posts_created(), 0);
    let kept = kept_container(&env, &key).await.expect("kept");
    t.set_publish_mode(Mode::Normal);

    env.wait_out_quiet_period(&key.on(Network::Threads)).await;
    let o = run(&env, &key, false).await;
    figures(&env, "publish never landed, published again");
    let th = target(&o, Network::Threads);
    assert!(
        matches!(th.outcome, OutcomeKind::Posted | OutcomeKind::AlreadyPosted),
        "{o:?}"
    );
    let posts = t.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].container.as_deref(), Some(kept.as_str()));
    assert_eq!(th.url.as_deref(), Some(t.permalink(&posts[0]).as_str()));
    assert_eq!(t.container_requests(), 1, "the same container");
    assert_eq!(t.publish_requests(), 2);
    assert_eq!(questions(&key, &o), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_container_is_not_posted_and_the_retry_makes_a_new_one() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(Mode::Hang(HANG));
    let first = run(&env, &key, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    t.set_publish_mode(Mode::Normal);
    // A day passes on Threads' side: the container expires unpublished.
    t.advance(Duration::from_secs(25 * 3600));
    let kept = kept_container(&env, &key).await.expect("kept");
    assert_eq!(t.status(&kept), Some("EXPIRED"));

    env.wait_out_quiet_period(&key.on(Network::Threads)).await;
    let o = run(&env, &key, false).await;
    println!("the container expired: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Failed, "{o:?}");
    assert!(th.retryable, "{o:?}");
    assert!(th.detail.contains("nothing was posted"), "{o:?}");
    assert_eq!(questions(&key, &o), 0);
    assert_eq!(
        t.publish_requests(),
        1,
        "the expired container is not published"
    );

    let o = run(&env, &key, false).await;
    figures(&env, "expired, then retried");
    assert_eq!(
        target(&o, Network::Threads).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );
    assert_eq!(t.container_requests(), 2, "a new attempt, a new container");
    assert_eq!(t.posts_created(), 1);
    assert_ne!(t.posts()[0].container.as_deref(), Some(kept.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_file_cover_fails_threads_before_any_request_and_the_run_is_partial() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let key = env.key();
    let mut content = env.announcement(&key);
    content.image = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png").to_owned();
    let o = env
        .app
        .pipeline
        .run(env.request(&key, Some(content)), env.deadline())
        .await;
    println!("a local file as the cover: {o:?}");
    assert_eq!(o.outcome, OutcomeKind::Partial, "{o:?}");
    assert_eq!(o.exit_code(), 6);
    assert_eq!(o.http_status(), 202);
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Failed, "{o:?}");
    assert!(!th.retryable, "{o:?}");
    assert!(th.detail.contains("local file"), "{o:?}");
    assert_eq!(
        target(&o, Network::Linkedin).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );
    assert_eq!(env.threads().requests(), 0, "no request to Threads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_permanent_and_a_used_up_quota_is_a_rate_limit() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET]).await;
    let t = env.threads();

    t.set_quota_total(0);
    let key = env.key();
    let o = run(&env, &key, true).await;
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Failed, "{o:?}");
    assert!(th.retryable, "a quota is waited out: {o:?}");
    assert!(th.detail.contains("250"), "{o:?}");
    assert_eq!(t.posts_created(), 0);
    t.set_quota_total(250);

    t.revoke();
    let key = env.key();
    let reports = env.telegram.requests_for("sendMessage").len();
    let o = run(&env, &key, true).await;
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Failed, "{o:?}");
    assert!(!th.retryable, "{o:?}");
    assert!(th.detail.contains("THREADS_ACCESS_TOKEN"), "{o:?}");
    assert!(
        env.telegram.requests_for("sendMessage").len() > reports,
        "the owner is told"
    );
    assert_eq!(t.posts_created(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_threads_is_a_dry_run_that_sends_nothing() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_threads(Stores::Real, &[QUIET, ("THREADS_ACCESS_TOKEN", "")]).await;
    let key = env.key();
    let o = run(&env, &key, true).await;
    println!("dry run: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    assert!(th.dry_run, "{o:?}");
    assert!(th
        .id
        .as_deref()
        .is_some_and(postonce::networks::is_dry_run_urn));
    assert_eq!(env.threads().requests(), 0, "nothing sent to Threads");
}

// ---------------------------------------------------------------------------------------------
// Instagram: the same container primitive through the same Graph adapter ([`Env::with_instagram`],
// its fake speaking `/v25.0/{user}/media`, `media_publish`, `status_code`), and what is
// Instagram's own: the publishing quota read before every publish, JPEG covers only, 30
// hashtags at most.

/// One run of `key` to Instagram only, with a fresh draft (its cover a square JPEG) or the
/// stored one.
async fn run_ig(env: &Env, key: &PostKey, fresh: bool) -> Outcome {
    run_on(
        env,
        key,
        fresh.then(|| square(env, key)),
        Network::Instagram,
    )
    .await
}

/// The usual draft of `key` with a square JPEG as its cover.
fn square(env: &Env, key: &PostKey) -> postonce::record::DraftContent {
    postonce::record::DraftContent {
        image: env.images.url("/cover.jpg"),
        ..env.announcement(key)
    }
}

/// 16 runs of one draft racing over two sets of clients, a publish whose answer is lost
/// (Instagram publishes, then hangs past the budget) and one that never lands (hangs, does
/// nothing): one post per draft, one container per draft, no question to the owner. The fake
/// would publish a container twice if asked ([`support::meta::MetaFake::set_republish`]), so
/// nothing but postonce stands between a draft and a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instagram_16_racing_runs_a_lost_answer_and_a_lost_request_each_make_one_post() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_instagram(Stores::Real, &[QUIET]).await;
    let ig = env.instagram();
    ig.set_republish(true);
    let containers_of = |key: &PostKey| {
        ig.containers()
            .into_iter()
            .filter(|c| c.text.contains(key.slug()))
            .count()
    };

    // A race of 16.
    let raced = env.key();
    let other = env.another_app().await;
    let content = square(&env, &raced);
    let runs: Vec<_> = (0..16)
        .map(|i| {
            let app = if i % 2 == 0 {
                env.app.clone()
            } else {
                other.clone()
            };
            let req = env.request_to(&raced, Some(content.clone()), &[Network::Instagram]);
            let dl = env.deadline();
            tokio::spawn(async move { app.pipeline.run(req, dl).await })
        })
        .collect();
    let mut posted = 0;
    for r in runs {
        let o = r.await.expect("a run");
        if target(&o, Network::Instagram).outcome == OutcomeKind::Posted {
            posted += 1;
        }
    }
    assert_eq!(posted, 1, "one run posts");
    assert_eq!(ig.posts_with(raced.slug()).len(), 1, "one post of 16 runs");
    assert_eq!(containers_of(&raced), 1, "one container");

    // The answer lost after the post was made.
    let lost_answer = env.key();
    ig.set_publish_mode(Mode::AcceptThenHang(HANG));
    let first = run_ig(&env, &lost_answer, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    // The request lost before Instagram did anything.
    let lost_request = env.key();
    ig.set_publish_mode(Mode::Hang(HANG));
    let first = run_ig(&env, &lost_request, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    ig.set_publish_mode(Mode::Normal);
    assert_eq!(ig.posts_with(lost_answer.slug()).len(), 1);
    assert_eq!(ig.posts_with(lost_request.slug()).len(), 0);

    env.wait_out_quiet_period(&lost_request.on(Network::Instagram))
        .await;
    for key in [&lost_answer, &lost_request] {
        let o = run_ig(&env, key, false).await;
        let t = target(&o, Network::Instagram);
        assert!(
            matches!(t.outcome, OutcomeKind::Posted | OutcomeKind::AlreadyPosted),
            "{o:?}"
        );
        assert_eq!(questions(key, &o), 0, "no question to the owner: {o:?}");
        assert!(
            t.url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://www.instagram.com/p/")),
            "{t:?}"
        );
        assert_eq!(ig.posts_with(key.slug()).len(), 1, "one post");
        assert_eq!(containers_of(key), 1, "the same container");
        let again = run_ig(&env, key, false).await;
        assert_eq!(
            target(&again, Network::Instagram).outcome,
            OutcomeKind::AlreadyPosted
        );
    }
    assert_eq!(ig.max_posts_per_text(), 1);
    assert_eq!(ig.bad_tokens(), 0);
    println!(
        "Instagram: {} containers, {} publishes, {} posts, {} quota reads",
        ig.container_requests(),
        ig.publish_requests(),
        ig.posts_created(),
        ig.limit_reads()
    );
}

/// The daily publishing quota is read before the publish: used up, nothing is published (the
/// publish is never sent), the target fails retryable and says so. A local cover, a PNG and a
/// 31st hashtag are refused before any request to Instagram; a revoked token is permanent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instagram_reads_its_quota_first_and_refuses_what_it_cannot_take_before_any_call() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_instagram(Stores::Real, &[QUIET]).await;
    let ig = env.instagram();

    ig.set_quota_total(0);
    let key = env.key();
    let o = run_ig(&env, &key, true).await;
    let t = target(&o, Network::Instagram);
    println!("quota used up: {}", t.detail);
    assert_eq!(t.outcome, OutcomeKind::Failed, "{o:?}");
    assert!(t.retryable, "a quota is waited out: {o:?}");
    assert!(
        t.detail.contains("publishing limit is used up") && t.detail.contains("0 of 0"),
        "{o:?}"
    );
    assert!(ig.limit_reads() >= 1);
    assert_eq!(ig.publish_requests(), 0, "the publish is never sent");
    ig.set_quota_total(50);
    let o = run_ig(&env, &key, false).await;
    assert_eq!(
        target(&o, Network::Instagram).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );

    let before = ig.requests();
    let refuse = |image: String, caption: Option<String>| {
        let key = env.key();
        let mut c = env.announcement(&key);
        c.image = image;
        if let Some(caption) = caption {
            c.caption = format!("{caption} {key}");
        }
        let req = env.request_to(&key, Some(c), &[Network::Instagram]);
        let app = env.app.clone();
        let dl = env.deadline();
        async move { target(&app.pipeline.run(req, dl).await, Network::Instagram) }
    };
    let local = refuse(
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png").into(),
        None,
    )
    .await;
    assert!(local.detail.contains("local file"), "{local:?}");
    env.images
        .serve(
            "/square.png",
            support::covers::smooth_png(1080, 1080),
            "image/png",
        )
        .await;
    let png = refuse(env.images.url("/square.png"), None).await;
    assert!(
        png.detail.contains("JPEG") && png.detail.contains("URL"),
        "{png:?}"
    );
    let banner = refuse(env.images.url("/cover.png"), None).await;
    assert!(
        banner.detail.contains("too wide") && banner.detail.contains("4:5"),
        "{banner:?}"
    );
    let tags = (0..31)
        .map(|i| format!("#tag{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let tagged = refuse(env.images.url("/cover.jpg"), Some(tags.clone())).await;
    assert!(
        tagged.detail.contains("31 hashtags") && tagged.detail.contains("at most 30"),
        "{tagged:?}"
    );
    for t in [&local, &png, &banner, &tagged] {
        assert_eq!(
            (t.outcome, t.retryable),
            (OutcomeKind::Failed, false),
            "{t:?}"
        );
    }
    assert_eq!(ig.requests(), before, "no request to Instagram");
    // At input (the CI route, the CLI), the same rule is a 400 naming Instagram.
    let mut c = env.announcement(&env.key());
    c.caption = tags;
    let e = env
        .app
        .pipeline
        .check_text(&c, &[Network::Instagram])
        .unwrap_err();
    assert!(e.message.contains("31 hashtags"), "{e:?}");

    ig.revoke();
    let o = run_ig(&env, &env.key(), true).await;
    let t = target(&o, Network::Instagram);
    assert_eq!(
        (t.outcome, t.retryable),
        (OutcomeKind::Failed, false),
        "{o:?}"
    );
    assert!(t.detail.contains("postonce auth instagram"), "{o:?}");
    assert_eq!(ig.posts_created(), 1);
}

/// `postonce post --targets instagram` without a token: a dry run that shows the container and
/// the publish it would send and sends nothing; `preview` shows Instagram's text and limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_instagram_is_a_dry_run_and_preview_shows_it() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_instagram(Stores::Local, &[QUIET, ("INSTAGRAM_ACCESS_TOKEN", "")]).await;
    let key = env.key();
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(&env.vars)
            .output()
            .expect("postonce runs")
    };
    let image = env.images.url("/cover.jpg");
    let caption = format!("Hello, Instagram #postonce {key}");
    let out = cli(&[
        "post",
        "--kind",
        key.kind(),
        "--slug",
        key.slug(),
        "--caption",
        &caption,
        "--image",
        &image,
        "--targets",
        "instagram",
        "--json",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let shown = format!("{stdout}\n{stderr}");
    let base = env.instagram().uri();
    assert!(
        shown.contains(&format!("POST {base}/v25.0/me/media")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("POST {base}/v25.0/me/media_publish")),
        "{shown}"
    );
    assert!(shown.contains("<INSTAGRAM_ACCESS_TOKEN>"), "{shown}");
    assert!(stdout.contains("\"dry_run\":true"), "{stdout}");
    assert_eq!(env.instagram().requests(), 0, "nothing sent to Instagram");

    let dir = tempfile::tempdir().expect("dir");
    let out = cli(&[
        "preview",
        "--kind",
        key.kind(),
        "--slug",
        key.slug(),
        "--out",
        &dir.path().display().to_string(),
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("preview JSON");
    let ig = v["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["network"] == "instagram"))
        .unwrap_or_else(|| panic!("instagram in the preview: {v}"));
    assert_eq!(ig["max"], 2200, "{ig}");
    assert!(
        ig["image_limits"]
            .as_str()
            .is_some_and(|l| l.contains("JPEG") && l.contains("4:5")),
        "{ig}"
    );
    assert!(
        ig["image_refused"].is_null(),
        "the square JPEG goes as it is: {ig}"
    );
    assert_eq!(env.instagram().requests(), 0);
}

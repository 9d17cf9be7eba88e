//! The Threads adapter against the Threads fake (tests/support/threads.rs), which checks the
//! `access_token`, makes containers from form fields, fetches their image itself, keeps them
//! `IN_PROGRESS` for a while, publishes each at most once, and keeps every post (two containers
//! of one draft both publish): the container made and stored before the publish, the wait for
//! `FINISHED` inside the budget, a lost publish settled from the container's status (posted, or
//! published once from the same container), expired and failed containers, every answer class,
//! the quota, the doctor's read, the text count, the dry run, and the token kept out of `Debug`
//! and errors.

use crate::support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use postonce::config::Secret;
use postonce::networks::capabilities::{Counting as CapCounting, Idempotency};
use postonce::networks::threads::{creation_id, media_ref, prepared, text, ThreadsAdapter};
use postonce::networks::{Media, Network, NetworkAdapter, PostError, PreparedPost};
use serde_json::json;
use support::images::ImageHost;
use support::threads::{Counting, Mode, ThreadsFake, TOKEN, USER_ID};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn adapter(fake: &ThreadsFake) -> ThreadsAdapter {
    // The suite's log capture, searched for the test secrets after the run (scripts/test.sh).
    support::env::capture_logs();
    ThreadsAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        "me",
        Secret::new(TOKEN),
    )
}

/// A client that gives up quickly, to see a timeout after sending.
fn impatient(fake: &ThreadsFake) -> ThreadsAdapter {
    support::env::capture_logs();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    ThreadsAdapter::new(http, &fake.uri(), "me", Secret::new(TOKEN))
}

/// What `create` is handed besides the kept request (Threads ignores it).
fn no_media() -> Media {
    cover(None)
}

/// The cover as the pipeline fetched it (Threads fetches it again itself, from its URL).
fn cover(alt: Option<&str>) -> Media {
    Media {
        bytes: Bytes::from(support::images::png_bytes()),
        content_type: "image/png",
        alt: alt.map(str::to_owned),
    }
}

fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Prepare and stage: what the pipeline does before it writes the intent.
async fn staged(t: &ThreadsAdapter, images: &ImageHost, text: &str) -> PreparedPost {
    let media = t.upload(&cover(Some("A cover"))).await.unwrap();
    let post = t.prepare(text, &media, "blog-hello@threads");
    t.stage(&post, &images.url("/cover.png")).await.unwrap()
}

#[tokio::test]
async fn stage_makes_the_documented_container_and_waits_for_finished() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    fake.set_processing(Duration::from_millis(600));
    let t = adapter(&fake);
    let url = images.url("/cover.png");
    let media = t.upload(&cover(Some(" A cover "))).await.unwrap();
    let post = t.prepare("Hello Threads", &media, "k");
    assert_eq!(creation_id(&post), None, "prepare sends nothing");
    assert_eq!(fake.requests(), 0);

    let started = Instant::now();
    let staged = t.stage(&post, &url).await.unwrap();
    let id = creation_id(&staged)
        .expect("the container id is in the kept request")
        .to_owned();
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "waited for FINISHED"
    );
    assert_eq!(fake.status(&id), Some("FINISHED"));
    let c = fake.container(&id).unwrap();
    assert_eq!(c.media_type, "IMAGE");
    assert_eq!(c.image_url.as_deref(), Some(url.as_str()));
    assert_eq!(c.text, "Hello Threads");
    assert_eq!(c.alt_text.as_deref(), Some("A cover"));
    let mut form: Vec<String> = fake.last_container_form().into_keys().collect();
    form.sort();
    assert_eq!(
        form,
        [
            "access_token",
            "alt_text",
            "image_url",
            "media_type",
            "text"
        ]
    );
    assert_eq!(
        fake.post_query_params(),
        0,
        "the token goes in the form, not the URL"
    );
    assert_eq!(
        images.hits("/cover.png").await,
        1,
        "Threads fetched the image itself"
    );
    assert_eq!(
        fake.posts_created(),
        0,
        "a container posts nothing by itself"
    );

    // A local file cannot go to Threads: refused before any request.
    let e = t.stage(&post, "/home/me/cover.png").await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 0, message, .. } if message.contains("local file")),
        "{e:?}"
    );
    assert_eq!(fake.container_requests(), 1);

    // Staging the staged request again makes no second container.
    assert_eq!(t.stage(&staged, &url).await.unwrap(), staged);
    assert_eq!(fake.container_requests(), 1);
    assert_eq!(fake.bad_tokens(), 0);
}

#[tokio::test]
async fn create_publishes_the_kept_container_and_reads_its_permalink() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let post = staged(&t, &images, "Posted once").await;
    let created = t.create(&post, &no_media()).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(created.id.as_deref(), Some(posts[0].id.as_str()));
    assert_eq!(
        created.url.as_deref(),
        Some(fake.permalink(&posts[0]).as_str())
    );
    assert_eq!(posts[0].container.as_deref(), creation_id(&post));
    assert_eq!(fake.status(creation_id(&post).unwrap()), Some("PUBLISHED"));
    assert_eq!(fake.publish_requests(), 1);
    assert_eq!(fake.container_requests(), 1);
    assert_eq!(fake.post_query_params(), 0);

    // Publishing the same container again posts nothing: it answers the post it made, as
    // this request's own (the kept container is named by nothing else).
    let again = t.create(&post, &no_media()).await.unwrap_err();
    assert!(
        matches!(&again, PostError::StagedPublished { post, .. } if post == &created),
        "{again:?}"
    );
    assert_eq!(fake.posts_created(), 1);
}

/// Issue 30: the publish is refused while the container was in fact published (the fake
/// publishes, then answers 400 "already published"). The refusal is read through the
/// container's status: `PUBLISHED`, so the post is this request's own, with its id and
/// permalink, never "someone else's post" ([`PostError::AlreadyExists`]).
#[tokio::test]
async fn a_refused_publish_of_a_published_container_answers_the_requests_own_post() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let post = staged(&t, &images, "Published, answered with a refusal").await;
    fake.set_publish_mode(Mode::AcceptThenRefuse);
    let e = t.create(&post, &no_media()).await.unwrap_err();
    let posts = fake.posts();
    assert_eq!(posts.len(), 1, "the publish published");
    assert_eq!(fake.status(creation_id(&post).unwrap()), Some("PUBLISHED"));
    match &e {
        PostError::StagedPublished { post: found, .. } => {
            assert_eq!(found.id.as_deref(), Some(posts[0].id.as_str()));
            assert_eq!(
                found.url.as_deref(),
                Some(fake.permalink(&posts[0]).as_str())
            );
        }
        other => panic!("expected the request's own post, got {other:?}"),
    }
    assert!(!e.may_exist() && !e.is_transient(), "{e:?}");
    assert_eq!((fake.container_requests(), fake.publish_requests()), (1, 1));
}

#[tokio::test]
async fn a_container_still_processing_is_handed_on_and_waited_for() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    fake.set_processing(Duration::from_millis(2500));
    let t = adapter(&fake).with_budget(Duration::from_millis(1500));
    let started = Instant::now();
    let post = staged(&t, &images, "Slow image").await;
    // The stage's wait ends inside its budget, with the container handed on.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let id = creation_id(&post).unwrap().to_owned();
    assert_eq!(fake.status(&id), Some("IN_PROGRESS"));

    // Create waits at most half its budget, then says so: nothing was published.
    let waited = Instant::now();
    let e = t.create(&post, &no_media()).await.unwrap_err();
    assert!(matches!(e, PostError::NotReady { .. }), "{e:?}");
    assert!(e.is_transient() && !e.may_exist(), "{e:?}");
    assert!(
        waited.elapsed() < Duration::from_millis(750),
        "{:?}",
        waited.elapsed()
    );
    assert_eq!(fake.publish_requests(), 0);

    // Once it is ready, the same container is published.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let created = t.create(&post, &no_media()).await.unwrap();
    assert!(created.id.is_some() && created.url.is_some(), "{created:?}");
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.container_requests(), 1);
}

#[tokio::test]
async fn accept_then_hang_is_in_doubt_and_the_container_says_it_posted() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let slow = impatient(&fake);
    let since = now();
    let post = staged(&slow, &images, "Published, answered too late").await;
    fake.set_publish_mode(Mode::AcceptThenHang(Duration::from_secs(2)));
    let e = slow.create(&post, &no_media()).await.unwrap_err();
    assert!(
        matches!(e, PostError::InDoubt { .. }) && e.may_exist(),
        "{e:?}"
    );
    assert_eq!(fake.posts_created(), 1, "published before hanging");

    // The reconcile reads the container: PUBLISHED, found among the account's posts.
    fake.set_publish_mode(Mode::Normal);
    let t = adapter(&fake);
    let found = t.find(&post, since).await.unwrap().expect("posted");
    let p = &fake.posts()[0];
    assert_eq!(found.id.as_deref(), Some(p.id.as_str()));
    assert_eq!(found.url.as_deref(), Some(fake.permalink(p).as_str()));
    assert!(fake.list_reads() >= 1);
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.max_posts_per_text(), 1);
}

#[tokio::test]
async fn a_lost_publish_that_never_landed_is_published_once_from_the_same_container() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let slow = impatient(&fake);
    let post = staged(&slow, &images, "Never reached Threads").await;
    fake.set_publish_mode(Mode::Hang(Duration::from_secs(2)));
    let e = slow.create(&post, &no_media()).await.unwrap_err();
    assert!(e.may_exist(), "{e:?}");
    assert_eq!(fake.posts_created(), 0);

    fake.set_publish_mode(Mode::Normal);
    let t = adapter(&fake);
    // FINISHED: not posted; the same container may be published.
    assert_eq!(t.find(&post, now()).await.unwrap(), None);
    let created = t.create(&post, &no_media()).await.unwrap();
    assert!(created.url.is_some());
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.container_requests(), 1, "no second container");
    // Any further replay answers the same post.
    assert!(matches!(
        t.create(&post, &no_media()).await,
        Err(PostError::StagedPublished { post, .. }) if post == created
    ));
    assert_eq!(fake.posts_created(), 1);
}

/// The failure the design prevents, shown by the fake: two containers made for one draft both
/// publish, and Threads keeps both posts.
#[tokio::test]
async fn the_fake_shows_a_duplicate_from_two_containers_of_one_draft() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let url = images.url("/cover.png");
    let post = t.prepare("Twice from two containers", &media_ref(None), "k");
    let first = t.stage(&post, &url).await.unwrap();
    let second = t.stage(&post, &url).await.unwrap();
    assert_ne!(creation_id(&first), creation_id(&second));
    t.create(&first, &no_media()).await.unwrap();
    t.create(&second, &no_media()).await.unwrap();
    assert_eq!(fake.posts_created(), 2);
    assert_eq!(fake.max_posts_per_text(), 2);
}

#[tokio::test]
async fn expired_and_failed_containers_are_not_posted() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let post = staged(&t, &images, "Left too long").await;
    fake.advance(Duration::from_secs(25 * 3600));
    let id = creation_id(&post).unwrap().to_owned();
    assert_eq!(fake.status(&id), Some("EXPIRED"));
    for e in [
        t.find(&post, now()).await.unwrap_err(),
        t.create(&post, &no_media()).await.unwrap_err(),
    ] {
        assert!(
            matches!(&e, PostError::Gone { message, .. } if message.contains("EXPIRED") && message.contains("nothing was posted")),
            "{e:?}"
        );
        assert!(!e.may_exist() && !e.is_transient(), "{e:?}");
    }
    assert_eq!(fake.publish_requests(), 0);

    // An image Threads cannot fetch: the container ends in ERROR, refused by the stage,
    // before any intent.
    let e = t
        .stage(
            &t.prepare("No image there", &media_ref(None), "k"),
            &images.url("/missing.png"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PostError::Gone { message, .. } if message.contains("ERROR") && message.contains("public")),
        "{e:?}"
    );
    // Forced into ERROR after the stage: refused at create, nothing published.
    let post = staged(&t, &images, "Broke later").await;
    fake.force_status(creation_id(&post).unwrap(), "ERROR");
    assert!(matches!(
        t.create(&post, &no_media()).await,
        Err(PostError::Gone { .. })
    ));
    assert_eq!(fake.posts_created(), 0);
}

#[tokio::test]
async fn each_answer_maps_to_its_error_class() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let (media, url) = (media_ref(None), images.url("/cover.png"));
    let post = t.prepare("Classes", &media, "k");

    for (mode, check) in [
        (Mode::Status(500), "in doubt"),
        (Mode::Status(502), "in doubt"),
        (Mode::TooMany, "rate"),
        (Mode::Quota, "rate"),
    ] {
        fake.set_container_mode(mode);
        let e = t.stage(&post, &url).await.unwrap_err();
        match check {
            "in doubt" => assert!(matches!(e, PostError::InDoubt { .. }), "{mode:?} {e:?}"),
            _ => assert!(matches!(e, PostError::RateLimited { .. }), "{mode:?} {e:?}"),
        }
        // Each is safe to repeat: a container nobody names never posts.
        assert!(e.is_transient(), "{mode:?} {e:?}");
    }
    fake.set_container_mode(Mode::Normal);
    let bad = t.prepare("Bad URL", &media, "k");
    let e = t
        .stage(&bad, "https://unfetchable.invalid/a.png")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 400, message, .. } if message.contains("code 100") && message.contains("public")),
        "{e:?}"
    );

    let staged = t.stage(&post, &url).await.unwrap();
    fake.set_publish_mode(Mode::Status(500));
    let e = t.create(&staged, &no_media()).await.unwrap_err();
    assert!(
        matches!(e, PostError::InDoubt { .. }) && e.may_exist(),
        "{e:?}"
    );
    fake.set_publish_mode(Mode::Status(503));
    assert!(t
        .create(&staged, &no_media())
        .await
        .unwrap_err()
        .may_exist());
    for mode in [Mode::TooMany, Mode::Quota] {
        fake.set_publish_mode(mode);
        let e = t.create(&staged, &no_media()).await.unwrap_err();
        assert!(
            matches!(&e, PostError::RateLimited { message, .. } if message.contains("250")),
            "{mode:?} {e:?}"
        );
        assert!(!e.may_exist());
    }
    // A status read that fails before the publish: the publish was not sent.
    fake.set_publish_mode(Mode::Normal);
    fake.set_read_mode(Mode::Status(503));
    let publishes = fake.publish_requests();
    let e = t.create(&staged, &no_media()).await.unwrap_err();
    assert!(
        matches!(&e, PostError::NotSent { message, .. } if message.contains("nothing was published")),
        "{e:?}"
    );
    assert_eq!(fake.publish_requests(), publishes);
    fake.set_read_mode(Mode::Normal);
    assert_eq!(fake.posts_created(), 0);

    // The publishing quota itself (250 per 24 h; 1 here).
    fake.set_quota_total(1);
    t.create(&staged, &no_media()).await.unwrap();
    let next = t
        .stage(&t.prepare("Over the quota", &media, "k"), &url)
        .await
        .unwrap();
    let e = t.create(&next, &no_media()).await.unwrap_err();
    assert!(matches!(e, PostError::RateLimited { .. }), "{e:?}");
    assert_eq!(fake.posts_created(), 1);
}

#[tokio::test]
async fn a_revoked_token_is_permanent_and_names_the_fix() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let post = staged(&t, &images, "Before the revoke").await;
    fake.revoke();
    let fresh = t.prepare("After", &media_ref(None), "k");
    let errors = [
        t.stage(&fresh, &images.url("/cover.png"))
            .await
            .unwrap_err(),
        t.create(&post, &no_media()).await.unwrap_err(),
        t.find(&post, now()).await.unwrap_err(),
        t.check().await.unwrap_err(),
    ];
    for e in errors {
        assert!(
            matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("code 190") && message.contains("THREADS_ACCESS_TOKEN")),
            "{e:?}"
        );
        assert!(!e.is_transient() && !e.may_exist(), "{e:?}");
    }
    assert_eq!(fake.posts_created(), 0);
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let t = ThreadsAdapter::new(
        postonce::app::http_client().unwrap(),
        &format!("http://127.0.0.1:{port}"),
        "me",
        Secret::new(TOKEN),
    );
    let post = t.prepare("x", &media_ref(None), "k");
    let e = t
        .stage(&post, "https://example.com/a.png")
        .await
        .unwrap_err();
    assert!(matches!(e, PostError::NotSent { .. }), "{e:?}");
    let mut staged = post.clone();
    staged.body["creation_id"] = json!("1789");
    let e = t.create(&staged, &no_media()).await.unwrap_err();
    assert!(
        matches!(e, PostError::NotSent { .. }) && !e.may_exist(),
        "{e:?}"
    );
}

#[tokio::test]
async fn check_reads_the_publishing_quota_only() {
    let fake = ThreadsFake::start().await;
    for i in 0..3 {
        fake.seed_post(&format!("earlier {i}"), Duration::from_secs(3600));
    }
    fake.seed_post("two days ago", Duration::from_secs(48 * 3600));
    let line = adapter(&fake).check().await.unwrap();
    assert!(line.contains("3 of 250"), "{line}");
    assert_eq!((fake.limit_reads(), fake.requests()), (1, 1));
    // The account's own id works as well as `me`.
    let by_id = ThreadsAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        USER_ID,
        Secret::new(TOKEN),
    );
    assert!(by_id.check().await.unwrap().contains(USER_ID));
    let other = ThreadsAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        "someone-else",
        Secret::new(TOKEN),
    );
    let e = other.check().await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("THREADS_USER_ID")),
        "{e:?}"
    );
}

#[tokio::test]
async fn find_pages_through_the_account_and_stops_at_older_posts() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let slow = impatient(&fake);
    let since = now();
    // The same text posted long ago is not this attempt's post.
    fake.seed_post("Paged", Duration::from_secs(5 * 3600));
    let post = staged(&slow, &images, "Paged").await;
    fake.set_publish_mode(Mode::AcceptThenHang(Duration::from_secs(2)));
    let _ = slow.create(&post, &no_media()).await.unwrap_err();
    fake.set_publish_mode(Mode::Normal);
    tokio::time::sleep(Duration::from_millis(20)).await;
    for i in 0..25 {
        fake.seed_post(&format!("newer {i}"), Duration::ZERO);
    }
    let ours = fake
        .posts()
        .into_iter()
        .find(|p| p.container.is_some())
        .unwrap();

    let t = adapter(&fake).with_list_limits(10, 5);
    let found = t.find(&post, since).await.unwrap().unwrap();
    assert_eq!(found.id.as_deref(), Some(ours.id.as_str()));
    assert_eq!(found.url.as_deref(), Some(fake.permalink(&ours).as_str()));
    assert_eq!(fake.list_reads(), 3);

    // Fewer pages than needed: the container still proves the post exists, without its name.
    let short = adapter(&fake).with_list_limits(10, 2);
    let found = short.find(&post, since).await.unwrap().unwrap();
    assert_eq!((found.id, found.url), (None, None));
}

/// Answers a Graph error that echoes the request's query and form, as a careless proxy might.
struct Echo;

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let message = format!(
            "Invalid request {} {}",
            req.url,
            String::from_utf8_lossy(&req.body)
        );
        ResponseTemplate::new(400).set_body_json(
            json!({"error": {"message": message, "type": "OAuthException", "code": 100}}),
        )
    }
}

#[tokio::test]
async fn the_token_never_appears_in_debug_or_errors() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    let t = adapter(&fake);
    let post = staged(&t, &images, "t").await;
    fake.revoke();
    let mut errors = vec![
        t.create(&post, &no_media()).await.unwrap_err(),
        t.find(&post, now()).await.unwrap_err(),
    ];
    let echo = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(Echo)
        .mount(&echo)
        .await;
    let e = ThreadsAdapter::new(
        postonce::app::http_client().unwrap(),
        &echo.uri(),
        "me",
        Secret::new(TOKEN),
    );
    errors.push(
        e.stage(
            &t.prepare("x", &media_ref(None), "k"),
            "https://a.example/i.png",
        )
        .await
        .unwrap_err(),
    );
    errors.push(e.create(&post, &no_media()).await.unwrap_err());
    errors.push(e.check().await.unwrap_err());
    assert!(
        errors[2].to_string().contains("<THREADS_ACCESS_TOKEN>"),
        "the echo is redacted, not dropped: {}",
        errors[2]
    );
    let shown = format!(
        "{t:?} {e:?} {errors:?} {}",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("ThreadsAdapter"));
}

#[tokio::test]
async fn the_count_takes_the_larger_reading_and_the_fake_agrees() {
    let (fake, images) = (ThreadsFake::start().await, ImageHost::start().await);
    fake.set_fetch_images(false);
    let t = adapter(&fake);
    let (media, url) = (media_ref(None), images.url("/cover.png"));
    // 497 letters and an emoji: 498 characters, 501 with the emoji as its 4 bytes.
    let over = format!("{}😀", "a".repeat(497));
    // 496 letters and an emoji: 497 characters, 500 by bytes: fits both readings.
    let fits = format!("{}😀", "a".repeat(496));
    assert_eq!(text::by_characters(&over), 498);
    assert_eq!(text::by_emoji_bytes(&over), 501);
    assert_eq!(t.text_len(&over), 501, "the larger reading");
    assert!(t.text_len(&over) > t.max_text(), "refused before any call");
    assert_eq!(t.text_len(&fits), 500);
    assert_eq!(t.max_text(), 500);

    for counting in [Counting::Characters, Counting::EmojiBytes] {
        fake.set_counting(counting);
        // What the adapter lets through, either reading of the server takes.
        t.stage(&t.prepare(&fits, &media, "k"), &url).await.unwrap();
        // What the adapter refuses, one reading of the server refuses too.
        let server = t.stage(&t.prepare(&over, &media, "k"), &url).await;
        match counting {
            Counting::Characters => assert!(server.is_ok(), "{server:?}"),
            Counting::EmojiBytes => assert!(
                matches!(&server, Err(PostError::Rejected { message, .. }) if message.contains("500")),
                "{server:?}"
            ),
        }
    }
}

#[tokio::test]
async fn the_dry_run_sends_nothing_and_marks_its_ids() {
    let fake = ThreadsFake::start().await;
    support::env::capture_logs();
    let d = ThreadsAdapter::dry_run(reqwest::Client::new(), &fake.uri(), "");
    assert!(d.is_dry_run());
    assert_eq!(d.max_text(), 500);
    let post = prepared("hello", &media_ref(Some("alt")));
    let staged = d
        .stage(&post, "https://cdn.example.com/c.png")
        .await
        .unwrap();
    assert!(creation_id(&staged).unwrap().starts_with("dryrun-"));
    let c = d.create(&staged, &no_media()).await.unwrap();
    assert!(postonce::networks::is_dry_run_urn(c.id.as_deref().unwrap()));
    assert_eq!(d.find(&staged, now()).await.unwrap(), None);
    assert!(d.check().await.unwrap().contains("dry run"));
    assert_eq!(d.text_len("😀"), 4);
    assert_eq!(d.capabilities(), adapter(&fake).capabilities());
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn capabilities() {
    let fake = ThreadsFake::start().await;
    let t = adapter(&fake);
    let caps = t.capabilities();
    assert_eq!(caps.idempotency, Idempotency::Container);
    assert!(caps.reads_back && caps.fetches_image);
    assert_eq!(caps.text.max, 500);
    assert_eq!(caps.text.counting, CapCounting::CharsEmojiBytes);
    assert_eq!(
        caps.images.formats,
        postonce::image::Formats::of(&[
            postonce::image::Format::Jpeg,
            postonce::image::Format::Png
        ])
    );
    assert!(!t.is_dry_run());
    assert_eq!(t.network(), Network::Threads);
    assert_eq!(Network::parse("threads"), Some(Network::Threads));
    assert_eq!(Network::Threads.min_gap_var(), "POSTONCE_MIN_GAP_S_THREADS");
}

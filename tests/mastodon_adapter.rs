//! The Mastodon adapter against the Mastodon fake (tests/support/mastodon.rs), which checks the
//! bearer token, keeps images "processing" for a while, remembers `Idempotency-Key`s per
//! account for an hour on a clock the test moves, and renders statuses as HTML the way Mastodon
//! does: upload with the processing wait, create and its replays within and past the hour,
//! accept-then-hang settled by the replay, reading back by exact text, the instance's limits,
//! every answer class, the dry run, and the token kept out of `Debug` and errors. Not wired
//! into the pipeline yet.

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use postonce::config::Secret;
use postonce::networks::mastodon::{create_body, MastodonAdapter};
use postonce::networks::{Media, MediaRef, NetworkAdapter, PostError, PreparedPost};
use serde_json::json;
use support::images::png_bytes;
use support::mastodon::{MastodonFake, Mode, Read, TOKEN, USERNAME};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "blog-hello@mastodon";

fn adapter(fake: &MastodonFake) -> MastodonAdapter {
    // The suite's log capture, searched for the test secrets after the run (scripts/test.sh).
    support::env::capture_logs();
    MastodonAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        Secret::new(TOKEN),
    )
}

/// A client that gives up quickly, to see a timeout after sending.
fn impatient(fake: &MastodonFake) -> MastodonAdapter {
    support::env::capture_logs();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    MastodonAdapter::new(http, &fake.uri(), Secret::new(TOKEN))
}

fn media(alt: Option<&str>) -> Media {
    Media {
        bytes: Bytes::from(png_bytes()),
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

/// Upload and prepare: what the pipeline does before it writes the intent.
async fn prepare(m: &MastodonAdapter, text: &str) -> PreparedPost {
    let uploaded = m.upload(&media(Some("A cover"))).await.unwrap();
    m.prepare(text, &uploaded, KEY)
}

#[tokio::test]
async fn upload_waits_while_the_image_is_processing() {
    let fake = MastodonFake::start().await;
    fake.set_processing(Some(2));
    let m = adapter(&fake);
    let uploaded = m.upload(&media(Some("A cover"))).await.unwrap();
    let id = uploaded.0.as_str().unwrap().to_owned();
    let item = fake.media(&id).expect("the fake knows the media id");
    assert_eq!(item.description.as_deref(), Some("A cover"));
    assert_eq!(item.content_type, "image/png");
    assert_eq!(item.bytes, png_bytes().len());
    assert_eq!(item.pending, None, "processed before upload returned");
    // 202, then 206 twice, then 200.
    assert_eq!(fake.upload_requests(), 1);
    assert_eq!(fake.media_polls(), 3);

    let p = m.prepare("With a processed image", &uploaded, KEY);
    let created = m.create(&p, &media(None)).await.unwrap();
    assert_eq!(fake.statuses()[0].media_ids, vec![id]);
    assert!(created.id.is_some());

    // Processed at once: no poll. No alt text: no description.
    fake.set_processing(None);
    let uploaded = m.upload(&media(Some("  "))).await.unwrap();
    let item = fake.media(uploaded.0.as_str().unwrap()).unwrap();
    assert_eq!(item.description, None);
    assert_eq!(fake.media_polls(), 3);
    assert_eq!(fake.bad_tokens(), 0);
}

#[tokio::test]
async fn the_processing_wait_is_bounded_and_the_next_try_resumes_it() {
    let fake = MastodonFake::start().await;
    fake.set_processing(Some(1000));
    let m = adapter(&fake).with_media_wait(Duration::from_millis(700));
    let started = std::time::Instant::now();
    let e = m.upload(&media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::NotReady { message, .. } if message.contains("still being processed")),
        "{e:?}"
    );
    assert!(e.is_transient(), "an upload may be tried again: {e:?}");
    assert!(!e.may_exist(), "{e:?}");
    // The wait ends by itself, before its bound and a poll's round trip.
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
    assert!(fake.media_polls() >= 1);
    assert_eq!(fake.upload_requests(), 1);

    // The next try polls the id it has; it never uploads the image again.
    fake.set_processing(None);
    let polls = fake.media_polls();
    let _ = m.upload(&media(None)).await.unwrap_err();
    assert_eq!(fake.upload_requests(), 1, "a second POST /api/v2/media");
    assert!(fake.media_polls() > polls);
}

/// A slow instance (each image processed 2.5 s after its upload) inside a 1 s budget per call:
/// each try waits inside its budget, and every try after the first resumes the same upload, so
/// the image is uploaded once and is ready on a later try. A try the budget cuts short (the
/// call dropped mid-poll) is resumed the same way.
#[tokio::test]
async fn a_slow_instance_is_waited_for_across_tries_with_one_upload() {
    let fake = MastodonFake::start().await;
    fake.set_processing_time(Some(Duration::from_millis(2500)));
    let budget = Duration::from_millis(1000);
    let m = adapter(&fake).with_budget(budget);
    let started = std::time::Instant::now();
    let mut tries = 0;
    let uploaded = loop {
        tries += 1;
        assert!(tries <= 6, "never processed");
        // The pipeline bounds every call by its budget; the first try is cut shorter still.
        let bound = if tries == 1 { budget / 2 } else { budget };
        match tokio::time::timeout(bound, m.upload(&media(Some("slow")))).await {
            Ok(Ok(uploaded)) => break uploaded,
            Ok(Err(e)) => assert!(matches!(e, PostError::NotReady { .. }), "{e:?}"),
            Err(_) => assert_eq!(tries, 1, "only the first try is cut by its bound"),
        }
    };
    println!(
        "slow instance: ready after {tries} tries in {:?}; uploads {}, polls {}",
        started.elapsed(),
        fake.upload_requests(),
        fake.media_polls()
    );
    assert_eq!(fake.upload_requests(), 1, "one POST /api/v2/media");
    let p = m.prepare("Slowly processed", &uploaded, KEY);
    m.create(&p, &media(Some("slow"))).await.expect("created");
    assert_eq!(fake.statuses_created(), 1);
}

#[tokio::test]
async fn the_fake_refuses_media_still_processing() {
    // What the wait prevents: a create naming an image the server is still processing.
    let fake = MastodonFake::start().await;
    fake.set_processing(Some(3));
    let http = reqwest::Client::new();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(png_bytes())
            .file_name("cover.png")
            .mime_str("image/png")
            .unwrap(),
    );
    let up = http
        .post(format!("{}/api/v2/media", fake.uri()))
        .bearer_auth(TOKEN)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(up.status().as_u16(), 202);
    let v: serde_json::Value = up.json().await.unwrap();
    assert!(v["url"].is_null());
    let id = v["id"].as_str().unwrap().to_owned();
    let m = adapter(&fake);
    let p = m.prepare("Too early", &MediaRef(json!(id)), KEY);
    let e = m.create(&p, &media(None)).await.unwrap_err();
    // Transient (a moment later it is accepted), and nothing was created.
    assert!(
        matches!(&e, PostError::NotReady { message, .. } if message.contains("not finished processing")),
        "{e:?}"
    );
    assert!(e.is_transient() && !e.may_exist(), "{e:?}");
    assert_eq!(fake.statuses_created(), 0);
}

#[tokio::test]
async fn create_sends_the_documented_request_with_its_key() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let uploaded = m.upload(&media(Some("A cover"))).await.unwrap();
    let p = m.prepare("New post https://example.com/p", &uploaded, KEY);
    assert_eq!(
        p.body,
        json!({"status": "New post https://example.com/p", "media_ids": [uploaded.0.clone()], "visibility": "public"})
    );
    let key = p.key.clone().expect("an Idempotency-Key");
    assert_eq!(key.len(), 64);
    // The same request gets the same key; another draft, text or image another one.
    assert_eq!(
        m.prepare("New post https://example.com/p", &uploaded, KEY),
        p
    );
    assert_ne!(
        m.prepare(
            "New post https://example.com/p",
            &uploaded,
            "blog-other@mastodon"
        )
        .key,
        p.key
    );
    assert_ne!(m.prepare("New post!", &uploaded, KEY).key, p.key);

    let created = m.create(&p, &media(None)).await.unwrap();
    let statuses = fake.statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].text, "New post https://example.com/p");
    assert_eq!(statuses[0].visibility, "public");
    assert_eq!(statuses[0].idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(fake.last_idempotency_key(), Some(key));
    assert_eq!(fake.last_create_body(), p.body);
    assert_eq!(created.id.as_deref(), Some(statuses[0].id.as_str()));
    assert_eq!(
        created.url,
        Some(format!("{}/@{USERNAME}/{}", fake.uri(), statuses[0].id))
    );

    let lang = adapter(&fake).with_language("en");
    let p = lang.prepare("Hallo", &uploaded, KEY);
    assert_eq!(p.body["language"], json!("en"));
}

#[tokio::test]
async fn a_replay_within_the_hour_returns_the_same_status_and_creates_nothing() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let p = prepare(&m, "Exactly once on Mastodon").await;
    let first = m.create(&p, &media(None)).await.unwrap();
    let again = m.create(&p, &media(None)).await.unwrap();
    assert_eq!(again, first);
    fake.advance(Duration::from_secs(59 * 60));
    let later = m.create(&p, &media(None)).await.unwrap();
    assert_eq!(later, first);
    assert_eq!(fake.create_requests(), 3);
    assert_eq!(fake.key_replays(), 2);
    assert_eq!(fake.statuses_created(), 1);
    assert_eq!(fake.max_posts_per_text(), 1);
}

#[tokio::test]
async fn past_the_hour_the_key_is_forgotten_and_a_second_status_is_possible() {
    // The fake can duplicate: the key is forgotten after an hour, as on a real server. This is
    // why a reconcile past the hour reads the statuses back instead of replaying.
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let since = now();
    let text = "Posted twice past the hour";
    let p = prepare(&m, text).await;
    let first = m.create(&p, &media(None)).await.unwrap();
    fake.advance(Duration::from_secs(61 * 60));

    // The identical request: the key is forgotten, but its image is attached to the first
    // status now, and Mastodon refuses an attached image (422), so nothing is created.
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 422, message, .. } if message.contains("already attached to another post")),
        "{e:?}"
    );
    assert_eq!(fake.statuses_created(), 1);

    // The same key with a fresh image (a run that uploaded again): a second status.
    let fresh = m.upload(&media(None)).await.unwrap();
    let p2 = PreparedPost {
        body: create_body(text, &fresh, None),
        text: text.into(),
        key: p.key.clone(),
    };
    let second = m.create(&p2, &media(None)).await.unwrap();
    assert_ne!(second.id, first.id);
    assert_eq!(fake.statuses_created(), 2);
    assert_eq!(fake.max_posts_per_text(), 2);
    assert_eq!(fake.key_replays(), 0);
    // The read-back sees it (the newest one).
    assert_eq!(m.find(&p, since).await.unwrap(), Some(second));

    // Within the hour the same would have answered the first status.
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let p = prepare(&m, text).await;
    let first = m.create(&p, &media(None)).await.unwrap();
    let fresh = m.upload(&media(None)).await.unwrap();
    let p2 = PreparedPost {
        body: create_body(text, &fresh, None),
        text: text.into(),
        key: p.key.clone(),
    };
    assert_eq!(m.create(&p2, &media(None)).await.unwrap(), first);
    assert_eq!(fake.statuses_created(), 1);
    assert_eq!(fake.key_replays(), 1);
}

#[tokio::test]
async fn a_remembered_key_answers_the_original_whatever_the_body() {
    // Why the key is derived from the body: the server does not compare bodies.
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let p = prepare(&m, "The original").await;
    let first = m.create(&p, &media(None)).await.unwrap();
    let changed = PreparedPost {
        body: json!({"status": "A changed text", "media_ids": [], "visibility": "public"}),
        text: "A changed text".into(),
        key: p.key.clone(),
    };
    assert_eq!(m.create(&changed, &media(None)).await.unwrap(), first);
    assert_eq!(fake.statuses_created(), 1);
    // Prepared by the adapter, the changed text has its own key and makes its own status.
    let own = prepare(&m, "A changed text").await;
    assert_ne!(own.key, p.key);
    assert_ne!(m.create(&own, &media(None)).await.unwrap(), first);
    assert_eq!(fake.statuses_created(), 2);
}

#[tokio::test]
async fn accept_then_hang_is_in_doubt_and_the_replay_returns_the_original() {
    let fake = MastodonFake::start().await;
    let slow = impatient(&fake);
    let p = prepare(&slow, "Created, answered too late").await;
    fake.set_create_mode(Mode::AcceptThenHang(Duration::from_secs(2)));
    let e = slow.create(&p, &media(None)).await.unwrap_err();
    assert!(
        matches!(e, PostError::InDoubt { .. }) && e.may_exist(),
        "{e:?}"
    );
    assert_eq!(fake.statuses_created(), 1, "created before hanging");

    // The reconcile: the identical request with the stored key.
    fake.set_create_mode(Mode::Normal);
    let m = adapter(&fake);
    let replay = m.create(&p, &media(None)).await.unwrap();
    let original = &fake.statuses()[0];
    assert_eq!(replay.id.as_deref(), Some(original.id.as_str()));
    assert_eq!(fake.statuses_created(), 1);
    assert_eq!(fake.max_posts_per_text(), 1);
    assert_eq!(fake.key_replays(), 1);
}

#[tokio::test]
async fn a_hang_without_creating_is_in_doubt_and_the_replay_creates_once() {
    let fake = MastodonFake::start().await;
    let slow = impatient(&fake);
    let p = prepare(&slow, "Never reached the database").await;
    fake.set_create_mode(Mode::Hang(Duration::from_secs(2)));
    let e = slow.create(&p, &media(None)).await.unwrap_err();
    assert!(e.may_exist(), "{e:?}");
    assert_eq!(fake.statuses_created(), 0);
    fake.set_create_mode(Mode::Normal);
    let m = adapter(&fake);
    let created = m.create(&p, &media(None)).await.unwrap();
    assert!(created.id.is_some());
    assert!(m.create(&p, &media(None)).await.unwrap() == created);
    assert_eq!(fake.statuses_created(), 1);
}

#[tokio::test]
async fn find_locates_a_status_by_its_exact_text() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let since = now();
    let text = "New post: https://example.com/blog/a-rather-long-slug-that-gets-cut?x=1&y=2 & more <3 it's \"quoted\"\nSecond line\n\n\nNew paragraph #rust with @bob@example.org";
    let p = prepare(&m, text).await;
    let created = m.create(&p, &media(None)).await.unwrap();
    fake.seed_status("Something else https://example.com/other", Duration::ZERO);
    // Mastodon renders the status as HTML: the adapter reads it back to the same text.
    let found = m.find(&p, since).await.unwrap();
    assert_eq!(found, Some(created));

    let other = m.prepare(
        "New post: https://example.com/blog/a-rather-long-slug-that-gets-cut?x=2&y=2 & more <3 it's \"quoted\"\nSecond line\n\n\nNew paragraph #rust with @bob@example.org",
        &MediaRef(json!("0")),
        KEY,
    );
    assert_eq!(m.find(&other, since).await.unwrap(), None);
    // verify_credentials once per process.
    assert_eq!(fake.verify_requests(), 1);
    assert_eq!(fake.bad_tokens(), 0);
}

#[tokio::test]
async fn find_pages_with_max_id_within_its_bound() {
    let fake = MastodonFake::start().await;
    let since = now() - 60;
    let m = adapter(&fake).with_find_limits(5, 3);
    let p = prepare(&m, "The one to find").await;
    let target = m.create(&p, &media(None)).await.unwrap();
    for i in 0..12 {
        fake.seed_status(&format!("Newer status {i}"), Duration::ZERO);
    }
    // Newest first: 12 newer statuses, so it is on page 3.
    assert_eq!(m.find(&p, since).await.unwrap(), Some(target));
    assert_eq!(fake.timeline_requests(), 3);

    let short = adapter(&fake).with_find_limits(5, 2);
    assert_eq!(short.find(&p, since).await.unwrap(), None);
    assert_eq!(fake.timeline_requests(), 5);
}

#[tokio::test]
async fn find_stops_at_statuses_older_than_the_attempt() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake).with_find_limits(5, 10);
    fake.seed_status("Same text as long ago", Duration::from_secs(7200));
    for i in 0..30 {
        fake.seed_status(&format!("Old filler {i}"), Duration::from_secs(7000));
    }
    let p = m.prepare("Same text as long ago", &MediaRef(json!("0")), KEY);
    assert_eq!(m.find(&p, now()).await.unwrap(), None);
    assert_eq!(
        fake.timeline_requests(),
        1,
        "stopped at the first older status"
    );
    assert!(m.find(&p, now() - 3 * 3600).await.unwrap().is_some());
}

#[tokio::test]
async fn a_refused_read_is_read_refused() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let p = m.prepare("anything", &MediaRef(json!("0")), KEY);
    fake.set_read_mode(Read::Refused);
    let e = m.find(&p, now()).await.unwrap_err();
    assert!(
        matches!(&e, PostError::ReadRefused { message, .. } if message.contains("read:statuses")),
        "{e:?}"
    );
    // Refused on the timeline itself, with the account already known.
    fake.set_read_mode(Read::Normal);
    assert_eq!(m.find(&p, now()).await.unwrap(), None);
    fake.set_read_mode(Read::Refused);
    let e = m.find(&p, now()).await.unwrap_err();
    assert!(matches!(e, PostError::ReadRefused { .. }), "{e:?}");
    // A rate limit is not a refusal.
    fake.set_read_mode(Read::RateLimited);
    let e = m.find(&p, now()).await.unwrap_err();
    assert!(matches!(e, PostError::RateLimited { .. }), "{e:?}");
}

#[tokio::test]
async fn text_len_counts_urls_as_23_and_the_fake_agrees() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    assert_eq!(m.max_text(), 500, "until the instance is read");
    let url = format!("https://example.com/{}", "p".repeat(200));
    assert_eq!(m.text_len(&format!("Read {url} today")), 5 + 23 + 6);
    assert_eq!(m.text_len("hi @Gargron@mastodon.social"), 3 + 8);
    assert_eq!(m.text_len("👨\u{200D}👩\u{200D}👧 ok"), 4);

    // 476 + 1 + 23 = 500: accepted although the text has 697 characters.
    let full = format!("{} {url}", "a".repeat(476));
    assert_eq!(m.text_len(&full), 500);
    let p = prepare(&m, &full).await;
    m.create(&p, &media(None)).await.unwrap();
    // One more is refused by the server, with its own words.
    let over = format!("{} {url}", "a".repeat(477));
    assert_eq!(m.text_len(&over), 501);
    let p = prepare(&m, &over).await;
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert_eq!(
        e,
        PostError::Rejected {
            network: "Mastodon",
            status: 422,
            message: "Validation failed: Text character limit of 500 exceeded".into()
        }
    );
    assert_eq!(fake.statuses_created(), 1);
}

#[tokio::test]
async fn the_instance_limits_are_read_and_kept() {
    let fake = MastodonFake::start().await;
    fake.set_max_characters(11_000);
    fake.set_image_size_limit(10_000);
    let m = adapter(&fake);
    assert_eq!(m.instance_limits().await.unwrap(), (11_000, 10_000));
    assert_eq!(m.max_text(), 11_000);
    assert_eq!(fake.instance_requests(), 1);
    // The cover image (49 KB) is over this instance's limit: refused before sending.
    let e = m.upload(&media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 0, message, .. } if message.contains("10000")),
        "{e:?}"
    );
    assert_eq!(fake.upload_requests(), 0);

    let configured = adapter(&fake).with_limits(1000, 20_000_000);
    assert_eq!(configured.max_text(), 1000);
    assert_eq!(configured.image_size_limit(), 20_000_000);
    // The server still enforces its own.
    let e = configured.upload(&media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 422, .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn each_answer_maps_to_its_error_class() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let p = prepare(&m, "classified").await;

    fake.set_create_mode(Mode::Status(401));
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::CredentialRefused { message, .. }
            if message.contains("The access token is invalid")),
        "{e:?}"
    );
    for scope in ["write:statuses", "write:media", "read:statuses"] {
        assert!(e.to_string().contains(scope), "{scope}: {e}");
    }

    fake.set_create_mode(Mode::Status(403));
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 403, message, .. } if message.contains("scope")),
        "{e:?}"
    );

    fake.set_create_mode(Mode::Status(422));
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert_eq!(
        e,
        PostError::Rejected {
            network: "Mastodon",
            status: 422,
            message: "Validation failed: Text can't be blank".into()
        }
    );

    fake.set_create_mode(Mode::RateLimited { reset_in: 120 });
    match m.create(&p, &media(None)).await.unwrap_err() {
        PostError::RateLimited {
            retry_after: Some(d),
            message,
            ..
        } => {
            assert!(
                d > Duration::from_secs(100) && d <= Duration::from_secs(120),
                "{d:?}"
            );
            assert!(message.contains("Too many requests"), "{message}");
        }
        e => panic!("{e:?}"),
    }

    for status in [500, 502, 503, 504] {
        fake.set_create_mode(Mode::Status(status));
        let e = m.create(&p, &media(None)).await.unwrap_err();
        assert!(
            matches!(e, PostError::InDoubt { .. }) && e.may_exist(),
            "{status}: {e:?}"
        );
    }
    fake.set_upload_mode(Mode::Status(422));
    let e = m.upload(&media(None)).await.unwrap_err();
    assert!(
        matches!(e, PostError::Rejected { status: 422, .. }),
        "{e:?}"
    );
    assert_eq!(fake.statuses_created(), 0);
    assert_eq!(fake.bad_tokens(), 0);
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let m = MastodonAdapter::new(
        postonce::app::http_client().unwrap(),
        &format!("http://127.0.0.1:{port}"),
        Secret::new(TOKEN),
    );
    let e = m.upload(&media(None)).await.unwrap_err();
    assert!(matches!(e, PostError::NotSent { .. }), "{e:?}");
    let p = m.prepare("t", &MediaRef(json!("1")), KEY);
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert!(
        matches!(e, PostError::NotSent { .. }) && !e.may_exist(),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_wrong_token_is_refused_by_the_fake() {
    let fake = MastodonFake::start().await;
    let m = MastodonAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        Secret::new("not-the-token"),
    );
    let e = m.upload(&media(None)).await.unwrap_err();
    assert!(matches!(e, PostError::CredentialRefused { .. }), "{e:?}");
    let p = m.prepare("t", &MediaRef(json!("1")), KEY);
    let e = m.create(&p, &media(None)).await.unwrap_err();
    assert!(matches!(e, PostError::CredentialRefused { .. }), "{e:?}");
    let e = m.check().await.unwrap_err();
    assert!(
        matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("MASTODON_ACCESS_TOKEN")),
        "{e:?}"
    );
    assert_eq!(fake.bad_tokens(), 3);
    assert_eq!(fake.statuses_created(), 0);
}

#[tokio::test]
async fn check_reads_verify_credentials() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let line = m.check().await.unwrap();
    assert_eq!(line, format!("Mastodon: @{USERNAME}@127.0.0.1"));
    assert_eq!(fake.verify_requests(), 1);
    // The account is known now: find needs no second verify_credentials.
    let p = m.prepare("x", &MediaRef(json!("0")), KEY);
    m.find(&p, now()).await.unwrap();
    assert_eq!(fake.verify_requests(), 1);
}

/// Answers 401 with a body that echoes the request's `Authorization` header, as a careless
/// proxy might.
struct Echo;

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        ResponseTemplate::new(401)
            .set_body_json(json!({"error": format!("The access token is invalid ({auth})")}))
    }
}

#[tokio::test]
async fn the_token_never_appears_in_debug_or_errors() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    fake.set_create_mode(Mode::Status(401));
    fake.set_read_mode(Read::Refused);
    let uploaded = m.upload(&media(Some("alt"))).await.unwrap();
    let p = m.prepare("t", &uploaded, KEY);
    let mut errors = vec![
        m.create(&p, &media(None)).await.unwrap_err(),
        m.find(&p, now()).await.unwrap_err(),
    ];

    let echo = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(Echo)
        .mount(&echo)
        .await;
    let e = MastodonAdapter::new(
        postonce::app::http_client().unwrap(),
        &echo.uri(),
        Secret::new(TOKEN),
    );
    errors.push(e.create(&p, &media(None)).await.unwrap_err());
    errors.push(e.check().await.unwrap_err());
    errors.push(e.upload(&media(None)).await.unwrap_err());
    assert!(
        errors[2].to_string().contains("<MASTODON_ACCESS_TOKEN>"),
        "the echo is redacted, not dropped: {}",
        errors[2]
    );

    let shown = format!(
        "{m:?} {e:?} {errors:?} {}",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("MastodonAdapter"));
}

#[tokio::test]
async fn the_dry_run_sends_nothing_and_marks_its_ids() {
    let fake = MastodonFake::start().await;
    support::env::capture_logs();
    let m = MastodonAdapter::dry_run(reqwest::Client::new(), &fake.uri());
    assert!(m.is_dry_run());
    assert_eq!(m.max_text(), 500);
    let uploaded = m.upload(&media(Some("alt"))).await.unwrap();
    assert!(uploaded.0.as_str().unwrap().starts_with("dryrun-"));
    let p = m.prepare("hello https://example.com/p", &uploaded, KEY);
    assert_eq!(p.key.as_deref().map(str::len), Some(64));
    let c = m.create(&p, &media(None)).await.unwrap();
    assert!(c.id.as_deref().unwrap().starts_with("dryrun-"));
    assert!(postonce::networks::is_dry_run_urn(c.id.as_deref().unwrap()));
    assert_eq!(m.find(&p, now()).await.unwrap(), None);
    assert!(m.check().await.unwrap().contains("dry run"));
    assert_eq!(m.text_len("hello https://example.com/p"), 6 + 23);
    assert_eq!(m.capabilities(), adapter(&fake).capabilities());
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn capabilities() {
    let fake = MastodonFake::start().await;
    let m = adapter(&fake);
    let caps = m.capabilities();
    assert_eq!(caps.idempotency_key(), Some(Duration::from_secs(3600)));
    assert!(caps.reads_back);
    assert!(
        !caps.client_chosen_id() && !caps.duplicate_names_post() && !caps.duplicate_without_id()
    );
    assert!(!m.is_dry_run());
    assert_eq!(m.network(), postonce::networks::Network::Mastodon);
}

//! The Bluesky adapter against the PDS fake (tests/support/bluesky.rs): login and the session
//! kept, refreshed and renewed; the post record with link facets (UTF-8 byte offsets) and the
//! image embed (alt, aspect ratio); replays of the identical record at the stored key (a
//! no-op, also a day later after the blob was collected); `InvalidSwap` for a different
//! record; accept-then-hang settled by a replay; `getRecord`; grapheme counting; the dry run;
//! and secrets kept out of `Debug` and errors. Not wired into the pipeline yet.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use postonce::config::Secret;
use postonce::networks::bluesky::BlueskyAdapter;
use postonce::networks::{Created, Media, MediaRef, NetworkAdapter, PostError, PreparedPost};
use serde_json::{json, Value};
use support::bluesky::{blob_cid, BlueskyFake, Mode, APP_PASSWORD, DID, HANDLE};
use support::images::{gif_bytes, png_bytes};

const DAY: Duration = Duration::from_secs(86_400);

fn adapter(fake: &BlueskyFake) -> BlueskyAdapter {
    // The suite's log capture, searched for the test secrets after the run (scripts/test.sh).
    support::env::capture_logs();
    BlueskyAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        HANDLE,
        Secret::new(APP_PASSWORD),
    )
}

/// A client that gives up quickly, to see a timeout after sending.
fn impatient(fake: &BlueskyFake) -> BlueskyAdapter {
    support::env::capture_logs();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    BlueskyAdapter::new(http, &fake.uri(), HANDLE, Secret::new(APP_PASSWORD))
}

fn media(alt: Option<&str>) -> Media {
    Media {
        bytes: Bytes::from(png_bytes()),
        content_type: "image/png",
        alt: alt.map(str::to_owned),
    }
}

fn no_bytes() -> Media {
    Media {
        bytes: Bytes::new(),
        content_type: "image/png",
        alt: None,
    }
}

/// Upload, prepare, create: what the pipeline will do for one Bluesky target.
async fn post(b: &BlueskyAdapter, text: &str) -> Result<(PreparedPost, Created), PostError> {
    let m = b.upload(&media(Some("A cover"))).await?;
    let p = b.prepare(text, &m, "blog-hello@bluesky");
    let c = b.create(&p, &media(Some("A cover"))).await?;
    Ok((p, c))
}

fn at_uri(rkey: &str) -> String {
    format!("at://{DID}/app.bsky.feed.post/{rkey}")
}

#[tokio::test]
async fn login_then_a_post_with_link_facets_and_an_image_embed() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let text = "Café ☕ — nouvel article : https://example.com/blog/été?x=1. Voir aussi example.org/p 👨\u{200D}👩\u{200D}👧\u{200D}👦";
    let m = b.upload(&media(Some("A cover"))).await.unwrap();
    let cid = blob_cid(&png_bytes());
    assert_eq!(
        m.0,
        json!({
            "blob": {"$type": "blob", "ref": {"$link": cid}, "mimeType": "image/png", "size": png_bytes().len()},
            "alt": "A cover",
            "aspectRatio": {"width": 1200, "height": 627}
        })
    );
    let p = b.prepare(text, &m, "blog-hello@bluesky");
    let rkey = p.key.clone().unwrap();
    assert_eq!(p.body["rkey"], json!(rkey));
    assert_eq!(p.text, text);

    let created = b.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(created.id, Some(at_uri(&rkey)));
    assert_eq!(
        created.url,
        Some(format!("https://bsky.app/profile/{DID}/post/{rkey}"))
    );

    let record = fake.record(&rkey).expect("the record is at the chosen key");
    assert_eq!(record.value, p.body["record"], "the stored record, exactly");
    assert_eq!(record.text(), text);
    // The facets cover the links' bytes in the UTF-8 text (é, ☕, — before them).
    assert_eq!(
        record.faceted(),
        vec![
            (
                Some("https://example.com/blog/été?x=1".to_owned()),
                "https://example.com/blog/été?x=1".to_owned()
            ),
            (
                Some("example.org/p".to_owned()),
                "https://example.org/p".to_owned()
            ),
        ]
    );
    let image = &record.value["embed"]["images"][0];
    assert_eq!(
        record.value["embed"]["$type"],
        json!("app.bsky.embed.images")
    );
    assert_eq!(image["alt"], json!("A cover"));
    assert_eq!(image["aspectRatio"], json!({"width": 1200, "height": 627}));
    assert_eq!(image["image"]["ref"]["$link"], json!(cid));
    let created_at = record.value["createdAt"].as_str().unwrap();
    assert_eq!(created_at.len(), 24, "{created_at}");
    assert!(created_at.ends_with('Z') && created_at.as_bytes()[19] == b'.');

    let sent = fake.last_put_body();
    assert_eq!(sent["repo"], json!(DID));
    assert_eq!(sent["collection"], json!("app.bsky.feed.post"));
    assert!(sent.get("swapRecord").is_some_and(Value::is_null), "{sent}");
    assert_eq!(
        fake.create_session_requests(),
        1,
        "one login for the process"
    );
    assert_eq!(fake.posts_created(), 1);
    // The create right after its upload does not upload again (issue 21).
    assert_eq!(fake.upload_requests(), 1);
    assert!(fake.has_blob(&cid));
}

/// `#tags` get `app.bsky.richtext.facet#tag` facets as the official clients make them: after
/// whitespace or at the start, up to whitespace, trailing punctuation left out, not all
/// digits, at most 64 graphemes; the tag without its `#`, the offsets in UTF-8 bytes.
/// Mentions stay text (handles are not resolved). The same text gives the same record.
#[tokio::test]
async fn tags_get_tag_facets_and_mentions_stay_text() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let long = "x".repeat(65);
    let text = format!(
        "Café ☕ #Rust, #日本語 et #2024 #a1 (#paren) #végé. example.com/p#frag @alice.bsky.social #{long} #last!"
    );
    let (p, _) = post(&b, &text).await.unwrap();
    let record = fake.record(p.key.as_deref().unwrap()).unwrap();
    println!("facets: {}", record.value["facets"]);
    assert_eq!(
        record.tagged(),
        vec![
            (Some("#Rust".to_owned()), "Rust".to_owned()),
            (Some("#日本語".to_owned()), "日本語".to_owned()),
            (Some("#a1".to_owned()), "a1".to_owned()),
            (Some("#végé".to_owned()), "végé".to_owned()),
            (Some("#last".to_owned()), "last".to_owned()),
        ]
    );
    assert_eq!(
        record.faceted(),
        vec![(
            Some("example.com/p#frag".to_owned()),
            "https://example.com/p#frag".to_owned()
        )]
    );
    assert!(
        !record.facet_types().iter().any(|t| t.ends_with("#mention")),
        "{:?}",
        record.facet_types()
    );
    // Deterministic: the same text prepared again carries the same facets.
    let m = b.upload(&media(None)).await.unwrap();
    let again = b.prepare(&text, &m, "k");
    assert_eq!(again.body["record"]["facets"], p.body["record"]["facets"]);
}

/// A first attempt (upload, prepare, create) uploads the image once; a replay of the same
/// record (a later attempt) uploads it again first, as designed.
#[tokio::test]
async fn a_first_attempt_uploads_once_and_a_replay_again() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let (p, first) = post(&b, "Once").await.unwrap();
    println!("first attempt: uploadBlob {}", fake.upload_requests());
    assert_eq!(fake.upload_requests(), 1, "one upload per first attempt");
    let again = b.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(fake.upload_requests(), 2, "the replay uploads again");
    assert_eq!((fake.posts_created(), fake.noop_puts()), (1, 1));
}

/// An image over the PDS's image blob limit (1,000,000 bytes, as the PDS tried enforces) is
/// refused before any call: no login, no upload, no putRecord.
#[tokio::test]
async fn an_image_over_the_blob_limit_is_refused_before_any_call() {
    let fake = BlueskyFake::start().await;
    fake.set_max_image_bytes(1_000_000);
    let b = adapter(&fake);
    let mut big = png_bytes();
    big.resize(1_000_001, 0);
    let big = Media {
        bytes: Bytes::from(big),
        content_type: "image/png",
        alt: None,
    };
    let e = b.upload(&big).await.unwrap_err();
    println!("{e}");
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("1,000,000") && message.contains("1,000,001")),
        "{e:?}"
    );
    assert!(!e.is_transient() && !e.may_exist());
    // A create with those bytes (a replay) is refused the same way.
    let small = b.prepare("t", &MediaRef(Value::Null), "k");
    let mut p = small.clone();
    p.body["record"]["embed"] = json!({"$type": "app.bsky.embed.images", "images": [{"alt": "", "image": {"$type": "blob", "ref": {"$link": "bafkreix"}, "mimeType": "image/png", "size": 1_000_001}}]});
    let e = b.create(&p, &big).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("1,000,000")),
        "{e:?}"
    );
    assert_eq!(fake.requests(), 0, "no request reached the PDS");
    // The dry run refuses it too.
    assert!(
        BlueskyAdapter::dry_run(reqwest::Client::new(), &fake.uri(), None)
            .upload(&big)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_post_without_an_image_and_a_gif_without_alt() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let p = b.prepare("Just text", &MediaRef(Value::Null), "k");
    let c = b.create(&p, &no_bytes()).await.unwrap();
    assert_eq!(c.id, Some(at_uri(p.key.as_deref().unwrap())));
    assert!(fake
        .record(p.key.as_deref().unwrap())
        .unwrap()
        .value
        .get("embed")
        .is_none());

    let gif = Media {
        bytes: Bytes::from(gif_bytes()),
        content_type: "image/gif",
        alt: None,
    };
    let m = b.upload(&gif).await.unwrap();
    assert_eq!(m.0["alt"], json!(""), "alt is required, and may be empty");
    assert_eq!(m.0["aspectRatio"], json!({"width": 1, "height": 1}));
    let p = b.prepare("A gif", &m, "k");
    b.create(&p, &gif).await.unwrap();
    assert_eq!(fake.posts_created(), 2);
    assert_eq!(
        fake.upload_requests(),
        1,
        "no bytes for the text-only post, no upload; the gif once"
    );
}

#[tokio::test]
async fn replaying_the_identical_record_creates_nothing_also_a_day_later() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let (p, first) = post(&b, "Replay me https://example.com/p").await.unwrap();

    let again = b.put_record(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(Some(again.uri.clone()), first.id);
    assert!(!again.wrote, "the identical record is a no-op");

    // A day later: the access token expired long ago (refreshed), the blob is still there
    // (a record references it), the put is a no-op.
    fake.advance(DAY);
    assert_eq!(b.create(&p, &media(Some("A cover"))).await.unwrap(), first);
    // And from a new process.
    let fresh = adapter(&fake);
    let later = fresh.put_record(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(later.created(), first);
    assert_eq!(later.cid, again.cid);

    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.put_requests(), 4);
    assert_eq!(fake.noop_puts(), 3);
    assert_eq!(fake.edits(), 0);
    assert_eq!(fake.max_posts_per_text(), 1);
    assert_eq!(fake.refresh_requests(), 1);
    assert_eq!(fake.create_session_requests(), 2, "one per process");
}

#[tokio::test]
async fn a_collected_blob_is_uploaded_again_before_the_replay() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let m = b.upload(&media(Some("A cover"))).await.unwrap();
    let cid = blob_cid(&png_bytes());
    let p = b.prepare("Written a day later", &m, "k");

    // The first write fails without writing; a day passes and the unreferenced blob is gone.
    fake.set_put_mode(Mode::Status(502));
    let e = b.create(&p, &media(Some("A cover"))).await.unwrap_err();
    assert!(e.may_exist(), "{e:?}");
    assert_eq!(fake.posts_created(), 0);
    fake.set_put_mode(Mode::Normal);
    fake.advance(DAY);
    assert!(!fake.has_blob(&cid), "the unreferenced blob was collected");

    // The fake shows the failure a replay without the bytes meets.
    let e = b.create(&p, &no_bytes()).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 400, message, .. } if message.contains("BlobNotFound") && message.contains(&cid)),
        "{e:?}"
    );
    assert_eq!(fake.last_put_error().as_deref(), Some("BlobNotFound"));

    // With the bytes: uploaded again (same CID), the identical record written, one post.
    let c = b.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(c.id, Some(at_uri(p.key.as_deref().unwrap())));
    assert_eq!(
        fake.record(p.key.as_deref().unwrap()).unwrap().value,
        p.body["record"]
    );
    assert!(fake.has_blob(&cid));
    assert_eq!(fake.posts_created(), 1);

    // Referenced now, it stays.
    fake.advance(DAY);
    assert!(fake.has_blob(&cid));
}

#[tokio::test]
async fn a_different_image_is_refused_before_put_record() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let m = b.upload(&media(None)).await.unwrap();
    let p = b.prepare("t", &m, "k");
    let other = Media {
        bytes: Bytes::from(gif_bytes()),
        content_type: "image/gif",
        alt: None,
    };
    let e = b.create(&p, &other).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 0, message, .. } if message.contains("not the one")),
        "{e:?}"
    );
    assert_eq!(fake.put_requests(), 0);
}

#[tokio::test]
async fn a_different_record_at_the_same_key_is_refused_as_invalid_swap() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let (p, _) = post(&b, "The original").await.unwrap();
    let rkey = p.key.clone().unwrap();

    let mut other = p.clone();
    other.body["record"]["text"] = json!("Something else");
    other.text = "Something else".into();
    let e = b.create(&other, &media(Some("A cover"))).await.unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 400, message, .. } if message.contains("InvalidSwap") && message.contains("different record")),
        "{e:?}"
    );
    assert!(!e.may_exist() && !e.is_transient());

    // The same text with another createdAt is another record too.
    let mut later = p.clone();
    later.body["record"]["createdAt"] = json!("2030-01-01T00:00:00.000Z");
    let e = b.create(&later, &media(Some("A cover"))).await.unwrap_err();
    assert!(
        matches!(e, PostError::Rejected { status: 400, .. }),
        "{e:?}"
    );
    assert_eq!(fake.last_put_error().as_deref(), Some("InvalidSwap"));

    assert_eq!(
        fake.record(&rkey).unwrap().value,
        p.body["record"],
        "nothing overwritten"
    );
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.edits(), 0);

    // getRecord: the post is not at its key (another record is): not found; putRecord is the
    // one that refuses, naming the record's at-uri.
    assert_eq!(b.find(&other, 0).await, Ok(None));
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains(&at_uri(&rkey))),
        "{e:?}"
    );
}

/// The same put sent by hand without `swapRecord`: the fake overwrites (an edit), which is
/// what `"swapRecord": null` prevents.
#[tokio::test]
async fn the_fake_overwrites_a_record_when_swap_record_is_left_out() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let (p, _) = post(&b, "First version").await.unwrap();
    let http = reqwest::Client::new();
    let session: Value = http
        .post(format!(
            "{}/xrpc/com.atproto.server.createSession",
            fake.uri()
        ))
        .json(&json!({"identifier": HANDLE, "password": APP_PASSWORD}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut body = p.body.clone();
    body["repo"] = json!(DID);
    body["record"]["text"] = json!("Second version");
    body.as_object_mut().unwrap().remove("swapRecord");
    let status = http
        .post(format!("{}/xrpc/com.atproto.repo.putRecord", fake.uri()))
        .bearer_auth(session["accessJwt"].as_str().unwrap())
        .json(&body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 200);
    assert_eq!(fake.edits(), 1);
    assert_eq!(
        fake.record(p.key.as_deref().unwrap()).unwrap().text(),
        "Second version"
    );
}

#[tokio::test]
async fn an_expired_session_is_refreshed_mid_run_and_one_post_is_made() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let m = b.upload(&media(Some("A cover"))).await.unwrap();
    let p = b.prepare("Posted after the token expired", &m, "k");
    // The access token lives 120 minutes.
    fake.advance(Duration::from_secs(3 * 3600));
    let c = b.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(c.id, Some(at_uri(p.key.as_deref().unwrap())));
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.create_session_requests(), 1);
    assert_eq!(fake.refresh_requests(), 1);
    assert!(fake.token_refusals() >= 1);

    // Two calls meeting the expired token at once renew it once.
    fake.expire_sessions();
    let (x, y) = tokio::join!(b.check(), b.check());
    x.unwrap();
    y.unwrap();
    assert_eq!(fake.refresh_requests(), 2);

    // The refresh token revoked too: logged in again.
    fake.expire_sessions();
    fake.revoke_refresh_tokens();
    post(&b, "Posted after logging in again").await.unwrap();
    assert_eq!(fake.refresh_requests(), 3);
    assert_eq!(fake.create_session_requests(), 2);
    assert_eq!(fake.posts_created(), 2);
    assert_eq!(fake.max_posts_per_text(), 1);
}

#[tokio::test]
async fn accept_then_hang_is_in_doubt_and_the_replay_answers_the_same_uri() {
    let fake = BlueskyFake::start().await;
    let b = impatient(&fake);
    let m = b.upload(&media(Some("A cover"))).await.unwrap();
    let p = b.prepare("Accepted, then silence", &m, "k");
    fake.set_put_mode(Mode::AcceptThenHang(Duration::from_secs(2)));
    let e = b.create(&p, &media(Some("A cover"))).await.unwrap_err();
    assert!(
        matches!(e, PostError::InDoubt { .. }) && e.may_exist(),
        "{e:?}"
    );
    assert_eq!(fake.posts_created(), 1, "written before the silence");
    fake.set_put_mode(Mode::Normal);

    // Another process, a day later: getRecord finds it, the replay is a no-op.
    fake.advance(DAY);
    let b2 = adapter(&fake);
    let found = b2.find(&p, 0).await.unwrap();
    let c = b2.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(c.id, Some(at_uri(p.key.as_deref().unwrap())));
    assert_eq!(found, Some(c));
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.max_posts_per_text(), 1);

    // Hang without writing: in doubt too, and the replay writes it once.
    let p = b.prepare("Silence, nothing written", &m, "k");
    fake.set_put_mode(Mode::Hang(Duration::from_secs(2)));
    let e = b.create(&p, &media(Some("A cover"))).await.unwrap_err();
    assert!(e.may_exist(), "{e:?}");
    fake.set_put_mode(Mode::Normal);
    assert_eq!(b2.find(&p, 0).await.unwrap(), None);
    b2.create(&p, &media(Some("A cover"))).await.unwrap();
    assert_eq!(fake.posts_created(), 2);
}

#[tokio::test]
async fn get_record_finds_the_post_or_not() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let m = b.upload(&media(None)).await.unwrap();
    let p = b.prepare("Find me", &m, "k");
    assert_eq!(b.find(&p, 0).await.unwrap(), None);
    let c = b.create(&p, &media(None)).await.unwrap();
    assert_eq!(b.find(&p, 0).await.unwrap(), Some(c));
    assert_eq!(fake.get_requests(), 2);

    fake.set_get_mode(Mode::Status(502));
    let e = b.find(&p, 0).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
}

#[tokio::test]
async fn each_answer_maps_to_its_error_class() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let m = b.upload(&media(None)).await.unwrap();

    fake.set_put_mode(Mode::RateLimited { reset_in: 120 });
    match b
        .create(&b.prepare("a", &m, "k"), &media(None))
        .await
        .unwrap_err()
    {
        PostError::RateLimited {
            retry_after: Some(d),
            ..
        } => assert!(d > Duration::from_secs(100) && d <= Duration::from_secs(120)),
        e => panic!("{e:?}"),
    }
    for status in [500, 502, 503, 504] {
        fake.set_put_mode(Mode::Status(status));
        let e = b
            .create(&b.prepare("b", &m, "k"), &media(None))
            .await
            .unwrap_err();
        assert!(matches!(e, PostError::InDoubt { .. }), "{status}: {e:?}");
    }
    fake.set_put_mode(Mode::Normal);

    // 301 graphemes: the PDS's validation refuses it.
    let e = b
        .create(&b.prepare(&"a".repeat(301), &m, "k"), &media(None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PostError::Rejected { status: 400, message, .. } if message.contains("InvalidRequest")),
        "{e:?}"
    );

    // A failed re-upload (a replay: prepared by another process) means putRecord was not
    // sent.
    let puts = fake.put_requests();
    fake.set_upload_mode(Mode::Status(503));
    let replayed = adapter(&fake).prepare("c", &m, "k");
    let e = b.create(&replayed, &media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::NotSent { message, .. } if message.contains("putRecord was not sent")),
        "{e:?}"
    );
    fake.set_upload_mode(Mode::RateLimited { reset_in: 60 });
    let e = b.create(&replayed, &media(None)).await.unwrap_err();
    assert!(matches!(e, PostError::RateLimited { .. }), "{e:?}");
    assert_eq!(fake.put_requests(), puts);
    assert_eq!(fake.posts_created(), 0);
}

#[tokio::test]
async fn a_wrong_app_password_is_refused_and_nothing_is_posted() {
    let fake = BlueskyFake::start().await;
    let b = BlueskyAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        HANDLE,
        Secret::new("not-the-app-password"),
    );
    let e = b.upload(&media(None)).await.unwrap_err();
    assert!(
        matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("BLUESKY_APP_PASSWORD")),
        "{e:?}"
    );
    let e = b.check().await.unwrap_err();
    assert!(matches!(e, PostError::CredentialRefused { .. }), "{e:?}");
    assert_eq!(fake.posts_created(), 0);
    assert_eq!(fake.upload_requests(), 0);
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let b = BlueskyAdapter::new(
        postonce::app::http_client().unwrap(),
        &format!("http://127.0.0.1:{port}"),
        HANDLE,
        Secret::new(APP_PASSWORD),
    );
    let e = b.upload(&media(None)).await.unwrap_err();
    assert!(matches!(e, PostError::NotSent { .. }), "{e:?}");
    let p = b.prepare("t", &MediaRef(Value::Null), "k");
    let e = b.create(&p, &no_bytes()).await.unwrap_err();
    assert!(
        matches!(e, PostError::NotSent { .. }) && !e.may_exist(),
        "{e:?}"
    );
}

#[tokio::test]
async fn graphemes_are_counted_as_bluesky_counts_them() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
    assert_eq!(b.max_text(), 300);
    assert_eq!(b.text_len(family), 1);
    assert_eq!(b.text_len("🇫🇷 cafe\u{301}"), 6);
    // 300 graphemes of 2 chars each: within the limit, and the PDS takes it.
    let accents = "e\u{301}".repeat(300);
    assert_eq!(b.text_len(&accents), 300);
    b.create(
        &b.prepare(&accents, &MediaRef(Value::Null), "k"),
        &no_bytes(),
    )
    .await
    .unwrap();
    // 300 families: 300 graphemes but 7,500 bytes, over the 3,000-byte limit.
    let families = family.repeat(300);
    assert!(b.text_len(&families) > b.max_text());
    let e = b
        .create(
            &b.prepare(&families, &MediaRef(Value::Null), "k"),
            &no_bytes(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, PostError::Rejected { status: 400, .. }),
        "{e:?}"
    );
    assert_eq!(fake.posts_created(), 1);
}

#[tokio::test]
async fn check_names_the_account() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    assert_eq!(
        b.check().await.unwrap(),
        format!("Bluesky: @{HANDLE} ({DID})")
    );
    assert_eq!(fake.create_session_requests(), 1);
    assert_eq!(fake.get_session_requests(), 1);
}

#[tokio::test]
async fn capabilities() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let caps = b.capabilities();
    assert!(caps.client_chosen_id() && caps.reads_back);
    assert!(!caps.duplicate_names_post() && !caps.duplicate_without_id());
    assert_eq!(caps.idempotency_key(), None);
    assert!(!b.is_dry_run());
    assert_eq!(b.network(), postonce::networks::Network::Bluesky);
    // Two posts prepared back to back get different, increasing keys.
    let a = b.prepare("a", &MediaRef(Value::Null), "k").key.unwrap();
    let c = b.prepare("a", &MediaRef(Value::Null), "k").key.unwrap();
    assert!(a < c, "{a} {c}");
}

#[tokio::test]
async fn secrets_never_appear_in_debug_or_errors() {
    let fake = BlueskyFake::start().await;
    let b = adapter(&fake);
    let (p, _) = post(&b, "t").await.unwrap();
    fake.expire_sessions();
    fake.revoke_refresh_tokens();
    fake.set_login_mode(Mode::Status(401));
    let mut errors = vec![b.check().await.unwrap_err()];
    fake.set_login_mode(Mode::Normal);
    let mut other = p.clone();
    other.body["record"]["text"] = json!("other");
    errors.push(b.create(&other, &media(None)).await.unwrap_err());
    let wrong = BlueskyAdapter::new(
        postonce::app::http_client().unwrap(),
        &fake.uri(),
        HANDLE,
        Secret::new("wrong-SECRET3"),
    );
    errors.push(wrong.upload(&media(None)).await.unwrap_err());
    let shown = format!(
        "{b:?} {wrong:?} {errors:?} {}",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let tokens = fake.issued_tokens();
    assert!(tokens.len() >= 4, "{}", tokens.len());
    for secret in tokens
        .iter()
        .map(String::as_str)
        .chain([APP_PASSWORD, "wrong-SECRET3"])
    {
        assert!(!shown.contains(secret), "a secret in {shown}");
    }
    assert!(
        shown.contains("BlueskyAdapter") && shown.contains(DID),
        "{shown}"
    );
}

#[tokio::test]
async fn the_dry_run_sends_nothing_and_marks_its_ids() {
    let fake = BlueskyFake::start().await;
    let b = BlueskyAdapter::dry_run(reqwest::Client::new(), &fake.uri(), Some(HANDLE));
    assert!(b.is_dry_run());
    assert!(b.capabilities().client_chosen_id());
    let m = b.upload(&media(Some("alt"))).await.unwrap();
    // The blob's CID is the bytes' own, as a PDS answers it: the create checks it.
    assert!(m.0["blob"]["ref"]["$link"]
        .as_str()
        .unwrap()
        .starts_with("bafkrei"));
    assert_eq!(m.0["aspectRatio"], json!({"width": 1200, "height": 627}));
    let p = b.prepare("hello https://example.com", &m, "k");
    assert_eq!(p.body["repo"], json!(HANDLE));
    assert_eq!(
        p.body["record"]["facets"][0]["index"],
        json!({"byteStart": 6, "byteEnd": 25})
    );
    let c = b.create(&p, &media(Some("alt"))).await.unwrap();
    let id = c.id.unwrap();
    assert!(id.starts_with("dryrun-"));
    assert!(postonce::networks::is_dry_run_urn(&id));
    assert!(c
        .url
        .unwrap()
        .ends_with(&format!("/post/{}", p.key.as_deref().unwrap())));
    assert_eq!(b.find(&p, 0).await.unwrap(), None);
    assert!(b.check().await.unwrap().contains("dry run"));
    assert_eq!(b.text_len("👨\u{200D}👩\u{200D}👧\u{200D}👦"), 1);
    assert_eq!(fake.requests(), 0);
}

//! The adapter's own checks: the kept request, its nonce, the dry run.

use bytes::Bytes;
use serde_json::Value;

use super::*;

fn cover() -> Media {
    Media {
        bytes: Bytes::from_static(b"\x89PNG fake"),
        content_type: "image/png",
        alt: Some("A cover".into()),
    }
}

#[tokio::test]
async fn a_dry_run_answers_a_marked_message_and_keeps_the_nonce_in_the_request() {
    let a = DiscordAdapter::dry_run(reqwest::Client::new(), DEFAULT_API, Some("1181234567890123456"));
    assert!(a.is_dry_run());
    let media = cover();
    let uploaded = a.upload(&media).await.expect("upload");
    let post = a.prepare("Hello https://example.com/p", &uploaded, "blog-hello@discord");
    let nonce = post.key.clone().expect("a nonce");
    assert_eq!(nonce.len(), wire::NONCE_MAX);
    let payload = &post.body["payload_json"];
    assert_eq!(payload["nonce"], Value::String(nonce.clone()));
    assert_eq!(payload["enforce_nonce"], Value::Bool(true));
    assert_eq!(payload["attachments"][0]["filename"], "cover.png");
    assert_eq!(payload["attachments"][0]["description"], "A cover");
    // A new attempt draws a new nonce; the kept request is what a re-send carries.
    let again = a.prepare("Hello https://example.com/p", &uploaded, "blog-hello@discord");
    assert_ne!(again.key, post.key);
    let created = a.create(&post, &media).await.expect("create");
    assert!(crate::networks::is_dry_run_urn(created.id.as_deref().unwrap_or("")));
    assert!(created
        .url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://discord.com/channels/<guild id>/1181234567890123456/")));
}

#[tokio::test]
async fn another_image_than_the_kept_one_is_not_sent() {
    let a = DiscordAdapter::dry_run(reqwest::Client::new(), DEFAULT_API, None);
    let uploaded = a.upload(&cover()).await.expect("upload");
    let post = a.prepare("Hello", &uploaded, "k@discord");
    let other = Media {
        bytes: Bytes::from_static(b"\x89PNG other"),
        ..cover()
    };
    let e = a.create(&post, &other).await.expect_err("refused");
    assert!(matches!(e, PostError::Rejected { status: 0, .. }), "{e:?}");
}

#[test]
fn text_is_counted_in_utf16_units_up_to_2000() {
    let a = DiscordAdapter::dry_run(reqwest::Client::new(), DEFAULT_API, None);
    assert_eq!(a.text_len("😀a"), 3);
    assert_eq!(a.max_text(), CONTENT_MAX);
    assert_eq!(a.capabilities().idempotency_key(), Some(NONCE_WINDOW));
    assert!(a.capabilities().reads_back && a.capabilities().create_carries_image);
}

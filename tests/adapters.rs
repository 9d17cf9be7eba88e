//! The per-network adapters against their fakes, through the one trait the pipeline will use
//! ([`NetworkAdapter`]): what each network's answers mean for the post.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use postonce::config::Secret;
use postonce::networks::linkedin::rest::LinkedIn;
use postonce::networks::linkedin::target::LinkedInTarget;
use postonce::networks::{Media, NetworkAdapter, PostError};
use support::env::LI_TOKEN;
use support::linkedin::{DuplicateCheck, LinkedInFake, Mode};

fn png() -> Media {
    Media {
        bytes: Bytes::from_static(include_bytes!("../examples/cover.png")),
        content_type: "image/png",
        alt: Some("A gradient".into()),
    }
}

fn linkedin(api: &str) -> LinkedInTarget {
    let http = postonce::app::http_client().expect("client");
    LinkedInTarget::new(Arc::new(LinkedIn::new(
        http,
        api,
        Secret::new(LI_TOKEN),
        "urn:li:person:tester1",
        "202610",
    )))
}

#[tokio::test]
async fn linkedin_through_the_network_trait() {
    let fake = LinkedInFake::start(LI_TOKEN).await;
    fake.set_duplicate_check(DuplicateCheck::INSTANT);
    let target = linkedin(&fake.uri());
    let media = target.upload(&png()).await.expect("upload");
    let post = target.prepare("Hello (world) #rust", &media, "blog-x");
    let created = target.create(&post, &png()).await.expect("created");
    let urn = created.id.clone().expect("an URN");
    assert_eq!(fake.posts_created(), 1);
    assert_eq!(fake.posts()[0].alt.as_deref(), Some("A gradient"));
    assert_eq!(
        created.url.as_deref(),
        Some(format!("https://www.linkedin.com/feed/update/{urn}/").as_str())
    );

    // The identical request again: LinkedIn's duplicate answer names the post.
    match target.create(&post, &png()).await {
        Err(PostError::AlreadyExists { existing, .. }) => assert_eq!(existing.id, Some(urn)),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(fake.posts_created(), 1);

    // A 5xx on create may have posted: in doubt.
    fake.set_create_mode(Mode::Status(503));
    let other = target.prepare("Another text", &media, "blog-y");
    let e = target.create(&other, &png()).await.expect_err("503");
    assert!(e.may_exist(), "{e:?}");
    fake.set_create_mode(Mode::Normal);

    // A refusal is neither in doubt nor transient.
    fake.set_create_mode(Mode::Status(401));
    let e = target.create(&other, &png()).await.expect_err("401");
    assert!(
        matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("postonce auth linkedin")),
        "{e:?}"
    );
    fake.set_create_mode(Mode::Normal);

    // Reading back is not allowed on LinkedIn.
    assert!(matches!(
        target.find(&post, 0).await,
        Err(PostError::ReadRefused { .. })
    ));
}

#[tokio::test]
async fn linkedin_unreachable_is_not_sent() {
    let port = support::services::free_port();
    let target = linkedin(&format!("http://127.0.0.1:{port}"));
    let e = tokio::time::timeout(Duration::from_secs(10), target.upload(&png()))
        .await
        .expect("answers")
        .expect_err("nothing listens");
    assert!(matches!(e, PostError::NotSent { .. }), "{e:?}");
    assert!(e.is_transient() && !e.may_exist());
}

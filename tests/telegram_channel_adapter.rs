//! The Telegram channel adapter against the Bot API fake (tests/support/tg_channel.rs): one
//! sendPhoto posts one message with the image and the escaped caption; every documented answer
//! maps to its PostError; a send that is accepted and then hangs is in
//! doubt while the message exists; the URL shapes; the caption limit; and the token never
//! leaves in an error, a `Debug` output or a log line.

use crate::support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use postonce::config::Secret;
use postonce::networks::capabilities::Idempotency;
use postonce::networks::telegram_channel::{is_dry_run_id, TelegramChannel, CAPTION_MAX};
use postonce::networks::{Media, NetworkAdapter, PostError};
use support::images::png_bytes;
use support::tg_channel::{ChannelMode, TgChannelFake, CHANNEL_ID};

const TOKEN: &str = "7000000001:AAH-secret_TOKEN-SECRET9-do-not-leak";
const BUDGET: Duration = Duration::from_millis(400);

fn adapter_for(api: &str, token: &str, channel: &str) -> TelegramChannel {
    // The suite's log capture, searched for the test secrets after the run (scripts/test.sh).
    support::env::capture_logs();
    let http = postonce::app::http_client().expect("http client");
    TelegramChannel::new(http, api, Secret::new(token), channel, BUDGET).expect("channel id")
}

fn adapter(fake: &TgChannelFake) -> TelegramChannel {
    adapter_for(&fake.uri(), TOKEN, &fake.channel_id())
}

fn cover() -> Media {
    Media {
        bytes: Bytes::from(png_bytes()),
        content_type: "image/png",
        alt: Some("a cover".into()),
    }
}

/// upload, prepare and create, as the pipeline will call them.
async fn post(
    a: &dyn NetworkAdapter,
    text: &str,
) -> Result<postonce::networks::Created, PostError> {
    let media = cover();
    let r = a.upload(&media).await?;
    let prepared = a.prepare(text, &r, "unused-key");
    a.create(&prepared, &media).await
}

fn assert_no_token(text: &str) {
    assert!(!text.contains(TOKEN), "the token leaked: {text}");
    assert!(
        !text.contains("AAH-secret"),
        "part of the token leaked: {text}"
    );
}

/// Captures what the adapter logs while `f` runs (current-thread runtime: one thread).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn start(&self) -> tracing::subscriber::DefaultGuard {
        let me = self.clone();
        let sub = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
            .with_writer(move || me.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(sub)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn one_send_photo_posts_one_message_with_the_image_and_the_escaped_caption() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    let text = "New post: a < b && c > d <b>not bold</b> &amp; https://example.com/p?x=1&y=2";

    let created = post(&a, text).await.expect("posted");

    assert_eq!(fake.send_photo_requests(), 1);
    assert_eq!(fake.messages_posted(), 1);
    let m = &fake.messages()[0];
    assert_eq!(
        m.caption, text,
        "readers see the draft's text, markup characters and all"
    );
    assert_eq!(m.parse_mode.as_deref(), Some("HTML"));
    assert_eq!(m.chat_id, "@postonce_chan");
    assert_eq!(
        m.photo,
        png_bytes(),
        "the photo part carries the image bytes"
    );
    assert_eq!(m.photo_content_type, "image/png");
    assert_eq!(m.photo_file_name, "cover.png");
    assert_eq!(
        created.id.as_deref(),
        Some(m.message_id.to_string().as_str())
    );
    assert_eq!(
        created.url,
        Some(format!("https://t.me/postonce_chan/{}", m.message_id))
    );
}

#[tokio::test]
async fn a_private_channel_gets_a_members_only_url() {
    let fake = TgChannelFake::private(TOKEN).await;
    assert_eq!(fake.channel_id(), CHANNEL_ID.to_string());
    let created = post(&adapter(&fake), "hello").await.expect("posted");
    let id = fake.messages()[0].message_id;
    assert_eq!(created.url, Some(format!("https://t.me/c/1234567890/{id}")));
}

#[tokio::test]
async fn a_public_channel_named_by_its_numeric_id_still_gets_the_public_url() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter_for(&fake.uri(), TOKEN, &CHANNEL_ID.to_string());
    let created = post(&a, "hello").await.expect("posted");
    let id = fake.messages()[0].message_id;
    assert_eq!(
        created.url,
        Some(format!("https://t.me/postonce_chan/{id}"))
    );
}

fn rejected(e: &PostError, status: u16, words: &str) -> bool {
    match e {
        // A refused bot token is the credential's problem (issue 32, step 5).
        PostError::CredentialRefused { message, .. } => status == 401 && message.contains(words),
        PostError::Rejected {
            status: s, message, ..
        } => *s == status && message.contains(words),
        _ => false,
    }
}

#[tokio::test]
async fn a_wrong_token_is_rejected_and_names_botfather() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter_for(
        &fake.uri(),
        "7000000001:AAH-an-old-token",
        &fake.channel_id(),
    );
    let e = post(&a, "hello").await.expect_err("refused");
    assert!(rejected(&e, 401, "@BotFather"), "{e}");
    assert!(e.to_string().contains("TELEGRAM_BOT_TOKEN"), "{e}");
    assert!(!e.may_exist() && !e.is_transient());
    assert_eq!(fake.messages_posted(), 0);
}

#[tokio::test]
async fn each_refusal_maps_to_rejected_naming_the_fix() {
    let cases = [
        (
            ChannelMode::ChatNotFound,
            400,
            "TELEGRAM_CHANNEL_ID is @postonce_chan",
        ),
        (
            ChannelMode::NotAdmin,
            400,
            "administrator of the channel @postonce_chan",
        ),
        (ChannelMode::NotEnoughRights, 400, "right to post messages"),
        (ChannelMode::NotMember, 403, "administrator of the channel"),
        (ChannelMode::CaptionTooLong, 400, "at most 1024 characters"),
        (
            ChannelMode::MediaCaptionTooLong,
            400,
            "at most 1024 characters",
        ),
    ];
    for (mode, status, words) in cases {
        let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
        fake.set_mode(mode);
        let e = post(&adapter(&fake), "hello").await.expect_err("refused");
        assert!(rejected(&e, status, words), "{mode:?}: {e}");
        assert!(!e.may_exist(), "{mode:?}");
        assert_eq!(fake.send_photo_requests(), 1, "{mode:?}");
        assert_eq!(fake.messages_posted(), 0, "{mode:?}");
    }
}

#[tokio::test]
async fn a_chat_id_telegram_does_not_know_is_chat_not_found() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter_for(&fake.uri(), TOKEN, "@some_other_chan");
    let e = post(&a, "hello").await.expect_err("refused");
    assert!(
        rejected(&e, 400, "TELEGRAM_CHANNEL_ID is @some_other_chan"),
        "{e}"
    );
}

#[tokio::test]
async fn too_many_requests_is_rate_limited_with_retry_after() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    fake.set_mode(ChannelMode::TooManyRequests { retry_after_s: 34 });
    let e = post(&adapter(&fake), "hello").await.expect_err("limited");
    assert!(
        matches!(&e, PostError::RateLimited { retry_after: Some(d), .. } if *d == Duration::from_secs(34)),
        "{e}"
    );
    assert!(!e.may_exist());
    assert_eq!(fake.messages_posted(), 0);
}

#[tokio::test]
async fn server_errors_and_gateway_pages_are_in_doubt() {
    for mode in [ChannelMode::ServerError, ChannelMode::BadGateway] {
        let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
        fake.set_mode(mode);
        let e = post(&adapter(&fake), "hello")
            .await
            .expect_err("no clear answer");
        assert!(matches!(e, PostError::InDoubt { .. }), "{mode:?}: {e}");
        assert!(e.may_exist());
        assert_eq!(fake.send_photo_requests(), 1);
    }
}

#[tokio::test]
async fn accepted_then_hung_is_in_doubt_while_the_message_exists() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    fake.set_mode(ChannelMode::AcceptThenHang(Duration::from_secs(5)));
    let started = std::time::Instant::now();
    let e = post(&adapter(&fake), "hello").await.expect_err("timed out");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the budget held"
    );
    assert!(
        matches!(&e, PostError::InDoubt { message, .. } if message.contains("400 ms")),
        "{e}"
    );
    assert!(e.may_exist());
    // What makes the pipeline answer `unknown` and never re-send: the post is there.
    assert_eq!(fake.send_photo_requests(), 1);
    assert_eq!(fake.messages_posted(), 1);
}

#[tokio::test]
async fn a_hang_before_posting_is_in_doubt_too_the_client_cannot_tell() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    fake.set_mode(ChannelMode::Hang(Duration::from_secs(5)));
    let e = post(&adapter(&fake), "hello").await.expect_err("timed out");
    assert!(e.may_exist(), "{e}");
    assert_eq!(fake.messages_posted(), 0);
}

#[tokio::test]
async fn a_slow_answer_within_the_budget_is_a_post() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    fake.set_mode(ChannelMode::AcceptThenHang(Duration::from_millis(100)));
    let created = post(&adapter(&fake), "hello").await.expect("posted");
    assert!(created.id.is_some());
    assert_eq!(fake.messages_posted(), 1);
}

fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let a = adapter_for(&closed_port_url(), TOKEN, "@postonce_chan");
    let e = post(&a, "hello").await.expect_err("refused");
    assert!(matches!(e, PostError::NotSent { .. }), "{e}");
    assert!(!e.may_exist() && e.is_transient());
}

#[tokio::test]
async fn the_caption_limit_is_1024_utf16_units_of_the_text_markup_aside() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    assert_eq!(a.max_text(), CAPTION_MAX);

    // 3 characters that escaping makes 13 bytes of markup, 510 emoji of 2 units each, 1 letter.
    let fits = format!("<&>{}a", "😀".repeat(510));
    assert_eq!(a.text_len(&fits), 1024);
    assert!(
        fits.chars().count() < 1024,
        "counting chars would have let more through"
    );
    post(&a, &fits).await.expect("1,024 units pass");
    assert_eq!(fake.messages()[0].caption, fits);

    let over = format!("{fits}b");
    assert_eq!(a.text_len(&over), 1025);
    assert!(a.text_len(&over) > a.max_text());
    let e = post(&a, &over).await.expect_err("1,025 units are over");
    assert!(rejected(&e, 400, "at most 1024"), "{e}");
    assert_eq!(fake.messages_posted(), 1);
}

#[tokio::test]
async fn the_fake_has_no_duplicate_check_every_send_photo_posts() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    post(&a, "same").await.expect("first");
    post(&a, "same").await.expect("second");
    assert_eq!(fake.messages_posted(), 2);
    assert_eq!(fake.send_photo_requests(), 2);
}

#[tokio::test]
async fn an_image_other_than_the_prepared_one_is_not_sent() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    let media = cover();
    let prepared = a.prepare("hello", &a.upload(&media).await.expect("ref"), "k");
    let mut other = png_bytes();
    other.push(0);
    let other = Media {
        bytes: Bytes::from(other),
        ..media
    };
    let e = a.create(&prepared, &other).await.expect_err("refused");
    assert!(
        rejected(&e, 0, "not the one this post was prepared with"),
        "{e}"
    );
    assert_eq!(fake.total_requests().await, 0);
}

#[tokio::test]
async fn the_prepared_request_keeps_the_bytes_out() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    let r = a.upload(&cover()).await.expect("ref");
    let prepared = a.prepare("a < b", &r, "k");
    let stored = serde_json::to_string(&prepared).expect("serializes");
    assert!(stored.len() < 500, "{stored}");
    assert_eq!(prepared.body["caption"], "a &lt; b");
    assert_eq!(prepared.body["parse_mode"], "HTML");
    assert_eq!(prepared.body["chat_id"], "@postonce_chan");
    assert_eq!(prepared.body["photo"]["size"], png_bytes().len());
    assert_eq!(
        fake.total_requests().await,
        0,
        "upload and prepare send nothing"
    );
}

#[tokio::test]
async fn no_read_back_and_no_capabilities() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let a = adapter(&fake);
    // "Can't" for exactly-once; its text and image limits are described all the same.
    let caps = a.capabilities();
    assert_eq!(caps.idempotency, Idempotency::None);
    assert!(!caps.reads_back && !caps.duplicate_without_id() && caps.idempotency_key().is_none());
    assert!(!a.is_dry_run());
    let prepared = a.prepare("x", &a.upload(&cover()).await.expect("ref"), "k");
    let e = a.find(&prepared, 0).await.expect_err("cannot read");
    assert!(
        matches!(&e, PostError::ReadRefused { message, .. } if message.contains("no Bot API method")),
        "{e}"
    );
    assert_eq!(fake.total_requests().await, 0);
}

#[tokio::test]
async fn check_reads_get_me_and_get_chat() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let ok = adapter(&fake).check().await.expect("check");
    assert!(
        ok.contains("@postonce_test_bot") && ok.contains("@postonce_chan"),
        "{ok}"
    );
    assert_eq!(fake.methods(), ["getMe", "getChat"]);
    assert_eq!(fake.send_photo_requests(), 0);

    let wrong = adapter_for(
        &fake.uri(),
        "7000000001:AAH-an-old-token",
        &fake.channel_id(),
    );
    let e = wrong.check().await.expect_err("bad token");
    assert!(rejected(&e, 401, "@BotFather"), "{e}");

    let elsewhere = adapter_for(&fake.uri(), TOKEN, "@not_our_chan");
    let e = elsewhere.check().await.expect_err("unknown chat");
    assert!(
        rejected(&e, 400, "TELEGRAM_CHANNEL_ID is @not_our_chan"),
        "{e}"
    );
}

#[tokio::test]
async fn the_token_never_appears_in_errors_debug_or_logs() {
    let logs = Logs::default();
    let _guard = logs.start();
    let mut seen = vec![];

    // A connect error: reqwest's own message names the URL, token and all.
    let a = adapter_for(&closed_port_url(), TOKEN, "@postonce_chan");
    seen.push(a.check().await.expect_err("refused"));
    seen.push(post(&a, "hello").await.expect_err("refused"));
    assert!(
        seen.iter().all(|e| matches!(e, PostError::NotSent { .. })),
        "{seen:?}"
    );

    // A gateway page that echoes the request path.
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    fake.set_mode(ChannelMode::BadGateway);
    let e = post(&adapter(&fake), "hello").await.expect_err("502");
    assert!(
        matches!(&e, PostError::InDoubt { message, .. } if message.contains("<TELEGRAM_BOT_TOKEN>/sendPhoto")),
        "{e}"
    );
    seen.push(e);

    // A timeout after sending.
    fake.set_mode(ChannelMode::AcceptThenHang(Duration::from_secs(5)));
    seen.push(post(&adapter(&fake), "hello").await.expect_err("timeout"));

    for e in &seen {
        assert_no_token(&e.to_string());
        assert_no_token(&format!("{e:?}"));
    }
    assert_no_token(&format!("{:?}", adapter(&fake)));
    let logged = logs.text();
    assert!(
        logged.contains("sendPhoto failed"),
        "the failures were logged: {logged}"
    );
    assert_no_token(&logged);
}

#[tokio::test]
async fn the_dry_run_sends_nothing_and_logs_the_exact_request_without_the_token() {
    let fake = TgChannelFake::public(TOKEN, "postonce_chan").await;
    let logs = Logs::default();
    let guard = logs.start();
    let a = TelegramChannel::dry_run(reqwest::Client::new(), &fake.uri(), None);
    assert!(a.is_dry_run());
    let created = post(&a, "a < b").await.expect("dry run");
    drop(guard);

    assert_eq!(fake.total_requests().await, 0);
    let id = created.id.expect("an id");
    assert!(is_dry_run_id(&id), "{id}");
    assert!(created.url.is_some_and(|u| u.contains("dryrun-")));
    let logged = logs.text();
    for part in [
        "would send POST",
        "/bot<TELEGRAM_BOT_TOKEN>/sendPhoto",
        "chat_id=@DRY_RUN_CHANNEL",
        "cover.png, image/png",
        "caption=\"a &lt; b\"",
        "parse_mode=HTML",
    ] {
        assert!(logged.contains(part), "{part:?} missing from: {logged}");
    }
    assert!(a.check().await.expect("check").contains("dry run"));
}

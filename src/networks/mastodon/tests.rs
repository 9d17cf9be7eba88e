use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::json;

use super::wire::prepared;
use super::*;

#[test]
fn counts_urls_as_23_and_mentions_by_username() {
    let cases: &[(&str, usize)] = &[
        ("hello", 5),
        ("", 0),
        (
            "Read https://example.com/a/very/long/path?x=1 today",
            5 + 23 + 6,
        ),
        ("see https://example.com/p.", 4 + 23 + 1),
        ("(https://example.com/p)", 25),
        ("http://localhost:3000/x", 23),
        ("example.com", 11),
        ("hi @Gargron@mastodon.social!", 3 + 8 + 1),
        ("hi @alice", 9),
        ("me@example.com", 14),
        ("👨\u{200D}👩\u{200D}👧\u{200D}👦", 1),
        ("🇫🇷 e\u{301}", 3),
        ("日本語", 3),
    ];
    for (text, want) in cases {
        assert_eq!(status_len(text, 23), *want, "{text:?}");
    }
    assert_eq!(status_len("https://example.com/x", 30), 30);
}

#[test]
fn html_content_back_to_text() {
    let html = r#"<p>New post: <a href="https://example.com/blog/hello-world-a-long-slug?x=1" target="_blank" rel="nofollow noopener" translate="no"><span class="invisible">https://</span><span class="ellipsis">example.com/blog/hello-world-a</span><span class="invisible">-long-slug?x=1</span></a> &amp; more &lt;3 it&#39;s &quot;q&quot;<br />line two</p><p>para <a href="https://mastodon.social/tags/rust" class="mention hashtag" rel="tag">#<span>rust</span></a> <span class="h-card" translate="no"><a href="https://example.org/@bob" class="u-url mention">@<span>bob</span></a></span></p>"#;
    assert_eq!(
        plain_text(html),
        "New post: https://example.com/blog/hello-world-a-long-slug?x=1 & more <3 it's \"q\"\nline two\n\npara #rust @bob"
    );
    assert_eq!(
        comparable(&plain_text(html)),
        comparable("New post: https://example.com/blog/hello-world-a-long-slug?x=1 & more <3 it's \"q\"\r\nline two\n\n\n\npara #rust @bob@example.org  ")
    );
    assert_eq!(
        plain_text("a &unknown; b &#x1F600; &#65;"),
        "a &unknown; b 😀 A"
    );
}

#[test]
fn times_and_links() {
    assert_eq!(
        parse_time_ms("2026-12-03T10:15:00.000000Z"),
        Some(1_796_292_900_000)
    );
    assert_eq!(
        parse_time_ms("2026-12-03T11:15:00.250+01:00"),
        Some(1_796_292_900_250)
    );
    assert_eq!(parse_time_ms("2026-12-03"), None);
    let mut h = HeaderMap::new();
    h.insert(
        "link",
        HeaderValue::from_static(
            "<https://m.example/api/v1/accounts/1/statuses?limit=40&max_id=103>; rel=\"next\", <https://m.example/api/v1/accounts/1/statuses?limit=40&min_id=140>; rel=\"prev\"",
        ),
    );
    assert_eq!(next_max_id(&h).as_deref(), Some("103"));
}

#[test]
fn classifies_the_documented_answers() {
    let none = HeaderMap::new();
    let e = classify(
        Op::Create,
        422,
        &none,
        r#"{"error":"Validation failed: Text character limit of 500 exceeded"}"#,
    );
    assert_eq!(
        e,
        PostError::Rejected {
            network: NETWORK,
            status: 422,
            message: "Validation failed: Text character limit of 500 exceeded".into()
        }
    );
    let e = classify(
        Op::Create,
        401,
        &none,
        r#"{"error":"The access token is invalid"}"#,
    );
    assert!(
        matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("write:statuses") && message.contains("write:media") && message.contains("read:statuses")),
        "{e:?}"
    );
    assert!(matches!(
        classify(
            Op::Read,
            403,
            &none,
            r#"{"error":"This action is outside the authorized scopes"}"#
        ),
        PostError::ReadRefused { .. }
    ));
    let mut h = HeaderMap::new();
    let reset = time::OffsetDateTime::now_utc() + time::Duration::seconds(120);
    let reset = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        reset.year(),
        u8::from(reset.month()),
        reset.day(),
        reset.hour(),
        reset.minute(),
        reset.second(),
        reset.microsecond()
    );
    h.insert("x-ratelimit-reset", HeaderValue::from_str(&reset).unwrap());
    match classify(Op::Create, 429, &h, r#"{"error":"Too many requests"}"#) {
        PostError::RateLimited {
            retry_after: Some(d),
            ..
        } => assert!(d > Duration::from_secs(110) && d <= Duration::from_secs(120)),
        other => panic!("{other:?}"),
    }
    let mut h = HeaderMap::new();
    h.insert("retry-after", HeaderValue::from_static("30"));
    assert_eq!(retry_after(&h), Some(Duration::from_secs(30)));
    let e = classify(
        Op::Create,
        502,
        &none,
        "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>",
    );
    assert!(e.may_exist(), "{e:?}");
    assert!(e.to_string().contains("502 Bad Gateway"), "{e}");
}

#[test]
fn the_key_follows_the_exact_request() {
    let m = MediaRef(json!("22348641"));
    let a = prepared("hi", &m, "blog-hello@mastodon", None);
    let again = prepared("hi", &m, "blog-hello@mastodon", None);
    assert_eq!(a, again);
    assert_eq!(a.key.as_deref().map(str::len), Some(64));
    assert_eq!(
        a.body,
        json!({"status": "hi", "media_ids": ["22348641"], "visibility": "public"})
    );
    let changed = [
        prepared("hi!", &m, "blog-hello@mastodon", None),
        prepared(
            "hi",
            &MediaRef(json!("22348642")),
            "blog-hello@mastodon",
            None,
        ),
        prepared("hi", &m, "blog-other@mastodon", None),
        prepared("hi", &m, "blog-hello@mastodon", Some("en")),
    ];
    for c in &changed {
        assert_ne!(c.key, a.key, "{c:?}");
    }
    assert_eq!(changed[3].body["language"], json!("en"));
    assert_eq!(
        canonical_json(&json!({"b": 1, "a": [true, null, "x"]})),
        r#"{"a":[true,null,"x"],"b":1}"#
    );
}

/// Mastodon's configuration, read through the whole configuration as the process reads it.
mod config {
    use crate::config::tests::load;

    #[test]
    fn the_mastodon_budget_must_hold_the_media_wait_inside_the_run() {
        let real = [
            ("MASTODON_URL", "https://mastodon.example"),
            ("MASTODON_ACCESS_TOKEN", "t"),
        ];
        let with = |ms: &str| {
            let mut pairs = real.to_vec();
            pairs.push(("POSTONCE_MASTODON_TIMEOUT_MS", ms));
            load(&pairs)
        };
        assert!(with("10000").is_ok());
        for ms in ["500", "50000"] {
            let err = with(ms).unwrap_err();
            assert_eq!(err.var, "POSTONCE_MASTODON_TIMEOUT_MS", "{err}");
            assert!(err.to_string().contains("45000ms"), "{err}");
        }
        // A dry run sends nothing: its budget is not checked.
        assert!(load(&[("POSTONCE_MASTODON_TIMEOUT_MS", "500")]).is_ok());
    }
}

use reqwest::header::HeaderMap;
use serde_json::json;

use super::wire::{self, classify};
use super::*;

fn err(status: u16, code: i64, subcode: Option<i64>) -> PostError {
    let body = json!({"error": {"message": "m", "type": "OAuthException", "code": code, "error_subcode": subcode, "fbtrace_id": "T"}});
    classify(Op::Check, status, &HeaderMap::new(), &body.to_string())
}

#[test]
fn answers() {
    assert!(matches!(err(400, 506, None), PostError::AlreadyExists { existing, .. } if existing.id.is_none()));
    assert!(matches!(err(400, 100, Some(1_366_051)), PostError::AlreadyExists { .. }));
    assert!(matches!(err(400, 190, Some(460)), PostError::CredentialRefused { .. }));
    assert!(matches!(err(400, 368, Some(1_390_008)), PostError::RateLimited { .. }));
    assert!(matches!(err(500, 2, None), PostError::InDoubt { .. }));
    let PostError::Rejected { message, .. } = err(400, 100, Some(33)) else { panic!() };
    assert!(message.contains("FACEBOOK_PAGE_ID"), "{message}");
}

#[test]
fn the_kept_request_checks_its_photo() {
    let media = Media { bytes: bytes::Bytes::from_static(b"\xff\xd8jpeg"), content_type: "image/jpeg", alt: None };
    let post = wire::prepared("1", "hello", &wire::media_ref(&media).unwrap());
    assert_eq!(wire::unpack(&post, &media).unwrap(), "hello");
    let other = Media { bytes: bytes::Bytes::from_static(b"\xff\xd8other"), ..media };
    assert!(wire::unpack(&post, &other).is_err());
}

#[test]
fn listed_posts_and_created() {
    let v = json!({"data": [{"id": "1_2", "message": "a\r\nb ", "created_time": "2026-12-02T10:15:00+0000"}],
        "paging": {"cursors": {"after": "X"}, "next": "https://…"}});
    let (posts, next) = wire::list_page(&v);
    assert_eq!((posts[0].message.as_str(), next.as_deref()), ("a\nb", Some("X")));
    let c = wire::created(&json!({"id": "9", "post_id": "1_2"}));
    assert_eq!(c.url.as_deref(), Some("https://www.facebook.com/1_2"));
}

/// The Page publishes without a Graph publishing quota: a rate-limited publish says only that
/// (the shared classifier speaks of a quota for the networks that have one).
#[test]
fn a_rate_limited_publish_names_no_quota() {
    let body = json!({"error": {"message": "Application request limit reached", "type": "OAuthException", "code": 4, "fbtrace_id": "T"}});
    let e = classify(Op::Publish, 400, &HeaderMap::new(), &body.to_string());
    let PostError::RateLimited { message, .. } = e else { panic!("{e:?}") };
    assert!(message.starts_with("the rate limit is used up"), "{message}");
    assert!(!message.contains("posts per 24 h"), "{message}");
}

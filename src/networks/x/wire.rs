//! X's wire: the create body, the reading of an answer, X's rate-limit resets, the classifier
//! that turns a non-2xx answer into a [`PostError`] naming the fix, and a read-back post's text
//! as it was sent.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use unicode_normalization::UnicodeNormalization;

use super::NETWORK;
use crate::networks::http::{excerpt, header_u64, unclassified, until_unix, Answer, Op};
use crate::networks::{Created, MediaRef, PostError, PreparedPost};

/// The public URL of a post; needs no username.
pub fn status_url(id: &str) -> String {
    format!("https://x.com/i/web/status/{id}")
}

/// The `POST /2/tweets` body. The media
/// id goes in as the [`MediaRef`] holds it, so a foreign reference is refused by X rather than
/// dropped.
pub fn create_body(text: &str, media: &MediaRef) -> Value {
    json!({"text": text, "media": {"media_ids": [media.0.clone()]}})
}

pub(super) fn prepared(text: &str, media: &MediaRef) -> PreparedPost {
    PreparedPost {
        body: create_body(text, media),
        text: text.to_owned(),
        key: None,
    }
}

/// RFC 3339 UTC seconds (`2026-12-03T10:55:45Z`), X's `start_time` format.
pub(super) fn start_time(unix: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(unix.max(0)).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// A 2xx answer's JSON, or the answer described as a [`PostError`]. X answers every 2xx with a
/// JSON object: an empty body is as unreadable as any other (a read that found nothing must
/// say so, not fall silent).
pub(super) async fn answer(resp: reqwest::Response, op: Op) -> Result<Value, PostError> {
    let a = Answer::read(NETWORK, resp).await?;
    if !a.is_success() {
        return Err(classify(op, a.status, &a.headers, &a.body));
    }
    match a.json(NETWORK)? {
        Value::Null => Err(PostError::InDoubt {
            network: NETWORK,
            message: format!("X answered {} with a body that is not JSON", a.status),
        }),
        v => Ok(v),
    }
}

/// When a 429 ends: `x-rate-limit-reset`, or the 24-hour user limit's reset when that one is
/// used up too (both Unix seconds), counted from now.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let window = header_u64(headers, "x-rate-limit-reset");
    let day = (header_u64(headers, "x-user-limit-24hour-remaining") == Some(0))
        .then(|| header_u64(headers, "x-user-limit-24hour-reset"))
        .flatten();
    window.max(day).map(until_unix)
}

/// Turns a non-2xx answer into a [`PostError`] whose message names the fix.
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let detail = [text("/detail"), text("/title"), text("/errors/0/message")]
        .into_iter()
        .find(|s| !s.is_empty())
        .map_or_else(|| excerpt(body), str::to_owned);
    let usage_capped =
        text("/title") == "UsageCapExceeded" || text("/type").ends_with("/usage-capped");
    let read = op == Op::Read;
    match status {
        401 | 403 if read => PostError::ReadRefused {
            network: NETWORK,
            message: format!(
                "{status} {detail}; these credentials or this API tier may not read the account's posts"
            ),
        },
        429 if read && usage_capped => PostError::ReadRefused {
            network: NETWORK,
            message: format!("{detail}; the app's usage cap for reads is used up"),
        },
        401 => PostError::credential_refused(
            crate::networks::Network::X,
            "X access token",
            status,
            &format!(
                "the OAuth 1.0a credentials were refused ({detail}); re-authorize: regenerate the access token and secret in the developer portal and update X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET (and X_API_KEY / X_API_SECRET if the app's keys were regenerated)"
            ),
        ),
        403 if op == Op::Create && detail.to_ascii_lowercase().contains("duplicate content") => {
            PostError::AlreadyExists {
                network: NETWORK,
                existing: Created {
                    id: None,
                    url: None,
                    cid: None,
                },
            }
        }
        403 => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!(
                "not permitted ({detail}); the app needs Read and Write permission (regenerate the access token after changing it); X also answers this way to an over-long text"
            ),
        },
        429 if usage_capped => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers),
            message: format!("{detail}; the app's usage cap is used up"),
        },
        429 => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers),
            message: detail,
        },
        _ => unclassified(NETWORK, status, detail),
    }
}

/// A post's text as it was sent: t.co links put back to the URLs they stand for (from
/// `entities.urls[].expanded_url`), the link X appends for attached media removed, the
/// HTML entities X escapes (`&amp;`, `&lt;`, `&gt;`) decoded; NFC and trimmed.
pub fn sent_text(tweet: &Value) -> String {
    let mut text = tweet
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let urls = tweet
        .pointer("/entities/urls")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for u in urls {
        let Some(tco) = u
            .get("url")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let is_media = u.get("media_key").is_some()
            || u.get("display_url")
                .and_then(Value::as_str)
                .is_some_and(|d| d.starts_with("pic.x.com") || d.starts_with("pic.twitter.com"));
        let original = if is_media {
            ""
        } else {
            u.get("expanded_url").and_then(Value::as_str).unwrap_or(tco)
        };
        text = text.replace(tco, original);
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    normalized(&text)
}

pub(super) fn normalized(text: &str) -> String {
    text.nfc().collect::<String>().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn classifies_the_documented_answers() {
        let none = HeaderMap::new();
        let dup = r#"{"detail":"You are not allowed to create a Tweet with duplicate content.","type":"about:blank","title":"Forbidden","status":403}"#;
        assert_eq!(
            classify(Op::Create, 403, &none, dup),
            PostError::AlreadyExists {
                network: NETWORK,
                existing: Created {
                    id: None,
                    url: None,
                    cid: None
                }
            }
        );
        let forbidden = r#"{"detail":"You are not permitted to perform this action.","type":"about:blank","title":"Forbidden","status":403}"#;
        assert!(matches!(
            classify(Op::Create, 403, &none, forbidden),
            PostError::Rejected { status: 403, .. }
        ));
        let unauthorized =
            r#"{"title":"Unauthorized","type":"about:blank","status":401,"detail":"Unauthorized"}"#;
        assert!(matches!(
            classify(Op::Create, 401, &none, unauthorized),
            PostError::CredentialRefused { message, .. } if message.contains("re-authorize") && message.contains("postonce auth x")
        ));
        assert!(matches!(
            classify(Op::Read, 401, &none, unauthorized),
            PostError::ReadRefused { .. }
        ));
        let invalid = r#"{"title":"Invalid Request","detail":"One or more parameters to your request was invalid.","type":"https://api.x.com/2/problems/invalid-request"}"#;
        assert!(matches!(
            classify(Op::Create, 400, &none, invalid),
            PostError::Rejected { status: 400, .. }
        ));
        let reset = timestamp_in(120);
        let h = headers(&[
            ("x-rate-limit-limit", "100".into()),
            ("x-rate-limit-remaining", "0".into()),
            ("x-rate-limit-reset", reset.to_string()),
        ]);
        let limited = r#"{"title":"Too Many Requests","detail":"Too Many Requests","type":"about:blank","status":429}"#;
        match classify(Op::Create, 429, &h, limited) {
            PostError::RateLimited {
                retry_after: Some(d),
                ..
            } => assert!(d <= Duration::from_secs(120) && d >= Duration::from_secs(110)),
            other => panic!("{other:?}"),
        }
        let capped = r#"{"title":"UsageCapExceeded","detail":"Usage cap exceeded: Monthly product cap","type":"https://api.twitter.com/2/problems/usage-capped","period":"Monthly","scope":"Product"}"#;
        assert!(matches!(
            classify(Op::Create, 429, &none, capped),
            PostError::RateLimited { .. }
        ));
        assert!(matches!(
            classify(Op::Read, 429, &none, capped),
            PostError::ReadRefused { .. }
        ));
        assert!(matches!(
            classify(Op::Read, 429, &h, limited),
            PostError::RateLimited { .. }
        ));
        assert!(classify(Op::Create, 503, &none, "").may_exist());
        // The 24-hour user limit, when used up, is the later reset.
        let day = timestamp_in(3600);
        let h = headers(&[
            ("x-rate-limit-reset", reset.to_string()),
            ("x-user-limit-24hour-remaining", "0".into()),
            ("x-user-limit-24hour-reset", day.to_string()),
        ]);
        assert!(retry_after(&h).is_some_and(|d| d > Duration::from_secs(3000)));
    }

    fn timestamp_in(s: u64) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + s
    }

    #[test]
    fn sent_text_puts_links_back_and_drops_the_media_link() {
        let tweet = json!({
            "id": "1",
            "text": "New post https://t.co/abc &amp; more https://t.co/pic",
            "entities": {"urls": [
                {"start": 9, "end": 32, "url": "https://t.co/abc", "expanded_url": "https://example.com/p", "display_url": "example.com/p"},
                {"start": 43, "end": 66, "url": "https://t.co/pic", "expanded_url": "https://x.com/u/status/1/photo/1", "display_url": "pic.x.com/pic", "media_key": "3_1"}
            ]}
        });
        assert_eq!(sent_text(&tweet), "New post https://example.com/p & more");
    }

    #[test]
    fn prepare_builds_the_documented_body() {
        let p = prepared("hi", &MediaRef(json!("1880028106020515840")));
        assert_eq!(
            p.body,
            json!({"text": "hi", "media": {"media_ids": ["1880028106020515840"]}})
        );
        assert_eq!(p.key, None);
        assert_eq!(
            status_url("1445880548472328192"),
            "https://x.com/i/web/status/1445880548472328192"
        );
    }
}

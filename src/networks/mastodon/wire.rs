//! Mastodon's wire: the create request and its `Idempotency-Key`, the answers (a status, the
//! account, a page of statuses and its `Link` header), [`classify`] (a non-2xx answer as a
//! [`PostError`] naming the fix), and the instance's limits.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::text::plain_text;
use super::{
    DEFAULT_CHARACTERS_PER_URL, DEFAULT_IMAGE_FORMATS, DEFAULT_IMAGE_MATRIX_LIMIT,
    DEFAULT_IMAGE_SIZE_LIMIT, DEFAULT_MAX_CHARACTERS, NETWORK, SCOPES,
};
use crate::image::Formats;
use crate::networks::http::{self, Answer};
use crate::networks::{Created, MediaRef, PostError, PreparedPost};

// The request.

/// The `POST /api/v1/statuses` body (of [`MastodonAdapter`](super::MastodonAdapter), a dry
/// run's included). The media id goes in as the [`MediaRef`] holds
/// it, so a foreign reference is refused by the server rather than dropped.
pub fn create_body(text: &str, media: &MediaRef, language: Option<&str>) -> Value {
    let mut body = json!({
        "status": text,
        "media_ids": [media.0.clone()],
        "visibility": "public",
    });
    if let Some(lang) = language {
        body["language"] = json!(lang);
    }
    body
}

/// A JSON value written with every object's keys sorted and no spaces, so that one request
/// always gives the same bytes whatever order its map keeps.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// The `Idempotency-Key` of a request: hex SHA-256 of the pipeline's key for this draft and
/// target (`blog-hello@mastodon`) and the exact body. The same request always carries the same
/// key; any change to it (text, image, language) gets a new one, so the server never answers a
/// changed request with a status made from another.
pub fn idempotency_key(idempotency: &str, body: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"postonce/mastodon/v1\n");
    h.update(idempotency.as_bytes());
    h.update(b"\n");
    h.update(canonical_json(body).as_bytes());
    hex::encode(h.finalize())
}

pub(super) fn prepared(
    text: &str,
    media: &MediaRef,
    idempotency: &str,
    language: Option<&str>,
) -> PreparedPost {
    let body = create_body(text, media, language);
    PreparedPost {
        key: Some(idempotency_key(idempotency, &body)),
        body,
        text: text.to_owned(),
    }
}

/// The file name the multipart upload gives the image.
pub(super) fn file_name(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "cover.png",
        "image/gif" => "cover.gif",
        "image/webp" => "cover.webp",
        _ => "cover.jpg",
    }
}

/// A call refused before anything was sent (it would fail the same way again).
pub(super) fn local_refusal(message: String) -> PostError {
    PostError::Rejected {
        network: NETWORK,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

/// The `language` an adapter creates statuses with: none for an empty setting (the server
/// guesses).
pub(super) fn language(setting: &str) -> Option<String> {
    let lang = setting.trim();
    (!lang.is_empty()).then(|| lang.to_owned())
}

// Answers.

/// The account the token belongs to, from `verify_credentials`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: String,
    pub username: String,
    /// The account's profile page (`https://mastodon.social/@Gargron`).
    pub url: Option<String>,
}

/// The id and public URL of a status answer: its `url` (the HTML page), else the account's
/// page + `/` + id (the `url` is nullable).
pub(super) fn created_from(status: &Value) -> Created {
    let id = status.get("id").and_then(Value::as_str).map(str::to_owned);
    let url = status
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            let account = status.pointer("/account/url").and_then(Value::as_str)?;
            Some(format!(
                "{}/{}",
                account.trim_end_matches('/'),
                id.as_deref()?
            ))
        });
    Created { id, url, cid: None }
}

/// ISO 8601 / RFC 3339 (`2026-12-03T10:15:00.000000Z`, `…+01:00`) → Unix milliseconds.
pub fn parse_time_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let month = time::Month::try_from(u8::try_from(n(5..7)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(
        i32::try_from(n(0..4)?).ok()?,
        month,
        u8::try_from(n(8..10)?).ok()?,
    )
    .ok()?;
    let clock = time::Time::from_hms(
        u8::try_from(n(11..13)?).ok()?,
        u8::try_from(n(14..16)?).ok()?,
        u8::try_from(n(17..19)?).ok()?,
    )
    .ok()?;
    let mut rest = &s[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first3: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = first3.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hm = rest[1..].replace(':', "");
            if hm.len() != 4 || !hm.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let h: i64 = hm[..2].parse().ok()?;
            let m: i64 = hm[2..].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let unix = date.with_time(clock).assume_utc().unix_timestamp() - offset_s;
    Some(unix * 1000 + millis)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The `max_id` of a `Link: <…?max_id=…>; rel="next"` header.
pub fn next_max_id(headers: &HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    link.split(',').find_map(|entry| {
        let (target, params) = entry.split_once(';')?;
        let next = params.split(';').any(|p| {
            let p = p.trim().to_ascii_lowercase();
            p == "rel=\"next\"" || p == "rel=next"
        });
        if !next {
            return None;
        }
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let query = target.split_once('?')?.1;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "max_id")
            .map(|(_, v)| v.into_owned())
    })
}

/// Which call an answer belongs to: the same status means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST /api/v2/media` and the `GET /api/v1/media/:id` polls.
    Upload,
    /// `POST /api/v1/statuses`.
    Create,
    /// Reading the account's statuses back (and the `verify_credentials` it needs).
    Read,
    /// `verify_credentials` as the doctor's check.
    Check,
    /// `GET /api/v2/instance`.
    Instance,
}

/// When a 429 ends: `X-RateLimit-Reset` (an ISO 8601 time), else `Retry-After` (seconds),
/// counted from now.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let reset = headers
        .get("x-ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_time_ms);
    if let Some(reset) = reset {
        let wait = u64::try_from(reset.saturating_sub(now_ms())).unwrap_or(0);
        return Some(Duration::from_millis(wait));
    }
    http::retry_after_seconds(headers)
}

/// Turns a non-2xx answer into a [`PostError`] whose message names the fix (Mastodon's
/// errors: every body is `{"error":"…"}`; a proxy's may be an HTML page).
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let error = v
        .get("error")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty());
    let detail = match (error, v.get("error_description").and_then(Value::as_str)) {
        (Some(e), Some(d)) if !d.is_empty() => format!("{e}: {d}"),
        (Some(e), _) => e.to_owned(),
        (None, _) => {
            let text = plain_text(body);
            let snippet: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let snippet: String = snippet.chars().take(200).collect();
            if snippet.is_empty() {
                "no error text".to_owned()
            } else {
                snippet
            }
        }
    };
    let scopes = format!(
        "create an access token (Preferences → Development → New application) with the scopes {SCOPES} and set MASTODON_ACCESS_TOKEN"
    );
    match status {
        401 | 403 if op == Op::Read => PostError::ReadRefused {
            network: NETWORK,
            message: format!(
                "{status} {detail}; reading the account's statuses back needs a token with read:accounts and read:statuses"
            ),
        },
        401 => PostError::credential_refused(
            crate::networks::Network::Mastodon,
            "Mastodon token",
            status,
            &format!(
                "the access token was refused ({detail}); it was revoked or belongs to another instance than MASTODON_URL: {scopes}"
            ),
        ),
        403 => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("not permitted ({detail}); the token lacks a scope: {scopes}"),
        },
        404 if op == Op::Upload => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!(
                "{detail}; the uploaded image is gone, or MASTODON_URL is not the instance's base URL"
            ),
        },
        404 => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; MASTODON_URL must be the instance's base URL (https://mastodon.example)"),
        },
        429 => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers),
            message: detail,
        },
        500..=599 => PostError::InDoubt {
            network: NETWORK,
            message: format!("Mastodon answered {status}: {detail}"),
        },
        // The image is still being processed: nothing was created, a moment later it will be.
        422 if detail.contains("have not finished processing") => PostError::NotReady {
            network: NETWORK,
            message: format!("{detail} (the image is still being processed)"),
        },
        _ => PostError::Rejected {
            network: NETWORK,
            status,
            message: detail,
        },
    }
}

/// A failure below HTTP, as [`http::transport`] describes it, except a request that could not
/// be built: that is refused here, naming `MASTODON_URL` (trying again will not fix it).
pub(super) fn transport(e: reqwest::Error) -> PostError {
    if e.is_builder() {
        return local_refusal(format!(
            "the request could not be built (check MASTODON_URL): {}",
            http::chain(e)
        ));
    }
    http::transport(NETWORK, e)
}

/// A 2xx answer and its JSON, or the answer described by [`classify`].
pub(super) async fn answer(resp: reqwest::Response, op: Op) -> Result<(Answer, Value), PostError> {
    let a = Answer::read(NETWORK, resp).await?;
    if !a.is_success() {
        return Err(classify(op, a.status, &a.headers, &a.body));
    }
    let v = a.json(NETWORK)?;
    Ok((a, v))
}

// The instance's limits.

/// The instance's limits an adapter respects: Mastodon's defaults until they are configured
/// or read from the instance (`GET /api/v2/instance`).
#[derive(Debug)]
pub(super) struct Limits {
    max_characters: AtomicUsize,
    image_size_limit: AtomicUsize,
    per_url: AtomicUsize,
    /// `supported_mime_types` (the image ones), as [`Formats`] bits.
    formats: AtomicU8,
    /// `image_matrix_limit`: the most pixels.
    matrix: AtomicU64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_characters: AtomicUsize::new(DEFAULT_MAX_CHARACTERS),
            image_size_limit: AtomicUsize::new(DEFAULT_IMAGE_SIZE_LIMIT),
            per_url: AtomicUsize::new(DEFAULT_CHARACTERS_PER_URL),
            formats: AtomicU8::new(DEFAULT_IMAGE_FORMATS.bits()),
            matrix: AtomicU64::new(DEFAULT_IMAGE_MATRIX_LIMIT),
        }
    }
}

impl Limits {
    /// The limits as configured (or as read earlier), without asking the instance.
    pub(super) fn set(&self, max_characters: usize, image_size_limit: usize) {
        self.max_characters.store(max_characters, Ordering::Relaxed);
        self.image_size_limit
            .store(image_size_limit, Ordering::Relaxed);
    }

    /// Keeps the limits `GET /api/v2/instance` states (`configuration.statuses.max_characters`,
    /// `configuration.media_attachments.image_size_limit`, `characters_reserved_per_url`); a
    /// limit it does not state keeps its value. Returns `(max_characters, image_size_limit)`.
    pub(super) fn read_instance(&self, v: &Value) -> (usize, usize) {
        let number = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0)
        };
        let store = |p: &str, slot: &AtomicUsize| match number(p) {
            Some(n) => slot.store(n, Ordering::Relaxed),
            None => tracing::warn!(
                network = NETWORK,
                field = p,
                "the instance's configuration does not state this limit; keeping {}",
                slot.load(Ordering::Relaxed)
            ),
        };
        store(
            "/configuration/statuses/max_characters",
            &self.max_characters,
        );
        store(
            "/configuration/media_attachments/image_size_limit",
            &self.image_size_limit,
        );
        store(
            "/configuration/statuses/characters_reserved_per_url",
            &self.per_url,
        );
        if let Some(n) = v
            .pointer("/configuration/media_attachments/image_matrix_limit")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            self.matrix.store(n, Ordering::Relaxed);
        }
        if let Some(mimes) = v
            .pointer("/configuration/media_attachments/supported_mime_types")
            .and_then(Value::as_array)
        {
            let formats = Formats::from_mimes(mimes.iter().filter_map(Value::as_str));
            if formats.is_empty() {
                tracing::warn!(
                    network = NETWORK,
                    "the instance lists no image type postonce sends; keeping {}",
                    self.formats().describe()
                );
            } else {
                self.formats.store(formats.bits(), Ordering::Relaxed);
            }
        }
        (self.max_characters(), self.image_size_limit())
    }

    pub(super) fn max_characters(&self) -> usize {
        self.max_characters.load(Ordering::Relaxed)
    }

    pub(super) fn image_size_limit(&self) -> usize {
        self.image_size_limit.load(Ordering::Relaxed)
    }

    /// The image types the instance takes (`supported_mime_types`).
    pub(super) fn formats(&self) -> Formats {
        Formats::from_bits(self.formats.load(Ordering::Relaxed))
    }

    /// The most pixels an image may have (`image_matrix_limit`).
    pub(super) fn image_matrix_limit(&self) -> u64 {
        self.matrix.load(Ordering::Relaxed)
    }

    pub(super) fn per_url(&self) -> usize {
        self.per_url.load(Ordering::Relaxed)
    }
}

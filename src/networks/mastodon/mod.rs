//! The Mastodon adapter (REST API, a user's access token; wire facts in API-NOTES.md
//! "Mastodon"): image upload with alt text (waiting while the server processes it), create with
//! an `Idempotency-Key`, reading the account's statuses back for an exact text, the instance's
//! own limits, and Mastodon's answers described as [`PostError`]s. Holds no policy: the
//! pipeline decides.
//!
//! What Mastodon offers for exactly-once: after a status is created the server remembers the
//! request's `Idempotency-Key` for one hour per account, and a repeat with that key within the
//! hour answers the **original** status (200) instead of creating one, whatever its body. The
//! key is derived here from the pipeline's per-target key and the exact request body (see
//! [`idempotency_key`]) and stored in [`PreparedPost::key`], so every re-send of the kept
//! request carries it. Past the hour the key is forgotten and a repeat creates a second status:
//! the account's statuses can be read back instead ([`Capabilities::reads_back`]).
//!
//! The access token travels only in the `Authorization` header; it never reaches a `Debug`
//! output, an error message or a log line (every message leaving the adapter is passed through
//! a redaction as well, in case a server echoes it). [`MastodonDryRun`] is the variant without
//! credentials.

pub mod config;

pub use config::DEFINITION;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::header::HeaderMap;
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::Secret;

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "Mastodon";
/// A status's characters until the instance's configuration is read
/// (`configuration.statuses.max_characters`; Mastodon's default).
pub const DEFAULT_MAX_CHARACTERS: usize = 500;
/// An image's bytes until the instance's configuration is read
/// (`configuration.media_attachments.image_size_limit`; the docs' example, 16 MiB).
pub const DEFAULT_IMAGE_SIZE_LIMIT: usize = 16_777_216;
/// What every URL counts (`configuration.statuses.characters_reserved_per_url`).
pub const DEFAULT_CHARACTERS_PER_URL: usize = 23;
/// How long the server remembers an `Idempotency-Key` (per account).
pub const KEY_MEMORY: Duration = Duration::from_secs(3600);
/// The scopes the token needs: upload, create, and read the account and its statuses back.
pub const SCOPES: &str = "write:media write:statuses read:accounts read:statuses";
/// Statuses asked for per page when looking a status up (Mastodon's maximum).
pub const FIND_PAGE_SIZE: u8 = 40;
/// Pages read at most when looking a status up.
pub const FIND_MAX_PAGES: u32 = 5;
/// How long one upload call waits, at most, for the server to finish processing the image,
/// until [`MastodonAdapter::with_budget`] sizes it inside the call's budget.
pub const MEDIA_WAIT: Duration = Duration::from_secs(8);
/// Kept back from the budget for the last poll's round trip, so the wait ends by itself (with
/// [`PostError::NotReady`]) before the budget cuts it.
pub const POLL_ROUND_TRIP: Duration = Duration::from_millis(250);
/// How long an upload still being processed is resumed (polled by its id) instead of uploaded
/// again; the instance removes unattached media after about a day.
pub const RESUME_WITHIN: Duration = Duration::from_secs(3600);
/// The least budget (`POSTONCE_MASTODON_TIMEOUT_MS`) an upload can wait for processing in: the
/// upload, one pause and one poll.
pub const MIN_BUDGET: Duration = Duration::from_millis(1000);
/// The first pause before asking whether the image is processed; it doubles up to
/// [`POLL_MAX`].
pub const POLL_FIRST: Duration = Duration::from_millis(200);
pub const POLL_MAX: Duration = Duration::from_secs(1);
/// Looked-up statuses may be this much older than the attempt (clock skew with the instance).
const CLOCK_SLACK_S: i64 = 600;
/// What marks an id the dry run made up.
pub const DRY_RUN_MARK: &str = "dryrun-";
/// What stands for the token in the dry run's log lines and in redacted messages.
const TOKEN_PLACEHOLDER: &str = "<MASTODON_ACCESS_TOKEN>";

/// The instance's limits as read (or Mastodon's defaults until they are).
fn capabilities(limits: &Limits) -> Capabilities {
    Capabilities {
        idempotency: Idempotency::Key(KEY_MEMORY),
        reads_back: true,
        text: TextLimit {
            max: limits.max_characters(),
            counting: Counting::CharsUrlsFixed,
        },
        images: ImageLimits {
            // The instance's `supported_mime_types` are read with its limits (#23 uses them).
            formats: &["image/jpeg", "image/png", "image/gif", "image/webp"],
            max_bytes: limits.image_size_limit() as u64,
            max_pixels: None,
        },
        links: Links::CountedAs(limits.per_url()),
        ..Capabilities::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The request.

/// The `POST /api/v1/statuses` body (shared by [`MastodonAdapter`] and [`MastodonDryRun`]).
/// The media id goes in as the [`MediaRef`] holds it, so a foreign reference is refused by the
/// server rather than dropped.
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

fn prepared(
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

fn file_name(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "cover.png",
        "image/gif" => "cover.gif",
        "image/webp" => "cover.webp",
        _ => "cover.jpg",
    }
}

fn local_refusal(message: String) -> PostError {
    PostError::Rejected {
        network: NETWORK,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Counting.

/// The length of a status as Mastodon counts it (its `StatusLengthValidator`): grapheme
/// clusters, where every `http://` / `https://` URL counts `per_url` whatever its length and a
/// mention `@user@domain` counts as `@user`. URLs without a scheme count by their letters (the
/// server extracts only URLs with a protocol for this).
pub fn status_len(text: &str, per_url: usize) -> usize {
    let chars: Vec<char> = text.chars().collect();
    let mut countable = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if let Some(end) = url_at(&chars, i) {
            countable.extend(std::iter::repeat_n('\u{1}', per_url));
            i = end;
        } else if let Some((user_end, end)) = mention_at(&chars, i) {
            countable.extend(&chars[i..user_end]);
            i = end;
        } else {
            countable.push(chars[i]);
            i += 1;
        }
    }
    countable.graphemes(true).count()
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The end of an `http(s)://` URL starting at `i`, if one does: a host of at least two
/// labels (or `localhost`), an optional port, and a path up to the next space, less the
/// punctuation that ends a sentence.
fn url_at(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 {
        let p = chars[i - 1];
        if is_word(p) || matches!(p, '@' | '/' | '.' | '-' | '=' | '#') {
            return None;
        }
    }
    let head: String = chars[i..chars.len().min(i + 8)].iter().collect();
    let lower = head.to_ascii_lowercase();
    let scheme = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return None;
    };
    let host_start = i + scheme;
    let mut j = host_start;
    while j < chars.len() && (chars[j].is_alphanumeric() || matches!(chars[j], '-' | '.')) {
        j += 1;
    }
    let host: String = chars[host_start..j].iter().collect();
    let host = host.trim_end_matches('.');
    let labels: Vec<&str> = host.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    let named = labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && tld.chars().count() >= 2
        && tld.chars().all(char::is_alphabetic);
    if !(named || host.eq_ignore_ascii_case("localhost")) {
        return None;
    }
    let host_end = host_start + host.chars().count();
    let mut end = host_end;
    if end < chars.len() && chars[end] == ':' {
        let digits = chars[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            end += 1 + digits;
        }
    }
    if end < chars.len() && matches!(chars[end], '/' | '?' | '#') {
        while end < chars.len() && !chars[end].is_whitespace() {
            end += 1;
        }
        loop {
            let c = chars[end - 1];
            let inside = &chars[host_end..end - 1];
            let unbalanced = match c {
                ')' => !inside.contains(&'('),
                ']' => !inside.contains(&'['),
                _ => false,
            };
            let trailing =
                matches!(c, '.' | ',' | ':' | ';' | '!' | '?' | '\'' | '"') || unbalanced;
            if end - 1 > host_end && trailing {
                end -= 1;
            } else {
                break;
            }
        }
    }
    Some(end)
}

/// A mention `@user` or `@user@domain` starting at `i`: (end of `@user`, end of the mention).
/// Not after a word character, `=` or `/` (an e-mail address, a URL).
fn mention_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if chars[i] != '@' {
        return None;
    }
    if i > 0 && (is_word(chars[i - 1]) || matches!(chars[i - 1], '=' | '/' | '@')) {
        return None;
    }
    let user_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let mut j = i + 1;
    while j < chars.len() && user_ok(chars[j]) {
        j += 1;
    }
    // A username ends with a letter, digit or `_`.
    while j > i + 1 && matches!(chars[j - 1], '.' | '-') {
        j -= 1;
    }
    if j == i + 1 {
        return None;
    }
    let user_end = j;
    if j < chars.len() && chars[j] == '@' {
        let mut k = j + 1;
        while k < chars.len() && (is_word(chars[k]) || matches!(chars[k], '.' | '-')) {
            k += 1;
        }
        while k > j + 1 && !is_word(chars[k - 1]) {
            k -= 1;
        }
        if k > j + 1 {
            return Some((user_end, k));
        }
    }
    Some((user_end, user_end))
}

// ---------------------------------------------------------------------------------------------
// Reading statuses back.

fn decode_entity(entity: &str) -> Option<String> {
    let named = match entity {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some('\u{a0}'),
        _ => None,
    };
    if let Some(c) = named {
        return Some(c.to_string());
    }
    let num = entity.strip_prefix('#')?;
    let code = match num.strip_prefix(['x', 'X']) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => num.parse().ok()?,
    };
    char::from_u32(code).map(String::from)
}

/// A status's HTML `content` as the text it was written from: tags removed (a link's hidden
/// `https://` and its cut-off tail are text, so a URL comes back whole), `<br>` as a line break,
/// a new paragraph as a blank line, and entities (`&amp;`, `&#39;`, numeric) decoded.
pub fn plain_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                // The tag runs to the first `>` outside quotes.
                let mut quote: Option<char> = None;
                let mut end = None;
                for (k, ch) in rest.char_indices().skip(1) {
                    match (quote, ch) {
                        (None, '"' | '\'') => quote = Some(ch),
                        (Some(q), ch) if ch == q => quote = None,
                        (None, '>') => {
                            end = Some(k);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    // Not a tag: a lone `<` (never in Mastodon's output, which escapes it).
                    out.push('<');
                    rest = &rest[1..];
                    continue;
                };
                let tag = rest[1..end].trim().to_ascii_lowercase();
                let name: String = tag
                    .trim_start_matches('/')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                let closing = tag.starts_with('/');
                match (name.as_str(), closing) {
                    ("br", _) => out.push('\n'),
                    ("p", false) if !out.is_empty() => {
                        while out.ends_with('\n') {
                            out.pop();
                        }
                        out.push_str("\n\n");
                    }
                    _ => {}
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let decoded = rest[1..]
                    .find(';')
                    .filter(|&semi| semi <= 10)
                    .and_then(|semi| decode_entity(&rest[1..=semi]).map(|d| (d, semi + 2)));
                match decoded {
                    Some((text, len)) => {
                        out.push_str(&text);
                        rest = &rest[len..];
                    }
                    None => {
                        out.push('&');
                        rest = &rest[1..];
                    }
                }
            }
            c => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// A text in the form both sides are compared in: NFC, line breaks as `\n`, the surrounding
/// space trimmed (the server strips a status's text), blank lines between paragraphs as one
/// (the server renders any run of them as one paragraph break), and mentions `@user@domain`
/// as `@user` (the server shows a mention by its username).
pub fn comparable(text: &str) -> String {
    let text: String = text
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .nfc()
        .collect();
    let text = text.trim();
    let mut collapsed = String::with_capacity(text.len());
    let mut newlines = 0;
    for c in text.chars() {
        if c == '\n' {
            newlines += 1;
            continue;
        }
        if newlines > 0 {
            collapsed.push_str(if newlines == 1 { "\n" } else { "\n\n" });
            newlines = 0;
        }
        collapsed.push(c);
    }
    let chars: Vec<char> = collapsed.chars().collect();
    let mut out = String::with_capacity(collapsed.len());
    let mut i = 0;
    while i < chars.len() {
        if let Some(end) = url_at(&chars, i) {
            out.extend(&chars[i..end]);
            i = end;
        } else if let Some((user_end, end)) = mention_at(&chars, i) {
            out.extend(&chars[i..user_end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The text of a status as it was sent, in [`comparable`] form: its `text` when the server
/// gives it (it does only in some answers), else its HTML `content` made plain.
pub fn status_text(status: &Value) -> String {
    match status.get("text").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => comparable(text),
        _ => comparable(&plain_text(
            status.get("content").and_then(Value::as_str).unwrap_or(""),
        )),
    }
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

// ---------------------------------------------------------------------------------------------
// Answers.

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
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(reset) = get("x-ratelimit-reset").and_then(parse_time_ms) {
        let wait = u64::try_from(reset.saturating_sub(now_ms())).unwrap_or(0);
        return Some(Duration::from_millis(wait));
    }
    get("retry-after")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Turns a non-2xx answer into a [`PostError`] whose message names the fix (API-NOTES.md
/// "Mastodon", Errors: every body is `{"error":"…"}`; a proxy's may be an HTML page).
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
        401 => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!(
                "the access token was refused ({detail}); it was revoked or belongs to another instance than MASTODON_URL: {scopes}"
            ),
        },
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

/// The error and its causes, one line, without the URL.
fn chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut src = std::error::Error::source(&e);
    while let Some(err) = src {
        parts.push(err.to_string());
        src = err.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// A failure below HTTP: nothing sent (connect, DNS, a request that could not be built), or
/// sent with no clear answer (timeout after sending, a broken exchange, an unreadable body).
fn transport(e: reqwest::Error) -> PostError {
    if e.is_builder() {
        return local_refusal(format!(
            "the request could not be built (check MASTODON_URL): {}",
            chain(e)
        ));
    }
    if e.is_connect() {
        return PostError::NotSent {
            network: NETWORK,
            message: chain(e),
        };
    }
    let message = if e.is_timeout() {
        format!("no answer in time ({})", chain(e))
    } else {
        chain(e)
    };
    PostError::InDoubt {
        network: NETWORK,
        message,
    }
}

/// A 2xx answer's status, headers and JSON, or the answer described as a [`PostError`].
async fn answer(resp: reqwest::Response, op: Op) -> Result<(u16, HeaderMap, Value), PostError> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.map_err(transport)?;
    if (200..300).contains(&status) {
        if body.trim().is_empty() {
            return Ok((status, headers, Value::Null));
        }
        return serde_json::from_str(&body)
            .map(|v| (status, headers, v))
            .map_err(|_| PostError::InDoubt {
                network: NETWORK,
                message: format!("Mastodon answered {status} with a body that is not JSON"),
            });
    }
    Err(classify(op, status, &headers, &body))
}

fn redact_text(token: &str, text: String) -> String {
    if token.is_empty() || !text.contains(token) {
        text
    } else {
        text.replace(token, TOKEN_PLACEHOLDER)
    }
}

/// Removes the token from every message of an error.
fn redact(token: &Secret, e: PostError) -> PostError {
    let t = token.expose();
    match e {
        PostError::NotSent { network, message } => PostError::NotSent {
            network,
            message: redact_text(t, message),
        },
        PostError::RateLimited {
            network,
            retry_after,
            message,
        } => PostError::RateLimited {
            network,
            retry_after,
            message: redact_text(t, message),
        },
        PostError::Rejected {
            network,
            status,
            message,
        } => PostError::Rejected {
            network,
            status,
            message: redact_text(t, message),
        },
        PostError::InDoubt { network, message } => PostError::InDoubt {
            network,
            message: redact_text(t, message),
        },
        PostError::ReadRefused { network, message } => PostError::ReadRefused {
            network,
            message: redact_text(t, message),
        },
        PostError::NotReady { network, message } => PostError::NotReady {
            network,
            message: redact_text(t, message),
        },
        e @ PostError::AlreadyExists { .. } => e,
    }
}

// ---------------------------------------------------------------------------------------------
// The adapter.

/// The account the token belongs to, from `verify_credentials`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: String,
    pub username: String,
    /// The account's profile page (`https://mastodon.social/@Gargron`).
    pub url: Option<String>,
}

/// The instance's limits this adapter respects.
#[derive(Debug)]
struct Limits {
    max_characters: AtomicUsize,
    image_size_limit: AtomicUsize,
    per_url: AtomicUsize,
}

impl Limits {
    fn new(max_characters: usize, image_size_limit: usize) -> Self {
        Self {
            max_characters: AtomicUsize::new(max_characters),
            image_size_limit: AtomicUsize::new(image_size_limit),
            per_url: AtomicUsize::new(DEFAULT_CHARACTERS_PER_URL),
        }
    }

    fn max_characters(&self) -> usize {
        self.max_characters.load(Ordering::Relaxed)
    }

    fn image_size_limit(&self) -> usize {
        self.image_size_limit.load(Ordering::Relaxed)
    }

    fn per_url(&self) -> usize {
        self.per_url.load(Ordering::Relaxed)
    }
}

/// Publishes to one Mastodon account through its instance's REST API.
pub struct MastodonAdapter {
    http: reqwest::Client,
    base: String,
    token: Secret,
    language: Option<String>,
    limits: Limits,
    /// The account, read once per process by `verify_credentials`.
    account: OnceCell<Account>,
    page_size: u8,
    max_pages: u32,
    media_wait: Duration,
    /// Uploads the instance answered 202 for and that are still being processed, by the
    /// digest of what was uploaded: a later try of the same upload polls the id it already
    /// has instead of uploading again (a second `POST /api/v2/media` would leave an orphan
    /// and count against 30 uploads per 30 minutes).
    processing: Arc<StdMutex<HashMap<String, Processing>>>,
}

/// An upload still being processed.
#[derive(Debug, Clone)]
struct Processing {
    id: String,
    since: Instant,
    /// A call is polling it now (another call of the same image uploads its own).
    busy: bool,
}

/// Marks a resumable upload free again when its poll ends without an answer (an error, or the
/// call dropped at its budget), unless [`Claimed::done`] removed it.
struct Claimed {
    map: Arc<StdMutex<HashMap<String, Processing>>>,
    digest: String,
    done: bool,
}

impl Claimed {
    fn done(mut self) {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.digest);
        self.done = true;
    }

    fn forget(self) {
        self.done();
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.done {
            if let Some(p) = self
                .map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_mut(&self.digest)
            {
                p.busy = false;
            }
        }
    }
}

/// What identifies an upload: the bytes, their type and the alt text.
fn upload_digest(media: &Media) -> String {
    let mut h = Sha256::new();
    h.update(media.content_type.as_bytes());
    h.update(b"\n");
    h.update(media.alt.as_deref().unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(&media.bytes);
    hex::encode(h.finalize())
}

impl fmt::Debug for MastodonAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MastodonAdapter")
            .field("base", &self.base)
            .field("token", &self.token)
            .field("language", &self.language)
            .field("limits", &self.limits)
            .field("account", &self.account.get())
            .finish_non_exhaustive()
    }
}

impl MastodonAdapter {
    /// `instance_url` is the instance's base (`https://mastodon.social`, `MASTODON_URL`);
    /// `http` the process's shared client ([`crate::app::http_client`]); `token` a user access
    /// token with the scopes [`SCOPES`].
    pub fn new(http: reqwest::Client, instance_url: &str, token: Secret) -> Self {
        Self {
            http,
            base: instance_url.trim().trim_end_matches('/').to_owned(),
            token,
            language: None,
            limits: Limits::new(DEFAULT_MAX_CHARACTERS, DEFAULT_IMAGE_SIZE_LIMIT),
            account: OnceCell::new(),
            page_size: FIND_PAGE_SIZE,
            max_pages: FIND_MAX_PAGES,
            media_wait: MEDIA_WAIT,
            processing: Arc::new(StdMutex::new(HashMap::new())),
        }
    }

    /// Sizes the wait for the image's processing inside one call's budget
    /// (`POSTONCE_MASTODON_TIMEOUT_MS`): an upload call polls until [`POLL_ROUND_TRIP`] before
    /// its budget, then answers [`PostError::NotReady`]; the next try of the same image resumes
    /// polling the id it already has.
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.media_wait = budget.saturating_sub(budget / 10).max(POLL_FIRST);
        self
    }

    /// The instance's limits as configured (or as read earlier), without asking the instance.
    #[must_use]
    pub fn with_limits(self, max_characters: usize, image_size_limit: usize) -> Self {
        self.limits
            .max_characters
            .store(max_characters, Ordering::Relaxed);
        self.limits
            .image_size_limit
            .store(image_size_limit, Ordering::Relaxed);
        self
    }

    /// The `language` (ISO 639) every status is created with; none by default (the server
    /// guesses).
    #[must_use]
    pub fn with_language(mut self, language: &str) -> Self {
        let lang = language.trim();
        self.language = (!lang.is_empty()).then(|| lang.to_owned());
        self
    }

    /// Page size (clamped to Mastodon's 1–40) and page count of [`NetworkAdapter::find`].
    #[must_use]
    pub fn with_find_limits(mut self, page_size: u8, max_pages: u32) -> Self {
        self.page_size = page_size.clamp(1, 40);
        self.max_pages = max_pages.max(1);
        self
    }

    /// How long an upload waits at most for the server to process the image.
    #[must_use]
    pub fn with_media_wait(mut self, wait: Duration) -> Self {
        self.media_wait = wait;
        self
    }

    /// The instance's base URL.
    pub fn instance_url(&self) -> &str {
        &self.base
    }

    /// The image size limit in force (bytes).
    pub fn image_size_limit(&self) -> usize {
        self.limits.image_size_limit()
    }

    /// Reads the instance's limits from `GET /api/v2/instance`
    /// (`configuration.statuses.max_characters`, `configuration.media_attachments.image_size_limit`,
    /// and `characters_reserved_per_url`), keeps them for [`NetworkAdapter::max_text`],
    /// [`NetworkAdapter::text_len`] and the upload's size check, and returns
    /// `(max_characters, image_size_limit)`. A limit the instance does not state keeps its
    /// current value.
    ///
    /// # Errors
    /// The instance could not be read (described as for any call).
    pub async fn instance_limits(&self) -> Result<(usize, usize), PostError> {
        let result = async {
            // Public, but an instance in limited-federation mode wants a token.
            let resp = self
                .get("/api/v2/instance")
                .send()
                .await
                .map_err(transport)?;
            let (_, _, v) = answer(resp, Op::Instance).await?;
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
                &self.limits.max_characters,
            );
            store(
                "/configuration/media_attachments/image_size_limit",
                &self.limits.image_size_limit,
            );
            store(
                "/configuration/statuses/characters_reserved_per_url",
                &self.limits.per_url,
            );
            Ok((self.limits.max_characters(), self.limits.image_size_limit()))
        }
        .await;
        result.map_err(|e| self.clean(e))
    }

    fn clean(&self, e: PostError) -> PostError {
        redact(&self.token, e)
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
    }

    /// `GET /api/v1/accounts/verify_credentials`.
    async fn verify_credentials(&self, op: Op) -> Result<Account, PostError> {
        let resp = self
            .get("/api/v1/accounts/verify_credentials")
            .send()
            .await
            .map_err(transport)?;
        let (_, _, v) = answer(resp, op).await?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match text("id") {
            Some(id) => Ok(Account {
                id,
                username: text("username").unwrap_or_default(),
                url: text("url"),
            }),
            None => Err(PostError::InDoubt {
                network: NETWORK,
                message: "verify_credentials answered without an id".into(),
            }),
        }
    }

    /// The token's account, read the first time it is needed.
    async fn account(&self) -> Result<&Account, PostError> {
        self.account
            .get_or_try_init(|| self.verify_credentials(Op::Read))
            .await
    }

    /// Waits until `GET /api/v1/media/:id` answers 200 (206 while processing), pausing
    /// [`POLL_FIRST`] doubling up to [`POLL_MAX`], until the media wait (counted from
    /// `started`, the call's start) less a poll's round trip.
    async fn wait_processed(&self, id: &str, started: Instant) -> Result<(), PostError> {
        let mut pause = POLL_FIRST;
        let path = format!(
            "/api/v1/media/{}",
            utf8_percent_encode(id, NON_ALPHANUMERIC)
        );
        loop {
            let left = self
                .media_wait
                .saturating_sub(started.elapsed())
                .saturating_sub(POLL_ROUND_TRIP);
            if left.is_zero() {
                return Err(PostError::NotReady {
                    network: NETWORK,
                    message: format!(
                        "the image {id} is still being processed after {} ms of this try; the next try polls it again (it is not uploaded again)",
                        started.elapsed().as_millis()
                    ),
                });
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(POLL_MAX);
            let resp = self.get(&path).send().await.map_err(transport)?;
            let (status, _, _) = answer(resp, Op::Upload).await?;
            match status {
                206 => {}
                _ => return Ok(()),
            }
        }
    }

    /// Takes the upload of this image that is still being processed, if one is free to poll.
    fn claim_processing(&self, digest: &str) -> Option<(String, Claimed)> {
        let mut map = self
            .processing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, p| p.since.elapsed() < RESUME_WITHIN);
        let p = map.get_mut(digest).filter(|p| !p.busy)?;
        p.busy = true;
        let id = p.id.clone();
        Some((
            id,
            Claimed {
                map: self.processing.clone(),
                digest: digest.to_owned(),
                done: false,
            },
        ))
    }

    async fn upload_once(&self, media: &Media) -> Result<MediaRef, PostError> {
        let started = Instant::now();
        let digest = upload_digest(media);
        // A try after one whose wait ran out: poll the id the instance already gave.
        if let Some((id, claimed)) = self.claim_processing(&digest) {
            tracing::info!(network = NETWORK, media_id = %id, "resuming the wait for the image uploaded before");
            match self.wait_processed(&id, started).await {
                Ok(()) => {
                    claimed.done();
                    return Ok(MediaRef(Value::String(id)));
                }
                // Gone (removed by the instance): upload it afresh below.
                Err(PostError::Rejected { status: 404, .. }) => claimed.forget(),
                Err(e) => return Err(e),
            }
        }
        let limit = self.limits.image_size_limit();
        if media.bytes.is_empty() {
            return Err(local_refusal("the cover image is empty".into()));
        }
        if media.bytes.len() > limit {
            return Err(local_refusal(format!(
                "the cover image is {} bytes; this instance takes images of at most {limit} bytes: make it smaller",
                media.bytes.len()
            )));
        }
        let part = Part::stream_with_length(
            reqwest::Body::from(media.bytes.clone()),
            media.bytes.len() as u64,
        )
        .file_name(file_name(media.content_type))
        .mime_str(media.content_type)
        .map_err(|e| {
            local_refusal(format!(
                "the image type {} is not a MIME type ({e})",
                media.content_type
            ))
        })?;
        let mut form = Form::new().part("file", part);
        if let Some(alt) = media.alt.as_deref().filter(|a| !a.trim().is_empty()) {
            form = form.text("description", alt.to_owned());
        }
        let resp = self
            .post("/api/v2/media")
            .multipart(form)
            .send()
            .await
            .map_err(transport)?;
        let (status, _, v) = answer(resp, Op::Upload).await?;
        let Some(id) = v.get("id").and_then(Value::as_str).map(str::to_owned) else {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: format!("the media upload answered {status} without an id"),
            });
        };
        if status == 202 {
            self.processing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    digest.clone(),
                    Processing {
                        id: id.clone(),
                        since: Instant::now(),
                        busy: true,
                    },
                );
            let claimed = Claimed {
                map: self.processing.clone(),
                digest,
                done: false,
            };
            self.wait_processed(&id, started).await?;
            claimed.done();
        }
        Ok(MediaRef(Value::String(id)))
    }

    async fn create_once(&self, post: &PreparedPost) -> Result<Created, PostError> {
        let Some(key) = post.key.as_deref().filter(|k| !k.is_empty()) else {
            return Err(local_refusal(
                "the prepared request carries no Idempotency-Key; prepare the post again".into(),
            ));
        };
        let resp = self
            .post("/api/v1/statuses")
            .header("Idempotency-Key", key)
            .json(&post.body)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(answer(resp, Op::Create).await.err().unwrap_or_else(|| {
                PostError::InDoubt {
                    network: NETWORK,
                    message: format!("Mastodon answered {status}"),
                }
            }));
        }
        // The status exists from here on: an unreadable answer still says so.
        let body = resp.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let created = created_from(&v);
        if created.id.is_none() {
            tracing::warn!(
                network = NETWORK,
                status,
                "Mastodon created the status but its answer carried no id"
            );
        }
        Ok(created)
    }

    async fn find_once(
        &self,
        post: &PreparedPost,
        since: i64,
    ) -> Result<Option<Created>, PostError> {
        let account_id = self.account().await?.id.clone();
        let wanted = comparable(&post.text);
        let cutoff_ms = (since - CLOCK_SLACK_S).saturating_mul(1000);
        let mut max_id: Option<String> = None;
        for _ in 0..self.max_pages {
            let mut path = format!(
                "/api/v1/accounts/{}/statuses?limit={}&exclude_replies=true&exclude_reblogs=true",
                utf8_percent_encode(&account_id, NON_ALPHANUMERIC),
                self.page_size
            );
            if let Some(m) = &max_id {
                path.push_str("&max_id=");
                path.push_str(&utf8_percent_encode(m, NON_ALPHANUMERIC).to_string());
            }
            let resp = self.get(&path).send().await.map_err(transport)?;
            let (_, headers, page) = answer(resp, Op::Read).await?;
            let statuses = page.as_array().map(Vec::as_slice).unwrap_or_default();
            let mut reached_older = false;
            for s in statuses {
                if s.get("reblog").is_some_and(|r| !r.is_null()) {
                    continue;
                }
                let created = s
                    .get("created_at")
                    .and_then(Value::as_str)
                    .and_then(parse_time_ms);
                if created.is_some_and(|t| t < cutoff_ms) {
                    reached_older = true;
                    continue;
                }
                if status_text(s) == wanted {
                    return Ok(Some(created_from(s)));
                }
            }
            if reached_older || statuses.is_empty() {
                return Ok(None);
            }
            max_id = next_max_id(&headers).or_else(|| {
                (statuses.len() >= usize::from(self.page_size))
                    .then(|| statuses.last()?.get("id")?.as_str().map(str::to_owned))
                    .flatten()
            });
            if max_id.is_none() {
                return Ok(None);
            }
        }
        tracing::info!(
            network = NETWORK,
            pages = self.max_pages,
            "the status was not among the pages read; older statuses were not looked at"
        );
        Ok(None)
    }
}

/// The id and public URL of a status answer: its `url` (the HTML page), else the account's
/// page + `/` + id (the `url` is nullable).
fn created_from(status: &Value) -> Created {
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

#[async_trait]
impl NetworkAdapter for MastodonAdapter {
    fn network(&self) -> Network {
        Network::Mastodon
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(&self.limits)
    }

    fn is_dry_run(&self) -> bool {
        false
    }

    fn text_len(&self, text: &str) -> usize {
        status_len(text, self.limits.per_url())
    }

    /// `POST /api/v2/media` (multipart: `file`, `description` = the alt text); a 202 is polled
    /// with `GET /api/v1/media/:id` until it answers 200. The image is checked against the
    /// instance's size limit first.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        self.upload_once(media).await.map_err(|e| self.clean(e))
    }

    fn prepare(&self, text: &str, media: &MediaRef, idempotency: &str) -> PreparedPost {
        prepared(text, media, idempotency, self.language.as_deref())
    }

    /// `POST /api/v1/statuses` once, with `Idempotency-Key: <post.key>`. Within the hour a
    /// repeat of the same key answers the original status.
    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        match self.create_once(post).await {
            Ok(created) => {
                tracing::info!(
                    network = NETWORK,
                    status_id = created.id.as_deref().unwrap_or("?"),
                    "status created (or answered for its Idempotency-Key)"
                );
                Ok(created)
            }
            Err(e) => {
                let e = self.clean(e);
                tracing::warn!(network = NETWORK, "create failed: {e}");
                Err(e)
            }
        }
    }

    /// Reads the account's statuses (newest first, replies and boosts left out, 40 a page,
    /// paging with `max_id`) back to `since` (Unix seconds of the attempt, less a clock
    /// slack) for one whose text is exactly `post.text`.
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        self.find_once(post, since).await.map_err(|e| self.clean(e))
    }

    /// `GET /api/v1/accounts/verify_credentials`.
    async fn check(&self) -> Result<String, PostError> {
        let account = self
            .verify_credentials(Op::Check)
            .await
            .map_err(|e| self.clean(e))?;
        let host = url::Url::parse(&self.base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| self.base.clone());
        let line = format!("Mastodon: @{}@{host}", account.username);
        let _ = self.account.set(account);
        Ok(line)
    }
}

// ---------------------------------------------------------------------------------------------
// The dry run.

/// The Mastodon adapter without credentials: sends nothing, logs at info the exact requests it
/// would send (the token as a placeholder), and answers ids marked `dryrun-`.
#[derive(Debug)]
pub struct MastodonDryRun {
    base: String,
    language: Option<String>,
    limits: Limits,
}

fn dry_id() -> String {
    format!("{DRY_RUN_MARK}{:016x}", rand::random::<u64>())
}

const DRY_AUTH: (&str, &str) = ("Authorization", "Bearer <MASTODON_ACCESS_TOKEN>");

impl MastodonDryRun {
    pub fn new(instance_url: &str) -> Self {
        Self {
            base: instance_url.trim().trim_end_matches('/').to_owned(),
            language: None,
            limits: Limits::new(DEFAULT_MAX_CHARACTERS, DEFAULT_IMAGE_SIZE_LIMIT),
        }
    }

    #[must_use]
    pub fn with_limits(self, max_characters: usize, image_size_limit: usize) -> Self {
        self.limits
            .max_characters
            .store(max_characters, Ordering::Relaxed);
        self.limits
            .image_size_limit
            .store(image_size_limit, Ordering::Relaxed);
        self
    }

    #[must_use]
    pub fn with_language(mut self, language: &str) -> Self {
        let lang = language.trim();
        self.language = (!lang.is_empty()).then(|| lang.to_owned());
        self
    }
}

#[async_trait]
impl NetworkAdapter for MastodonDryRun {
    fn network(&self) -> Network {
        Network::Mastodon
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(&self.limits)
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        status_len(text, self.limits.per_url())
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        let description = media.alt.as_deref().filter(|a| !a.trim().is_empty());
        let mut form = vec![format!(
            "file=<{} bytes {}, filename {}>",
            media.bytes.len(),
            media.content_type,
            file_name(media.content_type)
        )];
        if let Some(alt) = description {
            form.push(format!("description={alt:?}"));
        }
        show(
            "POST",
            &format!("{}/api/v2/media", self.base),
            &[DRY_AUTH, ("Content-Type", "multipart/form-data")],
            ShownBody::Lines(form),
        );
        show(
            "GET",
            &format!("{}/api/v1/media/<id>", self.base),
            &[DRY_AUTH],
            ShownBody::Lines(vec![
                "(only while the upload answers 202; again while this answers 206)".into(),
            ]),
        );
        Ok(MediaRef(Value::String(dry_id())))
    }

    fn prepare(&self, text: &str, media: &MediaRef, idempotency: &str) -> PreparedPost {
        prepared(text, media, idempotency, self.language.as_deref())
    }

    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        show(
            "POST",
            &format!("{}/api/v1/statuses", self.base),
            &[
                DRY_AUTH,
                ("Idempotency-Key", post.key.as_deref().unwrap_or("")),
                ("Content-Type", "application/json"),
            ],
            ShownBody::Json(&post.body),
        );
        let id = dry_id();
        Ok(Created {
            url: Some(format!("{}/web/statuses/{id}", self.base)),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        show(
            "GET",
            &format!("{}/api/v1/accounts/verify_credentials", self.base),
            &[DRY_AUTH],
            ShownBody::None,
        );
        show(
            "GET",
            &format!(
                "{}/api/v1/accounts/<id>/statuses?limit={FIND_PAGE_SIZE}&exclude_replies=true&exclude_reblogs=true",
                self.base
            ),
            &[DRY_AUTH],
            ShownBody::Lines(vec![format!(
                "(back to {}, looking for the text {:?})",
                crate::record::rfc3339(since),
                post.text
            )]),
        );
        Ok(None)
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: MASTODON_URL and MASTODON_ACCESS_TOKEN are not both set, nothing is sent to Mastodon".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

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
            matches!(&e, PostError::Rejected { status: 401, message, .. } if message.contains("write:statuses") && message.contains("write:media") && message.contains("read:statuses")),
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
}

//! The X adapter (API v2, OAuth 1.0a user context; wire facts in API-NOTES.md "X API v2"):
//! image upload with alt text, create, reading the account's posts back for an exact text,
//! and X's answers described as [`PostError`]s. Holds no policy: the pipeline decides.
//!
//! X has no idempotency key, and an identical create answers 403 "duplicate content" without
//! naming the post, so the adapter claims [`Capabilities::duplicate_without_id`] and
//! [`Capabilities::reads_back`]. [`XDryRun`] is the variant without credentials.

pub mod config;
pub mod oauth1;

pub use config::DEFINITION;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use reqwest::header::{HeaderMap, AUTHORIZATION};
use reqwest::multipart::{Form, Part};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::OnceCell;
use unicode_normalization::UnicodeNormalization;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use oauth1::Credentials;

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "X";
/// `X_API_URL`'s default.
pub const DEFAULT_API: &str = "https://api.x.com";
/// X's limit, counted by [`weighted_len`].
pub const MAX_TEXT: usize = 280;
/// Posts asked for per page when looking a post up (X allows 5–100; every post read is billed).
pub const FIND_PAGE_SIZE: u8 = 20;
/// Pages read at most when looking a post up.
pub const FIND_MAX_PAGES: u32 = 5;
/// Looked-up posts may be this much older than the attempt (clock skew between us and X).
const CLOCK_SLACK_S: i64 = 600;

/// The public URL of a post; needs no username.
pub fn status_url(id: &str) -> String {
    format!("https://x.com/i/web/status/{id}")
}

/// The `POST /2/tweets` body (shared by [`XAdapter`] and [`XDryRun`]). The media id goes in
/// as the [`MediaRef`] holds it, so a foreign reference is refused by X rather than dropped.
pub fn create_body(text: &str, media: &MediaRef) -> Value {
    json!({"text": text, "media": {"media_ids": [media.0.clone()]}})
}

fn prepared(text: &str, media: &MediaRef) -> PreparedPost {
    PreparedPost {
        body: create_body(text, media),
        text: text.to_owned(),
        key: None,
    }
}

fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::DuplicateWithoutId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::XWeighted,
        },
        images: ImageLimits {
            formats: &["image/jpeg", "image/png", "image/gif", "image/webp"],
            max_bytes: 5_000_000,
            max_pixels: None,
        },
        links: Links::CountedAs(23),
        ..Capabilities::default()
    }
}

/// Publishes through X's API v2 with OAuth 1.0a user-context credentials.
pub struct XAdapter {
    http: reqwest::Client,
    api: String,
    credentials: Credentials,
    /// The account's id, read once per process by `GET /2/users/me`.
    user_id: OnceCell<String>,
    page_size: u8,
    max_pages: u32,
}

impl fmt::Debug for XAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XAdapter")
            .field("api", &self.api)
            .field("credentials", &self.credentials)
            .field("user_id", &self.user_id.get())
            .finish_non_exhaustive()
    }
}

/// Which call an answer belongs to: the same status means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Upload,
    Metadata,
    Create,
    /// Reading the account's posts back (and the `users/me` it needs).
    Read,
    /// `GET /2/users/me` as the doctor's check.
    Check,
}

impl XAdapter {
    /// `api` is the base (`https://api.x.com`, `X_API_URL`); `http` the process's shared
    /// client ([`crate::app::http_client`]).
    pub fn new(http: reqwest::Client, api: &str, credentials: Credentials) -> Self {
        Self {
            http,
            api: api.trim_end_matches('/').to_owned(),
            credentials,
            user_id: OnceCell::new(),
            page_size: FIND_PAGE_SIZE,
            max_pages: FIND_MAX_PAGES,
        }
    }

    /// Page size (clamped to X's 5–100) and page count of [`NetworkAdapter::find`].
    #[must_use]
    pub fn with_find_limits(mut self, page_size: u8, max_pages: u32) -> Self {
        self.page_size = page_size.clamp(5, 100);
        self.max_pages = max_pages.max(1);
        self
    }

    /// Signs and sends one request. JSON and multipart bodies are not part of the signature;
    /// the query string is.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Body,
    ) -> Result<reqwest::Response, PostError> {
        let auth = self
            .credentials
            .authorization(method.as_str(), url, &[])
            .map_err(|e| PostError::Rejected {
                network: NETWORK,
                status: 0,
                message: format!("X_API_URL does not make a valid URL ({e})"),
            })?;
        let req = self.http.request(method, url).header(AUTHORIZATION, auth);
        let req = match body {
            Body::None => req,
            Body::Json(v) => req.json(&v),
            Body::Multipart(f) => req.multipart(f),
        };
        req.send().await.map_err(|e| transport(&e))
    }

    /// The account's id, from `GET /2/users/me` the first time.
    async fn user_id(&self) -> Result<&str, PostError> {
        self.user_id
            .get_or_try_init(|| async {
                let me = self.me(Op::Read).await?;
                Ok::<_, PostError>(me.0)
            })
            .await
            .map(String::as_str)
    }

    /// `GET /2/users/me` → (id, username).
    async fn me(&self, op: Op) -> Result<(String, String), PostError> {
        let resp = self
            .send(Method::GET, &format!("{}/2/users/me", self.api), Body::None)
            .await?;
        let v = answer(resp, op).await?;
        let id = v.pointer("/data/id").and_then(Value::as_str);
        let username = v
            .pointer("/data/username")
            .and_then(Value::as_str)
            .unwrap_or("");
        match id {
            Some(id) => Ok((id.to_owned(), username.to_owned())),
            None => Err(PostError::InDoubt {
                network: NETWORK,
                message: "GET /2/users/me answered without data.id".into(),
            }),
        }
    }

    fn timeline_url(&self, user: &str, since: i64, token: Option<&str>) -> String {
        let mut url = format!(
            "{}/2/users/{}/tweets?max_results={}&exclude=replies,retweets&tweet.fields=created_at,entities",
            self.api,
            oauth1::encode(user),
            self.page_size
        );
        if since > 0 {
            if let Some(start) = start_time(since - CLOCK_SLACK_S) {
                url.push_str("&start_time=");
                url.push_str(&oauth1::encode(&start));
            }
        }
        if let Some(t) = token {
            url.push_str("&pagination_token=");
            url.push_str(&oauth1::encode(t));
        }
        url
    }
}

enum Body {
    None,
    Json(Value),
    Multipart(Form),
}

/// RFC 3339 UTC seconds (`2026-12-03T10:55:45Z`), X's `start_time` format.
fn start_time(unix: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(unix.max(0)).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// The error and its causes, one line.
fn chain(e: &reqwest::Error) -> String {
    let mut parts = vec![];
    let mut src: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = src {
        parts.push(err.to_string());
        src = err.source();
    }
    parts.join(": ")
}

/// A failure below HTTP: nothing sent (connect, DNS, a request that could not be built), or
/// sent with no clear answer (timeout after sending, a broken exchange, an unreadable body).
fn transport(e: &reqwest::Error) -> PostError {
    if e.is_connect() || e.is_builder() {
        PostError::NotSent {
            network: NETWORK,
            message: chain(e),
        }
    } else {
        PostError::InDoubt {
            network: NETWORK,
            message: chain(e),
        }
    }
}

/// A 2xx answer's JSON, or the answer described as a [`PostError`].
async fn answer(resp: reqwest::Response, op: Op) -> Result<Value, PostError> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.map_err(|e| transport(&e))?;
    if (200..300).contains(&status) {
        return serde_json::from_str(&body).map_err(|_| PostError::InDoubt {
            network: NETWORK,
            message: format!("X answered {status} with a body that is not JSON"),
        });
    }
    Err(classify(op, status, &headers, &body))
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// When a 429 ends: `x-rate-limit-reset`, or the 24-hour user limit's reset when that one is
/// used up too (both Unix seconds), counted from now.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let window = header_u64(headers, "x-rate-limit-reset");
    let day = (header_u64(headers, "x-user-limit-24hour-remaining") == Some(0))
        .then(|| header_u64(headers, "x-user-limit-24hour-reset"))
        .flatten();
    let reset = window.max(day)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Some(Duration::from_secs(reset.saturating_sub(now)))
}

/// Turns a non-2xx answer into a [`PostError`] whose message names the fix (API-NOTES.md
/// "X API v2", Errors).
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let detail = [text("/detail"), text("/title"), text("/errors/0/message")]
        .into_iter()
        .find(|s| !s.is_empty())
        .map_or_else(|| body.chars().take(300).collect(), str::to_owned);
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
        401 => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!(
                "the OAuth 1.0a credentials were refused ({detail}); re-authorize: regenerate the access token and secret in the developer portal and update X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET (and X_API_KEY / X_API_SECRET if the app's keys were regenerated)"
            ),
        },
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
        500..=599 => PostError::InDoubt {
            network: NETWORK,
            message: format!("X answered {status}: {detail}"),
        },
        _ => PostError::Rejected {
            network: NETWORK,
            status,
            message: detail,
        },
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

fn normalized(text: &str) -> String {
    text.nfc().collect::<String>().trim().to_owned()
}

#[async_trait]
impl NetworkAdapter for XAdapter {
    fn network(&self) -> Network {
        Network::X
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        false
    }

    fn text_len(&self, text: &str) -> usize {
        weighted_len(text)
    }

    /// `POST /2/media/upload` (multipart: `media`, `media_category=tweet_image`), then
    /// `POST /2/media/metadata` with the alt text when there is one.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        let part = Part::stream_with_length(
            reqwest::Body::from(media.bytes.clone()),
            media.bytes.len() as u64,
        )
        .file_name("cover")
        .mime_str(media.content_type)
        .map_err(|e| PostError::Rejected {
            network: NETWORK,
            status: 0,
            message: format!(
                "the image type {} is not a MIME type ({e})",
                media.content_type
            ),
        })?;
        let form = Form::new()
            .part("media", part)
            .text("media_category", "tweet_image");
        let resp = self
            .send(
                Method::POST,
                &format!("{}/2/media/upload", self.api),
                Body::Multipart(form),
            )
            .await?;
        let v = answer(resp, Op::Upload).await?;
        let Some(id) = v.pointer("/data/id").and_then(Value::as_str) else {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: "the media upload answered without data.id".into(),
            });
        };
        if let Some(alt) = media.alt.as_deref().filter(|a| !a.trim().is_empty()) {
            let body = json!({"id": id, "metadata": {"alt_text": {"text": alt}}});
            let resp = self
                .send(
                    Method::POST,
                    &format!("{}/2/media/metadata", self.api),
                    Body::Json(body),
                )
                .await?;
            answer(resp, Op::Metadata).await?;
        }
        Ok(MediaRef(Value::String(id.to_owned())))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepared(text, media)
    }

    /// `POST /2/tweets` once. 201 → `data.id`; a 2xx without a readable id still proves the
    /// post exists, and is answered without an id.
    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        let resp = self
            .send(
                Method::POST,
                &format!("{}/2/tweets", self.api),
                Body::Json(post.body.clone()),
            )
            .await?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            let body = resp.text().await.unwrap_or_default();
            let id = serde_json::from_str::<Value>(&body).ok().and_then(|v| {
                v.pointer("/data/id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
            if id.is_none() {
                tracing::warn!(
                    status,
                    "X created the post but its answer carried no data.id"
                );
            }
            let url = id.as_deref().map(status_url);
            return Ok(Created { id, url, cid: None });
        }
        Err(answer(resp, Op::Create)
            .await
            .err()
            .unwrap_or_else(|| PostError::InDoubt {
                network: NETWORK,
                message: format!("X answered {status}"),
            }))
    }

    /// Reads the account's recent posts (newest first, replies and reposts left out) from
    /// `since` (Unix seconds of the attempt, less a clock slack) for one whose text, with its
    /// t.co links put back, is exactly `post.text`; at most the configured number of pages.
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        let user = self.user_id().await?.to_owned();
        let wanted = normalized(&post.text);
        let mut token: Option<String> = None;
        for _ in 0..self.max_pages {
            let url = self.timeline_url(&user, since, token.as_deref());
            let resp = self.send(Method::GET, &url, Body::None).await?;
            let page = answer(resp, Op::Read).await?;
            let tweets = page
                .get("data")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let found = tweets
                .iter()
                .find(|t| sent_text(t) == wanted)
                .and_then(|t| {
                    t.get("id").and_then(Value::as_str).map(|id| Created {
                        id: Some(id.to_owned()),
                        url: Some(status_url(id)),
                        cid: None,
                    })
                });
            if found.is_some() {
                return Ok(found);
            }
            token = page
                .pointer("/meta/next_token")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if token.is_none() {
                return Ok(None);
            }
        }
        tracing::info!(
            pages = self.max_pages,
            "X: the post was not among the pages read; older posts were not looked at"
        );
        Ok(None)
    }

    /// `GET /2/users/me`.
    async fn check(&self) -> Result<String, PostError> {
        let (id, username) = self.me(Op::Check).await?;
        let _ = self.user_id.set(id.clone());
        Ok(format!(
            "X credentials accepted for @{username} (user id {id})"
        ))
    }
}

/// The X adapter without credentials: sends nothing, logs at info the exact requests it would
/// send (secrets as placeholders), and answers ids marked `dryrun-`.
#[derive(Debug, Clone)]
pub struct XDryRun {
    api: String,
}

/// What marks an id the dry run made up.
pub const DRY_RUN_MARK: &str = "dryrun-";

fn dry_id() -> String {
    format!("{DRY_RUN_MARK}{:016x}", rand::random::<u64>())
}

const DRY_AUTH: (&str, &str) = ("Authorization", "OAuth oauth_consumer_key=\"<X_API_KEY>\", oauth_nonce=\"<random>\", oauth_signature=\"<HMAC-SHA1 with X_API_SECRET and X_ACCESS_TOKEN_SECRET>\", oauth_signature_method=\"HMAC-SHA1\", oauth_timestamp=\"<now>\", oauth_token=\"<X_ACCESS_TOKEN>\", oauth_version=\"1.0\"");

impl XDryRun {
    pub fn new(api: &str) -> Self {
        Self {
            api: api.trim_end_matches('/').to_owned(),
        }
    }
}

#[async_trait]
impl NetworkAdapter for XDryRun {
    fn network(&self) -> Network {
        Network::X
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        weighted_len(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        show(
            "POST",
            &format!("{}/2/media/upload", self.api),
            &[DRY_AUTH, ("Content-Type", "multipart/form-data")],
            ShownBody::Lines(vec![
                format!("media=<{} bytes {}>", media.bytes.len(), media.content_type),
                "media_category=tweet_image".into(),
            ]),
        );
        let id = dry_id();
        if let Some(alt) = media.alt.as_deref().filter(|a| !a.trim().is_empty()) {
            let body = json!({"id": id, "metadata": {"alt_text": {"text": alt}}});
            show(
                "POST",
                &format!("{}/2/media/metadata", self.api),
                &[DRY_AUTH, ("Content-Type", "application/json")],
                ShownBody::Json(&body),
            );
        }
        Ok(MediaRef(Value::String(id)))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepared(text, media)
    }

    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        show(
            "POST",
            &format!("{}/2/tweets", self.api),
            &[DRY_AUTH, ("Content-Type", "application/json")],
            ShownBody::Json(&post.body),
        );
        let id = dry_id();
        Ok(Created {
            url: Some(status_url(&id)),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        show(
            "GET",
            &format!("{}/2/users/me", self.api),
            &[DRY_AUTH],
            ShownBody::None,
        );
        show(
            "GET",
            &format!(
                "{}/2/users/<id>/tweets?max_results={FIND_PAGE_SIZE}&exclude=replies,retweets&tweet.fields=created_at,entities&start_time={}",
                self.api,
                start_time(since - CLOCK_SLACK_S).unwrap_or_default()
            ),
            &[DRY_AUTH],
            ShownBody::Lines(vec![format!("(looking for the text {:?})", post.text)]),
        );
        Ok(None)
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET are not all set, nothing is sent to X".into())
    }
}

/// X's weighted length (twitter-text configuration v3, the one X counts with): NFC first;
/// every URL counts 23 (it becomes a t.co link); an emoji, sequences included (ZWJ families,
/// skin tones, flags, keycaps), counts 2; a code point in U+0000–U+10FF, U+2000–U+200D,
/// U+2010–U+201F or U+2032–U+2037 counts 1; every other code point (CJK, most symbols) 2.
///
/// URLs with `http://` / `https://` are found exactly as far as their extent goes (to the next
/// space, less trailing punctuation). URLs without a scheme are recognised for common generic
/// top-level domains, and for two-letter country domains only when a path follows (`t.co/x`);
/// twitter-text knows every IANA domain, so a bare `name.tld` with a rare domain may count by
/// its letters here where X counts 23.
pub fn weighted_len(text: &str) -> usize {
    let chars: Vec<char> = text.nfc().collect();
    let mut total = 0;
    let mut i = 0;
    while i < chars.len() {
        if let Some(end) = url_at(&chars, i) {
            total += 23;
            i = end;
        } else if let Some(end) = emoji_at(&chars, i) {
            total += 2;
            i = end;
        } else {
            total += char_weight(chars[i]);
            i += 1;
        }
    }
    total
}

fn char_weight(c: char) -> usize {
    match u32::from(c) {
        0..=0x10FF | 0x2000..=0x200D | 0x2010..=0x201F | 0x2032..=0x2037 => 1,
        _ => 2,
    }
}

const GENERIC_TLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "edu", "gov", "mil", "int", "name", "pro", "mobi", "app",
    "dev", "page", "blog", "xyz", "online", "site", "tech", "store", "shop", "news", "club",
    "link", "live", "cloud", "art", "design", "studio", "social", "email", "website", "space",
];

/// The end of a URL starting at `i`, if one does.
fn url_at(chars: &[char], i: usize) -> Option<usize> {
    // Not inside a word, a mention, a cashtag or a hashtag.
    if i > 0 {
        let p = chars[i - 1];
        if p.is_alphanumeric() || matches!(p, '@' | '$' | '#' | '.' | '/' | '-' | '_') {
            return None;
        }
    }
    let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
    let lower = rest.to_ascii_lowercase();
    let scheme = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        0
    };
    let host_start = i + scheme;
    let mut j = host_start;
    while j < chars.len() && (chars[j].is_alphanumeric() || matches!(chars[j], '-' | '.')) {
        j += 1;
    }
    let host: String = chars[host_start..j].iter().collect();
    let host = host.trim_end_matches('.');
    let host_end = host_start + host.chars().count();
    let labels: Vec<&str> = host.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    if labels.len() < 2
        || labels.iter().any(|l| l.is_empty())
        || tld.chars().count() < 2
        || !tld.chars().all(char::is_alphabetic)
    {
        return None;
    }
    let mut end = host_end;
    // Port.
    if end < chars.len() && chars[end] == ':' {
        let digits = chars[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            end += 1 + digits;
        }
    }
    let has_path = end < chars.len() && matches!(chars[end], '/' | '?' | '#');
    if scheme == 0 {
        let tld = tld.to_ascii_lowercase();
        let generic = GENERIC_TLDS.contains(&tld.as_str());
        let country = tld.len() == 2 && tld.chars().all(|c| c.is_ascii_lowercase());
        if !(generic || (country && has_path)) {
            return None;
        }
    }
    if has_path {
        while end < chars.len() && !chars[end].is_whitespace() {
            end += 1;
        }
        // Trailing punctuation belongs to the sentence, and a closing bracket to the text
        // around the URL unless the URL opened one.
        loop {
            let c = chars[end - 1];
            let inside = &chars[host_end..end - 1];
            let unbalanced = match c {
                ')' => !inside.contains(&'('),
                ']' => !inside.contains(&'['),
                _ => false,
            };
            if end - 1 > host_end
                && (matches!(c, '.' | ',' | ':' | ';' | '!' | '?' | '\'' | '"') || unbalanced)
            {
                end -= 1;
            } else {
                break;
            }
        }
    }
    Some(end)
}

fn is_pictographic(c: u32) -> bool {
    matches!(c,
        0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2300..=0x23FF | 0x2B00..=0x2BFF
        | 0x2190..=0x21FF | 0x25A0..=0x25FF | 0x2900..=0x297F | 0x3030 | 0x303D
        | 0x3297 | 0x3299 | 0x203C | 0x2049 | 0x2122 | 0x2139 | 0x24C2 | 0xA9 | 0xAE)
}

/// The end of an emoji (with its modifiers and joined parts) starting at `i`, if one does.
/// Characters that are also plain text (`©`, `#`, digits) are emoji only with U+FE0F or as a
/// keycap.
fn emoji_at(chars: &[char], i: usize) -> Option<usize> {
    let c = u32::from(chars[i]);
    let next = |k: usize| chars.get(k).map(|&c| u32::from(c));
    // Keycap: [0-9#*] FE0F? 20E3.
    if chars[i].is_ascii_digit() || matches!(chars[i], '#' | '*') {
        return match (next(i + 1), next(i + 2)) {
            (Some(0x20E3), _) => Some(i + 2),
            (Some(0xFE0F), Some(0x20E3)) => Some(i + 3),
            _ => None,
        };
    }
    // Flag: two regional indicators.
    if (0x1F1E6..=0x1F1FF).contains(&c) {
        return match next(i + 1) {
            Some(n) if (0x1F1E6..=0x1F1FF).contains(&n) => Some(i + 2),
            _ => Some(i + 1),
        };
    }
    if !is_pictographic(c) || (char_weight(chars[i]) == 1 && next(i + 1) != Some(0xFE0F)) {
        return None;
    }
    let mut j = i + 1;
    loop {
        match next(j) {
            Some(0xFE0F | 0xFE0E | 0x20E3) | Some(0x1F3FB..=0x1F3FF) | Some(0xE0020..=0xE007F) => {
                j += 1;
            }
            Some(0x200D) if next(j + 1).is_some_and(is_pictographic) => j += 2,
            _ => break,
        }
    }
    Some(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn weighted_length_follows_x_counting() {
        let cases: &[(&str, usize)] = &[
            ("hello", 5),
            ("日本語", 6),
            ("Ж and é", 7),
            ("ሀ", 2),
            ("a\u{2014}b \u{201C}q\u{201D}", 7),
            ("cafe\u{301}", 4),
            ("😀", 2),
            ("👍🏽", 2),
            ("👨\u{200D}👩\u{200D}👧\u{200D}👦", 2),
            ("🇫🇷", 2),
            ("1\u{FE0F}\u{20E3}", 2),
            ("H🐱☺👨\u{200D}👩\u{200D}👧\u{200D}👦", 7),
            ("© 2026", 6),
            ("©\u{FE0F}", 2),
            ("#1 and 42", 9),
            ("Visit https://example.com/a/very/long/path?x=1 today", 35),
            ("see https://example.com/p.", 28),
            ("(https://example.com/p)", 25),
            ("HTTP://EXAMPLE.COM", 23),
            ("example.com", 23),
            ("t.co/abc", 23),
            ("example.jp", 10),
            ("x.y", 3),
            ("me@example.com", 14),
            ("#tag", 4),
        ];
        for (text, want) in cases {
            assert_eq!(weighted_len(text), *want, "{text:?}");
        }
        assert_eq!(weighted_len(&"x".repeat(280)), 280);
        assert_eq!(weighted_len(&"字".repeat(140)), 280);
        let with_url = format!(
            "{} https://example.com/{}",
            "a".repeat(256),
            "p".repeat(500)
        );
        assert_eq!(weighted_len(&with_url), 280);
    }

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
            PostError::Rejected { status: 401, message, .. } if message.contains("re-authorize")
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

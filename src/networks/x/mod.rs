//! X's idempotency primitive: none. A create carries no idempotency key, and an identical
//! create answers 403 "duplicate content" without naming the post (described as
//! [`PostError::AlreadyExists`] with no id). So a create whose answer was lost is settled by
//! reading the account's posts back for the exact text after the quiet period; the adapter
//! claims [`Capabilities::duplicate_without_id`] and [`Capabilities::reads_back`].
//!
//! The adapter (API v2, OAuth 1.0a user context):
//! image upload with alt text, create, reading the account's posts back for an exact text,
//! and X's answers described as [`PostError`]s. Holds no policy: the pipeline decides.
//! [`wire`] holds the bodies, the answers and the classifier; [`text`] the weighted count;
//! Without credentials it is a dry run ([`XAdapter::dry_run`]): the same adapter, its requests
//! shown instead of sent.

pub mod auth;
pub mod config;
pub mod oauth1;
pub mod text;
pub mod wire;

#[cfg(test)]
mod tests;

pub use config::DEFINITION;
pub use text::weighted_len;
pub use wire::{classify, create_body, sent_text, status_url};

use std::fmt;

use async_trait::async_trait;
use reqwest::header::AUTHORIZATION;
use reqwest::multipart::{Form, Part};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::image::{Format, Formats};
use crate::networks::http::{transport, Answer, Op, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use oauth1::Credentials;
use wire::{answer, normalized, prepared, start_time};

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

/// Duplicates refused without an id; the account's posts read back.
fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::DuplicateWithoutId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::XWeighted,
        },
        images: ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Gif, Format::Webp]),
            max_bytes: 5_000_000,
            ..ImageLimits::default()
        },
        links: Links::CountedAs(23),
        ..Capabilities::default()
    }
}

/// Publishes through X's API v2 with OAuth 1.0a user-context credentials.
pub struct XAdapter {
    transport: Transport,
    api: String,
    /// `None` in a dry run, which signs nothing and shows placeholders ([`DRY_AUTH`]).
    credentials: Option<Credentials>,
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

impl XAdapter {
    /// `api` is the base (`https://api.x.com`, `X_API_URL`); `http` the process's shared
    /// client ([`crate::app::http_client`]).
    pub fn new(http: reqwest::Client, api: &str, credentials: Credentials) -> Self {
        Self {
            transport: Transport::real(http),
            api: api.trim_end_matches('/').to_owned(),
            credentials: Some(credentials),
            user_id: OnceCell::new(),
            page_size: FIND_PAGE_SIZE,
            max_pages: FIND_MAX_PAGES,
        }
    }

    /// The adapter without credentials: it sends nothing, shows the exact requests it would
    /// send (secrets as placeholders) and answers ids marked `dryrun-`.
    pub fn dry_run(http: reqwest::Client, api: &str) -> Self {
        Self {
            transport: Transport::dry(http, std::sync::Arc::new(dry_answer)),
            api: api.trim_end_matches('/').to_owned(),
            credentials: None,
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
        let auth = match &self.credentials {
            Some(credentials) => credentials
                .authorization(method.as_str(), url, &[])
                .map_err(|e| PostError::Rejected {
                    network: NETWORK,
                    status: 0,
                    message: format!("X_API_URL does not make a valid URL ({e})"),
                })?,
            None => DRY_AUTH.to_owned(),
        };
        let req = self
            .transport
            .client()
            .request(method, url)
            .header(AUTHORIZATION, auth);
        let (req, shown) = match body {
            Body::None => (req, None),
            Body::Read(note) => (req, Some(vec![note])),
            Body::Json(v) => (req.json(&v), None),
            Body::Multipart(f, shown) => (req.multipart(f), Some(shown)),
        };
        self.transport
            .send_showing(req, || shown)
            .await
            .map_err(|e| transport(NETWORK, e))
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

/// A request's body: JSON and multipart bodies are not part of the OAuth 1.0a signature.
enum Body {
    None,
    Json(Value),
    /// The form, and how a dry run shows it.
    Multipart(Form, Vec<String>),
    /// No body; a dry run shows the note (what the read is for).
    Read(String),
}

/// What a dry run shows for the OAuth 1.0a header it cannot sign.
const DRY_AUTH: &str = "OAuth oauth_consumer_key=\"<X_API_KEY>\", oauth_nonce=\"<random>\", oauth_signature=\"<HMAC-SHA1 with X_API_SECRET and X_ACCESS_TOKEN_SECRET>\", oauth_signature_method=\"HMAC-SHA1\", oauth_timestamp=\"<now>\", oauth_token=\"<X_ACCESS_TOKEN>\", oauth_version=\"1.0\"";

/// What X's API answers a dry run: the upload's and the post's ids marked, the account's id
/// a placeholder (a dry run has no account), no post found.
fn dry_answer(request: &reqwest::Request) -> (u16, Value) {
    match request.url().path() {
        "/2/media/upload" => (200, json!({"data": {"id": dry_id()}})),
        "/2/tweets" => (201, json!({"data": {"id": dry_id()}})),
        "/2/users/me" => (200, json!({"data": {"id": "<id>", "username": "<username>"}})),
        _ => (200, json!({"meta": {"result_count": 0}})),
    }
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
        self.transport.is_dry_run()
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
                Body::Multipart(
                    form,
                    vec![
                        format!("media=<{} bytes {}>", media.bytes.len(), media.content_type),
                        "media_category=tweet_image".into(),
                    ],
                ),
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
            // The alt text is part of the upload: safe to repeat.
            answer(resp, Op::Upload).await?;
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
        let a = Answer::read(NETWORK, resp).await?;
        Err(classify(Op::Create, a.status, &a.headers, &a.body))
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
            let note = format!("(looking for the text {:?})", post.text);
            let resp = self.send(Method::GET, &url, Body::Read(note)).await?;
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
        if self.transport.is_dry_run() {
            return Ok("dry run: X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET are not all set, nothing is sent to X".into());
        }
        let (id, username) = self.me(Op::Check).await?;
        let _ = self.user_id.set(id.clone());
        Ok(format!(
            "X credentials accepted for @{username} (user id {id})"
        ))
    }
}


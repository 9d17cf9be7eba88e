//! Mastodon's idempotency primitive is the `Idempotency-Key` header on the create: the server
//! remembers a key for one hour per account, and a repeat with that key within the hour answers
//! the **original** status (200) instead of creating another, whatever its body. The key is
//! derived from the pipeline's per-target key and the exact request body ([`idempotency_key`])
//! and kept in [`PreparedPost::key`], so every re-send of the kept request replays it. Past the
//! hour the key is forgotten and a repeat would create a second status: the account's statuses
//! are read back for the exact text instead ([`NetworkAdapter::find`]); when they cannot be
//! read, the owner is asked.
//!
//! The adapter speaks the REST API with a user's access token (wire facts in `wire.rs`)
//! and holds no policy: it describes Mastodon's answers as [`PostError`]s and the
//! pipeline decides. Its parts:
//! - this file: the adapter, its create, and the `find` that settles a lost answer;
//! - `wire.rs`: the request body and its key, the answers, [`classify`], the instance's limits;
//! - `text.rs`: how a status's length is counted ([`status_len`]), and a status read back made
//!   comparable to the text sent;
//! - `media.rs`: the image upload and the wait for its processing, resumed by the next try;
//! - without credentials it is a dry run ([`MastodonAdapter::dry_run`]): the same adapter on
//!   the dry [`Transport`], its requests shown instead of sent, answered by [`dry_answer`].
//!
//! The access token travels only in the `Authorization` header; it never reaches a `Debug`
//! output, an error message or a log line (every message leaving the adapter is passed through
//! a [`Redactor`] as well, in case a server echoes it).

pub mod auth;
pub mod config;
mod media;
mod text;
mod wire;

#[cfg(test)]
mod tests;

pub use config::DEFINITION;
pub use text::{comparable, plain_text, status_len, status_text};
pub use wire::{
    canonical_json, classify, create_body, idempotency_key, next_max_id, parse_time_ms,
    retry_after, Account, Op,
};

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use media::InProcessing;
use wire::{answer, created_from, local_refusal, prepared, transport, Limits};

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::image::{Format, Formats};
use crate::networks::http::{Redactor, Transport};
use crate::networks::show::dry_id;
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
/// The image types until the instance's `supported_mime_types` are read (Mastodon 4's).
pub const DEFAULT_IMAGE_FORMATS: Formats =
    Formats::of(&[Format::Jpeg, Format::Png, Format::Gif, Format::Webp]);
/// The most pixels until the instance's `image_matrix_limit` is read (Mastodon 4's, 7680×4320).
pub const DEFAULT_IMAGE_MATRIX_LIMIT: u64 = 33_177_600;
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
            formats: limits.formats(),
            max_bytes: limits.image_size_limit() as u64,
            max_pixels: Some(limits.image_matrix_limit()),
            ..ImageLimits::default()
        },
        links: Links::CountedAs(limits.per_url()),
        ..Capabilities::default()
    }
}

/// Publishes to one Mastodon account through its instance's REST API.
pub struct MastodonAdapter {
    transport: Transport,
    base: String,
    token: Secret,
    /// Keeps the token out of every message leaving the adapter.
    redactor: Redactor,
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
    processing: InProcessing,
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
        Self::with_transport(Transport::real(http), instance_url, token)
    }

    /// The adapter without credentials: it sends nothing, shows the exact requests it would
    /// send (the token as a placeholder) and answers ids marked `dryrun-` ([`dry_answer`]).
    pub fn dry_run(http: reqwest::Client, instance_url: &str) -> Self {
        let base = instance_url.trim().trim_end_matches('/').to_owned();
        let answers = std::sync::Arc::new(move |r: &reqwest::Request| dry_answer(&base, r));
        Self::with_transport(
            Transport::dry(http, answers),
            instance_url,
            Secret::new(TOKEN_PLACEHOLDER),
        )
    }

    fn with_transport(transport: Transport, instance_url: &str, token: Secret) -> Self {
        Self {
            transport,
            base: instance_url.trim().trim_end_matches('/').to_owned(),
            redactor: Redactor::default().hide(&token, TOKEN_PLACEHOLDER),
            token,
            language: None,
            limits: Limits::default(),
            account: OnceCell::new(),
            page_size: FIND_PAGE_SIZE,
            max_pages: FIND_MAX_PAGES,
            media_wait: MEDIA_WAIT,
            processing: InProcessing::default(),
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
        self.limits.set(max_characters, image_size_limit);
        self
    }

    /// The `language` (ISO 639) every status is created with; none by default (the server
    /// guesses).
    #[must_use]
    pub fn with_language(mut self, language: &str) -> Self {
        self.language = wire::language(language);
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
                .transport
                .send(self.get("/api/v2/instance"))
                .await
                .map_err(transport)?;
            let (_, v) = answer(resp, Op::Instance).await?;
            Ok(self.limits.read_instance(&v))
        }
        .await;
        result.map_err(|e| self.clean(e))
    }

    fn clean(&self, e: PostError) -> PostError {
        self.redactor.error(e)
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.transport
            .client()
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.transport
            .client()
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
    }

    /// `GET /api/v1/accounts/verify_credentials`.
    async fn verify_credentials(&self, op: Op) -> Result<Account, PostError> {
        let resp = self
            .transport
            .send(self.get("/api/v1/accounts/verify_credentials"))
            .await
            .map_err(transport)?;
        let (_, v) = answer(resp, op).await?;
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


    async fn create_once(&self, post: &PreparedPost) -> Result<Created, PostError> {
        let Some(key) = post.key.as_deref().filter(|k| !k.is_empty()) else {
            return Err(local_refusal(
                "the prepared request carries no Idempotency-Key; prepare the post again".into(),
            ));
        };
        let req = self
            .post("/api/v1/statuses")
            .header("Idempotency-Key", key)
            .json(&post.body);
        let resp = self.transport.send(req).await.map_err(transport)?;
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
            let note = || {
                Some(vec![format!(
                    "(back to {}, looking for the text {:?})",
                    crate::record::rfc3339(since),
                    post.text
                )])
            };
            let resp = self
                .transport
                .send_showing(self.get(&path), note)
                .await
                .map_err(transport)?;
            let (a, page) = answer(resp, Op::Read).await?;
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
            max_id = next_max_id(&a.headers).or_else(|| {
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

#[async_trait]
impl NetworkAdapter for MastodonAdapter {
    fn network(&self) -> Network {
        Network::Mastodon
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(&self.limits)
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
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
        if self.transport.is_dry_run() {
            return Ok("dry run: MASTODON_URL and MASTODON_ACCESS_TOKEN are not both set, nothing is sent to Mastodon".into());
        }
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

/// What an instance answers a dry run: the upload's and the status's ids marked (the upload
/// processed at once, so it is not polled), the account a placeholder (a dry run has none),
/// no status found.
fn dry_answer(base: &str, request: &reqwest::Request) -> (u16, Value) {
    let path = request.url().path();
    match (request.method().as_str(), path) {
        ("POST", "/api/v2/media") => (200, json!({"id": dry_id(), "type": "image"})),
        ("POST", "/api/v1/statuses") => {
            let id = dry_id();
            (200, json!({"id": id, "url": format!("{base}/web/statuses/{id}")}))
        }
        (_, "/api/v1/accounts/verify_credentials") => {
            (200, json!({"id": "<id>", "username": "<username>"}))
        }
        _ if path.ends_with("/statuses") => (200, json!([])),
        _ => (200, json!({})),
    }
}

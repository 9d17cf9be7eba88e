//! Threads (Meta's Threads API, wire facts in `wire.rs`). Its idempotency
//! primitive is the **media container**: a post is made in two calls, `POST /{user}/threads`
//! (the container: image URL, text, alt text) and `POST /{user}/threads_publish` with that
//! container's id, and one container yields at most one post. The container's status
//! (`IN_PROGRESS`, `FINISHED`, `PUBLISHED`, `ERROR`, `EXPIRED`) can be read at any time, so an
//! unanswered publish is settled by reading it: `PUBLISHED` → the post exists (found among the
//! account's recent posts for its id and permalink), `FINISHED` → nothing was posted and the
//! same container may be published again, `EXPIRED` / `ERROR` → nothing was, or ever will be,
//! posted from it.
//!
//! Which step makes the container. The container id must be in the intent before
//! `threads_publish` is sent, and a draft must never have two containers that could both
//! publish. A container publishes only when `threads_publish` names it, and this adapter names
//! only the one its [`PreparedPost`] carries, which is what the pipeline stores in the intent
//! and replays. So the container is made by [`NetworkAdapter::stage`], which the pipeline runs
//! after `prepare` (the container needs the text) and before it writes the intent;
//! [`NetworkAdapter::create`] only waits for `FINISHED`, publishes the container of the kept
//! request, and reads the permalink. `upload` cannot make it: it has no text. A container made
//! by a stage whose answer was lost (the stage is retried), by a run whose intent was refused,
//! or by a process that died before its intent was written is named nowhere: it is never
//! published and expires unpublished after 24 hours. Every later publish of the draft (the
//! reconcile after a lost answer) replays the kept request, that is the same container, and
//! only after its status said `FINISHED`; a new container is made only by a new attempt, which
//! the pipeline starts only when the kept one cannot have posted (`EXPIRED` / `ERROR`:
//! [`PostError::Gone`]). [`NetworkAdapter::upload`] sends nothing: Threads fetches the image
//! itself from the draft's own URL, which `stage` puts in the container.
//!
//! Waiting for `FINISHED` is short polling inside the call's budget
//! (`POSTONCE_THREADS_TIMEOUT_MS`), not Meta's once-a-minute advice (which is for video): the
//! stage polls for most of its budget and, if the container is still in progress, hands it on
//! anyway; `create` polls for at most half of its budget, keeping the rest for the publish and
//! the permalink.
//!
//! The token travels as the `access_token` parameter (query for reads, form for writes). It
//! never reaches a `Debug` output, an error or a log line: reqwest's errors are taken without
//! their URL and every message leaving the adapter is redacted as well, in case a server echoes
//! it. Without a token it is a dry run ([`ThreadsAdapter::dry_run`]): the same adapter on the
//! dry [`Transport`], its requests shown instead of sent, answered by [`dry_answer`]. Holds no
//! policy: the pipeline decides.
//!
//! Its parts: this file, what Threads offers, the kept request and the adapter; `publish.rs`,
//! the two calls that post (the stage's container and its wait, the publish and its
//! permalink); `lookup.rs`, reading back; `wire.rs`, the answers and the classifier.

pub mod auth;
pub mod config;
mod lookup;
mod publish;
pub mod text;
pub mod wire;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

pub use config::DEFINITION;
use wire::{NETWORK, TOKEN_PLACEHOLDER};

use crate::vars::Secret;
use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::image::{Format, Formats};
use crate::networks::http::{Redactor, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

/// `THREADS_API_URL`'s default.
pub const DEFAULT_API_URL: &str = "https://graph.threads.net";
/// `THREADS_USER_ID`'s default: the token's own account.
pub const DEFAULT_USER: &str = "me";
/// The API version in every path.
pub const API_VERSION: &str = "v1.0";
/// `POSTONCE_THREADS_TIMEOUT_MS`'s default, until [`ThreadsAdapter::with_budget`] says.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);
/// The first pause before asking again whether the container is ready; it doubles up to
/// [`POLL_MAX`].
pub const POLL_FIRST: Duration = Duration::from_millis(200);
pub const POLL_MAX: Duration = Duration::from_secs(1);
/// Kept back from a wait for the last poll's round trip, so that it ends by itself.
pub const POLL_ROUND_TRIP: Duration = Duration::from_millis(250);
/// Posts asked for per page when looking one up (Meta's default), and pages read at most.
pub const LIST_PAGE_SIZE: u8 = 25;
pub const LIST_MAX_PAGES: u32 = 4;
/// Listed posts may be this much older than the attempt (clock skew with Meta).
const CLOCK_SLACK_S: i64 = 600;

/// A container not published within 24 hours expires: a container found `PUBLISHED` was
/// published at most this long ago, so its post is looked for among the posts since then
/// (never an older post of the same text).
const CONTAINER_LIFETIME_S: i64 = 24 * 3600;

/// The earliest time the post of a container found `PUBLISHED` now can have (Unix seconds).
fn published_since() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    now - CONTAINER_LIFETIME_S
}
/// The fields read of a published post.
const MEDIA_FIELDS: &str = "id,permalink";
const LIST_FIELDS: &str = "id,permalink,text,timestamp";

/// What Threads offers: a container publishes at most once and its status says whether it
/// did ([`Idempotency::Container`]); the account's posts can be read back; 500 characters,
/// an emoji as its UTF-8 bytes; JPEG or PNG up to 8 MB, fetched by Threads itself from the
/// draft's public URL.
pub fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::Container,
        reads_back: true,
        text: TextLimit {
            max: text::MAX_TEXT,
            counting: Counting::CharsEmojiBytes,
        },
        images: ImageLimits {
            // JPEG or PNG up to 8 MB, 320–1440 px wide, a shape of at most 10:1. Threads
            // fetches the image itself, so an image outside these is refused, never rendered.
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: 8_000_000,
            min_width: Some(320),
            max_width: Some(1440),
            max_ratio: Some(10),
            ..ImageLimits::default()
        },
        // The first URL becomes the link preview; at most 5 links.
        links: Links::AsText,
        fetches_image: true,
        create_carries_image: false,
    }
}

// ---------------------------------------------------------------------------------------------
// The request.

/// The image as [`NetworkAdapter::upload`] answers it: its alt text only. Threads fetches the
/// image itself; its URL comes with [`NetworkAdapter::stage`].
pub fn media_ref(alt: Option<&str>) -> MediaRef {
    let mut v = json!({ "image": "fetched by Threads from the draft's URL" });
    if let Some(alt) = alt.map(str::trim).filter(|a| !a.is_empty()) {
        v["alt_text"] = json!(alt);
    }
    MediaRef(v)
}

/// The kept request before [`NetworkAdapter::stage`]: the container's fields, as
/// `POST /{user}/threads` sends them (less the token and the image URL, which the stage adds).
/// Shared with the dry run.
pub fn prepared(text: &str, media: &MediaRef) -> PreparedPost {
    let mut container = json!({
        "media_type": "IMAGE",
        "text": text,
    });
    if let Some(alt) = media.0.get("alt_text").and_then(Value::as_str) {
        container["alt_text"] = json!(alt);
    }
    PreparedPost {
        body: json!({ "container": container }),
        text: text.to_owned(),
        key: None,
    }
}

/// The container a staged request publishes (`threads_publish`'s `creation_id`).
pub fn creation_id(post: &PreparedPost) -> Option<&str> {
    post.body
        .get("creation_id")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
}

/// A path segment: everything but RFC 3986's unreserved characters percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn enc(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

// ---------------------------------------------------------------------------------------------
// The adapter.

/// Publishes to one Threads account through the Threads API.
pub struct ThreadsAdapter {
    transport: Transport,
    base: String,
    user: String,
    token: Secret,
    /// Keeps the token out of every message that leaves the adapter.
    redactor: Redactor,
    budget: Duration,
    page_size: u8,
    max_pages: u32,
}

impl fmt::Debug for ThreadsAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadsAdapter")
            .field("base", &self.base)
            .field("user", &self.user)
            .field("token", &self.token)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl ThreadsAdapter {
    /// `api_url`: `THREADS_API_URL`; `user`: `THREADS_USER_ID` (`me` or the account's id);
    /// `http` the process's shared client ([`crate::app::http_client`]); `token` a Threads user
    /// access token with `threads_basic` and `threads_content_publish`.
    pub fn new(http: reqwest::Client, api_url: &str, user: &str, token: Secret) -> Self {
        Self::with_transport(Transport::real(http), api_url, user, token)
    }

    /// The adapter without a token: it sends nothing, shows the exact requests it would send
    /// (the token as a placeholder) and answers ids marked `dryrun-` ([`dry_answer`]).
    pub fn dry_run(http: reqwest::Client, api_url: &str, user: &str) -> Self {
        let adapter = Self::with_transport(
            Transport::real(http.clone()),
            api_url,
            user,
            Secret::new(TOKEN_PLACEHOLDER),
        );
        let shown_user = adapter.user.clone();
        let answers = std::sync::Arc::new(move |r: &reqwest::Request| dry_answer(&shown_user, r));
        Self {
            transport: Transport::dry(http, answers),
            ..adapter
        }
    }

    fn with_transport(transport: Transport, api_url: &str, user: &str, token: Secret) -> Self {
        let user = user.trim();
        Self {
            transport,
            base: api_url.trim().trim_end_matches('/').to_owned(),
            user: if user.is_empty() {
                DEFAULT_USER.to_owned()
            } else {
                user.to_owned()
            },
            redactor: Redactor::default().hide(&token, TOKEN_PLACEHOLDER),
            token,
            budget: DEFAULT_BUDGET,
            page_size: LIST_PAGE_SIZE,
            max_pages: LIST_MAX_PAGES,
        }
    }

    /// Sizes the waits for `FINISHED` inside one call's budget (`POSTONCE_THREADS_TIMEOUT_MS`).
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Page size (1–100) and page count of the lookup among the account's posts.
    #[must_use]
    pub fn with_list_limits(mut self, page_size: u8, max_pages: u32) -> Self {
        self.page_size = page_size.clamp(1, 100);
        self.max_pages = max_pages.max(1);
        self
    }

    fn clean(&self, e: PostError) -> PostError {
        self.redactor.error(e)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{API_VERSION}/{path}", self.base)
    }

    fn get(&self, path: &str, query: &[(&str, &str)]) -> reqwest::RequestBuilder {
        self.transport
            .client()
            .get(self.url(path))
            .query(query)
            .query(&[("access_token", self.token.expose())])
    }

    /// Sends `req` (a GET made by [`Self::get`]).
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, PostError> {
        self.transport.send(req).await.map_err(wire::transport)
    }

    /// Sends a form with the token; a dry run shows its fields one a line, the token as its
    /// placeholder.
    async fn send_form(
        &self,
        path: &str,
        fields: &[(&str, String)],
    ) -> Result<reqwest::Response, PostError> {
        let mut form: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        form.push(("access_token", self.token.expose()));
        let req = self.transport.client().post(self.url(path)).form(&form);
        let shown = || {
            // Values quoted (a caption may hold anything), ids bare, as the dry run showed them.
            let mut lines: Vec<String> = fields
                .iter()
                .map(|(k, v)| match *k {
                    "creation_id" => format!("{k}={v}"),
                    _ => format!("{k}={v:?}"),
                })
                .collect();
            lines.push(format!("access_token={TOKEN_PLACEHOLDER}"));
            Some(lines)
        };
        self.transport
            .send_showing(req, shown)
            .await
            .map_err(wire::transport)
    }

    fn user_path(&self, tail: &str) -> String {
        format!("{}/{tail}", enc(&self.user))
    }
}

#[async_trait]
impl NetworkAdapter for ThreadsAdapter {
    fn network(&self) -> Network {
        Network::Threads
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        text::threads_len(text)
    }

    /// Sends nothing: Threads fetches the image itself from the draft's URL (see
    /// [`NetworkAdapter::stage`]); the reference carries the alt text.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        Ok(media_ref(media.alt.as_deref()))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepared(text, media)
    }

    /// Makes the container of `post` with `image`, the draft's own URL
    /// (`POST /{user}/threads`: `media_type=IMAGE`, `image_url`, `text`, `alt_text`), and
    /// answers `post` with its id as `creation_id`, to be stored in the intent before anything
    /// is published. Waits for `FINISHED` for most of the budget; a container still in
    /// progress is handed on (`create` waits again), one in `ERROR` is refused here, before any
    /// intent. Safe to repeat: a container no kept request names is never published. A post
    /// already staged is answered as it is.
    async fn stage(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        self.stage_with(post, image).await
    }

    /// Waits for the kept container to be `FINISHED`, publishes it once
    /// (`POST /{user}/threads_publish`, `creation_id`), and reads the post's permalink.
    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        match self.create_once(post).await {
            Ok(created) => Ok(created),
            Err(e) => {
                let e = self.clean(e);
                tracing::warn!(network = NETWORK, "publish failed: {e}");
                Err(e)
            }
        }
    }

    /// Settles a lost publish from the kept container's status: `PUBLISHED` → the post (found
    /// among the account's posts since the attempt for its id and permalink); `FINISHED` or
    /// `IN_PROGRESS` → `None` (not posted: the same container may be published); `EXPIRED` or
    /// `ERROR` → refused (not posted, and it never will be from this container).
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        self.find_once(post, since).await.map_err(|e| self.clean(e))
    }

    /// The publishing quota's use: one harmless read that needs a working token.
    async fn check(&self) -> Result<String, PostError> {
        if self.transport.is_dry_run() {
            return Ok("dry run: THREADS_ACCESS_TOKEN is not set, nothing is sent to Threads".into());
        }
        let (used, total, duration) = self.publishing_limit().await?;
        Ok(format!(
            "Threads (user {}): {used} of {total} posts published through the API in the last {} h",
            self.user,
            duration / 3600
        ))
    }
}

/// What the Threads API answers a dry run: the container's and the post's ids marked, the
/// container ready at once (`FINISHED`), the post's permalink, no post found among the
/// account's.
fn dry_answer(user: &str, request: &reqwest::Request) -> (u16, Value) {
    let path = request.url().path();
    let id = path.rsplit('/').next().unwrap_or_default();
    let fields = request
        .url()
        .query_pairs()
        .find(|(k, _)| k == "fields")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    match request.method().as_str() {
        "POST" => (200, json!({ "id": dry_id() })),
        _ if path.ends_with("/threads") => (200, json!({ "data": [] })),
        _ if fields.starts_with("status") => (200, json!({"id": id, "status": "FINISHED"})),
        _ => (
            200,
            json!({"id": id, "permalink": format!("https://www.threads.com/@{user}/post/{id}")}),
        ),
    }
}

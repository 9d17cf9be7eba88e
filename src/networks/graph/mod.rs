//! Meta's Graph-style publishing, shared by Threads and Instagram (Meta's documentation of both): both publish through a **media container**. A post is
//! made in two calls, `POST /{user}/<container path>` (the container: image URL, text, alt
//! text) and `POST /{user}/<publish path>` with that container's id, and one container yields
//! at most one post. The container's status (`IN_PROGRESS`, `FINISHED`, `PUBLISHED`, `ERROR`,
//! `EXPIRED`) can be read at any time, so an unanswered publish is settled by reading it:
//! `PUBLISHED` → the post exists (found among the account's recent posts for its id and
//! permalink), `FINISHED` → nothing was posted and the same container may be published again,
//! `EXPIRED` / `ERROR` → nothing was, or ever will be, posted from it.
//!
//! What differs between the two networks (paths, field names, the version, the words for the
//! owner, the publishing quota) is a [`Dialect`], one per network folder; everything else is
//! here, once: the adapter [`GraphAdapter`], its two posting calls (`publish.rs`), its reading
//! back (`lookup.rs`) and the Graph wire format and classifier (`wire.rs`).
//!
//! Which step makes the container. The container id must be in the intent before the publish
//! is sent, and a draft must never have two containers that could both publish. A container
//! publishes only when the publish names it, and this adapter names only the one its
//! [`PreparedPost`] carries, which is what the pipeline stores in the intent and replays. So
//! the container is made by [`NetworkAdapter::stage`], which the pipeline runs after `prepare`
//! (the container needs the text) and before it writes the intent; [`NetworkAdapter::create`]
//! only waits for `FINISHED`, publishes the container of the kept request, and reads the
//! permalink. `upload` cannot make it: it has no text. A container made by a stage whose
//! answer was lost (the stage is retried), by a run whose intent was refused, or by a process
//! that died before its intent was written is named nowhere: it is never published and expires
//! unpublished after 24 hours. Every later publish of the draft (the reconcile after a lost
//! answer) replays the kept request, that is the same container, and only after its status
//! said `FINISHED`; a new container is made only by a new attempt, which the pipeline starts
//! only when the kept one cannot have posted (`EXPIRED` / `ERROR`: [`PostError::Gone`]).
//! [`NetworkAdapter::upload`] sends nothing: the network fetches the image itself from the
//! draft's own URL, which `stage` puts in the container.
//!
//! Waiting for `FINISHED` is short polling inside the call's budget, not Meta's
//! once-a-minute advice (which is for video): the stage polls for most of its budget and, if
//! the container is still in progress, hands it on anyway; `create` polls for at most half of
//! its budget, keeping the rest for the publish and the permalink.
//!
//! The token travels as the `access_token` parameter (query for reads, form for writes). It
//! never reaches a `Debug` output, an error or a log line: reqwest's errors are taken without
//! their URL and every message leaving the adapter is redacted as well, in case a server echoes
//! it. Without a token it is a dry run ([`GraphAdapter::dry_run`]): the same adapter on the
//! dry [`Transport`], its requests shown instead of sent, answered by [`dry_answer`]. Holds no
//! policy: the pipeline decides.

pub mod auth;
pub mod config;
mod lookup;
mod publish;
pub mod wire;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use crate::networks::http::{Redactor, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::Secret;

/// How the Graph answers' classifier ([`wire::classify`]) speaks of one network: its name, the
/// variables it names and the fixes it gives. Every network on the Graph API has one (the
/// Facebook Page too, which stages no container).
pub struct Voice {
    pub network: Network,
    /// How [`PostError`]s name it (its label).
    pub name: &'static str,
    /// What the owner is told to do when the token is refused.
    pub renew: &'static str,
    /// The account's variable (`THREADS_USER_ID`), and the API base's with its default.
    pub user_var: &'static str,
    pub api_var: &'static str,
    pub default_api_url: &'static str,
    /// The publishing quota when the quota read names none; 0: the network publishes without
    /// one (the Page), and a rate-limit answer says only that.
    pub default_quota: u64,
    /// The images it takes, for people.
    pub image_rule: &'static str,
    /// The scope a read of the account's posts needs.
    pub read_scope: &'static str,
}

/// What one network's Graph API calls things: everything of the container primitive that is
/// not the same for Threads and Instagram, and its [`Voice`] (reached through it, as
/// `dialect.name`).
pub struct Dialect {
    pub voice: Voice,
    /// The API version in every path (`v1.0`, `v25.0`).
    pub version: &'static str,
    /// The token's variable, and what stands for it in dry runs and redacted messages.
    pub token_var: &'static str,
    pub token_placeholder: &'static str,
    /// The budget's variable (`POSTONCE_THREADS_TIMEOUT_MS`).
    pub timeout_var: &'static str,
    /// `POST /{user}/<container>` makes a container; `GET` on it lists the account's posts.
    pub container_path: &'static str,
    /// `POST /{user}/<publish>` publishes one.
    pub publish_path: &'static str,
    /// `GET /{user}/<quota>?fields=quota_usage,config`.
    pub quota_path: &'static str,
    /// Fields every container carries (`media_type=IMAGE` for Threads).
    pub container_fixed: &'static [(&'static str, &'static str)],
    /// The field that holds the text, in the container and in the listed posts.
    pub text_field: &'static str,
    /// The status read: its `fields`, the field holding the status and the one holding its
    /// error.
    pub status_fields: &'static str,
    pub status_key: &'static str,
    pub error_key: &'static str,
    /// Whether the publishing quota is read before every publish (and a used-up quota
    /// refuses it, nothing sent).
    pub quota_before_publish: bool,
    /// Whether the account's posts are listed newest first (documented for Threads,
    /// unconfirmed for Instagram).
    pub newest_first: bool,
    /// A post's permalink as the dry run shows it.
    pub dry_permalink: fn(user: &str, id: &str) -> String,
    /// What is wrong with the account (`me` or an id) for this API base, if anything.
    pub check_account: fn(user: &str, api_url: &str) -> Option<String>,
    pub capabilities: fn() -> Capabilities,
    pub text_len: fn(&str) -> usize,
}

impl std::ops::Deref for Dialect {
    type Target = Voice;

    fn deref(&self) -> &Voice {
        &self.voice
    }
}

/// A network whose posts go through a Graph media container: its [`Dialect`].
pub trait Meta: Send + Sync + 'static {
    const DIALECT: &'static Dialect;
}

/// The default account: the token's own.
pub const DEFAULT_USER: &str = "me";
/// The default per-call budget, until [`GraphAdapter::with_budget`] says.
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

// ---------------------------------------------------------------------------------------------
// The request.

/// The image as [`NetworkAdapter::upload`] answers it: its alt text only. The network fetches
/// the image itself; its URL comes with [`NetworkAdapter::stage`].
pub fn media_ref(d: &Dialect, alt: Option<&str>) -> MediaRef {
    let mut v = json!({ "image": format!("fetched by {} from the draft's URL", d.name) });
    if let Some(alt) = alt.map(str::trim).filter(|a| !a.is_empty()) {
        v["alt_text"] = json!(alt);
    }
    MediaRef(v)
}

/// The kept request before [`NetworkAdapter::stage`]: the container's fields, as the container
/// call sends them (less the token and the image URL, which the stage adds). Shared with the
/// dry run.
pub fn prepared(d: &Dialect, text: &str, media: &MediaRef) -> PreparedPost {
    let mut container = json!({});
    for (k, v) in d.container_fixed {
        container[*k] = json!(v);
    }
    container[d.text_field] = json!(text);
    if let Some(alt) = media.0.get("alt_text").and_then(Value::as_str) {
        container["alt_text"] = json!(alt);
    }
    PreparedPost {
        body: json!({ "container": container }),
        text: text.to_owned(),
        key: None,
    }
}

/// The container a staged request publishes (the publish's `creation_id`).
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

/// Publishes to one account through a Graph API's media containers.
pub struct GraphAdapter<M: Meta> {
    transport: Transport,
    base: String,
    user: String,
    token: Secret,
    /// Keeps the token out of every message that leaves the adapter.
    redactor: Redactor,
    budget: Duration,
    page_size: u8,
    max_pages: u32,
    meta: PhantomData<M>,
}

impl<M: Meta> fmt::Debug for GraphAdapter<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `ThreadsAdapter`, `InstagramAdapter`: the network's own name for its adapter.
        let name = format!("{}Adapter", M::DIALECT.name);
        f.debug_struct(&name)
            .field("base", &self.base)
            .field("user", &self.user)
            .field("token", &self.token)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<M: Meta> GraphAdapter<M> {
    const D: &'static Dialect = M::DIALECT;

    /// `api_url`: the API base (`THREADS_API_URL`, `INSTAGRAM_API_URL`); `user`: the
    /// account's id or `me`; `http` the process's shared client ([`crate::app::http_client`]);
    /// `token` a user access token that may publish.
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
            Secret::new(Self::D.token_placeholder),
        );
        let shown_user = adapter.user.clone();
        let answers =
            std::sync::Arc::new(move |r: &reqwest::Request| dry_answer(Self::D, &shown_user, r));
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
            redactor: Redactor::default().hide(&token, Self::D.token_placeholder),
            token,
            budget: DEFAULT_BUDGET,
            page_size: LIST_PAGE_SIZE,
            max_pages: LIST_MAX_PAGES,
            meta: PhantomData,
        }
    }

    /// Sizes the waits for `FINISHED` inside one call's budget.
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
        format!("{}/{}/{path}", self.base, Self::D.version)
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
        self.transport
            .send(req)
            .await
            .map_err(|e| wire::transport(Self::D, e))
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
            lines.push(format!("access_token={}", Self::D.token_placeholder));
            Some(lines)
        };
        self.transport
            .send_showing(req, shown)
            .await
            .map_err(|e| wire::transport(Self::D, e))
    }

    fn user_path(&self, tail: &str) -> String {
        format!("{}/{tail}", enc(&self.user))
    }
}

#[async_trait]
impl<M: Meta> NetworkAdapter for GraphAdapter<M> {
    fn network(&self) -> Network {
        Self::D.network
    }

    fn capabilities(&self) -> Capabilities {
        (Self::D.capabilities)()
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        (Self::D.text_len)(text)
    }

    /// Sends nothing: the network fetches the image itself from the draft's URL (see
    /// [`NetworkAdapter::stage`]); the reference carries the alt text.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        Ok(media_ref(Self::D, media.alt.as_deref()))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepared(Self::D, text, media)
    }

    /// Makes the container of `post` with `image`, the draft's own URL, and answers `post`
    /// with its id as `creation_id`, to be stored in the intent before anything is published.
    /// Waits for `FINISHED` for most of the budget; a container still in progress is handed on
    /// (`create` waits again), one in `ERROR` is refused here, before any intent. Safe to
    /// repeat: a container no kept request names is never published. A post already staged is
    /// answered as it is.
    async fn stage(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        self.stage_with(post, image).await
    }

    /// Waits for the kept container to be `FINISHED`, publishes it once (`creation_id`), and
    /// reads the post's permalink.
    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        match self.create_once(post).await {
            Ok(created) => Ok(created),
            Err(e) => {
                let e = self.clean(e);
                tracing::warn!(network = Self::D.name, "publish failed: {e}");
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
        let d = Self::D;
        if self.transport.is_dry_run() {
            return Ok(format!(
                "dry run: {} is not set, nothing is sent to {}",
                d.token_var, d.name
            ));
        }
        let (used, total, duration) = self.publishing_limit().await?;
        Ok(format!(
            "{} (user {}): {used} of {total} posts published through the API in the last {} h",
            d.name,
            self.user,
            duration / 3600
        ))
    }
}

/// What a Graph API answers a dry run: the container's and the post's ids marked, the
/// container ready at once (`FINISHED`), the quota unused, the post's permalink, no post found
/// among the account's.
fn dry_answer(d: &Dialect, user: &str, request: &reqwest::Request) -> (u16, Value) {
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
        _ if path.ends_with(&format!("/{}", d.container_path)) => (200, json!({ "data": [] })),
        _ if path.ends_with(&format!("/{}", d.quota_path)) => (
            200,
            json!({"data": [{"quota_usage": 0, "config": {"quota_total": d.default_quota, "quota_duration": 86_400}}]}),
        ),
        _ if fields == d.status_fields => {
            let mut v = json!({ "id": id });
            v[d.status_key] = json!("FINISHED");
            (200, v)
        }
        _ => (
            200,
            json!({"id": id, "permalink": (d.dry_permalink)(user, id)}),
        ),
    }
}

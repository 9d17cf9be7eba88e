//! A Facebook Page (the Graph API's Pages endpoints, `v25.0`). Its idempotency primitive:
//! none. A create carries no key; a repeat may be refused with error 506 ("Duplicate Post")
//! or subcode 1366051 ("These photos were already posted"), neither naming the post, and may
//! as well be taken (a Page takes the same photo twice). So the pipeline writes the intent
//! before the create and settles an ambiguous create as for X: after the quiet period it reads
//! the Page's recent published posts back for the exact caption, posted since the attempt;
//! when the read cannot tell, the owner decides. The adapter claims
//! [`Idempotency::DuplicateWithoutId`] and `reads_back`.
//!
//! The post: one call, `POST /{page}/photos` with the photo's bytes as multipart `source`,
//! `message` (the caption) and `published=true`, answered `{"id":<photo>,"post_id":<page>_<post>}`.
//! One call, because only it creates anything: a lost answer leaves one thing in doubt, and
//! nothing is made before the intent (the two-step form uploads an unpublished photo first).
//! The bytes rather than a `url`, because Facebook then gets exactly the bytes postonce checked
//! (a rendition, a local cover), without a public URL to fetch.
//!
//! The token travels as the `access_token` parameter (query for reads, form for the create)
//! and never reaches a `Debug` output, an error or a log line ([`Redactor`]). Without a token
//! it is a dry run: the same adapter on the dry [`Transport`], answered by [`dry_answer`].
//! Errors are classified by [`wire::classify`], on top of the Graph classifier of
//! [`crate::networks::graph`] (190 → [`PostError::CredentialRefused`]).

pub mod auth;
pub mod config;
mod page;
pub mod wire;

#[cfg(test)]
mod tests;

use std::fmt;

use async_trait::async_trait;
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

use crate::image::{Format, Formats};
use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::networks::graph::wire::{comparable, Op};
use crate::networks::graph::Voice;
use crate::networks::http::{Answer, Redactor, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::Secret;

pub use config::DEFINITION;

/// `FACEBOOK_API_URL`'s default.
pub const DEFAULT_API_URL: &str = "https://graph.facebook.com";
/// The API version in every path.
pub const API_VERSION: &str = "v25.0";
/// Facebook's caption limit (63,206 characters: widely cited, observed) is beyond what postonce
/// takes at input ([`crate::networks::INPUT_MAX_CHARS`]): the Page's limit is that one.
pub const MAX_TEXT: usize = crate::networks::INPUT_MAX_CHARS;
/// Posts asked for per page when looking one up, and pages read at most.
pub const LIST_PAGE_SIZE: u8 = 25;
pub const LIST_MAX_PAGES: u32 = 4;
/// Listed posts may be this much older than the attempt (clock skew with Meta).
const CLOCK_SLACK_S: i64 = 600;
const TOKEN_PLACEHOLDER: &str = "<FACEBOOK_PAGE_TOKEN>";
/// What a dry run without `FACEBOOK_PAGE_ID` shows for the Page.
const PAGE_PLACEHOLDER: &str = "FACEBOOK_PAGE_ID";

/// How the shared Graph classifier speaks of the Page: its name, variables and fixes (the Page
/// publishes no container, so it has no [`crate::networks::graph::Dialect`]).
pub static VOICE: Voice = Voice {
    network: Network::Facebook,
    name: "Facebook",
    renew: "run `postonce auth facebook` again for a new Page token (one derived from a long-lived user token does not expire, but dies on a password change, the loss of the Page role or the app's removal), or set FACEBOOK_PAGE_TOKEN to a Page token with pages_manage_posts, pages_read_engagement and pages_show_list",
    user_var: config::PAGE_VAR,
    api_var: config::API_VAR,
    default_api_url: DEFAULT_API_URL,
    default_quota: 0,
    image_rule: "a JPEG or PNG of less than 4 MB",
    read_scope: "pages_read_engagement",
};

/// A post's public URL from its id (`<page id>_<post id>`, or a photo's id).
pub fn post_url(id: &str) -> String {
    format!("https://www.facebook.com/{id}")
}

/// No idempotency key; a duplicate refused without its id; the Page's posts read back; a
/// caption of at most postonce's input limit (Facebook's own is 63,206); a JPEG or PNG under 4 MB, its bytes sent with the create.
pub fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::DuplicateWithoutId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::Chars,
        },
        images: ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: wire::MAX_PHOTO_BYTES,
            ..ImageLimits::default()
        },
        links: Links::AsText,
        create_carries_image: true,
        ..Capabilities::default()
    }
}

/// Publishes photo posts to one Facebook Page with its Page token.
pub struct FacebookAdapter {
    transport: Transport,
    base: String,
    page: String,
    token: Secret,
    redactor: Redactor,
    page_size: u8,
    max_pages: u32,
}

impl fmt::Debug for FacebookAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FacebookAdapter")
            .field("base", &self.base)
            .field("page", &self.page)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl FacebookAdapter {
    /// `api_url`: `FACEBOOK_API_URL`; `page`: the Page's id; `token`: its Page token.
    pub fn new(http: reqwest::Client, api_url: &str, page: &str, token: Secret) -> Self {
        Self {
            transport: Transport::real(http),
            base: api_url.trim().trim_end_matches('/').to_owned(),
            page: page.trim().to_owned(),
            redactor: Redactor::default().hide(&token, TOKEN_PLACEHOLDER),
            token,
            page_size: LIST_PAGE_SIZE,
            max_pages: LIST_MAX_PAGES,
        }
    }

    /// The adapter without a token: it sends nothing, shows the exact requests (the token as
    /// a placeholder) and answers ids marked `dryrun-`.
    pub fn dry_run(http: reqwest::Client, api_url: &str, page: Option<&str>) -> Self {
        let page = page.unwrap_or(PAGE_PLACEHOLDER).to_owned();
        let shown = page.clone();
        let adapter = Self::new(http.clone(), api_url, &page, Secret::new(TOKEN_PLACEHOLDER));
        Self {
            transport: Transport::dry(
                http,
                std::sync::Arc::new(move |r: &reqwest::Request| dry_answer(&shown, r)),
            ),
            ..adapter
        }
    }

    /// Page size (1–100) and page count of the lookup among the Page's posts.
    #[must_use]
    pub fn with_list_limits(mut self, page_size: u8, max_pages: u32) -> Self {
        self.page_size = page_size.clamp(1, 100);
        self.max_pages = max_pages.max(1);
        self
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/{API_VERSION}/{}{tail}", self.base, self.page)
    }

    /// Sends `req` and reads its answer: a 2xx's JSON, else [`wire::classify`]'s error, the
    /// token kept out of both.
    async fn call(
        &self,
        req: reqwest::RequestBuilder,
        op: Op,
        shown: impl FnOnce() -> Option<Vec<String>>,
    ) -> Result<Value, PostError> {
        let result = async {
            let resp = self
                .transport
                .send_showing(req, shown)
                .await
                .map_err(|e| crate::networks::http::transport(VOICE.name, e))?;
            let a = Answer::read(VOICE.name, resp).await?;
            if a.is_success() {
                return a.json(VOICE.name);
            }
            Err(wire::classify(op, a.status, &a.headers, &a.body))
        }
        .await;
        result.map_err(|e| self.redactor.error(e))
    }

    /// A read of the Page (`GET /{page}<tail>`), the token in the query.
    async fn read(&self, tail: &str, query: &[(&str, &str)], op: Op) -> Result<Value, PostError> {
        let req = self
            .transport
            .client()
            .get(self.url(tail))
            .query(query)
            .query(&[("access_token", self.token.expose())]);
        self.call(req, op, || None).await
    }

    /// `POST /{page}/photos`, multipart: `source` (the bytes), `message`, `published=true`,
    /// `access_token`.
    async fn post_photo(&self, message: &str, media: &Media) -> Result<Value, PostError> {
        let source = Part::bytes(media.bytes.to_vec())
            .file_name(if media.content_type == "image/png" { "cover.png" } else { "cover.jpg" })
            .mime_str(media.content_type)
            .map_err(|_| wire::refusal("the image's content type is not a valid MIME type"))?;
        let form = Form::new()
            .part("source", source)
            .text("message", message.to_owned())
            .text("published", "true")
            .text("access_token", self.token.expose().to_owned());
        let req = self.transport.client().post(self.url("/photos")).multipart(form);
        let shown = || {
            Some(vec![
                format!(
                    "source=<{} bytes {}, sha256 {}>",
                    media.bytes.len(),
                    media.content_type,
                    wire::media_ref(media).ok()?.0["sha256"].as_str()?
                ),
                format!("message={message:?}"),
                "published=true".to_owned(),
                format!("access_token={TOKEN_PLACEHOLDER}"),
            ])
        };
        self.call(req, Op::Check, shown).await
    }

    /// The Page's published posts since `since` (less the clock slack), newest first, for one
    /// whose caption is exactly `text`.
    async fn find_text(&self, text: &str, since: i64) -> Result<Option<Created>, PostError> {
        let wanted = comparable(text);
        let limit = self.page_size.to_string();
        let mut after: Option<String> = None;
        for _ in 0..self.max_pages {
            let mut query = vec![
                ("fields", "id,message,created_time,permalink_url"),
                ("limit", limit.as_str()),
            ];
            if let Some(a) = &after {
                query.push(("after", a.as_str()));
            }
            let v = self.read("/published_posts", &query, Op::List).await?;
            let (posts, next) = wire::list_page(&v);
            let recent = |p: &wire::PagePost| p.created_time.is_none_or(|t| t >= since - CLOCK_SLACK_S);
            if let Some(p) = posts.iter().find(|p| recent(p) && p.message == wanted) {
                return Ok(Some(Created {
                    id: Some(p.id.clone()),
                    url: Some(p.permalink_url.clone().unwrap_or_else(|| post_url(&p.id))),
                    cid: None,
                }));
            }
            // Newest first: once a page reaches before the attempt, older pages cannot hold it.
            if next.is_none() || !posts.iter().all(recent) {
                return Ok(None);
            }
            after = next;
        }
        tracing::info!(
            pages = self.max_pages,
            "Facebook: the post was not among the pages read; older posts were not looked at"
        );
        Ok(None)
    }
}

impl FacebookAdapter {
    /// Facebook refused the create as a duplicate (506, 1366051), naming nothing: a signal
    /// only. The Page's recent posts are read for the caption: found → that post
    /// ([`PostError::AlreadyExists`] with its id, for the pipeline to record or to refuse);
    /// not found, or the read failed → in doubt (the pipeline settles it, or the owner does).
    async fn duplicate(&self, message: &str) -> PostError {
        let why = match self.find_text(message, 0).await {
            Ok(Some(existing)) => {
                return PostError::AlreadyExists {
                    network: VOICE.name,
                    existing,
                }
            }
            Ok(None) => "it is not among the Page's recent posts".to_owned(),
            Err(e) => format!("reading the Page's posts failed: {e}"),
        };
        PostError::InDoubt {
            network: VOICE.name,
            message: format!("Facebook refused the post as a duplicate without naming one, and {why}"),
        }
    }
}

/// What the Graph API answers a dry run: the photo's and the post's ids marked, the Page by
/// its id, no post found among the Page's.
fn dry_answer(page: &str, request: &reqwest::Request) -> (u16, Value) {
    let path = request.url().path();
    if request.method() == reqwest::Method::POST {
        // Marked ids only (a real `<page>_<post>` would not read as a dry run's).
        return (200, json!({"id": dry_id(), "post_id": dry_id()}));
    }
    if path.ends_with("/published_posts") {
        return (200, json!({"data": []}));
    }
    (200, json!({"id": page, "name": "<the Page's name>"}))
}

#[async_trait]
impl NetworkAdapter for FacebookAdapter {
    fn network(&self) -> Network {
        Network::Facebook
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        text.chars().count()
    }

    /// Sends nothing: the bytes travel with the create. The reference describes them.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        wire::media_ref(media)
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        wire::prepared(&self.page, text, media)
    }

    /// `POST /{page}/photos` once, with the kept caption and the photo it was prepared with.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let message = wire::unpack(post, media)?;
        let v = match self.post_photo(message, media).await {
            Err(PostError::AlreadyExists { .. }) => return Err(self.duplicate(message).await),
            answer => answer?,
        };
        let created = wire::created(&v);
        if created.id.is_none() {
            tracing::warn!("Facebook created the post but its answer carried no id");
        }
        Ok(created)
    }

    /// Reads the Page's published posts back for the exact caption, posted since the attempt
    /// (less a clock slack); at most the configured number of pages.
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        self.find_text(&post.text, since).await
    }

    /// `GET /{page}?fields=id,name`: one harmless read that needs a working Page token.
    async fn check(&self) -> Result<String, PostError> {
        if self.transport.is_dry_run() {
            return Ok("dry run: FACEBOOK_PAGE_TOKEN and FACEBOOK_PAGE_ID are not both set, nothing is sent to Facebook".into());
        }
        let v = self.read("", &[("fields", "id,name")], Op::Check).await?;
        let name = v.get("name").and_then(Value::as_str).unwrap_or("?");
        Ok(format!("the Facebook Page {name} ({}) accepts the token", self.page))
    }
}

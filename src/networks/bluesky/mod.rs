//! Bluesky. Its idempotency primitive is the record key: the client chooses it (a TID), and
//! `com.atproto.repo.putRecord` of byte-identical content at that key is a no-op that answers
//! the same uri and cid, while `"swapRecord": null` makes the PDS refuse (400 `InvalidSwap`)
//! rather than overwrite a different record there. So the key and the exact record (its
//! `createdAt` included) are chosen by [`NetworkAdapter::prepare`] and stored by the pipeline
//! before the first call, and replaying the stored request is safe at any time, a day later
//! included; `getRecord` at the key tells whether the post exists.
//!
//! The adapter speaks AT Protocol XRPC to the account's PDS (wire facts in
//! `xrpc.rs` and `wire.rs`): an app-password session kept for the process and in the record
//! store, the image blob upload, the `app.bsky.feed.post` record, and `getRecord`. It holds
//! no policy: the pipeline decides. Here: the adapter; `session.rs` the login, refresh and the
//! stored session; `xrpc.rs` the calls and what their answers mean; `wire.rs` the record key,
//! the record and its blob; `text.rs` the text limit and the facets; [`config`] the
//! variables. Without credentials it is a dry run ([`BlueskyAdapter::dry_run`]): the same
//! adapter on the dry [`Transport`], its requests shown instead of sent, answered by
//! [`dry_answer`].

pub mod auth;
pub mod config;
mod session;
mod text;
mod wire;
mod xrpc;

pub use config::DEFINITION;
pub use session::SESSION_NAME;
pub use text::{
    facets, grapheme_len, links, tags, text_len, Link, Tag, MAX_TAG_BYTES, MAX_TAG_GRAPHEMES,
};
pub use wire::{created_at, images_embed, is_tid, post_record, put_record_body, tid};
pub use xrpc::{classify, Op};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::image::{Format, Formats};
use crate::networks::fresh::FreshUploads;
use crate::networks::http::Transport;
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
    SessionStore,
};
use crate::vars::Secret;
use session::Session;
use wire::{
    address, blob_cid, blob_link, check_blob_size, is_blob_of, prepared, record_blob, same_blob,
    uri_authority,
};
use xrpc::{before_put, local_refusal, Body, Xrpc};

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "Bluesky";

/// `BLUESKY_PDS_URL`'s default.
pub const DEFAULT_PDS: &str = "https://bsky.social";

/// The post text limit, in graphemes (`app.bsky.feed.post` `maxGraphemes`).
pub const MAX_TEXT: usize = 300;

/// The post text limit in UTF-8 bytes (`maxLength`), the second limit the lexicon sets.
pub const MAX_TEXT_BYTES: usize = 3000;

/// The largest image blob sent, in bytes. The lexicon's image `maxSize` was 1,000,000 before
/// atproto #4823 (2,000,000 since), and older PDSs (the `@atproto/pds` 0.5.35 tried, many
/// self-hosted ones) still refuse more, and only at `putRecord`, after the upload. A larger
/// image is refused before any call.
pub const MAX_IMAGE_BLOB_BYTES: usize = 1_000_000;

/// The collection posts are written to.
pub const COLLECTION: &str = "app.bsky.feed.post";

/// The public URL of a post (web-app convention; the DID form survives handle changes).
pub fn post_url(authority: &str, rkey: &str) -> String {
    format!("https://bsky.app/profile/{authority}/post/{rkey}")
}

fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::ClientChosenId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::Graphemes,
        },
        images: ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Webp]),
            max_bytes: MAX_IMAGE_BLOB_BYTES as u64,
            ..ImageLimits::default()
        },
        links: Links::Facets,
        ..Capabilities::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Uploads within an attempt.

/// How long after an upload its blob is taken to be there for the create of the same attempt:
/// well inside the time a PDS keeps a blob no record references ("minutes").
const FRESH_FOR: Duration = Duration::from_secs(60);

/// Marks the record key of `post` as prepared just after its image was uploaded: the
/// attempt's create that follows need not upload it again ([`FreshUploads`]).
fn mark_fresh(fresh: &FreshUploads, post: &PreparedPost) {
    if record_blob(&post.body).is_none() {
        return;
    }
    if let Some(rkey) = &post.key {
        fresh.mark(rkey);
    }
}

// ---------------------------------------------------------------------------------------------
// The adapter.

/// What `putRecord` answered: the record's at-uri and cid, the public URL, and whether the
/// PDS wrote anything (`false`: the identical record was already there, a no-op).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutAnswer {
    pub uri: String,
    /// `None` only if a 2xx came without one (the record exists all the same).
    pub cid: Option<String>,
    pub url: String,
    pub wrote: bool,
}

impl PutAnswer {
    pub fn created(&self) -> Created {
        Created {
            id: Some(self.uri.clone()),
            url: Some(self.url.clone()),
            cid: self.cid.clone(),
        }
    }
}

/// Publishes to Bluesky through the account's PDS, logged in with an app password.
pub struct BlueskyAdapter {
    transport: Transport,
    pds: String,
    identifier: String,
    password: Secret,
    session: Mutex<Option<Session>>,
    langs: Vec<String>,
    /// Where the session is kept between processes, and each call's budget there.
    store: Option<(Arc<dyn SessionStore>, Duration)>,
    fresh: FreshUploads,
}

impl fmt::Debug for BlueskyAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = self
            .session
            .try_lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| format!("@{} ({})", s.handle, s.did)));
        f.debug_struct("BlueskyAdapter")
            .field("pds", &self.pds)
            .field("identifier", &self.identifier)
            .field("app_password", &self.password)
            .field("session", &session)
            .finish_non_exhaustive()
    }
}

impl BlueskyAdapter {
    /// `pds_url` is the account's PDS (`https://bsky.social`, `BLUESKY_PDS_URL`);
    /// `identifier` the handle or DID (`BLUESKY_IDENTIFIER`); `http` the process's shared
    /// client ([`crate::app::http_client`]).
    pub fn new(
        http: reqwest::Client,
        pds_url: &str,
        identifier: &str,
        app_password: Secret,
    ) -> Self {
        Self::with_transport(Transport::real(http), pds_url, identifier, app_password)
    }

    /// The adapter without credentials: it sends nothing, shows the exact requests it would
    /// send (the app password and the session's tokens as placeholders) and answers ids marked
    /// `dryrun-` ([`dry_answer`]). `identifier`: `BLUESKY_IDENTIFIER` when set without a
    /// password.
    pub fn dry_run(http: reqwest::Client, pds_url: &str, identifier: Option<&str>) -> Self {
        let identifier = identifier
            .map(|i| i.trim().trim_start_matches('@'))
            .filter(|i| !i.is_empty())
            .unwrap_or("<BLUESKY_IDENTIFIER>");
        Self::with_transport(
            Transport::dry(http, Arc::new(dry_answer)),
            pds_url,
            identifier,
            Secret::new("<BLUESKY_APP_PASSWORD>"),
        )
    }

    fn with_transport(
        transport: Transport,
        pds_url: &str,
        identifier: &str,
        app_password: Secret,
    ) -> Self {
        Self {
            transport,
            pds: pds_url.trim_end_matches('/').to_owned(),
            identifier: identifier.trim().trim_start_matches('@').to_owned(),
            password: app_password,
            session: Mutex::new(None),
            langs: vec![],
            store: None,
            fresh: FreshUploads::new(FRESH_FOR),
        }
    }

    /// The record's `langs` (BCP-47 tags, at most 3 are kept). Default: none.
    #[must_use]
    pub fn with_langs(mut self, langs: Vec<String>) -> Self {
        self.langs = langs.into_iter().take(3).collect();
        self
    }

    /// `uploadBlob` with the raw bytes → the blob object, verbatim.
    async fn upload_blob(&self, media: &Media) -> Result<Value, PostError> {
        let (_, answer) = self
            .authed(
                Method::POST,
                "com.atproto.repo.uploadBlob",
                &[],
                Body::Bytes(media.bytes.clone(), media.content_type),
            )
            .await?;
        let v = answer.result(Op::Upload)?;
        match v.get("blob") {
            Some(blob) if blob_link(blob).is_some() => Ok(blob.clone()),
            _ => Err(PostError::InDoubt {
                network: NETWORK,
                message: "uploadBlob answered without blob.ref".into(),
            }),
        }
    }

    /// Uploads the image again before a replay, and checks it is the blob the record names.
    async fn upload_again(&self, media: &Media, wanted: &Value) -> Result<(), PostError> {
        let got = self.upload_blob(media).await.map_err(before_put)?;
        if same_blob(&got, wanted) {
            return Ok(());
        }
        Err(local_refusal(&format!(
            "the image given is not the one the post was prepared with (uploaded {}, the record names {}); putRecord was not sent",
            blob_link(&got).unwrap_or("?"),
            blob_link(wanted).unwrap_or("?")
        )))
    }

    /// What [`NetworkAdapter::create`] does, with the whole answer: the cid, and whether the
    /// PDS wrote anything. See `create` for the steps.
    pub async fn put_record(
        &self,
        post: &PreparedPost,
        media: &Media,
    ) -> Result<PutAnswer, PostError> {
        let (rkey, collection) = address(post)?;
        if !media.bytes.is_empty() {
            check_blob_size(media)?;
        }
        let session = self.session().await?;
        let repo = post.body.get("repo").and_then(Value::as_str).unwrap_or("");
        let ours = [
            session.did.as_str(),
            session.handle.as_str(),
            self.identifier.as_str(),
        ];
        if !ours.iter().any(|o| o.eq_ignore_ascii_case(repo)) {
            return Err(local_refusal(&format!(
                "the post was prepared for the repo {repo}, but BLUESKY_IDENTIFIER logs in as @{} ({}); nothing was sent",
                session.handle, session.did
            )));
        }
        let wanted = record_blob(&post.body).filter(|_| !media.bytes.is_empty());
        // The attempt's own upload of these very bytes, a moment ago: the blob is there.
        let mut fresh =
            wanted.is_some_and(|w| self.fresh.take(&rkey) && is_blob_of(w, &media.bytes));
        let mut body = post.body.clone();
        body["repo"] = json!(session.did);
        body["swapRecord"] = Value::Null;
        let (session, answer) = loop {
            if let Some(wanted) = wanted.filter(|_| !fresh) {
                self.upload_again(media, wanted).await?;
            }
            let (session, answer) = self
                .authed(
                    Method::POST,
                    "com.atproto.repo.putRecord",
                    &[],
                    Body::Json(body.clone()),
                )
                .await?;
            // Collected sooner than expected: the refused put wrote nothing, so the image is
            // uploaded and the record written once more.
            if fresh && answer.status == 400 && answer.error_name() == "BlobNotFound" {
                tracing::info!(
                    "Bluesky: the image blob uploaded a moment ago is gone; uploading it again"
                );
                fresh = false;
                continue;
            }
            break (session, answer);
        };
        let status = answer.status;
        let at = format!("at://{}/{collection}/{rkey}", session.did);
        let swap = status == 400 && answer.error_name() == "InvalidSwap";
        let v = answer.result(Op::Put).map_err(|e| match e {
            // Name the key: the owner can look at what is there.
            PostError::Rejected {
                status, message, ..
            } if swap => PostError::Rejected {
                network: NETWORK,
                status,
                message: format!("{message} ({at})"),
            },
            e => e,
        })?;
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .map_or(at, str::to_owned);
        let cid = v.get("cid").and_then(Value::as_str).map(str::to_owned);
        // A dry run's answer carries no cid (nothing was written), as before it was a transport.
        let dry = self.transport.is_dry_run();
        if cid.is_none() && !dry {
            tracing::warn!(
                status,
                "Bluesky wrote the record but its answer carried no cid"
            );
        }
        // A dry run's post is named by its marked id alone (its URL too).
        let authority = match uri_authority(&uri) {
            Some(a) => a.to_owned(),
            None if dry => uri.clone(),
            None => session.did.clone(),
        };
        Ok(PutAnswer {
            url: post_url(&authority, &rkey),
            uri,
            cid,
            wrote: v.get("commit").is_some_and(|c| !c.is_null()),
        })
    }
}

#[async_trait]
impl NetworkAdapter for BlueskyAdapter {
    fn network(&self) -> Network {
        Network::Bluesky
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        text_len(text)
    }

    /// `uploadBlob` with the raw bytes and their Content-Type. The [`MediaRef`] holds the
    /// returned blob object verbatim (`blob`), the alt text (`alt`, empty when there is none)
    /// and the image's `aspectRatio` read from its header (left out if unreadable). An image
    /// over [`MAX_IMAGE_BLOB_BYTES`] is `Rejected` before any call.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        check_blob_size(media)?;
        let blob = self.upload_blob(media).await?;
        let mut r = json!({"blob": blob, "alt": media.alt.as_deref().unwrap_or("")});
        if let Some((width, height)) =
            crate::image::dimensions(&media.bytes).filter(|(w, h)| *w > 0 && *h > 0)
        {
            r["aspectRatio"] = json!({"width": width, "height": height});
        }
        Ok(MediaRef(r))
    }

    /// Chooses the record key (a TID from the current microsecond and a random clock id) and
    /// builds the exact record (`createdAt` now, link and tag facets, the image embed),
    /// returned as the whole `putRecord` input; `key` is the record key. `idempotency` is not
    /// used: the record key plays its part, and must be stored with the record before
    /// `create`. Remembers that the image was just uploaded for this key (the create that
    /// follows need not upload it again).
    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        let post = prepared(&self.identifier, text, media, &self.langs);
        mark_fresh(&self.fresh, &post);
        post
    }

    /// Writes the stored record at the stored key, the same way on the first attempt and on
    /// every replay:
    ///
    /// 1. An image over [`MAX_IMAGE_BLOB_BYTES`] is `Rejected` before any call.
    /// 2. When the record embeds an image and `media.bytes` is not empty, the bytes are
    ///    uploaded again first: the PDS deletes blobs no record references within minutes,
    ///    so a replay after a failed first write would otherwise fail with `BlobNotFound`.
    ///    The blob is content-addressed, so the same bytes give the same blob and the record
    ///    stays byte-identical; different bytes are refused here, before `putRecord`. A failed
    ///    re-upload is reported as `NotSent` (or its 429 / refusal): the create was not sent.
    ///    With empty bytes nothing is uploaded (the blob must still be there). Not on the
    ///    attempt's first create, right after [`NetworkAdapter::prepare`] in this process, with
    ///    the bytes of the blob the record names: that upload was a moment ago (once per
    ///    attempt). Should the PDS have collected it all the same (400 `BlobNotFound`, nothing
    ///    written), it is uploaded and the record written once more.
    /// 3. `putRecord` with the session's DID as `repo` and `"swapRecord": null`. The identical
    ///    record already there is a no-op answering the same uri (→ `Created`, as on the first
    ///    write); a different record there is 400 `InvalidSwap` (→ `Rejected` naming the
    ///    record's at-uri, nothing overwritten). 429 → `RateLimited` (`RateLimit-Reset`); 5xx or
    ///    a timeout after sending → `InDoubt`; a connect error → `NotSent`.
    ///
    /// An expired access token (400 `ExpiredToken`) renews the session and the call is sent
    /// once more.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        self.put_record(post, media).await.map(|p| p.created())
    }

    /// `getRecord` at the stored key (no auth; `since` is not needed). The identical record
    /// → the post; `RecordNotFound` → `None`; a different record there → `None` too: this
    /// post is not on Bluesky under its key (a replay is then refused with `InvalidSwap`,
    /// nothing overwritten).
    async fn find(&self, post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        let (rkey, collection) = address(post)?;
        let session = self.session().await?;
        let answer = self
            .xrpc(
                Method::GET,
                "com.atproto.repo.getRecord",
                &[
                    ("repo", session.did.as_str()),
                    ("collection", collection.as_str()),
                    ("rkey", rkey.as_str()),
                ],
                None,
                Body::None,
            )
            .await?;
        if answer.status == 400 && answer.error_name() == "RecordNotFound" {
            return Ok(None);
        }
        let v = answer.result(Op::Get)?;
        let uri = v.get("uri").and_then(Value::as_str).map_or_else(
            || format!("at://{}/{collection}/{rkey}", session.did),
            str::to_owned,
        );
        if v.get("value") != post.body.get("record") {
            let cid = v.get("cid").and_then(Value::as_str).unwrap_or("?");
            tracing::warn!(
                %uri,
                cid,
                "Bluesky: a different record is at the post's record key; the post is not there"
            );
            return Ok(None);
        }
        let authority = uri_authority(&uri).unwrap_or(&session.did).to_owned();
        Ok(Some(Created {
            url: Some(post_url(&authority, &rkey)),
            id: Some(uri),
            cid: v.get("cid").and_then(Value::as_str).map(str::to_owned),
        }))
    }

    /// Logs in (`createSession`, unless the process has a session) and reads
    /// `getSession` with the access token.
    async fn check(&self) -> Result<String, PostError> {
        if self.transport.is_dry_run() {
            return Ok("dry run: BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD are not both set, nothing is sent to Bluesky".into());
        }
        let (_, answer) = self
            .authed(
                Method::GET,
                "com.atproto.server.getSession",
                &[],
                Body::None,
            )
            .await?;
        let v = answer.result(Op::Check)?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?");
        Ok(format!("Bluesky: @{} ({})", s("handle"), s("did")))
    }
}

/// What a PDS answers a dry run: a session whose tokens and DID are placeholders (a dry run has
/// no account), the blob's CID as a PDS computes it, the record's ids marked, no record found
/// at the key.
fn dry_answer(request: &reqwest::Request) -> (u16, Value) {
    let nsid = request.url().path().trim_start_matches("/xrpc/");
    match nsid {
        "com.atproto.server.createSession" | "com.atproto.server.refreshSession" => (
            200,
            json!({
                "accessJwt": "<accessJwt from createSession>",
                "refreshJwt": "<refreshJwt from createSession>",
                "did": "<session did>",
                "handle": "<handle>",
            }),
        ),
        "com.atproto.repo.uploadBlob" => {
            let mime = request
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let bytes = request
                .body()
                .and_then(reqwest::Body::as_bytes)
                .unwrap_or_default();
            // Content-addressed, as a PDS answers it: not made up, so not marked (the
            // create checks that the blob is the one of its bytes).
            let link = blob_cid(bytes);
            let blob = json!({"$type": "blob", "ref": {"$link": link}, "mimeType": mime, "size": bytes.len()});
            (200, json!({ "blob": blob }))
        }
        "com.atproto.repo.putRecord" => (
            200,
            json!({"uri": dry_id(), "commit": {"cid": dry_id(), "rev": "<rev>"}}),
        ),
        "com.atproto.repo.getRecord" => (
            400,
            json!({"error": "RecordNotFound", "message": "Could not locate record"}),
        ),
        _ => (200, json!({"did": "<session did>", "handle": "<handle>"})),
    }
}

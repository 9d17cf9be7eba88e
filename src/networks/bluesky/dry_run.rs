//! The Bluesky adapter without credentials: sends nothing, and shows the exact requests it
//! would send.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::json;

use super::text::text_len;
use super::wire::{address, check_blob_size, prepared, record_blob};
use super::{capabilities, post_url, FreshUploads};
use crate::networks::show::{dry_id, show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

/// The Bluesky adapter without credentials: sends nothing, logs at info the exact requests it
/// would send (the app password and tokens as placeholders), and answers ids marked `dryrun-`.
#[derive(Debug)]
pub struct BlueskyDryRun {
    pds: String,
    identifier: String,
    langs: Vec<String>,
    logged_in: AtomicBool,
    fresh: FreshUploads,
}

const DRY_AUTH: (&str, &str) = ("Authorization", "Bearer <accessJwt from createSession>");

impl BlueskyDryRun {
    /// `identifier`: `BLUESKY_IDENTIFIER` when set without a password.
    pub fn new(pds_url: &str, identifier: Option<&str>) -> Self {
        Self {
            pds: pds_url.trim_end_matches('/').to_owned(),
            identifier: identifier
                .map(|i| i.trim().trim_start_matches('@').to_owned())
                .filter(|i| !i.is_empty())
                .unwrap_or_else(|| "<BLUESKY_IDENTIFIER>".into()),
            langs: vec![],
            logged_in: AtomicBool::new(false),
            fresh: FreshUploads::default(),
        }
    }

    #[must_use]
    pub fn with_langs(mut self, langs: Vec<String>) -> Self {
        self.langs = langs.into_iter().take(3).collect();
        self
    }

    fn log_login(&self) {
        if !self.logged_in.swap(true, Ordering::SeqCst) {
            show(
                "POST",
                &format!("{}/xrpc/com.atproto.server.createSession", self.pds),
                &[("Content-Type", "application/json")],
                ShownBody::Json(
                    &json!({"identifier": self.identifier, "password": "<BLUESKY_APP_PASSWORD>"}),
                ),
            );
        }
    }

    fn log_upload(&self, media: &Media) {
        show(
            "POST",
            &format!("{}/xrpc/com.atproto.repo.uploadBlob", self.pds),
            &[DRY_AUTH, ("Content-Type", media.content_type)],
            ShownBody::Lines(vec![format!("<{} bytes>", media.bytes.len())]),
        );
    }
}

#[async_trait]
impl NetworkAdapter for BlueskyDryRun {
    fn network(&self) -> Network {
        Network::Bluesky
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        text_len(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        check_blob_size(media)?;
        self.log_login();
        self.log_upload(media);
        let blob = json!({"$type": "blob", "ref": {"$link": dry_id()}, "mimeType": media.content_type, "size": media.bytes.len()});
        let mut r = json!({"blob": blob, "alt": media.alt.as_deref().unwrap_or("")});
        if let Some((width, height)) =
            crate::image::dimensions(&media.bytes).filter(|(w, h)| *w > 0 && *h > 0)
        {
            r["aspectRatio"] = json!({"width": width, "height": height});
        }
        Ok(MediaRef(r))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        let post = prepared(&self.identifier, text, media, &self.langs);
        self.fresh.mark(&post);
        post
    }

    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let (rkey, _) = address(post)?;
        if !media.bytes.is_empty() {
            check_blob_size(media)?;
        }
        self.log_login();
        let fresh = self.fresh.take(&rkey);
        if record_blob(&post.body).is_some() && !media.bytes.is_empty() && !fresh {
            self.log_upload(media);
        }
        let mut body = post.body.clone();
        body["repo"] = json!("<session did>");
        show(
            "POST",
            &format!("{}/xrpc/com.atproto.repo.putRecord", self.pds),
            &[DRY_AUTH, ("Content-Type", "application/json")],
            ShownBody::Json(&body),
        );
        let id = dry_id();
        Ok(Created {
            url: Some(post_url(&id, &rkey)),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        let (rkey, collection) = address(post)?;
        show(
            "GET",
            &format!(
                "{}/xrpc/com.atproto.repo.getRecord?repo=<session did>&collection={collection}&rkey={rkey}",
                self.pds
            ),
            &[],
            ShownBody::None,
        );
        Ok(None)
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD are not both set, nothing is sent to Bluesky".into())
    }
}

//! The Mastodon adapter without credentials ([`MastodonDryRun`]): it sends nothing and logs the
//! exact requests the real adapter would send.

use async_trait::async_trait;
use serde_json::Value;

use super::text::status_len;
use super::wire::{self, file_name, prepared, Limits};
use super::{capabilities, FIND_PAGE_SIZE};
use crate::networks::show::{dry_id, show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

/// The Mastodon adapter without credentials: sends nothing, logs at info the exact requests it
/// would send (the token as a placeholder), and answers ids marked `dryrun-`.
#[derive(Debug)]
pub struct MastodonDryRun {
    base: String,
    language: Option<String>,
    limits: Limits,
}

const DRY_AUTH: (&str, &str) = ("Authorization", "Bearer <MASTODON_ACCESS_TOKEN>");

impl MastodonDryRun {
    pub fn new(instance_url: &str) -> Self {
        Self {
            base: instance_url.trim().trim_end_matches('/').to_owned(),
            language: None,
            limits: Limits::default(),
        }
    }

    #[must_use]
    pub fn with_limits(self, max_characters: usize, image_size_limit: usize) -> Self {
        self.limits.set(max_characters, image_size_limit);
        self
    }

    #[must_use]
    pub fn with_language(mut self, language: &str) -> Self {
        self.language = wire::language(language);
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

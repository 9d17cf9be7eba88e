//! The X adapter without credentials ([`XDryRun`]): it sends nothing and shows the exact
//! requests it would send, secrets as placeholders.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::wire::{prepared, start_time, status_url};
use super::{capabilities, weighted_len, CLOCK_SLACK_S, FIND_PAGE_SIZE};
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

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


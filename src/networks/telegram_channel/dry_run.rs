//! The channel adapter used when no channel is configured ([`DryRunChannel`]): it sends
//! nothing and shows the exact `sendPhoto` it would send, the token as a placeholder.

use async_trait::async_trait;

use super::text::caption_len;
use super::wire::{media_ref, prepare_for, read_refused, sha256_hex, unpack, TOKEN_PLACEHOLDER};
use super::capabilities;
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

/// What marks an id the dry run made up.
pub const DRY_RUN_MARK: &str = "dryrun-";

/// Whether a message id was made up by [`DryRunChannel`].
pub fn is_dry_run_id(id: &str) -> bool {
    id.starts_with(DRY_RUN_MARK)
}

/// The channel adapter used when no channel is configured: it sends nothing, logs the exact
#[derive(Debug, Clone)]
pub struct DryRunChannel {
    api: String,
    channel: String,
}

impl DryRunChannel {
    /// `channel`: the configured `TELEGRAM_CHANNEL_ID` if any (shown in the requests).
    pub fn new(api: &str, channel: Option<&str>) -> Self {
        Self {
            api: api.trim_end_matches('/').to_owned(),
            channel: channel.unwrap_or("@DRY_RUN_CHANNEL").to_owned(),
        }
    }
}

#[async_trait]
impl NetworkAdapter for DryRunChannel {
    fn network(&self) -> Network {
        Network::Telegram
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        caption_len(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        media_ref(media)
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepare_for(&self.channel, text, media)
    }

    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let p = unpack(post, media)?;
        show(
            "POST",
            &format!("{}/bot{TOKEN_PLACEHOLDER}/sendPhoto", self.api),
            &[("Content-Type", "multipart/form-data")],
            ShownBody::Lines(vec![
                format!("chat_id={}", p.chat_id),
                format!(
                    "photo=<file {}, {}, {} bytes, sha256 {}>",
                    p.file_name,
                    p.content_type,
                    media.bytes.len(),
                    sha256_hex(&media.bytes)
                ),
                format!(
                    "caption={}",
                    serde_json::Value::String(p.caption.to_owned())
                ),
                format!("parse_mode={}", p.parse_mode),
            ]),
        );
        let id = format!("{DRY_RUN_MARK}{:016x}", rand::random::<u64>());
        let name = self.channel.trim_start_matches('@');
        Ok(Created {
            url: Some(format!("https://t.me/{name}/{id}")),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, _post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        Err(read_refused())
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: TELEGRAM_CHANNEL_ID is not set, nothing is sent to a Telegram channel".into())
    }
}


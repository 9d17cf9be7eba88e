//! The Telegram channel's idempotency primitive: none. There is no idempotency key, no
//! duplicate check (every `sendPhoto` posts), and a bot cannot read what it sent (no Bot API
//! method sees a message the bot sent), so a send that got no clear answer can never be
//! settled by the adapter: it is [`PostError::InDoubt`], and the pipeline makes it `unknown`
//! and asks the owner. At most once; the owner decides. Every capability is "can't".
//!
//! The adapter (README "Targets"; the Bot API, posting to a channel):
//! one `sendPhoto` per post, multipart, caption in HTML ([`text`]); the request,
//! the answers and the classifier are in [`wire`]. Without a channel it is a dry run
//! ([`TelegramChannel::dry_run`]): the same adapter, its requests shown instead of sent.
//!
//! The bot token sits in the URL path (`/bot<token>/sendPhoto`), so no URL ever reaches an error
//! message, a log line or a `Debug` output from here: transport errors are taken
//! [`reqwest::Error::without_url`] ([`crate::networks::http::chain`]), and every message is
//! passed through a [`Redactor`] as well.

pub mod auth;
pub mod config;
pub mod text;
pub mod wire;

#[cfg(test)]
mod tests;

pub use config::{parse_channel_id, DEFINITION};
/// Whether a message id was made up by a dry run (the one dry-run mark).
pub use crate::networks::show::is_dry_run_urn as is_dry_run_id;
pub use text::{caption_html, caption_len, CAPTION_MAX};
pub use wire::{classify, message_url, PHOTO_MAX_BYTES};

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::multipart::{Form, Part};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, TextLimit};
use crate::image::{Format, Formats};
use crate::networks::http::{Answer, Redactor, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::{ConfigError, Secret};
use wire::{
    local_refusal, media_ref, prepare_for, read_refused, redactor, sha256_hex, transport, unpack,
    TOKEN_PLACEHOLDER,
};

/// The adapter's name in [`PostError`]s.
const NET: &str = "telegram";

/// The Bot API's default base.
pub const DEFAULT_API: &str = "https://api.telegram.org";

/// At most once: no key, no duplicate check, no read back.
fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::None,
        text: TextLimit {
            max: CAPTION_MAX,
            counting: Counting::Utf16,
        },
        images: ImageLimits {
            // sendPhoto: 10 MB, width + height at most 10,000, a shape of at most 20:1.
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: 10_000_000,
            max_side_sum: Some(10_000),
            max_ratio: Some(20),
            ..ImageLimits::default()
        },
        ..Capabilities::default()
    }
}

/// Posts to one Telegram channel through the Bot API.
pub struct TelegramChannel {
    transport: Transport,
    api: String,
    token: Secret,
    redact: Redactor,
    channel: String,
    timeout: Duration,
}

impl fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("api", &self.api)
            .field("token", &self.token)
            .field("channel", &self.channel)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// `http` is the process's shared client ([`crate::app::http_client`]); `api` the Bot API
    /// base ([`DEFAULT_API`]); `channel` a `TELEGRAM_CHANNEL_ID`; `timeout` the budget of one
    /// call (`POSTONCE_TELEGRAM_TIMEOUT_MS`).
    ///
    /// # Errors
    /// The channel id is malformed (see [`parse_channel_id`]).
    pub fn new(
        http: reqwest::Client,
        api: &str,
        token: Secret,
        channel: &str,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            transport: Transport::real(http),
            api: api.trim_end_matches('/').to_owned(),
            redact: redactor(&token),
            token,
            channel: parse_channel_id(channel)?,
            timeout,
        })
    }

    /// The adapter without a channel or a bot: it sends nothing, shows the exact `sendPhoto`
    /// it would send (the token as a placeholder) and answers a message id marked `dryrun-`.
    /// `channel`: the configured `TELEGRAM_CHANNEL_ID` if any (shown in the requests).
    ///
    /// # Panics
    /// Never: the placeholder channel is a valid channel id.
    pub fn dry_run(http: reqwest::Client, api: &str, channel: Option<&str>) -> Self {
        let channel = channel.unwrap_or("@DRY_RUN_CHANNEL").to_owned();
        let name = channel.trim_start_matches('@').to_owned();
        let token = Secret::new(TOKEN_PLACEHOLDER);
        Self {
            transport: Transport::dry(
                http,
                std::sync::Arc::new(move |_: &reqwest::Request| {
                    // sendPhoto, the one call: the message, its id marked, in the channel.
                    let chat = json!({"username": name, "type": "channel"});
                    (200, json!({"ok": true, "result": {"message_id": dry_id(), "chat": chat}}))
                }),
            ),
            api: api.trim_end_matches('/').to_owned(),
            redact: redactor(&token),
            token,
            channel,
            timeout: Duration::from_secs(10),
        }
    }

    /// A request to the Bot API `method`, under the call's budget.
    fn post(&self, method: &str) -> RequestBuilder {
        self.transport
            .client()
            .post(format!("{}/bot{}/{method}", self.api, self.token.expose()))
            .timeout(self.timeout)
    }

    /// Sends `req` and reads its answer: the `result` of an `ok` answer, else the classified
    /// failure. Messages are not yet redacted: the caller does that where they leave.
    async fn call(
        &self,
        req: RequestBuilder,
        shown: impl FnOnce() -> Option<Vec<String>>,
    ) -> Result<Value, PostError> {
        let resp = self
            .transport
            .send_showing(req, shown)
            .await
            .map_err(|e| transport(e, self.timeout))?;
        let a = Answer::read_with(resp, |e| transport(e, self.timeout)).await?;
        let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
        if v.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(v.get("result").cloned().unwrap_or(Value::Null));
        }
        // Redacted before anything is cut from it: a gateway page may echo the path, and a
        // token cut in half would slip past a later redaction.
        Err(classify(a.status, &self.redact.clean(&a.body), &self.channel))
    }

    /// A harmless read with a JSON body.
    async fn read(&self, method: &str, body: &Value) -> Result<Value, PostError> {
        self.call(self.post(method).json(body), || None)
            .await
            .map_err(|e| self.redact.error(e))
    }

    async fn send_photo(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let p = unpack(post, media)?;
        let photo = Part::bytes(media.bytes.to_vec())
            .file_name(p.file_name.to_owned())
            .mime_str(p.content_type)
            .map_err(|_| local_refusal("the image's content type is not a valid MIME type"))?;
        let form = Form::new()
            .text("chat_id", p.chat_id.to_owned())
            .part("photo", photo)
            .text("caption", p.caption.to_owned())
            .text("parse_mode", p.parse_mode.to_owned());
        let shown = || {
            Some(vec![
                format!("chat_id={}", p.chat_id),
                format!(
                    "photo=<file {}, {}, {} bytes, sha256 {}>",
                    p.file_name,
                    p.content_type,
                    media.bytes.len(),
                    sha256_hex(&media.bytes)
                ),
                format!("caption={}", Value::String(p.caption.to_owned())),
                format!("parse_mode={}", p.parse_mode),
            ])
        };
        let result = self
            .call(self.post("sendPhoto").multipart(form), shown)
            .await?;
        // A number from the Bot API; a dry run's is marked text.
        let message_id = result.get("message_id").and_then(|id| {
            id.as_i64()
                .map(|n| n.to_string())
                .or_else(|| id.as_str().map(str::to_owned))
        });
        let url = message_id
            .as_deref()
            .and_then(|id| message_url(result.get("chat").unwrap_or(&Value::Null), id));
        Ok(Created {
            id: message_id,
            url,
            cid: None,
        })
    }
}

#[async_trait]
impl NetworkAdapter for TelegramChannel {
    fn network(&self) -> Network {
        Network::Telegram
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        caption_len(text)
    }

    /// Nothing to send: the bytes travel with `sendPhoto`.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        media_ref(media)
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepare_for(&self.channel, text, media)
    }

    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        match self.send_photo(post, media).await {
            Ok(created) if self.transport.is_dry_run() => Ok(created),
            Ok(created) => {
                tracing::info!(
                    network = NET,
                    channel = %self.channel,
                    message_id = created.id.as_deref().unwrap_or("?"),
                    "sendPhoto posted"
                );
                Ok(created)
            }
            Err(e) => {
                let e = self.redact.error(e);
                tracing::warn!(network = NET, channel = %self.channel, "sendPhoto failed: {e}");
                Err(e)
            }
        }
    }

    async fn find(&self, _post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        Err(read_refused())
    }

    /// `getMe` (the token) and `getChat` (the channel), both harmless reads.
    async fn check(&self) -> Result<String, PostError> {
        if self.transport.is_dry_run() {
            return Ok(
                "dry run: TELEGRAM_CHANNEL_ID is not set, nothing is sent to a Telegram channel"
                    .into(),
            );
        }
        let me = self.read("getMe", &json!({})).await?;
        let bot = me.get("username").and_then(Value::as_str).unwrap_or("?");
        let chat = self
            .read("getChat", &json!({"chat_id": self.channel}))
            .await?;
        let title = chat.get("title").and_then(Value::as_str).unwrap_or("?");
        let kind = chat.get("type").and_then(Value::as_str).unwrap_or("?");
        if kind != "channel" {
            return Err(PostError::Rejected {
                network: NET,
                status: 0,
                message: format!(
                    "TELEGRAM_CHANNEL_ID {} is a {kind}, not a channel: set it to the channel's @username or -100… id",
                    self.channel
                ),
            });
        }
        Ok(format!(
            "bot @{bot} accepted; it can see the channel {title:?} ({})",
            self.channel
        ))
    }
}

//! Discord's idempotency primitive is the message `nonce` sent with `enforce_nonce: true`:
//! Discord checks it "for uniqueness in the past few minutes", and a create whose nonce the
//! same author already used answers **that** message instead of making another. The nonce is
//! derived from the pipeline's per-target key and a token drawn once per attempt
//! ([`wire::nonce`]) and kept in the intent's request, so every re-send of the kept request
//! carries it. The window is not stated beyond "a few minutes" (unconfirmed), so the adapter
//! claims [`NONCE_WINDOW`] (`DISCORD_NONCE_WINDOW_S`); past it a repeat would post again, and an
//! ambiguous create is settled by reading the channel back instead ([`NetworkAdapter::find`]:
//! the bot's own messages after the attempt's time, with the same text and attachment), paced
//! by the rate-limit headers.
//!
//! Announcement channels (`DISCORD_CROSSPOST=1`): the message is also published to the
//! channel's followers, exactly once too: a message read back says whether it was
//! (`flags` bit [`wire::CROSSPOSTED`]), and Discord answers a second publish with code 40033,
//! which is taken as done. A publish that got no clear answer leaves the create in doubt, so
//! the pipeline settles it the same way (the nonce's replay or the read back), which publishes
//! it then; a publish refused for good (not an announcement channel, no permission) is logged
//! and the message kept: it is never posted again for it.
//!
//! The adapter speaks the bot REST API (`Authorization: Bot <token>`, wire facts in
//! `wire.rs`) and holds no policy. Without a token or a channel it is a dry run
//! ([`DiscordAdapter::dry_run`]): the same adapter on the dry [`Transport`], answered by
//! [`dry_answer`]. The token travels only in the `Authorization` header and never reaches a
//! `Debug` output, an error message or a log line (every message leaving the adapter is passed
//! through a [`Redactor`] as well).

pub mod auth;
pub mod config;
mod lookup;
pub mod wire;

#[cfg(test)]
mod tests;

pub use config::DEFINITION;
pub use wire::{classify, message_url, nonce, snowflake_at, snowflake_ms, Op, FILE_MAX_BYTES};

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::multipart::{Form, Part};
use reqwest::RequestBuilder;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::image::{Format, Formats};
use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, TextLimit};
use crate::networks::http::{Answer, Redactor, Transport};
use crate::networks::show::dry_id;
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::Secret;
use wire::{error_code, local_refusal, media_ref, sha256_hex, transport};

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "Discord";
/// The bot REST API's base.
pub const DEFAULT_API: &str = "https://discord.com/api/v10";
/// A message's `content`, at most (the counting unit is undocumented: UTF-16 units are
/// counted, the larger of the two readings).
pub const CONTENT_MAX: usize = 2000;
/// How long Discord is taken to remember a nonce, until `DISCORD_NONCE_WINDOW_S` says
/// otherwise: "a few minutes" (unconfirmed), read as two.
pub const NONCE_WINDOW: Duration = Duration::from_secs(120);
/// Messages asked for per page when reading the channel back (Discord's most).
pub const PAGE_SIZE: u8 = 100;
/// Pages read at most when reading the channel back.
pub const MAX_PAGES: u32 = 10;
/// The longest wait for a rate-limit bucket between two pages of a read; a longer one ends the
/// read as rate limited (the pipeline comes back after it).
pub const MAX_PACE: Duration = Duration::from_secs(2);
/// Messages read back may be this much older than the attempt (clock skew with Discord).
const CLOCK_SLACK_MS: i64 = 300_000;
/// What stands for the token in the dry run's requests and in redacted messages.
const TOKEN_PLACEHOLDER: &str = "<DISCORD_BOT_TOKEN>";
/// Discord wants a bot's User-Agent in this form (others may be blocked).
const USER_AGENT: &str = concat!(
    "DiscordBot (https://github.com/postonce/postonce, ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// The channel as read once (`GET /channels/{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    /// `None` for a direct message.
    pub guild_id: Option<String>,
    /// Discord's channel type: 0 text, 5 announcement, 15 forum, …
    pub kind: u64,
}

/// Posts to one Discord channel as a bot.
pub struct DiscordAdapter {
    transport: Transport,
    api: String,
    token: Secret,
    redactor: Redactor,
    channel: String,
    crosspost: bool,
    nonce_window: Duration,
    timeout: Duration,
    /// The bot's own user id, read once (`GET /users/@me`).
    bot: OnceCell<String>,
    /// The channel, read once.
    channel_info: OnceCell<Channel>,
}

impl fmt::Debug for DiscordAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscordAdapter")
            .field("api", &self.api)
            .field("token", &self.token)
            .field("channel", &self.channel)
            .field("crosspost", &self.crosspost)
            .field("nonce_window", &self.nonce_window)
            .finish_non_exhaustive()
    }
}

impl DiscordAdapter {
    /// `http` is the process's shared client; `api` the REST base ([`DEFAULT_API`]); `token` a
    /// bot token; `channel` a `DISCORD_CHANNEL_ID`; `timeout` one call's budget
    /// (`POSTONCE_DISCORD_TIMEOUT_MS`).
    pub fn new(
        http: reqwest::Client,
        api: &str,
        token: Secret,
        channel: &str,
        timeout: Duration,
    ) -> Self {
        Self::with_transport(Transport::real(http), api, token, channel, timeout)
    }

    /// The adapter without a token or a channel: it sends nothing, shows the exact requests it
    /// would send (the token as a placeholder) and answers ids marked `dryrun-` ([`dry_answer`]).
    pub fn dry_run(http: reqwest::Client, api: &str, channel: Option<&str>) -> Self {
        let answers = std::sync::Arc::new(dry_answer);
        Self::with_transport(
            Transport::dry(http, answers),
            api,
            Secret::new(TOKEN_PLACEHOLDER),
            channel.unwrap_or("<DISCORD_CHANNEL_ID>"),
            Duration::from_secs(10),
        )
    }

    fn with_transport(
        transport: Transport,
        api: &str,
        token: Secret,
        channel: &str,
        timeout: Duration,
    ) -> Self {
        Self {
            transport,
            api: api.trim().trim_end_matches('/').to_owned(),
            redactor: Redactor::default().hide(&token, TOKEN_PLACEHOLDER),
            token,
            channel: channel.trim().to_owned(),
            crosspost: false,
            nonce_window: NONCE_WINDOW,
            timeout,
            bot: OnceCell::new(),
            channel_info: OnceCell::new(),
        }
    }

    /// Publishes every message to the followers of its announcement channel too
    /// (`DISCORD_CROSSPOST=1`).
    #[must_use]
    pub fn with_crosspost(mut self, on: bool) -> Self {
        self.crosspost = on;
        self
    }

    /// How long Discord is taken to remember a nonce (`DISCORD_NONCE_WINDOW_S`).
    #[must_use]
    pub fn with_nonce_window(mut self, window: Duration) -> Self {
        self.nonce_window = window;
        self
    }

    fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        self.transport
            .client()
            .request(method, format!("{}{path}", self.api))
            .header(reqwest::header::AUTHORIZATION, format!("Bot {}", self.token.expose()))
            .header(reqwest::header::USER_AGENT, USER_AGENT)
            .timeout(self.timeout)
    }

    /// Sends `req` and reads its answer: a 2xx's JSON, else [`classify`]'s error.
    async fn call(
        &self,
        req: RequestBuilder,
        op: Op,
        shown: impl FnOnce() -> Option<Vec<String>>,
    ) -> Result<(Answer, Value), PostError> {
        let resp = self
            .transport
            .send_showing(req, shown)
            .await
            .map_err(transport)?;
        let a = Answer::read_with(resp, transport).await?;
        if !a.is_success() {
            return Err(classify(op, a.status, &a.headers, &a.body, &self.channel));
        }
        let v = a.json(NETWORK)?;
        Ok((a, v))
    }

    /// A harmless read.
    async fn get(&self, path: &str, op: Op) -> Result<(Answer, Value), PostError> {
        self.call(self.request(reqwest::Method::GET, path), op, || None)
            .await
    }

    /// The bot's own user (`GET /users/@me`): its id and name.
    async fn me(&self, op: Op) -> Result<(String, String), PostError> {
        let (_, me) = self.get("/users/@me", op).await?;
        let text = |k: &str| me.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(id) = text("id") else {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: "GET /users/@me answered without an id".into(),
            });
        };
        Ok((id, text("username").unwrap_or_default()))
    }

    /// The bot's user id, read the first time it is needed.
    async fn bot_id(&self) -> Result<&String, PostError> {
        self.bot
            .get_or_try_init(|| async { self.me(Op::Read).await.map(|(id, _)| id) })
            .await
    }

    /// The channel, read the first time it is needed (`GET /channels/{id}`).
    async fn channel(&self) -> Result<&Channel, PostError> {
        self.channel_info
            .get_or_try_init(|| async {
                let (_, c) = self
                    .get(&format!("/channels/{}", self.channel), Op::Check)
                    .await?;
                Ok(Channel {
                    name: c.get("name").and_then(Value::as_str).unwrap_or("?").to_owned(),
                    guild_id: c.get("guild_id").and_then(Value::as_str).map(str::to_owned),
                    kind: c.get("type").and_then(Value::as_u64).unwrap_or(0),
                })
            })
            .await
    }

    /// The post a message object names, its URL built with the channel's guild (`None` when
    /// the channel could not be read).
    async fn created(&self, message: &Value) -> Created {
        let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        let channel = message
            .get("channel_id")
            .and_then(Value::as_str)
            .unwrap_or(&self.channel);
        let guild = match message.get("guild_id").and_then(Value::as_str) {
            Some(g) => Some(Some(g.to_owned())),
            None => self.channel().await.ok().map(|c| c.guild_id.clone()),
        };
        let url = match (&id, guild) {
            (Some(id), Some(guild)) => Some(message_url(guild.as_deref(), channel, id)),
            _ => None,
        };
        Created { id, url, cid: None }
    }

    /// `POST /channels/{id}/messages`, multipart: `payload_json` and `files[0]`.
    async fn send_message(&self, post: &PreparedPost, media: &Media) -> Result<Value, PostError> {
        let p = wire::unpack(post, media)?;
        let file = Part::bytes(media.bytes.to_vec())
            .file_name(p.file_name.to_owned())
            .mime_str(p.content_type)
            .map_err(|_| local_refusal("the image's content type is not a valid MIME type"))?;
        let payload = Part::text(p.payload.to_string())
            .mime_str("application/json")
            .map_err(|_| local_refusal("payload_json could not be typed"))?;
        let form = Form::new().part("payload_json", payload).part("files[0]", file);
        let shown = || {
            // Each form field one line (a log keeps the whole request on one): the JSON compact.
            let mut lines = vec![format!("payload_json={}", p.payload)];
            lines.push(format!(
                "files[0]=<file {}, {}, {} bytes, sha256 {}>",
                p.file_name,
                p.content_type,
                media.bytes.len(),
                sha256_hex(&media.bytes)
            ));
            Some(lines)
        };
        let req = self
            .request(reqwest::Method::POST, &format!("/channels/{}/messages", p.channel))
            .multipart(form);
        let (_, message) = self.call(req, Op::Create, shown).await?;
        if message.get("id").and_then(Value::as_str).is_none() {
            tracing::warn!(network = NETWORK, "Discord created the message but its answer carried no id");
        }
        Ok(message)
    }

    /// Publishes `message` to the followers of its announcement channel, once: a message that
    /// says it was, or Discord's "already crossposted", is done.
    async fn crosspost(&self, message: &Value) -> Result<(), PostError> {
        let flags = message.get("flags").and_then(Value::as_u64).unwrap_or(0);
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return Ok(());
        };
        if !self.crosspost || flags & wire::CROSSPOSTED != 0 {
            return Ok(());
        }
        let path = format!("/channels/{}/messages/{id}/crosspost", self.channel);
        let resp = self
            .transport
            .send(self.request(reqwest::Method::POST, &path))
            .await
            .map_err(transport)?;
        let a = Answer::read_with(resp, transport).await?;
        if a.is_success() || error_code(&a.error_json()) == Some(wire::ALREADY_CROSSPOSTED) {
            return Ok(());
        }
        Err(classify(Op::Crosspost, a.status, &a.headers, &a.body, &self.channel))
    }

    /// The message exists: publishes it if asked to. A publish without a clear answer leaves
    /// the create in doubt (the pipeline settles it again, and publishes then); one refused for
    /// good is logged and the message kept (never posted again for it).
    async fn published(&self, message: &Value) -> Result<(), PostError> {
        match self.crosspost(message).await {
            Ok(()) => Ok(()),
            Err(e @ (PostError::Rejected { .. } | PostError::ReadRefused { .. })) => {
                tracing::error!(
                    network = NETWORK,
                    channel = %self.channel,
                    "the message is posted, but Discord refused to publish it to the channel's followers: {}",
                    self.redactor.error(e)
                );
                Ok(())
            }
            Err(e) => Err(PostError::InDoubt {
                network: NETWORK,
                message: format!(
                    "the message {} is posted; publishing it to the announcement channel's followers got no clear answer ({e})",
                    message.get("id").and_then(Value::as_str).unwrap_or("?")
                ),
            }),
        }
    }

    async fn create_once(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let message = self.send_message(post, media).await?;
        self.published(&message).await?;
        Ok(self.created(&message).await)
    }

    /// The bot and the channel, and, with `DISCORD_CROSSPOST=1`, that it is an announcement
    /// channel.
    async fn check_once(&self) -> Result<String, PostError> {
        let (id, name) = self.me(Op::Check).await?;
        let _ = self.bot.set(id.clone());
        let channel = self.channel().await?.clone();
        let where_ = format!("#{} ({})", channel.name, self.channel);
        if channel.kind == 15 || channel.kind == 16 {
            return Err(PostError::Rejected {
                network: NETWORK,
                status: 0,
                message: format!("DISCORD_CHANNEL_ID: {where_} is a forum or media channel, where a bot posts only in a thread: set it to a text or announcement channel (or a thread's id)"),
            });
        }
        if self.crosspost && channel.kind != 5 {
            return Err(PostError::Rejected {
                network: NETWORK,
                status: 0,
                message: format!("DISCORD_CROSSPOST=1, but {where_} is not an announcement channel (its type is {}): make it one (Edit Channel → Announcement Channel) or unset DISCORD_CROSSPOST", channel.kind),
            });
        }
        let publish = if self.crosspost {
            "; each message is published to its followers"
        } else {
            ""
        };
        Ok(format!("bot {name} ({id}) can see the channel {where_}{publish}"))
    }
}

fn capabilities(window: Duration) -> Capabilities {
    Capabilities {
        idempotency: Idempotency::Key(window),
        reads_back: true,
        text: TextLimit {
            max: CONTENT_MAX,
            counting: Counting::Utf16,
        },
        images: ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Gif, Format::Webp]),
            max_bytes: FILE_MAX_BYTES as u64,
            ..ImageLimits::default()
        },
        create_carries_image: true,
        ..Capabilities::default()
    }
}

#[async_trait]
impl NetworkAdapter for DiscordAdapter {
    fn network(&self) -> Network {
        Network::Discord
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(self.nonce_window)
    }

    fn is_dry_run(&self) -> bool {
        self.transport.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        text.encode_utf16().count()
    }

    /// Nothing to upload: the bytes travel with the create. The channel is read first (once
    /// per process; its guild makes the message's URL), so a channel the bot cannot see or a
    /// refused token stops the post before its intent.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        let described = media_ref(media)?;
        self.channel().await.map_err(|e| self.redactor.error(e))?;
        Ok(described)
    }

    /// The request, with its nonce (a token drawn for this attempt: see [`wire::nonce`]).
    fn prepare(&self, text: &str, media: &MediaRef, idempotency: &str) -> PreparedPost {
        let attempt = format!("{:016x}", rand::random::<u64>());
        wire::prepared(&self.channel, text, media, idempotency, &attempt)
    }

    /// `POST /channels/{id}/messages` once, with the kept nonce (and, with
    /// `DISCORD_CROSSPOST=1`, the publish). Within Discord's window a repeat of the nonce
    /// answers the message it already made.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        match self.create_once(post, media).await {
            Ok(created) => {
                if !self.transport.is_dry_run() {
                    tracing::info!(
                        network = NETWORK,
                        message_id = created.id.as_deref().unwrap_or("?"),
                        "message created (or answered for its nonce)"
                    );
                }
                Ok(created)
            }
            Err(e) => {
                let e = self.redactor.error(e);
                tracing::warn!(network = NETWORK, channel = %self.channel, "create failed: {e}");
                Err(e)
            }
        }
    }

    /// Reads the channel's messages after `since` (Unix seconds of the attempt, less a clock
    /// slack), 100 a page, pacing by the rate-limit headers, for the bot's own message with the
    /// exact text and the cover's file name (a message read back carries no nonce).
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        self.find_once(post, since)
            .await
            .map_err(|e| self.redactor.error(e))
    }

    /// `GET /users/@me` (the token) and `GET /channels/{id}` (the channel).
    async fn check(&self) -> Result<String, PostError> {
        if self.transport.is_dry_run() {
            return Ok("dry run: DISCORD_BOT_TOKEN and DISCORD_CHANNEL_ID are not both set, nothing is sent to Discord".into());
        }
        self.check_once().await.map_err(|e| self.redactor.error(e))
    }
}

/// What Discord answers a dry run: the message's id marked, the bot and the channel
/// placeholders (a dry run has neither), nothing found when reading back.
fn dry_answer(request: &reqwest::Request) -> (u16, Value) {
    let path = request.url().path();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match (request.method().as_str(), segments.as_slice()) {
        ("POST", [.., "channels", channel, "messages"]) => (
            200,
            json!({"id": dry_id(), "channel_id": channel, "flags": 0}),
        ),
        ("POST", [.., "messages", id, "crosspost"]) => (200, json!({"id": id, "flags": 1})),
        ("GET", [.., "users", "@me"]) => {
            (200, json!({"id": "<bot id>", "username": "<bot>", "bot": true}))
        }
        ("GET", [.., "channels", _, "messages"]) => (200, json!([])),
        ("GET", [.., "channels", channel]) => (
            200,
            json!({"id": channel, "name": "<channel>", "guild_id": "<guild id>", "type": 0}),
        ),
        _ => (200, json!({})),
    }
}

//! The Telegram channel adapter (DESIGN.md "Targets"; wire facts in API-NOTES.md "Telegram Bot
//! API, posting to a channel"): one `sendPhoto` per post, multipart, caption in HTML.
//!
//! What Telegram offers for exactly-once: nothing. There is no idempotency key, no duplicate
//! check (every `sendPhoto` posts), and no Bot API method can see a message the bot sent, so a
//! send that got no clear answer can never be settled by the adapter: it is
//! [`PostError::InDoubt`], and the pipeline makes it `unknown` and asks the owner. Every
//! capability is "can't".
//!
//! The bot token sits in the URL path (`/bot<token>/sendPhoto`), so no URL ever reaches an error
//! message, a log line or a `Debug` output from here: transport errors are taken
//! [`reqwest::Error::without_url`], and every message is passed through [`Redactor`] as well.

pub mod config;

pub use config::{parse_channel_id, DEFINITION};

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, TextLimit};
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::{ConfigError, Secret};

/// The adapter's name in [`PostError`]s.
const NET: &str = "telegram";

/// The Bot API's default base.
pub const DEFAULT_API: &str = "https://api.telegram.org";

/// A photo's caption: 0–1,024 characters after entity parsing. Telegram does not say which
/// unit; its entity offsets are UTF-16 code units, so this adapter counts UTF-16 units. That is
/// never fewer than the Unicode scalar values, so a caption accepted here is accepted by
/// Telegram whichever of the two it counts (an emoji costs 2 here).
pub const CAPTION_MAX: usize = 1024;

/// `sendPhoto` uploads are at most 10 MB.
pub const PHOTO_MAX_BYTES: usize = 10 * 1024 * 1024;

/// What marks an id the dry run made up.
pub const DRY_RUN_MARK: &str = "dryrun-";

/// Whether a message id was made up by [`DryRunChannel`].
pub fn is_dry_run_id(id: &str) -> bool {
    id.starts_with(DRY_RUN_MARK)
}

/// At most once: no key, no duplicate check, no read back.
fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::None,
        text: TextLimit {
            max: CAPTION_MAX,
            counting: Counting::Utf16,
        },
        images: ImageLimits {
            formats: &["image/jpeg", "image/png"],
            max_bytes: 10_000_000,
            max_pixels: None,
        },
        ..Capabilities::default()
    }
}

/// The caption as HTML (`parse_mode: HTML`): `&`, `<` and `>` escaped, nothing else added.
/// A URL stays bare; Telegram makes it a link.
pub fn caption_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The length of a caption as Telegram counts it after entity parsing (see [`CAPTION_MAX`]):
/// the text itself, markup aside, in UTF-16 code units.
pub fn caption_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The public URL of a message, from the `chat` of the answer: `t.me/<username>/<id>` for a
/// public channel, `t.me/c/<id without -100>/<id>` (members only) for a private one.
pub fn message_url(chat: &Value, message_id: i64) -> Option<String> {
    if let Some(username) = chat.get("username").and_then(Value::as_str) {
        if !username.is_empty() {
            return Some(format!("https://t.me/{username}/{message_id}"));
        }
    }
    let id = chat.get("id").and_then(Value::as_i64)?.to_string();
    let internal = id.strip_prefix("-100")?;
    (!internal.is_empty()).then(|| format!("https://t.me/c/{internal}/{message_id}"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn file_name(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "cover.png",
        "image/gif" => "cover.gif",
        "image/webp" => "cover.webp",
        _ => "cover.jpg",
    }
}

/// What `create` needs to know of the image, without the bytes (see [`MediaRef`]).
fn media_ref(media: &Media) -> Result<MediaRef, PostError> {
    if media.bytes.is_empty() {
        return Err(local_refusal("the cover image is empty"));
    }
    if media.bytes.len() > PHOTO_MAX_BYTES {
        return Err(local_refusal(&format!(
            "the cover image is {} bytes; Telegram's sendPhoto takes at most {PHOTO_MAX_BYTES} (10 MB): make it smaller",
            media.bytes.len()
        )));
    }
    Ok(MediaRef(json!({
        "content_type": media.content_type,
        "file_name": file_name(media.content_type),
        "size": media.bytes.len(),
        "sha256": sha256_hex(&media.bytes),
    })))
}

fn local_refusal(message: &str) -> PostError {
    PostError::Rejected {
        network: NET,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

/// The `sendPhoto` request as stored in the intent: the multipart fields, with the photo part
/// described by its [`MediaRef`].
fn prepare_for(chat_id: &str, text: &str, media: &MediaRef) -> PreparedPost {
    let caption = caption_html(text);
    PreparedPost {
        body: json!({
            "method": "sendPhoto",
            "chat_id": chat_id,
            "photo": media.0,
            "caption": caption,
            "parse_mode": "HTML",
        }),
        text: caption,
        key: None,
    }
}

/// The fields of a prepared `sendPhoto`, checked against the image about to be sent.
struct SendPhoto<'a> {
    chat_id: &'a str,
    caption: &'a str,
    parse_mode: &'a str,
    file_name: &'a str,
    content_type: &'a str,
}

fn unpack<'a>(post: &'a PreparedPost, media: &Media) -> Result<SendPhoto<'a>, PostError> {
    let b = &post.body;
    let field = |name: &str| b.get(name).and_then(Value::as_str);
    let photo = b.get("photo");
    let photo_field = |name: &str| photo.and_then(|p| p.get(name)).and_then(Value::as_str);
    let (Some(chat_id), Some(caption), Some(parse_mode), Some(file_name), Some(content_type)) = (
        field("chat_id"),
        field("caption"),
        field("parse_mode"),
        photo_field("file_name"),
        photo_field("content_type"),
    ) else {
        return Err(local_refusal(
            "the prepared request is not a sendPhoto this adapter made (a field is missing)",
        ));
    };
    if field("method") != Some("sendPhoto") {
        return Err(local_refusal("the prepared request is not a sendPhoto"));
    }
    if photo_field("sha256") != Some(sha256_hex(&media.bytes).as_str())
        || content_type != media.content_type
    {
        return Err(local_refusal(
            "the cover image is not the one this post was prepared with (its SHA-256 or type differs); prepare the post again",
        ));
    }
    Ok(SendPhoto {
        chat_id,
        caption,
        parse_mode,
        file_name,
        content_type,
    })
}

/// Removes the bot token from any text that leaves the adapter.
#[derive(Clone)]
struct Redactor(Secret);

impl Redactor {
    fn clean(&self, text: &str) -> String {
        let token = self.0.expose();
        if token.is_empty() {
            text.to_owned()
        } else {
            text.replace(token, "<TELEGRAM_BOT_TOKEN>")
        }
    }
}

/// A transport error as text: the error and its causes, without the URL.
fn transport_text(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut src = std::error::Error::source(&e);
    while let Some(err) = src {
        parts.push(err.to_string());
        src = err.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// What a failed exchange means for a post: connect errors never sent anything; anything else
/// (a timeout after the request went out, a reset, an unreadable answer) may have posted.
fn transport(e: reqwest::Error, timeout: Duration) -> PostError {
    if e.is_builder() {
        return local_refusal(&format!(
            "the request could not be built (check the Bot API base URL): {}",
            transport_text(e)
        ));
    }
    if e.is_connect() {
        return PostError::NotSent {
            network: NET,
            message: transport_text(e),
        };
    }
    let message = if e.is_timeout() {
        format!("no answer within {} ms", timeout.as_millis())
    } else {
        transport_text(e)
    };
    PostError::InDoubt {
        network: NET,
        message,
    }
}

/// Turns a Bot API answer that is not `ok` into a [`PostError`] whose message names the fix.
/// `http` is the HTTP status; `body` the answer as text; `channel` the configured channel.
pub fn classify(http: u16, body: &str, channel: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if v.get("ok").and_then(Value::as_bool).is_none() {
        // Not the Bot API speaking (a gateway, a proxy): who knows what reached Telegram.
        let snippet: String = body.chars().take(300).collect();
        return PostError::InDoubt {
            network: NET,
            message: format!(
                "HTTP {http} with an answer that is not Bot API JSON: {}",
                snippet.trim()
            ),
        };
    }
    let status = v
        .get("error_code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(http);
    let description = v
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("no description")
        .to_owned();
    let lower = description.to_ascii_lowercase();
    let rejected = |fix: String| PostError::Rejected {
        network: NET,
        status,
        message: format!("{description}; {fix}"),
    };
    let make_admin = format!(
        "make the bot an administrator of the channel {channel} with the right to post messages"
    );
    match status {
        429 => PostError::RateLimited {
            network: NET,
            retry_after: v
                .pointer("/parameters/retry_after")
                .and_then(Value::as_u64)
                .map(Duration::from_secs),
            message: format!("{description}; Telegram allows about one message a second per chat"),
        },
        401 => rejected(
            "the bot token is wrong or was regenerated: get the current one from @BotFather and update TELEGRAM_BOT_TOKEN".into(),
        ),
        400 if lower.contains("chat not found") => rejected(format!(
            "TELEGRAM_CHANNEL_ID is {channel}, which names no chat this bot can see: check the @username or -100… id, and add the bot to the channel as an administrator"
        )),
        400 if lower.contains("need administrator rights") || lower.contains("not enough rights") => {
            rejected(make_admin)
        }
        400 if lower.contains("caption is too long") || lower.contains("media_caption_too_long") => {
            rejected(format!(
                "a photo caption is at most {CAPTION_MAX} characters after entity parsing: shorten it, or give this target its own caption"
            ))
        }
        403 if lower.contains("not a member") || lower.contains("kicked") => rejected(make_admin),
        404 => rejected(
            "the Bot API base URL or the method is wrong (TELEGRAM_API_URL, if set, must be the server's base, without /bot<token>)".into(),
        ),
        500..=599 => PostError::InDoubt {
            network: NET,
            message: format!("Telegram answered {status}: {description}"),
        },
        _ => PostError::Rejected {
            network: NET,
            status,
            message: description,
        },
    }
}

fn read_refused() -> PostError {
    PostError::ReadRefused {
        network: NET,
        message: "no Bot API method can see a message the bot sent (no history or get-message call, and the bot gets no update for its own channel posts); whether an unanswered sendPhoto posted can only be told by looking at the channel".into(),
    }
}

/// Posts to one Telegram channel through the Bot API.
pub struct TelegramChannel {
    http: reqwest::Client,
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
            http,
            api: api.trim_end_matches('/').to_owned(),
            redact: Redactor(token.clone()),
            token,
            channel: parse_channel_id(channel)?,
            timeout,
        })
    }

    fn url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.api, self.token.expose())
    }

    /// Cleans every message of an error that leaves the adapter.
    fn clean(&self, e: PostError) -> PostError {
        let r = &self.redact;
        match e {
            PostError::NotSent { network, message } => PostError::NotSent {
                network,
                message: r.clean(&message),
            },
            PostError::RateLimited {
                network,
                retry_after,
                message,
            } => PostError::RateLimited {
                network,
                retry_after,
                message: r.clean(&message),
            },
            PostError::Rejected {
                network,
                status,
                message,
            } => PostError::Rejected {
                network,
                status,
                message: r.clean(&message),
            },
            PostError::InDoubt { network, message } => PostError::InDoubt {
                network,
                message: r.clean(&message),
            },
            PostError::NotReady { network, message } => PostError::NotReady {
                network,
                message: r.clean(&message),
            },
            PostError::Gone { network, message } => PostError::Gone {
                network,
                message: r.clean(&message),
            },
            PostError::ReadRefused { network, message } => PostError::ReadRefused {
                network,
                message: r.clean(&message),
            },
            PostError::AlreadyExists { network, existing } => {
                PostError::AlreadyExists { network, existing }
            }
        }
    }

    /// Reads an answer: the `result` of an `ok` answer, else the classified failure.
    async fn answer(&self, resp: reqwest::Response) -> Result<Value, PostError> {
        let status = resp.status().as_u16();
        let body = resp.text().await.map_err(|e| transport(e, self.timeout))?;
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if v.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(v.get("result").cloned().unwrap_or(Value::Null));
        }
        // Redacted before anything is cut from it: a gateway page may echo the path, and a
        // token cut in half would slip past a later redaction.
        Err(classify(status, &self.redact.clean(&body), &self.channel))
    }

    /// A harmless read with a JSON body.
    async fn read(&self, method: &str, body: &Value) -> Result<Value, PostError> {
        let result = async {
            let resp = self
                .http
                .post(self.url(method))
                .timeout(self.timeout)
                .json(body)
                .send()
                .await
                .map_err(|e| transport(e, self.timeout))?;
            self.answer(resp).await
        }
        .await;
        result.map_err(|e| self.clean(e))
    }

    async fn send_photo(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let p = unpack(post, media)?;
        let photo = reqwest::multipart::Part::bytes(media.bytes.to_vec())
            .file_name(p.file_name.to_owned())
            .mime_str(p.content_type)
            .map_err(|_| local_refusal("the image's content type is not a valid MIME type"))?;
        let form = reqwest::multipart::Form::new()
            .text("chat_id", p.chat_id.to_owned())
            .part("photo", photo)
            .text("caption", p.caption.to_owned())
            .text("parse_mode", p.parse_mode.to_owned());
        let resp = self
            .http
            .post(self.url("sendPhoto"))
            .timeout(self.timeout)
            .multipart(form)
            .send()
            .await
            .map_err(|e| transport(e, self.timeout))?;
        let result = self.answer(resp).await?;
        let message_id = result.get("message_id").and_then(Value::as_i64);
        let url =
            message_id.and_then(|id| message_url(result.get("chat").unwrap_or(&Value::Null), id));
        Ok(Created {
            id: message_id.map(|id| id.to_string()),
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
        false
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
                let e = self.clean(e);
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

/// The channel adapter used when no channel is configured: it sends nothing, logs the exact
/// request it would send (the token as a placeholder), and answers with ids marked
/// [`DRY_RUN_MARK`].
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
            &format!("{}/bot<TELEGRAM_BOT_TOKEN>/sendPhoto", self.api),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_three_html_specials_and_nothing_else() {
        assert_eq!(
            caption_html(r#"a < b && c > d "q" https://e.com/p?x=1&y=2"#),
            r#"a &lt; b &amp;&amp; c &gt; d "q" https://e.com/p?x=1&amp;y=2"#
        );
        assert_eq!(caption_html("&lt;"), "&amp;lt;");
    }

    #[test]
    fn counts_utf16_units_of_the_text_not_of_the_markup() {
        assert_eq!(caption_len("abc"), 3);
        assert_eq!(caption_len("é"), 1);
        assert_eq!(caption_len("😀"), 2);
        assert_eq!(caption_len("<&>"), 3);
        assert_eq!(caption_len(&"😀".repeat(512)), CAPTION_MAX);
    }

    #[test]
    fn channel_ids() {
        assert!(parse_channel_id("@my_channel").is_ok());
        assert!(parse_channel_id("-1001234567890").is_ok());
        for bad in [
            "",
            "@",
            "@abc",
            "mychannel",
            "-12345",
            "-100",
            "@bad-name",
            "123",
        ] {
            let e = parse_channel_id(bad).expect_err(bad);
            assert_eq!(e.var, "TELEGRAM_CHANNEL_ID");
        }
    }

    #[test]
    fn urls_of_public_and_private_channels() {
        assert_eq!(
            message_url(&json!({"id": -1001234567890_i64, "username": "chan"}), 7).as_deref(),
            Some("https://t.me/chan/7")
        );
        assert_eq!(
            message_url(&json!({"id": -1001234567890_i64}), 7).as_deref(),
            Some("https://t.me/c/1234567890/7")
        );
        assert_eq!(message_url(&json!({"id": -42}), 7), None);
        assert_eq!(message_url(&Value::Null, 7), None);
    }

    fn body(code: u16, description: &str) -> String {
        json!({"ok": false, "error_code": code, "description": description}).to_string()
    }

    #[test]
    fn classifies_the_documented_answers() {
        let c = |code, d: &str| classify(code, &body(code, d), "@chan");
        let rejected_with = |e: PostError, status: u16, words: &str| match e {
            PostError::Rejected {
                status: s, message, ..
            } => s == status && message.contains(words),
            _ => false,
        };
        assert!(rejected_with(c(401, "Unauthorized"), 401, "@BotFather"));
        assert!(rejected_with(
            c(400, "Bad Request: chat not found"),
            400,
            "TELEGRAM_CHANNEL_ID is @chan"
        ));
        assert!(rejected_with(
            c(
                400,
                "Bad Request: need administrator rights in the channel chat"
            ),
            400,
            "administrator of the channel @chan"
        ));
        assert!(rejected_with(
            c(
                400,
                "Bad Request: not enough rights to send text messages to the chat"
            ),
            400,
            "administrator"
        ));
        for d in [
            "Bad Request: message caption is too long",
            "Bad Request: MEDIA_CAPTION_TOO_LONG",
        ] {
            assert!(rejected_with(c(400, d), 400, "at most 1024"), "{d}");
        }
        assert!(rejected_with(
            c(403, "Forbidden: bot is not a member of the channel chat"),
            403,
            "administrator"
        ));
        let limited = classify(
            429,
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 34","parameters":{"retry_after":34}}"#,
            "@chan",
        );
        assert!(
            matches!(limited, PostError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(34))
        );
        assert!(rejected_with(c(404, "Not Found"), 404, "base URL"));
        assert!(c(500, "Internal Server Error: x").may_exist());
        assert!(classify(502, "<html>502 Bad Gateway</html>", "@chan").may_exist());
        assert!(classify(200, "", "@chan").may_exist());
        assert!(!c(400, "Bad Request: PHOTO_INVALID_DIMENSIONS").may_exist());
    }

    #[test]
    fn a_prepared_post_pins_its_image() {
        let media = Media {
            bytes: bytes::Bytes::from_static(b"\x89PNG one"),
            content_type: "image/png",
            alt: None,
        };
        let r = media_ref(&media).expect("ref");
        assert!(r.0.to_string().len() < 200, "no bytes in the ref: {}", r.0);
        let post = prepare_for("@chan", "a < b", &r);
        assert_eq!(post.text, "a &lt; b");
        assert!(unpack(&post, &media).is_ok());
        let other = Media {
            bytes: bytes::Bytes::from_static(b"\x89PNG two"),
            ..media
        };
        assert!(matches!(
            unpack(&post, &other),
            Err(PostError::Rejected { status: 0, .. })
        ));
    }

    /// The first layer on its own (the redactor is the second): reqwest names the URL in its
    /// errors, `transport_text` must not.
    #[tokio::test]
    async fn transport_errors_lose_the_url() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let url = format!("http://127.0.0.1:{port}/bot1:SECRET-TOKEN/sendPhoto");
        let e = reqwest::Client::new()
            .post(&url)
            .send()
            .await
            .expect_err("closed port");
        assert!(
            format!("{e}").contains("SECRET-TOKEN"),
            "reqwest names the URL: {e}"
        );
        let text = transport_text(e);
        assert!(!text.contains("SECRET-TOKEN"), "{text}");
        assert!(text.contains("error sending request"), "{text}");
    }

    #[test]
    fn the_redactor_removes_the_token() {
        let r = Redactor(Secret::new("123:ABC"));
        assert_eq!(
            r.clean("http://x/bot123:ABC/sendPhoto"),
            "http://x/bot<TELEGRAM_BOT_TOKEN>/sendPhoto"
        );
        assert_eq!(Redactor(Secret::new("")).clean("abc"), "abc");
    }
}

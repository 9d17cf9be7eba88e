//! The Telegram channel's wire (the Bot API, posting to a channel): the
//! `sendPhoto` request as stored in the intent and checked against the image before it is
//! sent, the URL of a message, what a failed exchange means, and the classifier that turns a
//! Bot API answer that is not `ok` into a [`PostError`] naming the fix.

use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::text::{caption_html, CAPTION_MAX};
use super::NET;
use crate::networks::http::{self, chain, excerpt, unclassified, Redactor};
use crate::networks::{Media, MediaRef, PostError, PreparedPost};
use crate::vars::Secret;

/// `sendPhoto` uploads are at most 10 MB.
pub const PHOTO_MAX_BYTES: usize = 10 * 1024 * 1024;

/// What stands for the bot token wherever it would have appeared.
pub(super) const TOKEN_PLACEHOLDER: &str = "<TELEGRAM_BOT_TOKEN>";

/// Removes the bot token from any text that leaves the adapter.
pub(super) fn redactor(token: &Secret) -> Redactor {
    Redactor::default().hide(token, TOKEN_PLACEHOLDER)
}

/// The public URL of a message, from the `chat` of the answer: `t.me/<username>/<id>` for a
/// public channel, `t.me/c/<id without -100>/<id>` (members only) for a private one.
pub fn message_url(chat: &Value, message_id: impl std::fmt::Display) -> Option<String> {
    if let Some(username) = chat.get("username").and_then(Value::as_str) {
        if !username.is_empty() {
            return Some(format!("https://t.me/{username}/{message_id}"));
        }
    }
    let id = chat.get("id").and_then(Value::as_i64)?.to_string();
    let internal = id.strip_prefix("-100")?;
    (!internal.is_empty()).then(|| format!("https://t.me/c/{internal}/{message_id}"))
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
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
pub(super) fn media_ref(media: &Media) -> Result<MediaRef, PostError> {
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

pub(super) fn local_refusal(message: &str) -> PostError {
    PostError::Rejected {
        network: NET,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

/// The `sendPhoto` request as stored in the intent: the multipart fields, with the photo part
/// described by its [`MediaRef`].
pub(super) fn prepare_for(chat_id: &str, text: &str, media: &MediaRef) -> PreparedPost {
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
pub(super) struct SendPhoto<'a> {
    pub chat_id: &'a str,
    pub caption: &'a str,
    pub parse_mode: &'a str,
    pub file_name: &'a str,
    pub content_type: &'a str,
}

pub(super) fn unpack<'a>(post: &'a PreparedPost, media: &Media) -> Result<SendPhoto<'a>, PostError> {
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
/// What a failed exchange means for a post, as [`http::transport`] says, with two things said
/// more precisely here: a request that could not be built is a bad Bot API base URL (a
/// refusal: no retry fixes it), and a timeout after sending names the call's budget.
pub(super) fn transport(e: reqwest::Error, budget: Duration) -> PostError {
    if e.is_builder() {
        return local_refusal(&format!(
            "the request could not be built (check the Bot API base URL): {}",
            chain(e)
        ));
    }
    if e.is_timeout() && !e.is_connect() {
        return PostError::InDoubt {
            network: NET,
            message: format!("no answer within {} ms", budget.as_millis()),
        };
    }
    http::transport(NET, e)
}


/// Turns a Bot API answer that is not `ok` into a [`PostError`] whose message names the fix.
/// `http` is the HTTP status; `body` the answer as text; `channel` the configured channel.
pub fn classify(http: u16, body: &str, channel: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if v.get("ok").and_then(Value::as_bool).is_none() {
        // Not the Bot API speaking (a gateway, a proxy): who knows what reached Telegram.
        let snippet = excerpt(body);
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
        401 => PostError::credential_refused(
            crate::networks::Network::Telegram,
            "Telegram bot token",
            401,
            "the bot token is wrong or was regenerated: get the current one from @BotFather and update TELEGRAM_BOT_TOKEN",
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
        _ => unclassified(NET, status, description),
    }
}

pub(super) fn read_refused() -> PostError {
    PostError::ReadRefused {
        network: NET,
        message: "no Bot API method can see a message the bot sent (no history or get-message call, and the bot gets no update for its own channel posts); whether an unanswered sendPhoto posted can only be told by looking at the channel".into(),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(
            c(401, "Unauthorized"),
            PostError::CredentialRefused { message, .. } if message.contains("@BotFather")
        ));
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
    /// errors, [`chain`] must not.
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
        let text = chain(e);
        assert!(!text.contains("SECRET-TOKEN"), "{text}");
        assert!(text.contains("error sending request"), "{text}");
    }

    #[test]
    fn the_redactor_removes_the_token() {
        let r = redactor(&Secret::new("123:ABC"));
        assert_eq!(
            r.clean("http://x/bot123:ABC/sendPhoto"),
            "http://x/bot<TELEGRAM_BOT_TOKEN>/sendPhoto"
        );
        assert_eq!(redactor(&Secret::new("")).clean("abc"), "abc");
    }
}

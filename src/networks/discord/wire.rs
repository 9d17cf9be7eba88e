//! Discord's wire (its bot REST API): the create
//! request as the intent keeps it (the `payload_json` with its `nonce`, and a description of
//! the attachment that the image is checked against before it is sent), snowflakes, the
//! rate-limit headers, and [`classify`], which turns an answer that is not 2xx into a
//! [`PostError`] naming the fix.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::NETWORK;
use crate::networks::http::{self, excerpt, unclassified};
use crate::networks::{Media, MediaRef, Network, PostError, PreparedPost};

/// An attachment is at most 10 MiB without server boosts.
pub const FILE_MAX_BYTES: usize = 10 * 1024 * 1024;
/// A nonce is at most 25 characters.
pub const NONCE_MAX: usize = 25;
/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds: a snowflake's time is counted
/// from it.
pub const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;
/// A message's `flags` bit saying it was published to the followers of its announcement
/// channel.
pub const CROSSPOSTED: u64 = 1;
/// Discord's code for "This message has already been crossposted".
pub const ALREADY_CROSSPOSTED: u64 = 40033;
/// The bot permissions postonce needs: VIEW_CHANNEL, SEND_MESSAGES, EMBED_LINKS,
/// ATTACH_FILES, READ_MESSAGE_HISTORY (`1<<10 | 1<<11 | 1<<14 | 1<<15 | 1<<16`).
pub const PERMISSIONS: u64 = 117_760;

/// What the fix of a permission problem says.
fn permissions_fix() -> String {
    format!("invite the bot with the permissions View Channel, Send Messages, Embed Links, Attach Files and Read Message History (https://discord.com/oauth2/authorize?client_id=<application id>&scope=bot&permissions={PERMISSIONS}), or grant them on the channel")
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub(super) fn file_name(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "cover.png",
        "image/gif" => "cover.gif",
        "image/webp" => "cover.webp",
        _ => "cover.jpg",
    }
}

/// A call refused before anything was sent (it would fail the same way again).
pub(super) fn local_refusal(message: &str) -> PostError {
    PostError::Rejected {
        network: NETWORK,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

/// What the create needs to know of the image, without the bytes (they travel with the
/// create as `files[0]`): its type, name, size, SHA-256 and alt text.
///
/// # Errors
/// An empty image or one over [`FILE_MAX_BYTES`].
pub(super) fn media_ref(media: &Media) -> Result<MediaRef, PostError> {
    if media.bytes.is_empty() {
        return Err(local_refusal("the cover image is empty"));
    }
    if media.bytes.len() > FILE_MAX_BYTES {
        return Err(local_refusal(&format!(
            "the cover image is {} bytes; a Discord attachment is at most {FILE_MAX_BYTES} (10 MiB): make it smaller",
            media.bytes.len()
        )));
    }
    // Discord takes an attachment's description (its alt text) up to 1,024 characters.
    let alt: Option<String> = media
        .alt
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| a.chars().take(1024).collect());
    Ok(MediaRef(json!({
        "content_type": media.content_type,
        "file_name": file_name(media.content_type),
        "size": media.bytes.len(),
        "sha256": sha256_hex(&media.bytes),
        "description": alt,
    })))
}

/// The message's nonce: `po-` and 22 hex digits of SHA-256 over the pipeline's key for this
/// draft and target (`blog-hello@discord`) and `attempt`, a token drawn once when the
/// attempt's request is prepared (25 characters, Discord's most). The request is kept in the
/// intent before it is sent, so every re-send of it carries this nonce; a new attempt (after a
/// failure that posted nothing, or the owner's Post anyway) draws a new one.
pub fn nonce(idempotency: &str, attempt: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"postonce/discord/nonce/v1\n");
    h.update(idempotency.as_bytes());
    h.update(b"\n");
    h.update(attempt.as_bytes());
    let digest = hex::encode(h.finalize());
    format!("po-{}", &digest[..NONCE_MAX - 3])
}

/// The `payload_json` of `POST /channels/{id}/messages`: the text, its nonce (enforced), no
/// mention pinging anyone, the cover as attachment 0 (`files[0]`) with its alt text.
pub fn payload(text: &str, nonce: &str, media: &MediaRef) -> Value {
    let mut attachment = json!({
        "id": 0,
        "filename": media.0.get("file_name").cloned().unwrap_or(Value::Null),
    });
    if let Some(alt) = media.0.get("description").filter(|d| d.is_string()) {
        attachment["description"] = alt.clone();
    }
    json!({
        "content": text,
        "nonce": nonce,
        "enforce_nonce": true,
        "allowed_mentions": {"parse": []},
        "attachments": [attachment],
    })
}

/// The request the intent keeps: the channel, the `payload_json`, and the attachment as
/// [`media_ref`] described it.
pub(super) fn prepared(
    channel: &str,
    text: &str,
    media: &MediaRef,
    idempotency: &str,
    attempt: &str,
) -> PreparedPost {
    let nonce = nonce(idempotency, attempt);
    PreparedPost {
        body: json!({
            "channel_id": channel,
            "payload_json": payload(text, &nonce, media),
            "file": media.0,
        }),
        text: text.to_owned(),
        key: Some(nonce),
    }
}

/// The parts of a kept request, checked against the image about to be sent.
pub(super) struct Unpacked<'a> {
    pub channel: &'a str,
    pub payload: &'a Value,
    pub file_name: &'a str,
    pub content_type: &'a str,
}

/// Reads a kept request and checks `media` is the image it was prepared with.
///
/// # Errors
/// A request this adapter did not make, or another image (a refusal: nothing is sent).
pub(super) fn unpack<'a>(post: &'a PreparedPost, media: &Media) -> Result<Unpacked<'a>, PostError> {
    let b = &post.body;
    let file = |name: &str| b.pointer(&format!("/file/{name}")).and_then(Value::as_str);
    let (Some(channel), Some(payload), Some(file_name), Some(content_type)) = (
        b.get("channel_id").and_then(Value::as_str),
        b.get("payload_json").filter(|p| p.is_object()),
        file("file_name"),
        file("content_type"),
    ) else {
        return Err(local_refusal(
            "the prepared request is not a Discord message this adapter made (a field is missing)",
        ));
    };
    if payload.get("nonce").and_then(Value::as_str).is_none() {
        return Err(local_refusal("the prepared request carries no nonce; prepare the post again"));
    }
    if file("sha256") != Some(sha256_hex(&media.bytes).as_str()) || content_type != media.content_type
    {
        return Err(local_refusal(
            "the cover image is not the one this message was prepared with (its SHA-256 or type differs); prepare the post again",
        ));
    }
    Ok(Unpacked {
        channel,
        payload,
        file_name,
        content_type,
    })
}

// Snowflakes.

/// The smallest snowflake of the millisecond `unix_ms` (for `after=`: every message made at or
/// after it has a larger id, less the one at exactly that bound).
pub fn snowflake_at(unix_ms: i64) -> u64 {
    u64::try_from(unix_ms.saturating_sub(DISCORD_EPOCH_MS)).unwrap_or(0) << 22
}

/// When a snowflake was made, in Unix milliseconds.
pub fn snowflake_ms(id: &str) -> Option<i64> {
    let n: u64 = id.parse().ok()?;
    i64::try_from(n >> 22).ok().map(|ms| ms + DISCORD_EPOCH_MS)
}

/// Whether `id` is a snowflake (a channel's, a user's): 17 to 20 digits.
pub fn is_snowflake(id: &str) -> bool {
    (17..=20).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()) && id.parse::<u64>().is_ok()
}

// Answers.

/// A message's public URL: `https://discord.com/channels/{guild}/{channel}/{message}`
/// (`@me` in place of a guild for a direct message).
pub fn message_url(guild: Option<&str>, channel: &str, message: &str) -> String {
    format!(
        "https://discord.com/channels/{}/{channel}/{message}",
        guild.unwrap_or("@me")
    )
}

/// A header's value as seconds that may have decimals (`X-RateLimit-Reset-After: 64.57`).
fn header_seconds(headers: &HeaderMap, name: &str) -> Option<Duration> {
    let v: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| Duration::from_secs_f64(v))
}

/// When a 429 ends: the body's `retry_after` (seconds with decimals), else `Retry-After`, else
/// `X-RateLimit-Reset-After`.
pub fn retry_after(headers: &HeaderMap, body: &Value) -> Option<Duration> {
    body.get("retry_after")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .or_else(|| http::retry_after_seconds(headers))
        .or_else(|| header_seconds(headers, "x-ratelimit-reset-after"))
}

/// How long to wait before the next call in the same bucket: the bucket's reset when it has no
/// request left (`X-RateLimit-Remaining: 0`), else nothing.
pub fn pace(headers: &HeaderMap) -> Option<Duration> {
    (http::header_u64(headers, "x-ratelimit-remaining") == Some(0))
        .then(|| header_seconds(headers, "x-ratelimit-reset-after"))
        .flatten()
        .or_else(|| {
            (http::header_u64(headers, "x-ratelimit-remaining") == Some(0))
                .then(|| header_seconds(headers, "x-ratelimit-reset"))
                .flatten()
                .map(|reset| {
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    reset.saturating_sub(now)
                })
        })
}

/// Which call an answer belongs to: the same status means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST /channels/{id}/messages`.
    Create,
    /// `POST /channels/{id}/messages/{id}/crosspost`.
    Crosspost,
    /// The channel's messages read back (and the bot's own user it needs).
    Read,
    /// The channel and the bot read before a post, or by doctor.
    Check,
}

/// Discord's error `code` (`0` for the 401 body).
pub fn error_code(body: &Value) -> Option<u64> {
    body.get("code").and_then(Value::as_u64)
}

/// Turns an answer that is not 2xx into a [`PostError`] whose message names the fix. Discord's
/// errors: `{"code": 50013, "message": "Missing Permissions"}` (an `errors` object for 50035);
/// a 429 carries `retry_after`; a gateway's 502 may be a page.
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str, channel: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = error_code(&v);
    let mut detail = v
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map_or_else(|| excerpt(body), str::to_owned);
    if let Some(errors) = v.get("errors") {
        detail = format!("{detail} {}", excerpt(&errors.to_string()));
    }
    if let Some(code) = code.filter(|c| *c != 0) {
        detail = format!("{detail} (code {code})");
    }
    match (status, code) {
        (401, _) => PostError::credential_refused(
            Network::Discord,
            "Discord bot token",
            status,
            &format!("{detail}; it was reset in the Developer Portal (Bot → Reset Token) or is not a bot token: set DISCORD_BOT_TOKEN to the new one"),
        ),
        (403, _) if op == Op::Read => PostError::ReadRefused {
            network: NETWORK,
            message: format!("{detail}; reading the channel's messages back needs Read Message History: {}", permissions_fix()),
        },
        (403, _) if op == Op::Crosspost => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; publishing needs an announcement channel (DISCORD_CROSSPOST=1) and Send Messages there"),
        },
        (403, _) => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; the bot may not post in channel {channel}: {}", permissions_fix()),
        },
        (404, Some(10003)) | (404, None) if op != Op::Crosspost => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; DISCORD_CHANNEL_ID {channel} is no channel the bot can see (or DISCORD_API_URL is not Discord's API base): {}", permissions_fix()),
        },
        (404, Some(10008)) if op == Op::Create => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; the message this request's nonce made was deleted, so Discord will not post it again under that nonce"),
        },
        (413, _) | (_, Some(40005)) => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("{detail}; the request is too large (an attachment is at most 10 MiB)"),
        },
        (429, _) => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers, &v),
            message: detail,
        },
        _ => unclassified(NETWORK, status, detail),
    }
}

/// A failure below HTTP, as [`http::transport`] describes it, except a request that could not
/// be built: that is refused here, naming `DISCORD_API_URL`.
pub(super) fn transport(e: reqwest::Error) -> PostError {
    if e.is_builder() {
        return local_refusal(&format!(
            "the request could not be built (check DISCORD_API_URL): {}",
            http::chain(e)
        ));
    }
    http::transport(NETWORK, e)
}

/// The text as Discord keeps a message's `content`, to compare one read back with the text
/// sent: Discord trims it and keeps `\n` line ends.
pub fn comparable(content: &str) -> String {
    content.replace("\r\n", "\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_fits_discord_and_is_stable_for_an_attempt() {
        let a = nonce("blog-hello@discord", "1");
        assert_eq!(a.len(), NONCE_MAX);
        assert!(a.starts_with("po-"));
        assert_eq!(a, nonce("blog-hello@discord", "1"));
        assert_ne!(a, nonce("blog-hello@discord", "2"));
        assert_ne!(a, nonce("blog-other@discord", "1"));
    }

    #[test]
    fn snowflakes_count_from_discords_epoch() {
        // Discord's docs' example: 175928847299117063 was made at 1462015105796.
        assert_eq!(snowflake_ms("175928847299117063"), Some(1_462_015_105_796));
        assert_eq!(snowflake_at(1_462_015_105_796) >> 22, 175_928_847_299_117_063 >> 22);
        assert!(is_snowflake("175928847299117063"));
        assert!(!is_snowflake("#general"));
        assert!(!is_snowflake("123"));
    }

    #[test]
    fn answers_are_classified_with_their_fix() {
        let h = HeaderMap::new();
        let e = classify(Op::Create, 401, &h, r#"{"message": "401: Unauthorized", "code": 0}"#, "1");
        assert!(matches!(e, PostError::CredentialRefused { .. }), "{e:?}");
        assert!(e.to_string().contains("postonce auth discord"), "{e}");
        let e = classify(Op::Create, 403, &h, r#"{"code":50013,"message":"Missing Permissions"}"#, "1");
        assert!(matches!(e, PostError::Rejected { status: 403, .. }), "{e:?}");
        assert!(e.to_string().contains("permissions=117760"), "{e}");
        let e = classify(Op::Read, 403, &h, r#"{"code":50001,"message":"Missing Access"}"#, "1");
        assert!(matches!(e, PostError::ReadRefused { .. }), "{e:?}");
        let body = r#"{"message":"You are being rate limited.","retry_after":64.57,"global":false}"#;
        let e = classify(Op::Create, 429, &h, body, "1");
        assert!(
            matches!(e, PostError::RateLimited { retry_after: Some(d), .. } if d.as_millis() == 64_570),
            "{e:?}"
        );
        let e = classify(Op::Create, 502, &h, "<html>bad gateway</html>", "1");
        assert!(e.may_exist(), "{e:?}");
    }

    #[test]
    fn an_empty_bucket_is_waited_for() {
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", "1".parse().unwrap());
        h.insert("x-ratelimit-reset-after", "0.25".parse().unwrap());
        assert_eq!(pace(&h), None);
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        assert_eq!(pace(&h), Some(Duration::from_millis(250)));
    }
}

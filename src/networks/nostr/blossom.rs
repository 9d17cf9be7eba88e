//! The cover on a Blossom media server (BUD-02, NIP-B7): `PUT <server>/upload` with the raw
//! bytes, `Content-Type`, `X-SHA-256` and `Authorization: Nostr <base64url of a signed kind
//! 24242 event>`; `201` (stored now) or `200` (already there) with the blob descriptor
//! (`url`, `sha256`, `size`, `type`). Blobs are addressed by their hash, so an upload repeated
//! is the same blob at the same URL: safe to repeat. `X-Reason` carries the server's words.
//! Before a replay the blob is looked for (`HEAD <url>`) and put back when it is gone.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::event::{blossom_auth, Keys};
use super::NETWORK;
use crate::networks::http::{excerpt, retry_after_seconds};
use crate::networks::{Media, MediaRef, PostError};

/// Uploads `media` to the server at `base` (no trailing `/`) as `keys`, within `timeout`.
///
/// # Errors
/// What the server answered, described: 401/403 refused (the key is not allowed there), 413
/// too large, 409 the hash did not match (the bytes changed on the way: retried), 429 rate
/// limited, 5xx or a broken exchange in doubt (retried: safe), not reached.
pub async fn upload(
    http: &reqwest::Client,
    base: &str,
    keys: &Keys,
    media: &Media,
    timeout: std::time::Duration,
) -> Result<MediaRef, PostError> {
    let sha = hex::encode(Sha256::digest(&media.bytes));
    let now = u64::try_from(crate::record::now_s()).unwrap_or(0);
    let resp = http
        .put(format!("{base}/upload"))
        .header("Content-Type", media.content_type)
        .header("X-SHA-256", &sha)
        .header("Authorization", blossom_auth(keys, &sha, now))
        .timeout(timeout)
        .body(media.bytes.clone())
        .send()
        .await
        .map_err(|e| {
            let message = format!("the Blossom server {base}: {}", crate::networks::http::chain(e));
            PostError::NotSent {
                network: NETWORK,
                message,
            }
        })?;
    let status = resp.status().as_u16();
    let reason = resp
        .headers()
        .get("x-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let retry_after = retry_after_seconds(resp.headers());
    let body = resp.text().await.unwrap_or_default();
    let said = if reason.is_empty() {
        excerpt(&body)
    } else {
        reason
    };
    let refused = |message: String| PostError::Rejected {
        network: NETWORK,
        status,
        message,
    };
    match status {
        200 | 201 => descriptor(&body, &sha, media),
        401 | 403 => Err(refused(format!(
            "the Blossom server at NOSTR_BLOSSOM_URL refused this key's upload ({said}): use a server that accepts this npub, or unset NOSTR_BLOSSOM_URL to reference an https cover as it is"
        ))),
        413 => Err(refused(format!(
            "the Blossom server refused the cover as too large ({} bytes: {said})",
            media.bytes.len()
        ))),
        409 => Err(PostError::NotSent {
            network: NETWORK,
            message: format!("the Blossom server found another hash than X-SHA-256 {sha} (409: {said}); nothing stored"),
        }),
        429 => Err(PostError::RateLimited {
            network: NETWORK,
            retry_after,
            message: format!("the Blossom server: {said}"),
        }),
        s if s >= 500 => Err(PostError::InDoubt {
            network: NETWORK,
            message: format!("the Blossom server answered {s}: {said}"),
        }),
        _ => Err(refused(format!("the Blossom server refused the upload: {said}"))),
    }
}

/// Makes sure the blob at `url` is still on the server before a note that names it goes out
/// again: `HEAD` it (BUD-01), and upload `media` once more when the server answers 404 (the
/// same bytes are the same blob at the same URL). Any other answer, or none, leaves it be: the
/// blob may well be there, and the note names the URL either way.
///
/// # Errors
/// The upload's, when the blob was gone and could not be put back (the caller says so and
/// sends the note all the same).
pub async fn ensure(
    http: &reqwest::Client,
    base: &str,
    keys: &Keys,
    url: &str,
    media: &Media,
    timeout: std::time::Duration,
) -> Result<(), PostError> {
    match http.head(url).timeout(timeout).send().await {
        Ok(r) if r.status().as_u16() == 404 => {
            tracing::info!(network = NETWORK, "the Blossom blob is gone; uploading the cover again");
            upload(http, base, keys, media, timeout).await.map(|_| ())
        }
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(network = NETWORK, error = %crate::networks::http::chain(e), "could not ask the Blossom server for the blob; sending the note as it is");
            Ok(())
        }
    }
}

/// The blob descriptor, checked against the bytes sent: the media reference the note names.
fn descriptor(body: &str, sha: &str, media: &Media) -> Result<MediaRef, PostError> {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let url = v.get("url").and_then(Value::as_str).unwrap_or("");
    let their = v.get("sha256").and_then(Value::as_str).unwrap_or(sha);
    if !(url.starts_with("https://") || url.starts_with("http://")) || their != sha {
        return Err(PostError::InDoubt {
            network: NETWORK,
            message: format!(
                "the Blossom server's answer names no URL of this blob ({})",
                excerpt(body)
            ),
        });
    }
    Ok(MediaRef(json!({
        "url": url,
        "sha256": sha,
        "m": media.content_type,
        "size": media.bytes.len(),
    })))
}

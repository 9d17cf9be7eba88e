//! A Facebook Page's wire (the Graph API's Pages endpoints): the create request as the intent
//! keeps it (the caption, and a description of the photo that the image is checked against
//! before its bytes are sent), the Page's published posts as a read answers them, and
//! [`classify`]: Facebook's own answers first (the duplicate signals 506 and subcode 1366051,
//! a temporary block), then the Graph classifier Threads and Instagram share.

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::VOICE;
use crate::networks::graph::wire::{self as graph, comparable, GraphError, Op};
use crate::networks::http;
use crate::networks::{Created, Media, MediaRef, PostError, PreparedPost};

/// Graph error 506: "Duplicate Post" (consecutive identical posts refused).
pub const DUPLICATE_POST: i64 = 506;
/// Subcode 1366051: "These photos were already posted".
pub const PHOTOS_ALREADY_POSTED: i64 = 1_366_051;
/// Code 368: temporarily blocked from posting (subcode 1390008: "wait and retry").
pub const TEMPORARILY_BLOCKED: i64 = 368;
/// A photo is at most 4 MB (postiz's reading of subcode 1366046, observed).
pub const MAX_PHOTO_BYTES: u64 = 4_000_000;

pub(super) fn refusal(message: &str) -> PostError {
    graph::local_refusal(&VOICE, message.to_owned())
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What the create needs to know of the photo, without its bytes (they travel with the create,
/// multipart `source`): type, size, SHA-256 and alt text.
///
/// # Errors
/// An empty photo (nothing is sent).
pub fn media_ref(media: &Media) -> Result<MediaRef, PostError> {
    if media.bytes.is_empty() {
        return Err(refusal("the cover image is empty"));
    }
    let alt = media.alt.as_deref().map(str::trim).filter(|a| !a.is_empty());
    Ok(MediaRef(json!({
        "content_type": media.content_type,
        "size": media.bytes.len(),
        "sha256": digest(&media.bytes),
        "alt_text": alt,
    })))
}

/// The request the intent keeps: `POST /{page}/photos` with `message`, `published=true`, and
/// the photo as [`media_ref`] described it.
pub fn prepared(page: &str, text: &str, media: &MediaRef) -> PreparedPost {
    PreparedPost {
        body: json!({
            "page_id": page,
            "message": text,
            "published": true,
            "source": media.0,
        }),
        text: text.to_owned(),
        key: None,
    }
}

/// The caption of a kept request, after checking `media` is the photo it was prepared with.
///
/// # Errors
/// A request this adapter did not make, or another image (nothing is sent).
pub fn unpack<'a>(post: &'a PreparedPost, media: &Media) -> Result<&'a str, PostError> {
    let b = &post.body;
    let Some(message) = b.get("message").and_then(Value::as_str) else {
        return Err(refusal(
            "the prepared request is not a Facebook photo post this adapter made (no message)",
        ));
    };
    let sha = b.pointer("/source/sha256").and_then(Value::as_str);
    if sha != Some(digest(&media.bytes).as_str()) {
        return Err(refusal(
            "the cover image is not the one this post was prepared with (its SHA-256 differs); prepare the post again",
        ));
    }
    Ok(message)
}

/// The post a create's answer names: `post_id` (`<page>_<post>`, the feed post), else the
/// photo's `id`.
pub fn created(v: &Value) -> Created {
    let id = ["post_id", "id"]
        .iter()
        .find_map(|k| graph::id_of(&json!({ "id": v.get(*k)? })));
    Created {
        url: id.as_deref().map(super::post_url),
        id,
        cid: None,
    }
}

/// Turns a non-2xx answer into a [`PostError`]. Facebook keeps no idempotency key: 506 and
/// 1366051 say a post like this one exists without naming it ([`PostError::AlreadyExists`]
/// without an id: the pipeline reads the Page back); 368 is a block to wait out; a Page the
/// token does not reach names `FACEBOOK_PAGE_ID`; the rest is the shared Graph classifier's
/// (190 → the token refused).
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let g = GraphError::parse(body).unwrap_or_default();
    let name = VOICE.name;
    if g.code == Some(DUPLICATE_POST) || g.error_subcode == Some(PHOTOS_ALREADY_POSTED) {
        tracing::warn!(network = name, "Facebook refused a duplicate: {}", g.describe());
        return PostError::AlreadyExists {
            network: name,
            existing: Created {
                id: None,
                url: None,
                cid: None,
            },
        };
    }
    if g.code == Some(TEMPORARILY_BLOCKED) {
        return PostError::RateLimited {
            network: name,
            retry_after: http::retry_after_seconds(headers),
            message: format!("the Page is temporarily blocked from posting, wait and retry: {}", g.describe()),
        };
    }
    if status == 404 || (g.code == Some(graph::PARAMETER_CODE) && g.error_subcode == Some(33)) {
        return PostError::Rejected {
            network: name,
            status,
            message: format!(
                "{}; FACEBOOK_PAGE_ID must be the id of a Page the token manages, and FACEBOOK_API_URL Graph's base ({})",
                g.describe(),
                super::DEFAULT_API_URL
            ),
        };
    }
    graph::classify(&VOICE, op, status, headers, body)
}

/// One of the Page's published posts (`fields=id,message,created_time,permalink_url`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePost {
    pub id: String,
    pub message: String,
    pub created_time: Option<i64>,
    pub permalink_url: Option<String>,
}

/// One page of `GET /{page}/published_posts` (newest first) and the cursor of the next.
pub fn list_page(v: &Value) -> (Vec<PagePost>, Option<String>) {
    let s = |p: &Value, k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
    let posts = v
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(PagePost {
                id: graph::id_of(p)?,
                message: comparable(&s(p, "message").unwrap_or_default()),
                created_time: s(p, "created_time").and_then(|t| graph::parse_timestamp(&t).ok()),
                permalink_url: s(p, "permalink_url"),
            })
        })
        .collect();
    let next = v
        .pointer("/paging/next")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .and_then(|_| v.pointer("/paging/cursors/after").and_then(Value::as_str))
        .map(str::to_owned);
    (posts, next)
}

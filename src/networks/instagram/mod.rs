//! Instagram (a professional account through the Instagram Graph API). Its primitive is Threads': a **media container**
//! (`POST /v25.0/{user}/media` with `image_url`, `caption`, `alt_text`), published at most
//! once (`POST /v25.0/{user}/media_publish` with `creation_id`), its status read back
//! (`GET /v25.0/{container}?fields=status_code,status`). The adapter, its calls and its
//! classifier are [`crate::networks::graph`]'s, shared with Threads; this folder holds
//! Instagram's [`Dialect`], its limits (`text.rs` and [`capabilities`]), its variables
//! (`config.rs`) and its `postonce auth instagram` (`auth.rs`).
//!
//! Before every publish the daily publishing quota is read
//! (`GET /{user}/content_publishing_limit`); a used-up quota publishes nothing and is a rate
//! limit the pipeline waits out. Instagram fetches the image itself from the draft's public
//! https URL: a local cover is refused before any call. Without a token it is a dry run on the
//! dry transport, answered by the shared `dry_answer`.

pub mod auth;
pub mod config;
pub mod text;

use crate::image::{Format, Formats};
use crate::networks::capabilities::{
    Counting, Idempotency, ImageLimits, Links, TagLimits, TextLimit,
};
use crate::networks::graph::{self, Dialect, GraphAdapter, Meta, Voice};
use crate::networks::{Capabilities, MediaRef, Network, PreparedPost};

pub use crate::networks::graph::creation_id;
pub use config::DEFINITION;

/// `INSTAGRAM_API_URL`'s default: the Instagram-Login host (`https://graph.facebook.com`
/// serves the same paths to a Facebook-Login token, with the account's id instead of `me`).
pub const DEFAULT_API_URL: &str = "https://graph.instagram.com";
/// The API version in every path.
pub const API_VERSION: &str = "v25.0";
/// The publishing quota when the quota read names none: the current guide's 50 per 24 h
/// (older pages say 25, some clients 100; postonce reads the account's own figure).
pub const DEFAULT_QUOTA: u64 = 50;

/// Instagram's words for the container primitive.
pub static DIALECT: Dialect = Dialect {
    voice: Voice {
        network: Network::Instagram,
        name: "Instagram",
        renew: "create a new long-lived Instagram user access token (Instagram API with Instagram Login, scopes instagram_business_basic, instagram_business_content_publish; it lasts 60 days) and set INSTAGRAM_ACCESS_TOKEN",
        user_var: config::USER_VAR,
        api_var: config::API_VAR,
        default_api_url: DEFAULT_API_URL,
        default_quota: DEFAULT_QUOTA,
        image_rule: "a JPEG of at most 8 MB, 320 to 1440 pixels wide, width:height from 4:5 to 1.91:1",
        read_scope: "instagram_business_basic",
    },
    version: API_VERSION,
    token_var: config::TOKEN_VAR,
    token_placeholder: "<INSTAGRAM_ACCESS_TOKEN>",
    timeout_var: config::TIMEOUT_VAR,
    container_path: "media",
    publish_path: "media_publish",
    quota_path: "content_publishing_limit",
    container_fixed: &[],
    text_field: "caption",
    status_fields: "status_code,status",
    status_key: "status_code",
    error_key: "status",
    quota_before_publish: true,
    // The order of the account's media is unconfirmed: every page is read.
    newest_first: false,
    dry_permalink: |_, id| format!("https://www.instagram.com/p/{id}/"),
    check_account,
    capabilities,
    text_len: text::caption_len,
};

/// A Facebook-Login token (`graph.facebook.com`) reaches the Instagram account by its id only:
/// `me` there is the Facebook user.
fn check_account(user: &str, api_url: &str) -> Option<String> {
    (user == graph::DEFAULT_USER && api_url.contains("graph.facebook.com")).then(|| {
        "with INSTAGRAM_API_URL at graph.facebook.com (Facebook Login), `me` is the Facebook user: set the Instagram account's numeric id (GET /<page id>?fields=instagram_business_account)".to_owned()
    })
}

/// The marker of Instagram's [`GraphAdapter`].
pub struct Instagram;

impl Meta for Instagram {
    const DIALECT: &'static Dialect = &DIALECT;
}

/// Publishes to one Instagram professional account.
pub type InstagramAdapter = GraphAdapter<Instagram>;

/// What Instagram offers: a container publishes at most once and its status says whether it
/// did; the account's media can be read back; a caption of 2,200 characters with at most 30
/// hashtags and 20 @-mentions; a JPEG of at most 8 MB, 320–1440 pixels wide, from 4:5 to
/// 1.91:1, fetched by Instagram itself from the draft's public URL.
pub fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::Container,
        reads_back: true,
        text: TextLimit {
            max: text::MAX_CAPTION,
            counting: Counting::Chars,
        },
        images: ImageLimits {
            // JPEG only (no MPO or JPS); sRGB is Meta's advice, not checked here.
            formats: Formats::of(&[Format::Jpeg]),
            max_bytes: 8_000_000,
            min_width: Some(320),
            // Meta scales a wider image down; a rendition does it here, byte for byte the
            // same on every try.
            max_width: Some(1440),
            min_aspect: Some((4, 5)),
            max_aspect: Some((191, 100)),
            ..ImageLimits::default()
        },
        links: Links::AsText,
        fetches_image: true,
        tags: TagLimits {
            max_hashtags: Some(text::MAX_HASHTAGS),
            max_mentions: Some(text::MAX_MENTIONS),
        },
        ..Capabilities::default()
    }
}

/// The image as the upload answers it: its alt text only ([`graph::media_ref`]).
pub fn media_ref(alt: Option<&str>) -> MediaRef {
    graph::media_ref(&DIALECT, alt)
}

/// The kept request before the stage: the container's fields ([`graph::prepared`]).
pub fn prepared(text: &str, media: &MediaRef) -> PreparedPost {
    graph::prepared(&DIALECT, text, media)
}

#[cfg(test)]
mod tests;

//! The Instagram fake: the Graph container fake (`meta.rs`) speaking Instagram's dialect
//! (Meta's documentation): `/v25.0/{user}/media` (form `image_url`,
//! `caption`, `alt_text`; no `media_type` for an image), `/v25.0/{user}/media_publish`
//! (`creation_id`), `GET /v25.0/{container}?fields=status_code,status` (`status_code` the
//! state, `status` its error), `GET /v25.0/{user}/media?fields=id,caption,timestamp,permalink`,
//! `content_publishing_limit` (50 per 24 hours; a used-up quota answered with Graph code 9, as
//! observed), permalinks `https://www.instagram.com/p/<shortcode>/`, the Graph error body. The
//! caption: at most 2,200 characters, 30 hashtags and 20 @-mentions (a 400, code 100). Images
//! fetched by the fake itself: JPEG only, at most 8,000,000 bytes, 320 to 1440 pixels wide,
//! width:height from 4:5 to 1.91:1 (outside: the container goes to `ERROR`).
//!
//! It can show a duplicate: [`MetaFake::set_republish`] lets a published container publish
//! again (Instagram's own refusal of that is the primitive; its code is unconfirmed).

use std::collections::HashMap;

use wiremock::ResponseTemplate;

use super::meta::{bad_param, Counting, Dialect, FakeDialect, MetaFake};
#[allow(unused_imports)]
pub use super::meta::{Container, Mode, Post};
use super::received::Received;

pub const MAX_IMAGE_BYTES: usize = 8_000_000;
pub const MIN_WIDTH: u32 = 320;
pub const MAX_WIDTH: u32 = 1440;

/// The account's access token (the `SECRET1` mark lets scripts/test.sh find it in logs).
pub const TOKEN: &str = "IGAAR7x-instagram-SECRET1-T0k3nV4lu3";
/// The professional account's id (`user_id` of `/me`).
pub const USER_ID: &str = "17841405793187218";
pub const USERNAME: &str = "postonce_ig";
pub const MAX_TEXT: usize = 2200;
pub const MAX_HASHTAGS: usize = 30;
pub const QUOTA_TOTAL: u64 = 50;

/// Instagram's fake.
pub type InstagramFake = MetaFake<Instagram>;

pub struct Instagram;

impl Dialect for Instagram {
    const DIALECT: &'static FakeDialect = &FakeDialect {
        version: "v25.0",
        container: "media",
        publish: "media_publish",
        quota: "content_publishing_limit",
        text_field: "caption",
        status_key: "status_code",
        error_key: "status",
        token: TOKEN,
        user_id: USER_ID,
        username: USERNAME,
        quota_total: QUOTA_TOTAL,
        quota_code: 9,
        check_form,
        image_refusal,
        permalink: |shortcode| format!("https://www.instagram.com/p/{shortcode}/"),
    };
}

/// An image has no `media_type`; the caption's length and tags.
fn check_form(p: &HashMap<String, String>, _: Counting) -> Option<ResponseTemplate> {
    if let Some(t) = p.get("media_type").filter(|t| !t.is_empty()) {
        return Some(bad_param(&format!(
            "Param media_type {t} is not valid for an image; leave it out"
        )));
    }
    let caption = p.get("caption").map_or("", String::as_str);
    if caption.encode_utf16().count() > MAX_TEXT {
        return Some(bad_param(
            "Param caption must be at most 2200 characters long",
        ));
    }
    let hashtags = caption
        .split(|c: char| c.is_whitespace())
        .filter(|w| w.starts_with('#') && w.len() > 1)
        .count();
    (hashtags > MAX_HASHTAGS).then(|| bad_param("The caption has more than 30 hashtags"))
}

/// Why Instagram refuses an image it fetched (the container goes to `ERROR`, its `status`
/// naming the error).
fn image_refusal(got: &Received) -> Option<String> {
    let (w, h) = (u64::from(got.width), u64::from(got.height));
    if !got.is_one_of(&["image/jpeg"]) {
        Some("Error: 2207026, not a JPEG".into())
    } else if got.bytes > MAX_IMAGE_BYTES {
        Some(format!("Error: 2207004, {} bytes", got.bytes))
    } else if got.width < MIN_WIDTH || got.width > MAX_WIDTH {
        Some(format!("Error: 2207009, {} pixels wide", got.width))
    } else if w * 5 < h * 4 || w * 100 > h * 191 {
        Some(format!(
            "Error: 2207009, {}×{} aspect ratio",
            got.width, got.height
        ))
    } else {
        None
    }
}

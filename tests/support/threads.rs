//! The Threads fake: the Graph container fake (`meta.rs`) speaking Threads' dialect:
//! `/v1.0/{user}/threads` (form `media_type=IMAGE|TEXT`, `image_url`, `text`, `alt_text`),
//! `/v1.0/{user}/threads_publish`, `threads_publishing_limit` (250 per 24 hours, a used-up
//! quota answered with Graph code 4), `fields=status,error_message`, permalinks
//! `https://www.threads.com/@<username>/post/<shortcode>`; text of at most 500 counted as
//! [`Counting`] says; images JPEG or PNG, at most 8,000,000 bytes, 320 to 1440 pixels wide, a
//! shape of at most 10:1.

use std::collections::HashMap;

use wiremock::ResponseTemplate;

use super::meta::{bad_param, fake_len, Dialect, FakeDialect, MetaFake};
#[allow(unused_imports)]
pub use super::meta::{
    graph_error, timestamp, Container, Counting, Mode, Post, CONTAINER_LIFETIME_MS,
    QUOTA_DURATION_S,
};
use super::received::Received;

/// Threads' image limits ("JPEG or PNG, ≤ 8 MB, width 320–1440 px, aspect ratio up to
/// 10:1").
pub const MAX_IMAGE_BYTES: usize = 8_000_000;
pub const MIN_WIDTH: u32 = 320;
pub const MAX_WIDTH: u32 = 1440;
pub const MAX_RATIO: u32 = 10;

/// The account's access token (the `SECRET1` mark lets scripts/test.sh find it in logs).
pub const TOKEN: &str = "THAAHq2ZbW9x-threads-SECRET1-T0k3nV4lu3";
pub const USER_ID: &str = "25876043578412345";
pub const USERNAME: &str = "postonce_test";
pub const MAX_TEXT: usize = 500;
pub const QUOTA_TOTAL: u64 = 250;

/// Threads' fake.
pub type ThreadsFake = MetaFake<Threads>;

pub struct Threads;

impl Dialect for Threads {
    const DIALECT: &'static FakeDialect = &FakeDialect {
        version: "v1.0",
        container: "threads",
        publish: "threads_publish",
        quota: "threads_publishing_limit",
        text_field: "text",
        status_key: "status",
        error_key: "error_message",
        token: TOKEN,
        user_id: USER_ID,
        username: USERNAME,
        quota_total: QUOTA_TOTAL,
        quota_code: 4,
        check_form,
        image_refusal,
        permalink: |shortcode| format!("https://www.threads.com/@{USERNAME}/post/{shortcode}"),
    };
}

/// Threads' `media_type` (`IMAGE` or `TEXT`, required) and its text's length.
fn check_form(p: &HashMap<String, String>, counting: Counting) -> Option<ResponseTemplate> {
    let text = p.get("text").map_or("", String::as_str);
    match p.get("media_type").map_or("", String::as_str) {
        "IMAGE" => {}
        "TEXT" if !text.is_empty() => {}
        "TEXT" => return Some(bad_param("Param text is required for media_type TEXT")),
        "" => return Some(bad_param("The parameter media_type is required")),
        _ => {
            return Some(bad_param(
                "Param media_type must be one of {TEXT, IMAGE, VIDEO, CAROUSEL}",
            ))
        }
    }
    (fake_len(text, counting) > MAX_TEXT)
        .then(|| bad_param("Param text must be at most 500 characters long"))
}

/// Why Threads refuses an image it fetched; `None`: within its limits.
///
/// Meta's posts page states the limits; a wider image "is scaled down" there, but the fake
/// refuses it like the rest, so that an image postonce's capabilities rule out (1440 wide at
/// most) shows when it reaches Threads. How Threads answers a refused image is not
/// documented: the container goes to `ERROR` (its `error_message` stays `UNKNOWN`).
fn image_refusal(got: &Received) -> Option<String> {
    if !got.is_one_of(&["image/jpeg", "image/png"]) {
        Some("not a JPEG or PNG".into())
    } else if got.bytes > MAX_IMAGE_BYTES {
        Some(format!("{} bytes, over {MAX_IMAGE_BYTES}", got.bytes))
    } else if got.width < MIN_WIDTH || got.width > MAX_WIDTH {
        Some(format!(
            "{} pixels wide, outside {MIN_WIDTH}–{MAX_WIDTH}",
            got.width
        ))
    } else if got.shape_over(MAX_RATIO) {
        Some(format!(
            "{}×{}, a shape over {MAX_RATIO}:1",
            got.width, got.height
        ))
    } else {
        None
    }
}

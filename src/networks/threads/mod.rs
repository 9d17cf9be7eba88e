//! Threads (Meta's Threads API). Its idempotency primitive is the
//! **media container** (`POST /v1.0/{user}/threads`, then `POST /v1.0/{user}/threads_publish`
//! with its id; the status read back with `fields=status,error_message`), which it shares with
//! Instagram: the adapter, its two posting calls, its reading back and the Graph classifier are
//! [`crate::networks::graph`]'s, written once. This folder holds what is Threads' own: its
//! [`Dialect`] (paths, fields, words), its text rule (`text.rs`), its variables (`config.rs`)
//! and its `postonce auth threads` (`auth.rs`).
//!
//! Waiting for `FINISHED` happens inside `POSTONCE_THREADS_TIMEOUT_MS`. Without a token it is a
//! dry run ([`ThreadsAdapter::dry_run`]): the same adapter on the dry transport.

pub mod auth;
pub mod config;
pub mod text;

use crate::image::{Format, Formats};
use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::networks::graph::{self, Dialect, GraphAdapter, Meta, Voice};
use crate::networks::{Capabilities, MediaRef, Network, PreparedPost};

pub use crate::networks::graph::creation_id;
pub use config::DEFINITION;

/// `THREADS_API_URL`'s default.
pub const DEFAULT_API_URL: &str = "https://graph.threads.net";
/// `THREADS_USER_ID`'s default: the token's own account.
pub const DEFAULT_USER: &str = graph::DEFAULT_USER;
/// The API version in every path.
pub const API_VERSION: &str = "v1.0";
/// `POSTONCE_THREADS_TIMEOUT_MS`'s default.
pub const DEFAULT_BUDGET: std::time::Duration = graph::DEFAULT_BUDGET;

/// Threads' words for the container primitive.
pub static DIALECT: Dialect = Dialect {
    voice: Voice {
        network: Network::Threads,
        name: "Threads",
        renew: "create a new long-lived Threads user access token (scopes threads_basic, threads_content_publish; it lasts 60 days) and set THREADS_ACCESS_TOKEN",
        user_var: config::USER_VAR,
        api_var: config::API_VAR,
        default_api_url: DEFAULT_API_URL,
        default_quota: 250,
        image_rule: "a JPEG or PNG of at most 8 MB",
        read_scope: "threads_basic",
    },
    version: API_VERSION,
    token_var: config::TOKEN_VAR,
    token_placeholder: "<THREADS_ACCESS_TOKEN>",
    timeout_var: config::TIMEOUT_VAR,
    container_path: "threads",
    publish_path: "threads_publish",
    quota_path: "threads_publishing_limit",
    container_fixed: &[("media_type", "IMAGE")],
    text_field: "text",
    status_fields: "status,error_message",
    status_key: "status",
    error_key: "error_message",
    // Threads enforces its quota at the publish itself (a rate-limit answer).
    quota_before_publish: false,
    newest_first: true,
    dry_permalink: |user, id| format!("https://www.threads.com/@{user}/post/{id}"),
    check_account: |_, _| None,
    capabilities,
    text_len: text::threads_len,
};

/// The marker of Threads' [`GraphAdapter`].
pub struct Threads;

impl Meta for Threads {
    const DIALECT: &'static Dialect = &DIALECT;
}

/// Publishes to one Threads account.
pub type ThreadsAdapter = GraphAdapter<Threads>;

/// What Threads offers: a container publishes at most once and its status says whether it
/// did ([`Idempotency::Container`]); the account's posts can be read back; 500 characters,
/// an emoji as its UTF-8 bytes; JPEG or PNG up to 8 MB, fetched by Threads itself from the
/// draft's public URL.
pub fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::Container,
        reads_back: true,
        text: TextLimit {
            max: text::MAX_TEXT,
            counting: Counting::CharsEmojiBytes,
        },
        images: ImageLimits {
            // JPEG or PNG up to 8 MB, 320–1440 px wide, a shape of at most 10:1. Threads
            // fetches the image itself, so an image outside these is refused, never rendered.
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: 8_000_000,
            min_width: Some(320),
            max_width: Some(1440),
            max_ratio: Some(10),
            ..ImageLimits::default()
        },
        // The first URL becomes the link preview; at most 5 links.
        links: Links::AsText,
        fetches_image: true,
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

//! LinkedIn. Its idempotency primitive: none a client controls. LinkedIn refuses an identical
//! create with `422 DUPLICATE_POST`, naming the existing post's URN, within a window it does
//! not document; so after the quiet period (and within `POSTONCE_RECONCILE_WINDOW_S`) an
//! ambiguous create is settled by re-sending the identical request, whose duplicate answer
//! names the post; past the window, the owner is asked.
//!
//! The [`Publisher`] exposes LinkedIn's three calls separately (initializeUpload and the
//! upload PUT are safe to repeat; create-post never is); [`target::LinkedInTarget`] puts it
//! behind the [`crate::networks::NetworkAdapter`] shape. Adapters only classify what happened
//! ([`PublishError`]).

pub mod auth;
pub mod config;
pub mod dry_run;
pub mod little_text;
pub mod rest;
pub mod target;

pub use config::DEFINITION;

/// Default `LINKEDIN_VERSION` (versions live at least a year).
pub const DEFAULT_VERSION: &str = "202610";

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

/// Where to PUT the image bytes, and the image's URN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadTarget {
    pub upload_url: String,
    pub image_urn: String,
}

/// The create-post request, as the pipeline decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPost {
    /// Already in little text (see [`little_text::escape`]).
    pub commentary: String,
    pub image_urn: String,
    pub alt: Option<String>,
}

/// What went wrong with a LinkedIn call, classified by what it means for the post.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The request never reached LinkedIn (connect refused, DNS): nothing happened.
    #[error("LinkedIn could not be reached: {0}")]
    NotSent(String),
    /// 429: a quota is used up; nothing was posted.
    #[error("LinkedIn rate limit (429): {message}")]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    /// A 4xx that retrying will not fix (401, 403, 422, 426, …). `message` names the fix.
    #[error("LinkedIn refused ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// 422 DUPLICATE_POST: LinkedIn already has this exact content as `urn`.
    #[error("LinkedIn says this content is a duplicate of {urn}")]
    Duplicate { urn: String },
    /// A 5xx: the call failed on LinkedIn's side. For create-post the post may exist.
    #[error("LinkedIn server error ({status}): {message}")]
    Server { status: u16, message: String },
    /// The request was sent and then the exchange broke (reset, unreadable answer).
    #[error("LinkedIn call broke after the request was sent: {0}")]
    Broken(String),
}

impl PublishError {
    /// Whether repeating a *safe* call (initializeUpload, upload PUT) may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::NotSent(_) | Self::RateLimited { .. } | Self::Server { .. } | Self::Broken(_)
        )
    }

    /// Whether a create-post that failed this way may nevertheless have created the post.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Self::Server { .. } | Self::Broken(_))
    }
}

/// The LinkedIn calls the pipeline makes.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// `POST /rest/images?action=initializeUpload`.
    async fn initialize_upload(&self) -> Result<UploadTarget, PublishError>;

    /// `PUT <uploadUrl>` with the raw bytes.
    async fn upload_image(
        &self,
        target: &UploadTarget,
        bytes: Bytes,
        content_type: &str,
    ) -> Result<(), PublishError>;

    /// `POST /rest/posts`. `Ok(Some(urn))` from `x-restli-id`; `Ok(None)` if LinkedIn answered
    /// 201 without naming the post.
    async fn create_post(&self, post: &NewPost) -> Result<Option<String>, PublishError>;

    /// True when nothing is really sent (no token configured).
    fn is_dry_run(&self) -> bool;

    /// Checks the token and version with a harmless call (doctor).
    async fn check(&self) -> Result<String, PublishError>;
}

/// The `POST /rest/posts` body, shared by the real and the dry-run publisher.
pub fn create_post_body(author: &str, post: &NewPost) -> serde_json::Value {
    let mut media = serde_json::json!({"id": post.image_urn});
    if let Some(alt) = &post.alt {
        media["altText"] = serde_json::json!(alt);
    }
    serde_json::json!({
        "author": author,
        "commentary": post.commentary,
        "visibility": "PUBLIC",
        "distribution": {
            "feedDistribution": "MAIN_FEED",
            "targetEntities": [],
            "thirdPartyDistributionChannels": []
        },
        "content": {"media": media},
        "lifecycleState": "PUBLISHED",
        "isReshareDisabledByAuthor": false
    })
}

/// The public URL of a post.
pub fn post_url(urn: &str) -> String {
    format!("https://www.linkedin.com/feed/update/{urn}/")
}

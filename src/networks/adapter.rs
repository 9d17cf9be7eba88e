//! The adapter shape every network implements (README "Targets"): what the network can do
//! is described in its [`super::Capabilities`], and every failure is described, never decided,
//! in [`PostError`]. The pipeline alone decides what happens next (retry, ask the owner,
//! record).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Capabilities, Network};
use crate::vars::Secret;

/// The cover image as fetched and checked (origin, size, type) by the pipeline.
#[derive(Debug, Clone)]
pub struct Media {
    pub bytes: Bytes,
    /// `image/png`, `image/jpeg`, `image/gif`.
    pub content_type: &'static str,
    pub alt: Option<String>,
}

/// An uploaded image as the network names it (X's media id, Mastodon's attachment id, a
/// Bluesky blob object, ...), or, for a network whose create carries the bytes (Telegram's
/// sendPhoto), a description of them (content type, size, SHA-256) that `create` checks the
/// [`Media`] it is given against. Stored in the intent, so it must serialize; never the bytes
/// (an intent is one stored item, and a store may cap an item at 400 KB).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef(pub serde_json::Value);

/// The exact create request, built before the intent is written so that it can be stored
/// and replayed byte for byte (with the idempotency key or record key it carries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedPost {
    /// The network's request body as the adapter will send it.
    pub body: serde_json::Value,
    /// The text as posted (after any markup), to look the post up by.
    pub text: String,
    /// An idempotency key or client-chosen record key, when the network takes one.
    pub key: Option<String>,
}

/// A post that exists on its network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The network's id (`urn:li:share:…`, a tweet id, a message id, a status id, an at-uri);
    /// `None` when the network proved the post exists without naming it (X's 403 duplicate).
    pub id: Option<String>,
    /// The public URL, when it can be built.
    pub url: Option<String>,
    /// The network's content id of this version of the post, for networks that have one
    /// (Bluesky's record cid); `None` for the others.
    pub cid: Option<String>,
}

/// What went wrong, described by what it means for the post. The adapter never decides
/// whether to retry; [`PostError::may_exist`] and [`PostError::is_transient`] only describe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The request never reached the network (connect refused, DNS): nothing happened.
    #[error("{network} could not be reached: {message}")]
    NotSent {
        network: &'static str,
        message: String,
    },
    /// A quota is used up (429); nothing was posted.
    #[error("{network} rate limit: {message}")]
    RateLimited {
        network: &'static str,
        retry_after: Option<Duration>,
        message: String,
    },
    /// Refused in a way retrying will not fix (401, 403, 4xx). `message` names the fix.
    #[error("{network} refused ({status}): {message}")]
    Rejected {
        network: &'static str,
        status: u16,
        message: String,
    },
    /// The network refused the credential itself (a 401, Threads' OAuth code 190, a revoked
    /// app password): it has expired or was revoked, and nothing was done with the request.
    /// `message` is the network's own words for the owner, naming the command that renews it
    /// ([`PostError::credential_refused`]). Retrying with the same credential cannot help; a
    /// new one can (the pipeline holds the drafts until it changes).
    #[error("{message}")]
    CredentialRefused {
        network: &'static str,
        message: String,
    },
    /// The post already exists (a duplicate answer); `existing.id` when the network named it.
    #[error("{network} already has this post")]
    AlreadyExists {
        network: &'static str,
        existing: Created,
    },
    /// The post of this very request exists, although this call was not answered with it (a
    /// publish refused, or found done): what [`NetworkAdapter::stage`] made for the request
    /// (Threads' container) was published, and it can publish only once, only through the
    /// request that names it. So `post` is the post of the attempt that kept this request,
    /// never one made by hand or under another key, unlike [`Self::AlreadyExists`].
    #[error("{network}: the post of this request was already published")]
    StagedPublished {
        network: &'static str,
        post: Created,
    },
    /// The request was sent and no clear answer came back (timeout after sending, 5xx, a
    /// broken exchange): the post may exist.
    // What this means for the post ("the post may exist", "nothing was posted") is said by
    // the pipeline, which knows whether the call was the create.
    #[error("{network}: no clear answer after the request was sent ({message})")]
    InDoubt {
        network: &'static str,
        message: String,
    },
    /// Reading back is not allowed for this account (API tier, scope).
    #[error("{network} does not let this account read its posts back: {message}")]
    ReadRefused {
        network: &'static str,
        message: String,
    },
    /// The network is not ready for the call yet (Mastodon still processing the image):
    /// nothing was posted, and the same call a moment later may succeed.
    #[error("{network} is not ready yet: {message}")]
    NotReady {
        network: &'static str,
        message: String,
    },
    /// The kept request can never make the post, and made none (Threads: its container
    /// expired or ended in error): nothing was posted by that attempt, and only a new
    /// request can post it.
    #[error("{network}: the attempt can no longer post, and did not: {message}")]
    Gone {
        network: &'static str,
        message: String,
    },
}

impl PostError {
    /// Whether repeating a call that is safe to repeat (an upload, a read) may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::NotSent { .. }
                | Self::RateLimited { .. }
                | Self::InDoubt { .. }
                | Self::NotReady { .. }
        )
    }

    /// The same error with every message passed through `f` (redaction).
    #[must_use]
    pub fn map_message(self, f: impl Fn(String) -> String) -> Self {
        match self {
            Self::NotSent { network, message } => Self::NotSent {
                network,
                message: f(message),
            },
            Self::RateLimited {
                network,
                retry_after,
                message,
            } => Self::RateLimited {
                network,
                retry_after,
                message: f(message),
            },
            Self::Rejected {
                network,
                status,
                message,
            } => Self::Rejected {
                network,
                status,
                message: f(message),
            },
            Self::InDoubt { network, message } => Self::InDoubt {
                network,
                message: f(message),
            },
            Self::ReadRefused { network, message } => Self::ReadRefused {
                network,
                message: f(message),
            },
            Self::NotReady { network, message } => Self::NotReady {
                network,
                message: f(message),
            },
            Self::Gone { network, message } => Self::Gone {
                network,
                message: f(message),
            },
            Self::CredentialRefused { network, message } => Self::CredentialRefused {
                network,
                message: f(message),
            },
            Self::AlreadyExists { .. } | Self::StagedPublished { .. } => self,
        }
    }

    /// The credential of `network` refused (see [`Self::CredentialRefused`]), in the words every
    /// network's folder uses: "the LinkedIn token has expired or was revoked: run `postonce
    /// auth linkedin`", then the network's own answer (`answer`, which names the fix the
    /// network's way) with its HTTP `status`. `what` names the credential for people
    /// ("LinkedIn token").
    pub fn credential_refused(network: Network, what: &str, status: u16, answer: &str) -> Self {
        Self::CredentialRefused {
            network: network.label(),
            message: format!(
                "the {what} has expired or was revoked: run `postonce auth {}` ({} answered {status}: {answer})",
                network.as_str(),
                network.label()
            ),
        }
    }

    /// Whether a create that failed this way may nevertheless have created the post.
    pub fn may_exist(&self) -> bool {
        matches!(self, Self::InDoubt { .. })
    }
}

/// One network's adapter: it carries out calls and describes their results; it holds no
/// policy. Upload and reads are safe to repeat; `create` is sent once per decision of the
/// pipeline.
#[async_trait]
pub trait NetworkAdapter: Send + Sync {
    fn network(&self) -> Network;

    fn capabilities(&self) -> Capabilities;

    /// True when nothing is really sent (no credentials configured).
    fn is_dry_run(&self) -> bool;

    /// The most characters (counted this network's way) a post's text may have.
    fn max_text(&self) -> usize {
        self.capabilities().text.max
    }

    /// The length of `text` counted this network's way (X: weighted, URLs as 23; Bluesky:
    /// graphemes; Telegram: UTF-16 units; LinkedIn: characters).
    fn text_len(&self, text: &str) -> usize;

    /// Uploads the image (safe to repeat).
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError>;

    /// The part of the upload that needs no image (LinkedIn's initializeUpload), safe to
    /// repeat: the pipeline runs it while it fetches the image, and hands its answer to
    /// [`Self::upload_begun`]. `None` (the default): nothing to start early.
    async fn begin_upload(&self) -> Result<Option<MediaRef>, PostError> {
        Ok(None)
    }

    /// The rest of an upload [`Self::begin_upload`] started. The default: the whole
    /// [`Self::upload`].
    async fn upload_begun(&self, media: &Media, begun: &MediaRef) -> Result<MediaRef, PostError> {
        let _ = begun;
        self.upload(media).await
    }

    /// Builds the exact create request for `text` and `media`. `idempotency` is a key derived
    /// by the pipeline from the draft's key and target, for networks that take one.
    fn prepare(&self, text: &str, media: &MediaRef, idempotency: &str) -> PreparedPost;

    /// The network-side part of preparing, for a network whose create names something made
    /// beforehand (Threads' media container): answers the request to keep in the intent and
    /// replay. Runs after [`Self::prepare`] and before the intent, so it is safe to repeat:
    /// what it makes is used only through the request it answers. `image` is the draft's own
    /// image source, for a network that fetches the image itself
    /// ([`super::Capabilities::fetches_image`]). The default: `post` as it is.
    async fn stage(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        let _ = image;
        Ok(post.clone())
    }

    /// Sends the create request once. `media` is the image as fetched for this attempt (the
    /// one `post` was prepared from): a network whose create carries the bytes (Telegram's
    /// sendPhoto) sends them, after checking them against the [`MediaRef`] in `post`; the
    /// others ignore it.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError>;

    /// Looks for `post` among the account's recent posts (exact text). `Ok(None)`: not found.
    /// `since` is the attempt's time in Unix seconds: older posts need not be read.
    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError>;

    /// One harmless read that proves the credentials work (doctor).
    async fn check(&self) -> Result<String, PostError>;

    /// Sends a recorded post's kept request `post` again, as it is, to the places that may
    /// still lack it (only where the capability `spreads` says this makes no second post).
    /// The default: nothing is left to reach.
    async fn spread(&self, post: &PreparedPost) -> Result<Spread, PostError> {
        let _ = post;
        Ok(Spread {
            complete: true,
            detail: String::new(),
        })
    }
}

/// What [`NetworkAdapter::spread`] reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spread {
    /// Every place holds the post now: nothing is left to send.
    pub complete: bool,
    /// Each place's answer, for the sweep's report.
    pub detail: String,
}

/// Where an adapter that logs in (Bluesky) keeps its session between processes: the record
/// store, behind this narrow port so that adapters never depend on the stores.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The secret kept under `name` (the network's name), if any.
    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, String>;

    /// Stores (replaces) the secret kept under `name`. Last writer wins.
    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), String>;
}

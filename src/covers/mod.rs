//! Covers hosted for the networks that fetch the image themselves (Threads, Instagram): the
//! bytes the pipeline checked for that network, an original or a rendition, put where the
//! network can fetch them, under a name made from their SHA-256 (`<hex>.<ext>`), so that a
//! replay puts and hands over the very same name.
//!
//! [`CoverHost`] is the port; its two adapters hold no policy:
//! - [`folder::FolderHost`] (self-hosted, `POSTONCE_PUBLIC_URL`): a file in a folder that
//!   `postonce serve` answers at `GET /covers/<name>` ([`folder::read`]);
//! - [`s3::S3Host`] (AWS, `POSTONCE_COVERS_BUCKET`): an object in a private bucket, handed over
//!   as a presigned GET URL.
//!
//! Whether to host, what, and what a failure means is the pipeline's (`pipeline/cover.rs`).

pub mod config;
pub mod folder;
pub mod s3;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::image::{Format, ImageError};

pub use config::{BucketConfig, CoverHosting};

/// How long a hosted cover is kept: a folder's file is removed after it, and the template's
/// bucket expires its objects after it. An attempt needs a cover for minutes (the network
/// fetches it while it makes its container).
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// How long a presigned URL is valid: well past one publish's window (the container is made
/// and fetched within the network's budget; a replay puts and signs again).
pub const PRESIGNED_FOR: Duration = Duration::from_secs(3600);

/// A hosted cover's name: `<sha256 hex>.<ext>`, from its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverName {
    pub sha256: String,
    pub format: Format,
}

impl CoverName {
    /// The name of `bytes` in `format`.
    pub fn of(bytes: &[u8], format: Format) -> Self {
        use sha2::{Digest, Sha256};
        Self {
            sha256: hex::encode(Sha256::digest(bytes)),
            format,
        }
    }

    /// A name as a URL gives it, strictly: 64 lowercase hex digits, a dot, and `jpg`, `png`,
    /// `gif` or `webp`. Anything else (another case, a path, an encoding) is `None`.
    pub fn parse(name: &str) -> Option<Self> {
        let (hash, ext) = name.split_once('.')?;
        let hex_ok = hash.len() == 64
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let format = match ext {
            "jpg" => Format::Jpeg,
            "png" => Format::Png,
            "gif" => Format::Gif,
            "webp" => Format::Webp,
            _ => return None,
        };
        hex_ok.then(|| Self {
            sha256: hash.to_owned(),
            format,
        })
    }

    /// The file extension of its format.
    pub fn ext(&self) -> &'static str {
        match self.format {
            Format::Jpeg => "jpg",
            Format::Png => "png",
            Format::Gif => "gif",
            Format::Webp => "webp",
        }
    }
}

impl std::fmt::Display for CoverName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.sha256, self.ext())
    }
}

/// Where covers are hosted. Every call is bounded by the caller's budget
/// (`tokio::time::timeout`) on top of its own limits.
#[async_trait]
pub trait CoverHost: Send + Sync {
    /// Makes `bytes` fetchable under `name` (safe to repeat: the same name is the same
    /// bytes) and answers the URL the network fetches them from.
    ///
    /// # Errors
    /// [`ImageError::Unavailable`]: the host failed (nothing was posted; a retry may work).
    async fn put(&self, name: &CoverName, bytes: &Bytes) -> Result<String, ImageError>;

    /// The URL `name` is (or would be) fetched from, storing nothing: a dry run's request and
    /// `preview` show it.
    ///
    /// # Errors
    /// As [`Self::put`] (a presigned URL needs the credentials).
    async fn locate(&self, name: &CoverName) -> Result<String, ImageError>;

    /// One harmless check that covers can be hosted (doctor): the folder is writable, the
    /// bucket answers.
    ///
    /// # Errors
    /// What is wrong, naming the variable to fix.
    async fn check(&self) -> Result<String, String>;

    /// Where covers go, for people (`preview`, doctor): no secret.
    fn describe(&self) -> String;
}

/// The host `hosting` names, built once per process; `None` when covers are not hosted.
///
/// # Errors
/// A message naming what could not be set up.
pub fn build(
    hosting: &CoverHosting,
    http: &reqwest::Client,
) -> Result<Option<Arc<dyn CoverHost>>, String> {
    Ok(match hosting {
        CoverHosting::None => None,
        CoverHosting::Folder { dir, public_url } => Some(Arc::new(folder::FolderHost::new(
            dir.clone(),
            public_url.clone(),
        ))),
        CoverHosting::Bucket(bucket) => {
            Some(Arc::new(s3::S3Host::new(bucket.clone(), http.clone())?))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_strict() {
        let hex = "a".repeat(64);
        let n = CoverName::parse(&format!("{hex}.jpg")).expect("a name");
        assert_eq!(n.format, Format::Jpeg);
        assert_eq!(n.to_string(), format!("{hex}.jpg"));
        for bad in [
            format!("{}.jpg", "A".repeat(64)),
            format!("{}.jpg", "a".repeat(63)),
            format!("{}.jpg", "a".repeat(65)),
            format!("{hex}.jpeg"),
            format!("{hex}.JPG"),
            format!("{hex}.jpg.png"),
            format!("../{hex}.jpg"),
            hex.clone(),
            format!("{}.png", "g".repeat(64)),
            String::new(),
            "..".into(),
        ] {
            assert!(CoverName::parse(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn the_name_is_the_hash_of_the_bytes() {
        let n = CoverName::of(b"abc", Format::Png);
        assert_eq!(
            n.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.png"
        );
    }
}

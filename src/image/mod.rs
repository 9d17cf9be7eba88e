//! The cover image: where it may come from ([`fetch`]), what it is ([`format`], judged by its
//! bytes), that it is sound ([`decode`], strictly), and what each network gets ([`limits`],
//! [`render`]): the original byte for byte where it fits the network's limits, else a
//! rendition that does, the same bytes every time.

mod decode;
mod fetch;
mod format;
mod limits;
mod local;
pub mod render;
mod structure;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde::Serialize;

pub use decode::{MAX_ANIMATION_PIXELS, MAX_PIXELS};
pub use fetch::{is_public, ImageFetcher, OriginPolicy};
pub use format::{Format, Formats};
pub use limits::ImageLimits;
pub use local::{ImageDir, LocalCovers, MCP_IMAGE_DIRS};

/// The download cap (URLs and local files). Some networks document no byte limit; third parties
/// report 5-8 MB.
pub const MAX_IMAGE_BYTES: usize = 8 * 1024 * 1024;

/// Why an image was refused or could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Retrying will not help: bad origin, too large, wrong type, corrupt, 4xx.
    #[error("cover image refused: {0}")]
    Refused(String),
    /// The host failed or could not be reached; a retry may work.
    #[error("cover image unavailable: {0}")]
    Unavailable(String),
}

impl ImageError {
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

/// A fetched image, its type and declared size read from its bytes (not yet decoded).
#[derive(Debug, Clone)]
pub struct Image {
    pub bytes: Bytes,
    pub content_type: &'static str,
    pub format: Format,
    pub width: u32,
    pub height: u32,
}

/// Judges the type from the bytes and refuses, from the header alone, what postonce will not
/// decode (a declared size over [`MAX_PIXELS`]: a decompression bomb).
///
/// # Errors
/// [`ImageError::Refused`] naming the cause.
pub fn vet(bytes: Bytes) -> Result<Image, ImageError> {
    let h = decode::declared(&bytes).map_err(ImageError::Refused)?;
    Ok(Image {
        bytes,
        content_type: h.format.mime(),
        format: h.format,
        width: h.width,
        height: h.height,
    })
}

/// The image type from magic bytes.
pub fn sniff(b: &[u8]) -> Option<&'static str> {
    Format::sniff(b).map(Format::mime)
}

/// Width and height from the header (JPEG, PNG, GIF, WebP), without decoding.
pub fn dimensions(b: &[u8]) -> Option<(u32, u32)> {
    format::header(b).map(|h| (h.width, h.height))
}

/// What one network gets: the original, or a rendition within its limits.
#[derive(Debug, Clone)]
pub struct Cover {
    pub bytes: Bytes,
    pub format: Format,
    pub width: u32,
    pub height: u32,
    /// Made for this network (the original did not fit its limits).
    pub rendition: bool,
}

/// What was sent as the image, shown in the outcome (`--json`, the dry run, `preview`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Sent {
    /// `image/jpeg`, ...
    pub format: String,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
    /// `original` (byte for byte) or `rendition`.
    pub kind: String,
}

impl Cover {
    pub fn sent(&self) -> Sent {
        Sent {
            format: self.format.mime().to_owned(),
            bytes: self.bytes.len() as u64,
            width: self.width,
            height: self.height,
            kind: if self.rendition {
                "rendition"
            } else {
                "original"
            }
            .to_owned(),
        }
    }
}

impl Sent {
    /// `JPEG 812,345 bytes, 2890×2168, a rendition`.
    pub fn describe(&self) -> String {
        let name = Format::from_mime(&self.format).map_or(self.format.clone(), |f| f.name().into());
        format!(
            "{name} {} bytes, {}×{}, {}",
            self.bytes,
            self.width,
            self.height,
            if self.kind == "rendition" {
                "a rendition made for it"
            } else {
                "the original"
            }
        )
    }
}

/// The original as it is, without decoding it, when it fits `limits` and its structure is
/// sound from its header to its end marker ([`structure`]: a walk of the bytes, about a
/// hundredth of a decode). `None`: it is decoded strictly ([`cover_blocking`]), which accepts or
/// refuses it naming the cause. Never inlined: a symbol of its own for `bench/callgrind.sh`.
#[inline(never)]
fn as_is(image: &Image, limits: &ImageLimits) -> Option<Cover> {
    let h = decode::declared(&image.bytes).ok()?;
    if h.cmyk || format::check_complete(h.format, &image.bytes).is_err() {
        return None;
    }
    let facts = limits::Facts {
        format: h.format,
        bytes: image.bytes.len() as u64,
        width: h.width,
        height: h.height,
    };
    limits.check(&facts).ok()?;
    structure::sound(&h, &image.bytes).then(|| Cover {
        bytes: image.bytes.clone(),
        format: h.format,
        width: h.width,
        height: h.height,
        rendition: false,
    })
}

/// Picks what a network with `limits` gets: the original where it fits (as it is when its
/// structure is sound throughout, else once it has decoded strictly), else (unless the network
/// fetches the image itself, `can_render` false) a rendition that fits, made from the strict
/// decode. CPU-bound: call [`cover`] from async code.
///
/// # Errors
/// [`ImageError::Refused`]: the image is unsound, or nothing postonce can make fits.
pub fn cover_blocking(
    image: &Image,
    limits: &ImageLimits,
    can_render: bool,
) -> Result<Cover, ImageError> {
    match as_is(image, limits) {
        Some(original) => Ok(original),
        None => decoded_cover(image, limits, can_render),
    }
}

/// [`cover_blocking`] once the original did not go as it is: decoded strictly, then the
/// original if it fits, else a rendition.
fn decoded_cover(
    image: &Image,
    limits: &ImageLimits,
    can_render: bool,
) -> Result<Cover, ImageError> {
    let decoded = decode::decode(&image.bytes).map_err(ImageError::Refused)?;
    let h = decoded.header;
    let facts = limits::Facts {
        format: h.format,
        bytes: image.bytes.len() as u64,
        width: h.width,
        height: h.height,
    };
    let misfit = match limits.check(&facts) {
        Ok(()) if !h.cmyk => {
            return Ok(Cover {
                bytes: image.bytes.clone(),
                format: h.format,
                width: h.width,
                height: h.height,
                rendition: false,
            })
        }
        Ok(()) => limits::Misfit {
            why: "the JPEG is CMYK, which not every network shows correctly".into(),
            fixable: true,
        },
        Err(m) => m,
    };
    if !misfit.fixable {
        return Err(ImageError::Refused(misfit.why));
    }
    if !can_render {
        return Err(ImageError::Refused(format!(
            "{}; the network fetches the image itself from its URL, so no rendition can reach it",
            misfit.why
        )));
    }
    let r = render::render(&decoded.image, limits)
        .map_err(|e| ImageError::Refused(format!("{}; {e}", misfit.why)))?;
    Ok(Cover {
        bytes: Bytes::from(r.bytes),
        format: r.format,
        width: r.width,
        height: r.height,
        rendition: true,
    })
}

/// The process's one permit to decode a cover: whoever decodes (a run's cover phase, the MCP
/// server's check of a local cover) holds it for the whole decode, so that decoded covers,
/// tens of megabytes each, are never held side by side.
///
/// # Errors
/// Only while the process shuts down.
pub async fn decode_permit() -> Result<tokio::sync::OwnedSemaphorePermit, ImageError> {
    static ONE_AT_A_TIME: OnceLock<Arc<tokio::sync::Semaphore>> = OnceLock::new();
    let gate = ONE_AT_A_TIME.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(1)));
    gate.clone()
        .acquire_owned()
        .await
        .map_err(|_| ImageError::Unavailable("the image worker is shutting down".into()))
}

/// [`cover_blocking`]: an original that fits and is sound throughout right here (a walk of
/// its bytes, no decode), anything else decoded on a blocking thread, one at a time in the
/// process: a decoded cover is tens of megabytes, and several targets of one run would
/// otherwise hold one each at once.
///
/// # Errors
/// As [`cover_blocking`].
pub async fn cover(
    image: Image,
    limits: ImageLimits,
    can_render: bool,
) -> Result<Cover, ImageError> {
    if let Some(original) = as_is(&image, &limits) {
        return Ok(original);
    }
    let permit = decode_permit().await?;
    // The permit goes with the work: a caller that gives up (its budget ran out) does not let
    // another decode start beside one still running.
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        decoded_cover(&image, &limits, can_render)
    })
    .await
    .map_err(|e| ImageError::Refused(format!("the image could not be processed ({e})")))?
}

/// Checks a local cover before anything is stored (`postonce post --image PATH`): any file
/// this process can read, as [`LocalCovers::Anywhere`] reads it. Blocking. Returns its
/// canonical path.
///
/// # Errors
/// The cause and the fix, for people.
pub fn check_local(raw: &str) -> Result<String, String> {
    LocalCovers::Anywhere.check(raw)
}

//! Decoding a cover strictly, with pure-Rust codecs only (the `image` crate): the size its
//! header declares is checked before a byte is decoded, the data must end where its format says
//! it must, every frame of an animation is decoded (within a cap), and the decoded size must be
//! the declared one. What passes is a cover every later step can trust; what fails is refused
//! with the cause, before anything is uploaded anywhere.

use std::io::Cursor;

use image::codecs::gif::GifDecoder;
use image::codecs::jpeg::JpegDecoder;
use image::codecs::png::PngDecoder;
use image::codecs::webp::WebPDecoder;
use image::{AnimationDecoder, DynamicImage, ImageDecoder};

use super::format::{check_complete, header, Format, Header};
use super::limits::{memory_need, MEMORY_BUDGET};

/// The most pixels postonce decodes: the largest pixel limit any network documents.
/// A header that declares more is refused before decoding (a decompression bomb is a small file
/// that declares a huge image).
pub const MAX_PIXELS: u64 = 36_152_320;
/// The most pixels decoded across an animation's frames to check it and take its first frame.
pub const MAX_ANIMATION_PIXELS: u64 = 100_000_000;

/// A cover decoded and checked.
pub struct Decoded {
    pub header: Header,
    /// The first frame of an animation, upright (a JPEG's EXIF orientation applied).
    pub image: DynamicImage,
}

/// Reads the format and the declared size of `bytes` and refuses what postonce will not decode,
/// without decoding anything.
///
/// # Errors
/// The cause, for people.
pub fn declared(bytes: &[u8]) -> Result<Header, String> {
    let Some(format) = Format::sniff(bytes) else {
        return Err(
            "not a JPEG, PNG, GIF or WebP image (judged by its bytes, not its name or header)"
                .into(),
        );
    };
    let Some(h) = header(bytes) else {
        return Err(format!(
            "the data starts like a {format} but its header cannot be read: it is corrupt or not a {format}"
        ));
    };
    if h.width == 0 || h.height == 0 {
        return Err(format!(
            "the {format} declares a size of {}×{}",
            h.width, h.height
        ));
    }
    if h.pixels() > MAX_PIXELS {
        return Err(format!(
            "the {format} declares {}×{} = {} pixels, more than the {MAX_PIXELS} any network takes; it was not decoded",
            h.width,
            h.height,
            h.pixels()
        ));
    }
    // What decoding it would take, from its header: refused before a byte is decoded when
    // that is more than the process may spend on it.
    let need = memory_need(format, bytes, h.width, h.height);
    if need.bytes > MEMORY_BUDGET {
        return Err(format!(
            "{}; it was not decoded",
            need.refusal(h.width, h.height)
                .replacen("the image", &format!("the {format}"), 1)
        ));
    }
    Ok(h)
}

/// Decodes `bytes` strictly (see the module's note).
///
/// # Errors
/// The cause, for people: not an image, a declared size over [`MAX_PIXELS`], data cut short or
/// corrupt, a decoded size that is not the declared one, an animation over
/// [`MAX_ANIMATION_PIXELS`].
pub fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    let h = declared(bytes)?;
    let format = h.format;
    check_complete(format, bytes)?;
    // The decoder's own count of what it allocates stops it at the budget too; that refusal
    // names the size, never "corrupt" (a valid image the estimate let through).
    let (w, ht) = (h.width, h.height);
    let corrupt = |e: image::ImageError| {
        match e {
        image::ImageError::Limits(l) => format!(
            "the {format} is {w}×{ht} ({} pixels) and needs more memory to decode than the {} MB postonce allows itself ({l}); make it smaller",
            u64::from(w) * u64::from(ht),
            MEMORY_BUDGET / 1_000_000
        ),
        e => format!("the {format} is corrupt: {e}"),
    }
    };
    let limits = || {
        let mut l = image::Limits::default();
        l.max_image_width = Some(h.width);
        l.max_image_height = Some(h.height);
        l.max_alloc = Some(MEMORY_BUDGET);
        l
    };
    let mut reoriented = false;
    let image = match format {
        Format::Jpeg => {
            let mut d = JpegDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
            d.set_limits(limits()).map_err(corrupt)?;
            let orientation = d
                .orientation()
                .unwrap_or(image::metadata::Orientation::NoTransforms);
            let mut image = DynamicImage::from_decoder(d).map_err(corrupt)?;
            if orientation != image::metadata::Orientation::NoTransforms {
                image.apply_orientation(orientation);
                reoriented = true;
            }
            image
        }
        Format::Png => {
            let mut d = PngDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
            d.set_limits(limits()).map_err(corrupt)?;
            DynamicImage::from_decoder(d).map_err(corrupt)?
        }
        Format::Gif => {
            let mut d = GifDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
            d.set_limits(limits()).map_err(corrupt)?;
            first_of_all_frames(d.into_frames(), &h, corrupt)?
        }
        Format::Webp => {
            let mut d = WebPDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
            d.set_limits(limits()).map_err(corrupt)?;
            if d.has_animation() {
                first_of_all_frames(d.into_frames(), &h, corrupt)?
            } else {
                DynamicImage::from_decoder(d).map_err(corrupt)?
            }
        }
    };
    let (w, hh) = (image.width(), image.height());
    let (dw, dh) = if reoriented && (w, hh) == (h.height, h.width) {
        (hh, w)
    } else {
        (w, hh)
    };
    if (dw, dh) != (h.width, h.height) {
        return Err(format!(
            "the {format} declares {}×{} but holds {dw}×{dh}: it is corrupt or lies about itself",
            h.width, h.height
        ));
    }
    Ok(Decoded { header: h, image })
}

/// Decodes every frame (each a full canvas), keeping the first; refuses an animation whose
/// frames add up to more than [`MAX_ANIMATION_PIXELS`].
fn first_of_all_frames(
    frames: image::Frames<'_>,
    h: &Header,
    corrupt: impl Fn(image::ImageError) -> String,
) -> Result<DynamicImage, String> {
    let mut first = None;
    let mut count: u64 = 0;
    for frame in frames {
        let frame = frame.map_err(&corrupt)?;
        count += 1;
        if count.saturating_mul(h.pixels()) > MAX_ANIMATION_PIXELS {
            return Err(format!(
                "the animated {} has more than {} frames of {}×{}: too large to check and flatten (at most {MAX_ANIMATION_PIXELS} pixels in all); post a still image",
                h.format,
                count - 1,
                h.width,
                h.height
            ));
        }
        if first.is_none() {
            first = Some(DynamicImage::ImageRgba8(frame.into_buffer()));
        }
    }
    first.ok_or_else(|| format!("the {} has no frame", h.format))
}

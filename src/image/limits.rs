//! What a network takes as an image (its capability description; README "Covers" has the
//! table): formats, bytes, pixels, sides and shape, and the check of one image against
//! them.

use super::format::{Format, Formats};

/// The images a network takes. Every field defaults to "no stated limit".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageLimits {
    /// The formats it accepts. Empty: unknown.
    pub formats: Formats,
    /// The most bytes an image may have. Zero: unknown.
    pub max_bytes: u64,
    /// The most pixels (width × height).
    pub max_pixels: Option<u64>,
    /// The most width + height.
    pub max_side_sum: Option<u32>,
    /// The longer side over the shorter at most this.
    pub max_ratio: Option<u32>,
    /// Width over height at least `w:h` (Instagram: 4:5, the tallest it takes).
    pub min_aspect: Option<(u32, u32)>,
    /// Width over height at most `w:h` (Instagram: 191:100, the widest it takes).
    pub max_aspect: Option<(u32, u32)>,
    /// The narrowest width it takes. Never reached by upscaling.
    pub min_width: Option<u32>,
    /// The widest width it takes.
    pub max_width: Option<u32>,
}

/// The facts of one image the limits are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub format: Format,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
}

/// Why an image does not fit, and whether a rendition can fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    pub why: String,
    /// A smaller or re-encoded copy would fit (bytes, pixels, sides, format); `false` for
    /// what would need a crop or an upscale (the shape, a too-narrow image).
    pub fixable: bool,
}

impl ImageLimits {
    /// Whether an image with these facts goes to the network as it is; the first reason it
    /// does not, for people.
    ///
    /// # Errors
    /// [`Misfit`] naming the limit.
    pub fn check(&self, f: &Facts) -> Result<(), Misfit> {
        let (w, h) = (f.width, f.height);
        let fixable = |why: String| Misfit { why, fixable: true };
        let fixed = |why: String| Misfit {
            why,
            fixable: false,
        };
        if let Some(ratio) = self.max_ratio {
            let (long, short) = (w.max(h), w.min(h).max(1));
            if u64::from(long) > u64::from(ratio) * u64::from(short) {
                return Err(fixed(format!(
                    "the image is {w}×{h}, a shape of more than {ratio}:1, and it takes at most {ratio}:1 (it would need cropping)"
                )));
            }
        }
        if let Some(why) = self.aspect_misfit(w, h) {
            return Err(fixed(why));
        }
        if let Some(min) = self.min_width {
            if w < min {
                return Err(fixed(format!(
                    "the image is {w} pixels wide, and it takes images at least {min} wide (postonce never enlarges a cover)"
                )));
            }
        }
        if !self.formats.takes(f.format) {
            return Err(fixable(format!(
                "it takes {}, not {}",
                self.formats.describe(),
                f.format
            )));
        }
        if self.max_bytes > 0 && f.bytes > self.max_bytes {
            return Err(fixable(format!(
                "the image is {} bytes, and it takes at most {}",
                f.bytes, self.max_bytes
            )));
        }
        if let Some(max) = self.max_pixels {
            let px = u64::from(w) * u64::from(h);
            if px > max {
                return Err(fixable(format!(
                    "the image is {w}×{h} = {px} pixels, and it takes at most {max}"
                )));
            }
        }
        if let Some(max) = self.max_side_sum {
            if u64::from(w) + u64::from(h) > u64::from(max) {
                return Err(fixable(format!(
                    "the image is {w}×{h}, and it takes width + height of at most {max}"
                )));
            }
        }
        if let Some(max) = self.max_width {
            if w > max {
                return Err(fixable(format!(
                    "the image is {w} pixels wide, and it takes at most {max}"
                )));
            }
        }
        Ok(())
    }

    /// Why a `w`×`h` image is outside the aspect range, or `None`.
    fn aspect_misfit(&self, w: u32, h: u32) -> Option<String> {
        let (w64, h64) = (u64::from(w), u64::from(h));
        let range = || {
            let side =
                |a: Option<(u32, u32)>| a.map_or("any".to_owned(), |(x, y)| format!("{x}:{y}"));
            format!("{} to {}", side(self.min_aspect), side(self.max_aspect))
        };
        let tall = self
            .min_aspect
            .is_some_and(|(x, y)| w64 * u64::from(y) < h64 * u64::from(x));
        let wide = self
            .max_aspect
            .is_some_and(|(x, y)| w64 * u64::from(y) > h64 * u64::from(x));
        (tall || wide).then(|| {
            format!(
                "the image is {w}×{h}, {} for the shapes it takes (width:height {}; it would need cropping)",
                if tall { "too tall" } else { "too wide" },
                range()
            )
        })
    }

    /// The largest scale (≤ 1) at which `width`×`height` meets the pixel and side limits.
    pub(super) fn scale_for(&self, width: u32, height: u32) -> f64 {
        let (w, h) = (f64::from(width), f64::from(height));
        let mut s: f64 = 1.0;
        if let Some(max) = self.max_pixels {
            s = s.min((max as f64 / (w * h)).sqrt());
        }
        if let Some(max) = self.max_side_sum {
            s = s.min(f64::from(max) / (w + h));
        }
        if let Some(max) = self.max_width {
            s = s.min(f64::from(max) / w);
        }
        s
    }
}

/// The most memory postonce lets one cover take while it is decoded and rendered: room to
/// spare in the 256 MB the template gives the function (whose own resident size is about
/// 12 MB). What its header says would need more is refused before a byte is decoded, with the
/// size named (issue 30, finding 3): a process that dies of it would die the same way at
/// every retry, and take the sweep's other drafts with it.
pub const MEMORY_BUDGET: u64 = 192 * 1024 * 1024;

/// Held besides the pixels: the decoder's own tables and rows, and the render's rows.
const OVERHEAD: u64 = 8 * 1024 * 1024;

/// What decoding and rendering an image would take, estimated from its header alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Bytes at the peak (the decoder's buffers, or the decoded image with a rendition's).
    pub bytes: u64,
    /// What makes it cost that much, for people (`a progressive JPEG, 4:4:4`).
    pub kind: String,
    /// The most pixels an image of this kind may have within [`MEMORY_BUDGET`].
    pub max_pixels: u64,
}

impl MemoryNeed {
    /// Why the image is refused, naming its size and what would fit.
    pub fn refusal(&self, width: u32, height: u32) -> String {
        let mb = |b: u64| b.div_ceil(1_000_000);
        format!(
            "the image is {width}×{height} ({} pixels, {}) and would need about {} MB of memory to decode and render, more than the {} MB postonce allows itself; make it smaller (at most about {} pixels for this kind of image, e.g. {}×{})",
            u64::from(width) * u64::from(height),
            self.kind,
            mb(self.bytes),
            mb(MEMORY_BUDGET),
            self.max_pixels,
            fit_side(width, height, self.max_pixels).0,
            fit_side(width, height, self.max_pixels).1,
        )
    }
}

/// `width`×`height` scaled down to at most `max` pixels, keeping the shape.
fn fit_side(width: u32, height: u32, max: u64) -> (u64, u64) {
    let px = (u64::from(width) * u64::from(height)).max(1) as f64;
    let s = (max as f64 / px).sqrt().min(1.0);
    (
        (f64::from(width) * s).floor() as u64,
        (f64::from(height) * s).floor() as u64,
    )
}

/// Bytes per pixel at each step, in quarters (a 4:2:0 JPEG's planes are 1.5 bytes a pixel).
struct Cost {
    /// While the decoder runs: its output and what it holds beside it.
    decode: u64,
    /// The decoded image.
    out: u64,
    /// Whether the decoded image is 8-bit RGB or RGBA (a rendition reads it as it is; any
    /// other is converted to one first, a copy of 4 bytes a pixel).
    direct: bool,
    kind: String,
}

/// What decoding `b` (a `format` image of `width`×`height`, as its header declares) and
/// rendering it would take at the peak, from its header alone.
pub fn memory_need(format: Format, b: &[u8], width: u32, height: u32) -> MemoryNeed {
    let c = match format {
        Format::Jpeg => jpeg_cost(b),
        Format::Png => png_cost(b),
        Format::Gif => {
            let frames = gif_frames(b);
            Cost {
                // The first frame kept, the canvas, the frame being decoded and the one
                // handed out (a still GIF: all but the first).
                decode: if frames > 1 { 64 } else { 48 },
                out: 16,
                direct: true,
                kind: if frames > 1 {
                    "an animated GIF".into()
                } else {
                    "a GIF".into()
                },
            }
        }
        Format::Webp => webp_cost(b),
    };
    // A rendition: the decoded image, a converted copy unless it is 8-bit RGB(A), and the
    // resized RGB copy (at most full size).
    let render = c.out + if c.direct { 0 } else { 16 } + 12;
    let per_pixel4 = c.decode.max(render);
    let fixed = OVERHEAD + b.len() as u64;
    let px = u64::from(width) * u64::from(height);
    MemoryNeed {
        bytes: px.saturating_mul(per_pixel4) / 4 + fixed,
        max_pixels: MEMORY_BUDGET.saturating_sub(fixed) * 4 / per_pixel4.max(1),
        kind: c.kind,
    }
}

/// A JPEG: its output (grey or RGB) and, when progressive, the coefficients of every component
/// (2 bytes each, at the component's own resolution), all held until the last scan.
fn jpeg_cost(b: &[u8]) -> Cost {
    let (progressive, comps) = jpeg_frame(b).unwrap_or((true, vec![(1, 1); 3]));
    let (hmax, vmax) = comps
        .iter()
        .fold((1, 1), |(h, v), (ch, cv)| (h.max(*ch), v.max(*cv)));
    // Quarters of a pixel each component holds.
    let planes: u64 = comps
        .iter()
        .map(|(h, v)| 4 * u64::from(*h * *v) / u64::from(hmax * vmax).max(1))
        .sum();
    let out = if comps.len() == 1 { 4 } else { 12 };
    let sampling = match (comps.len(), hmax, vmax) {
        (1, _, _) => "greyscale".to_owned(),
        (_, 1, 1) => "4:4:4".to_owned(),
        (_, 2, 1) => "4:2:2".to_owned(),
        (_, 2, 2) => "4:2:0".to_owned(),
        (_, h, v) => format!("sampled {h}×{v}"),
    };
    Cost {
        decode: out + if progressive { 2 * planes } else { planes / 2 },
        out,
        direct: comps.len() != 1,
        kind: format!(
            "a {} JPEG, {sampling}",
            if progressive {
                "progressive"
            } else {
                "baseline"
            }
        ),
    }
}

/// A JPEG's frame header: progressive or not, and each component's sampling factors.
fn jpeg_frame(b: &[u8]) -> Option<(bool, Vec<(u32, u32)>)> {
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([*b.get(i + 2)?, *b.get(i + 3)?]));
        if matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF) {
            let progressive = matches!(marker, 0xC2 | 0xC6 | 0xCA | 0xCE);
            let n = usize::from(*b.get(i + 9)?);
            let comps = (0..n)
                .map(|k| {
                    let hv = *b.get(i + 11 + 3 * k)?;
                    Some((u32::from(hv >> 4).max(1), u32::from(hv & 0x0F).max(1)))
                })
                .collect::<Option<Vec<_>>>()?;
            return (!comps.is_empty()).then_some((progressive, comps));
        }
        i += 2 + len;
    }
    None
}

/// A PNG: its output keeps 16-bit samples; a palette is expanded (to RGBA, at worst).
fn png_cost(b: &[u8]) -> Cost {
    let depth = b.get(24).copied().unwrap_or(16);
    let colour = b.get(25).copied().unwrap_or(6);
    let wide = if depth == 16 { 2 } else { 1 };
    let (channels, name) = match colour {
        0 => (1, "greyscale"),
        2 => (3, "RGB"),
        3 => (4, "palette"),
        4 => (2, "greyscale with alpha"),
        _ => (4, "RGBA"),
    };
    let out = 4 * channels * wide;
    Cost {
        decode: out,
        out,
        direct: wide == 1 && matches!(colour, 2 | 3 | 6),
        kind: format!("a {depth}-bit {name} PNG"),
    }
}

/// A WebP: lossy ones decode through YUV planes; lossless ones through 32-bit pixels;
/// animations through canvases, as GIFs.
fn webp_cost(b: &[u8]) -> Cost {
    let chunk = b.get(12..16).unwrap_or_default();
    let flags = b.get(20).copied().unwrap_or(0);
    let animated = chunk == b"VP8X" && flags & 0x02 != 0;
    let lossless = chunk == b"VP8L" || (chunk == b"VP8X" && find(b, b"VP8L"));
    let (decode, kind) = if animated {
        (64, "an animated WebP")
    } else if lossless {
        (32, "a lossless WebP")
    } else {
        (24, "a lossy WebP")
    };
    Cost {
        decode,
        out: 16,
        direct: true,
        kind: kind.into(),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// How many frames a GIF holds (2 means "more than one": counting stops there), walking its
/// blocks without decoding any.
fn gif_frames(b: &[u8]) -> u32 {
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3usize << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let mut i = 13 + b.get(10).map_or(0, |f| table(*f));
    let skip_blocks = |mut i: usize| {
        while let Some(&n) = b.get(i) {
            i += 1 + usize::from(n);
            if n == 0 {
                return Some(i);
            }
        }
        None
    };
    let mut frames = 0;
    while let Some(&kind) = b.get(i) {
        match kind {
            0x21 => match skip_blocks(i + 2) {
                Some(next) => i = next,
                None => break,
            },
            0x2C => {
                frames += 1;
                if frames > 1 {
                    break;
                }
                let local = b.get(i + 9).map_or(0, |f| table(*f));
                match skip_blocks(i + 10 + local + 1) {
                    Some(next) => i = next,
                    None => break,
                }
            }
            _ => break,
        }
    }
    frames.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sides_and_shape() -> ImageLimits {
        ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: 10_000_000,
            max_side_sum: Some(10_000),
            max_ratio: Some(20),
            ..ImageLimits::default()
        }
    }

    fn facts(format: Format, bytes: u64, width: u32, height: u32) -> Facts {
        Facts {
            format,
            bytes,
            width,
            height,
        }
    }

    #[test]
    fn each_limit_is_named_and_says_whether_a_rendition_helps() {
        let t = sides_and_shape();
        assert!(t.check(&facts(Format::Png, 9_000_000, 4000, 3000)).is_ok());
        let over = t
            .check(&facts(Format::Png, 10_000_001, 100, 100))
            .unwrap_err();
        assert!(over.fixable && over.why.contains("10000000"), "{over:?}");
        let webp = t.check(&facts(Format::Webp, 10, 100, 100)).unwrap_err();
        assert!(webp.fixable && webp.why.contains("JPEG or PNG"), "{webp:?}");
        let sides = t.check(&facts(Format::Jpeg, 10, 6000, 5000)).unwrap_err();
        assert!(sides.fixable && sides.why.contains("10000"), "{sides:?}");
        let shape = t.check(&facts(Format::Jpeg, 10, 2100, 100)).unwrap_err();
        assert!(!shape.fixable && shape.why.contains("20:1"), "{shape:?}");
        assert!((t.scale_for(6000, 5000) - 10_000.0 / 11_000.0).abs() < 1e-9);
    }
}

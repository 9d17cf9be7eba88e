//! A rendition of a decoded cover within one network's limits: a format it takes (JPEG, or PNG
//! where JPEG is not taken), shrunk by quality first, then by size, keeping the aspect ratio and
//! never enlarging. Everything here is integer arithmetic or the `image` crate's scalar code,
//! single-threaded and with no clock, so the same original under the same limits gives the same
//! bytes in every run, process and machine (a replay at a client-chosen key needs the same blob).

use std::borrow::Cow;
use std::io::Cursor;

use image::codecs::png::PngEncoder;
use image::{DynamicImage, ImageEncoder, RgbImage};

use super::format::Format;
use super::limits::ImageLimits;

/// JPEG qualities tried in turn before the size is reduced.
const QUALITIES: [u8; 3] = [85, 75, 65];
/// An estimate must leave this share of the byte limit free before a full encode is tried.
const ESTIMATE_MARGIN: f64 = 0.92;
/// Size reductions tried after the lowest quality, each from the last encoded size.
const SHRINKS: usize = 8;

/// Bytes made for one network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendition {
    pub bytes: Vec<u8>,
    pub format: Format,
    pub width: u32,
    pub height: u32,
}

/// Renders `image` for `limits` (the caller has found that the original does not fit them).
///
/// # Errors
/// Why no rendition fits: the network takes neither JPEG nor PNG, or no size does.
pub fn render(image: &DynamicImage, limits: &ImageLimits) -> Result<Rendition, String> {
    let format = if limits.formats.takes(Format::Jpeg) {
        Format::Jpeg
    } else if limits.formats.takes(Format::Png) {
        Format::Png
    } else {
        return Err(format!(
            "it takes {}, and postonce renders covers as JPEG or PNG",
            limits.formats.describe()
        ));
    };
    let (w, h) = (image.width(), image.height());
    let fit = |s: f64| -> (u32, u32) {
        // Rounded down, so that the product and the sum stay within the limits.
        let nw = ((f64::from(w) * s).floor() as u32).clamp(1, w);
        let nh = ((f64::from(h) * s).floor() as u32).clamp(1, h);
        (nw, nh)
    };
    let mut scale = limits.scale_for(w, h).min(1.0);
    if format == Format::Jpeg {
        // A JPEG's sides are 16-bit.
        scale = scale.min(f64::from(u16::MAX) / f64::from(w.max(h)));
    }
    let mut current = match image {
        DynamicImage::ImageRgb8(b) if scale >= 1.0 => Cow::Borrowed(b),
        _ => Cow::Owned(shrink(image, fit(scale))),
    };
    let max = limits.max_bytes;
    let fits = |len: usize| max == 0 || len as u64 <= max;

    // Quality first: the best quality an estimate says fits, then each lower one.
    if format == Format::Jpeg {
        let sample = mosaic(&current);
        let per_pixel = |q: u8| {
            encode_jpeg(&sample, q)
                .map(|b| b.len() as f64 / (f64::from(sample.width()) * f64::from(sample.height())))
        };
        let pixels = f64::from(current.width()) * f64::from(current.height());
        let mut last_estimate = 0.0;
        for (i, q) in QUALITIES.iter().enumerate() {
            let estimate = per_pixel(*q)? * pixels;
            last_estimate = estimate;
            let is_last = i + 1 == QUALITIES.len();
            if max != 0 && estimate > max as f64 * ESTIMATE_MARGIN && !is_last {
                continue;
            }
            if max != 0 && is_last && estimate > max as f64 {
                break;
            }
            let bytes = encode_jpeg(&current, *q)?;
            if fits(bytes.len()) {
                return Ok(done(bytes, format, &current));
            }
            last_estimate = bytes.len() as f64;
        }
        // Then size, at the lowest quality.
        let q = QUALITIES[QUALITIES.len() - 1];
        let mut last = last_estimate;
        for _ in 0..SHRINKS {
            scale *= (max as f64 * 0.85 / last).sqrt().min(0.95);
            let (nw, nh) = fit(scale);
            current = Cow::Owned(shrink(image, (nw, nh)));
            let bytes = encode_jpeg(&current, q)?;
            if fits(bytes.len()) {
                return Ok(done(bytes, format, &current));
            }
            last = bytes.len() as f64;
        }
    } else {
        let mut bytes = encode_png(&current)?;
        for _ in 0..SHRINKS {
            if fits(bytes.len()) {
                return Ok(done(bytes, format, &current));
            }
            scale *= (max as f64 * 0.85 / bytes.len() as f64).sqrt().min(0.95);
            current = Cow::Owned(shrink(image, fit(scale)));
            bytes = encode_png(&current)?;
        }
    }
    Err(format!(
        "no {format} rendition of this cover fits in {max} bytes"
    ))
}

fn done(bytes: Vec<u8>, format: Format, image: &RgbImage) -> Rendition {
    Rendition {
        bytes,
        format,
        width: image.width(),
        height: image.height(),
    }
}

fn encode_jpeg(image: &RgbImage, quality: u8) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(image.as_raw().len() / 8);
    let (Ok(w), Ok(h)) = (u16::try_from(image.width()), u16::try_from(image.height())) else {
        return Err(format!(
            "{}×{} is too large for a JPEG",
            image.width(),
            image.height()
        ));
    };
    jpeg_encoder::Encoder::new(&mut out, quality)
        .encode(image.as_raw(), w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| format!("could not encode the JPEG rendition: {e}"))?;
    Ok(out)
}

fn encode_png(image: &RgbImage) -> Result<Vec<u8>, String> {
    let mut out = Cursor::new(Vec::new());
    PngEncoder::new(&mut out)
        .write_image(
            image.as_raw(),
            image.width(),
            image.height(),
            image::ExtendedColorType::Rgb8,
        )
        .map_err(|e| format!("could not encode the PNG rendition: {e}"))?;
    Ok(out.into_inner())
}

/// The decoded pixels as rows of RGB over white, without a full-size copy.
struct Source<'a> {
    raw: std::borrow::Cow<'a, [u8]>,
    width: u32,
    height: u32,
    /// 3 (RGB) or 4 (RGBA).
    channels: usize,
}

impl<'a> Source<'a> {
    fn of(image: &'a DynamicImage) -> Self {
        let (raw, channels) = match image {
            DynamicImage::ImageRgb8(b) => (Cow::Borrowed(b.as_raw().as_slice()), 3),
            DynamicImage::ImageRgba8(b) => (Cow::Borrowed(b.as_raw().as_slice()), 4),
            DynamicImage::ImageLuma8(_) | DynamicImage::ImageLumaA8(_)
                if !image.color().has_alpha() =>
            {
                (Cow::Owned(image.to_rgb8().into_raw()), 3)
            }
            other if other.color().has_alpha() => (Cow::Owned(other.to_rgba8().into_raw()), 4),
            other => (Cow::Owned(other.to_rgb8().into_raw()), 3),
        };
        Self {
            raw,
            width: image.width(),
            height: image.height(),
            channels,
        }
    }

    /// Row `y` as RGB (0..=255 each), transparency laid over white.
    fn row(&self, y: u32, out: &mut [u32]) {
        let c = self.channels;
        let w = self.width as usize;
        let start = y as usize * w * c;
        let row = &self.raw[start..start + w * c];
        if c == 3 {
            for (o, v) in out.iter_mut().zip(row) {
                *o = u32::from(*v);
            }
        } else {
            for (o, p) in out.chunks_exact_mut(3).zip(row.chunks_exact(4)) {
                o.copy_from_slice(&over_white([p[0], p[1], p[2], p[3]]));
            }
        }
    }
}

/// RGB at `size`: transparency laid over white, halved with a 2×2 box while the target is at
/// most half the size, then resampled (a triangle filter as wide as the reduction, in fixed
/// point) to the exact size.
fn shrink(image: &DynamicImage, (nw, nh): (u32, u32)) -> RgbImage {
    let source = Source::of(image);
    if nw * 2 <= source.width && nh * 2 <= source.height {
        let mut half = halve(&source);
        while nw * 2 <= half.width() && nh * 2 <= half.height() {
            half = halve(&Source {
                width: half.width(),
                height: half.height(),
                channels: 3,
                raw: Cow::Borrowed(half.as_raw()),
            });
        }
        let s = Source {
            width: half.width(),
            height: half.height(),
            channels: 3,
            raw: Cow::Borrowed(half.as_raw()),
        };
        return resample(&s, nw, nh);
    }
    if (nw, nh) == (source.width, source.height) {
        let mut line = vec![0u32; source.width as usize * 3];
        let mut out = Vec::with_capacity(line.len() * source.height as usize);
        for y in 0..source.height {
            source.row(y, &mut line);
            out.extend(line.iter().map(|v| *v as u8));
        }
        return RgbImage::from_raw(nw, nh, out).unwrap_or_else(|| RgbImage::new(nw, nh));
    }
    resample(&source, nw, nh)
}

fn over_white([r, g, b, a]: [u8; 4]) -> [u32; 3] {
    let a = u32::from(a);
    let mix = |c: u8| (u32::from(c) * a + 255 * (255 - a) + 127) / 255;
    [mix(r), mix(g), mix(b)]
}

/// Half the size (rounded down), each pixel the mean of a 2×2 block.
fn halve(source: &Source<'_>) -> RgbImage {
    let (w, h) = (source.width / 2, source.height / 2);
    let full = source.width as usize * 3;
    let (mut a, mut b) = (vec![0u32; full], vec![0u32; full]);
    let mut out = Vec::with_capacity(w as usize * h as usize * 3);
    for y in 0..h {
        source.row(2 * y, &mut a);
        source.row(2 * y + 1, &mut b);
        for x in 0..w as usize {
            let i = 6 * x;
            for c in 0..3 {
                let sum = a[i + c] + a[i + 3 + c] + b[i + c] + b[i + 3 + c];
                out.push(((sum + 2) / 4) as u8);
            }
        }
    }
    RgbImage::from_raw(w, h, out).unwrap_or_else(|| RgbImage::new(w, h))
}

/// The weights (summing to 1) of the input samples behind each of `n_out` outputs: a
/// triangle as wide as the reduction. Plain `f32` arithmetic (Rust never fuses or reorders
/// it), so every machine computes the same values.
fn weights(n_in: u32, n_out: u32) -> Vec<(u32, Vec<f32>)> {
    let ratio = f64::from(n_in) / f64::from(n_out);
    let support = ratio.max(1.0);
    (0..n_out)
        .map(|i| {
            let center = (f64::from(i) + 0.5) * ratio - 0.5;
            let first = ((center - support).ceil().max(0.0)) as u32;
            let last = ((center + support).floor() as u32).min(n_in - 1);
            let raw: Vec<f64> = (first..=last)
                .map(|j| (1.0 - (f64::from(j) - center).abs() / support).max(0.0))
                .collect();
            let total: f64 = raw.iter().sum();
            (first, raw.iter().map(|w| (w / total) as f32).collect())
        })
        .collect()
}

/// Resamples to `nw`×`nh` (never larger): each output row is the weighted sum of input rows,
/// then of that row's samples.
fn resample(source: &Source<'_>, nw: u32, nh: u32) -> RgbImage {
    let w = source.width;
    let (cols, rows) = (weights(w, nw), weights(source.height, nh));
    let full = w as usize * 3;
    let mut line = vec![0u32; full];
    let mut acc = vec![0f32; full];
    let mut out = Vec::with_capacity(nw as usize * nh as usize * 3);
    for (first, ws) in &rows {
        acc.iter_mut().for_each(|a| *a = 0.0);
        for (k, wt) in ws.iter().enumerate() {
            let y = first + k as u32;
            if source.channels == 3 {
                let start = y as usize * full;
                for (a, v) in acc.iter_mut().zip(&source.raw[start..start + full]) {
                    *a += wt * f32::from(*v);
                }
            } else {
                source.row(y, &mut line);
                for (a, v) in acc.iter_mut().zip(&line) {
                    *a += wt * *v as f32;
                }
            }
        }
        for (first_x, wx) in &cols {
            let (mut r, mut g, mut b) = (0f32, 0f32, 0f32);
            let from = *first_x as usize * 3;
            for (wt, p) in wx.iter().zip(acc[from..].chunks_exact(3)) {
                r += wt * p[0];
                g += wt * p[1];
                b += wt * p[2];
            }
            for s in [r, g, b] {
                out.push((s + 0.5).clamp(0.0, 255.0) as u8);
            }
        }
    }
    RgbImage::from_raw(nw, nh, out).unwrap_or_else(|| RgbImage::new(nw, nh))
}

/// Tiles from across the image, put side by side: their encoded size per pixel estimates the
/// whole image's at a fraction of the cost. Tiles are 32 pixels square at multiples of 16, so
/// their edges fall on JPEG block edges.
fn mosaic(image: &RgbImage) -> RgbImage {
    const TILE: u32 = 32;
    const GRID: u32 = 12;
    let (w, h) = (image.width(), image.height());
    if w <= TILE * GRID || h <= TILE * GRID {
        return image.clone();
    }
    let pick = |i: u32, span: u32| ((span - TILE) * i / (GRID - 1)) / 16 * 16;
    RgbImage::from_fn(TILE * GRID, TILE * GRID, |x, y| {
        let (tx, ty) = (x / TILE, y / TILE);
        *image.get_pixel(pick(tx, w) + x % TILE, pick(ty, h) + y % TILE)
    })
}

#[cfg(test)]
mod tests {
    use super::super::format::Formats;
    use super::*;

    fn noise(w: u32, h: u32, seed: u32) -> DynamicImage {
        let mut s = seed;
        DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |_, _| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            image::Rgb([s as u8, (s >> 8) as u8, (s >> 16) as u8])
        }))
    }

    #[test]
    fn a_rendition_fits_keeps_the_shape_and_never_enlarges() {
        let limits = ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png]),
            max_bytes: 200_000,
            max_side_sum: Some(900),
            ..ImageLimits::default()
        };
        let r = render(&noise(800, 400, 7), &limits).unwrap();
        assert_eq!(r.format, Format::Jpeg);
        assert!(r.bytes.len() <= 200_000, "{}", r.bytes.len());
        assert!(r.width + r.height <= 900 && r.width <= 800);
        let ratio = f64::from(r.width) / f64::from(r.height);
        assert!((ratio - 2.0).abs() < 0.02, "{ratio}");
        assert_eq!(render(&noise(800, 400, 7), &limits).unwrap(), r);
    }

    #[test]
    fn transparency_is_laid_over_white() {
        assert_eq!(over_white([0, 0, 0, 0]), [255, 255, 255]);
        assert_eq!(over_white([10, 20, 30, 255]), [10, 20, 30]);
    }
}

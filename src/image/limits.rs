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

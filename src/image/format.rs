//! What an image is, judged by its bytes alone: its format (from the magic bytes, never from a
//! name or a `Content-Type`), the size its header declares (read before anything is decoded),
//! whether a JPEG is CMYK, and whether the data ends where its format says it must.

use std::fmt;

/// The image formats postonce reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    Jpeg,
    Png,
    Gif,
    Webp,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Jpeg, Format::Png, Format::Gif, Format::Webp];

    /// The MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }

    /// `JPEG`, `PNG`, ...: for people.
    pub fn name(self) -> &'static str {
        match self {
            Self::Jpeg => "JPEG",
            Self::Png => "PNG",
            Self::Gif => "GIF",
            Self::Webp => "WebP",
        }
    }

    /// The format a MIME type names (`image/jpg` too); `None` for any other.
    pub fn from_mime(mime: &str) -> Option<Self> {
        match mime.trim().to_ascii_lowercase().as_str() {
            "image/jpeg" | "image/jpg" | "image/pjpeg" => Some(Self::Jpeg),
            "image/png" => Some(Self::Png),
            "image/gif" => Some(Self::Gif),
            "image/webp" => Some(Self::Webp),
            _ => None,
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::Jpeg => 1,
            Self::Png => 2,
            Self::Gif => 4,
            Self::Webp => 8,
        }
    }

    /// The format from the magic bytes.
    pub fn sniff(b: &[u8]) -> Option<Self> {
        if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if b.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
            Some(Self::Png)
        } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else if b.len() >= 12 && &b[0..4] == b"RIFF" && &b[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else {
            None
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of formats (a network's accepted ones). Empty: unknown, anything goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Formats(u8);

impl Formats {
    pub const fn of(list: &[Format]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < list.len() {
            bits |= match list[i] {
                Format::Jpeg => 1,
                Format::Png => 2,
                Format::Gif => 4,
                Format::Webp => 8,
            };
            i += 1;
        }
        Self(bits)
    }

    /// The formats among `mimes` (an instance's `supported_mime_types`).
    pub fn from_mimes<'a>(mimes: impl IntoIterator<Item = &'a str>) -> Self {
        Self(
            mimes
                .into_iter()
                .filter_map(Format::from_mime)
                .fold(0, |bits, f| bits | f.bit()),
        )
    }

    /// The set as bits (to keep in an atomic).
    pub const fn bits(self) -> u8 {
        self.0
    }

    pub const fn from_bits(bits: u8) -> Self {
        Self(bits & 0x0F)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `format` is in the set (an empty set takes every format).
    pub fn takes(self, format: Format) -> bool {
        self.is_empty() || self.0 & format.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Format> {
        Format::ALL
            .into_iter()
            .filter(move |f| self.0 & f.bit() != 0)
    }

    /// `JPEG, PNG or WebP`.
    pub fn describe(self) -> String {
        let names: Vec<&str> = self.iter().map(Format::name).collect();
        match names.as_slice() {
            [] => "any format".into(),
            [one] => (*one).into(),
            [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// What the header says, read without decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    pub width: u32,
    pub height: u32,
    /// A JPEG with four components (CMYK or YCCK): never sent as it is.
    pub cmyk: bool,
}

impl Header {
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }
}

/// Reads the format and the declared size from the first bytes (for a JPEG, the frame header
/// wherever it is). `None` when the header cannot be read.
pub fn header(b: &[u8]) -> Option<Header> {
    let format = Format::sniff(b)?;
    let be32 = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let be16 = |i: usize| {
        Some(u32::from(u16::from_be_bytes(
            b.get(i..i + 2)?.try_into().ok()?,
        )))
    };
    let le16 = |i: usize| {
        Some(u32::from(u16::from_le_bytes(
            b.get(i..i + 2)?.try_into().ok()?,
        )))
    };
    let le24 = |i: usize| {
        let s = b.get(i..i + 3)?;
        Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
    };
    let plain = |width, height| {
        Some(Header {
            format,
            width,
            height,
            cmyk: false,
        })
    };
    match format {
        Format::Png => {
            if b.get(12..16)? != b"IHDR" {
                return None;
            }
            plain(be32(16)?, be32(20)?)
        }
        Format::Gif => plain(le16(6)?, le16(8)?),
        Format::Webp => match b.get(12..16)? {
            b"VP8X" => plain(le24(24)? + 1, le24(27)? + 1),
            b"VP8L" => {
                if *b.get(20)? != 0x2F {
                    return None;
                }
                let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                plain((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
            }
            b"VP8 " => {
                if b.get(23..26)? != [0x9D, 0x01, 0x2A] {
                    return None;
                }
                plain(le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)
            }
            _ => None,
        },
        Format::Jpeg => {
            // Walk the segments to a start-of-frame marker.
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
                let len = usize::try_from(be16(i + 2)?).ok()?;
                if matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF) {
                    return Some(Header {
                        format,
                        width: be16(i + 7)?,
                        height: be16(i + 5)?,
                        cmyk: *b.get(i + 9)? == 4,
                    });
                }
                i += 2 + len;
            }
            None
        }
    }
}

/// Whether the data ends where its format says it must: a lenient decoder fills a truncated
/// JPEG with grey and calls it done, so the end is checked here, from the bytes.
///
/// # Errors
/// What is missing, for people.
pub fn check_complete(format: Format, b: &[u8]) -> Result<(), String> {
    match format {
        // End of image (FF D9) after the first scan: inside entropy-coded data FF is always
        // followed by 00 or a restart marker, so FF D9 there is the real end.
        Format::Jpeg => {
            let scan = find(b, &[0xFF, 0xDA]).ok_or("the JPEG has no image data (no scan)")?;
            if memchr::memmem::rfind(&b[scan..], &[0xFF, 0xD9]).is_none() {
                return Err(
                    "the JPEG is cut short: its data stops before the end-of-image marker".into(),
                );
            }
        }
        Format::Png => {
            if memchr::memmem::rfind(b, b"IEND").is_none() {
                return Err("the PNG is cut short: it has no IEND chunk".into());
            }
        }
        Format::Gif => {
            let end = b.iter().rposition(|&x| x != 0).unwrap_or(0);
            if b.get(end) != Some(&0x3B) {
                return Err("the GIF is cut short: it does not end with its trailer".into());
            }
        }
        Format::Webp => {
            let declared = b
                .get(4..8)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or("the WebP is cut short: no RIFF size")?;
            if u64::from(declared) + 8 > b.len() as u64 {
                return Err(format!(
                    "the WebP is cut short: it declares {} bytes and has {}",
                    u64::from(declared) + 8,
                    b.len()
                ));
            }
        }
    }
    Ok(())
}

/// The first `needle` in `hay` (memchr's vectorized search: a byte-by-byte window over a cover
/// of megabytes cost a run more than the rest of its checks).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_formats_from_bytes() {
        assert_eq!(Format::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(Format::Jpeg));
        assert_eq!(Format::sniff(b"GIF89a...."), Some(Format::Gif));
        assert_eq!(Format::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(Format::Webp));
        assert_eq!(Format::sniff(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(Format::sniff(b"<html>"), None);
    }

    #[test]
    fn format_sets() {
        let f = Formats::of(&[Format::Jpeg, Format::Png, Format::Webp]);
        assert!(f.takes(Format::Webp) && !f.takes(Format::Gif));
        assert_eq!(f.describe(), "JPEG, PNG or WebP");
        assert!(Formats::default().takes(Format::Gif));
        let m = Formats::from_mimes(["image/jpeg", "video/mp4", "image/gif"]);
        assert_eq!(m, Formats::of(&[Format::Gif, Format::Jpeg]));
    }

    #[test]
    fn a_png_header_declares_its_size() {
        let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
        png.extend_from_slice(b"IHDR");
        png.extend_from_slice(&100_000u32.to_be_bytes());
        png.extend_from_slice(&100_000u32.to_be_bytes());
        let h = header(&png).unwrap();
        assert_eq!(
            (h.width, h.height, h.pixels()),
            (100_000, 100_000, 10_000_000_000)
        );
        assert!(check_complete(Format::Png, &png).is_err());
    }
}

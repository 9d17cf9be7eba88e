//! The check of a cover that goes as it is, without decoding it (issue 34): the data's whole
//! structure is walked from its bytes, and only a cover that passes every step skips the strict
//! decode ([`super::decode`]). Every doubt sends the cover to the decoder, which then accepts it
//! or refuses it naming the cause, so nothing this check lets through could have been refused
//! by the structure alone, and nothing it turns away is refused by it: it never refuses.
//!
//! What is walked, per format:
//! - PNG: every chunk from the signature to `IEND`, each chunk's CRC-32 checked over its type
//!   and data (what a flipped or lost byte changes), `IHDR` first and sound, the palette
//!   present where the colour type needs one, the image data consecutive with a sound zlib
//!   header, and enough of it for the declared size (deflate gives at most 1,032 bytes a byte).
//! - JPEG: every marker segment from the start to the end-of-image marker, each length within
//!   the data, one baseline, extended or progressive Huffman frame of 8-bit samples whose size
//!   is the declared one, quantization and Huffman tables before the first scan, and each scan's
//!   entropy-coded data holding nothing but stuffed bytes and restart markers.
//! - GIF: every block from the screen descriptor to the trailer, each frame inside the canvas,
//!   every sub-block within the data, and the frames within the pixels an animation may have.
//! - WebP: every RIFF chunk within the declared size, one still bitstream (a key frame of
//!   lossy data with its start code and a first partition within its chunk, or lossless data
//!   of version 0) whose size is the canvas's; an animation goes to the decoder.
//!
//! Not checked: the compressed pixels themselves (a stream crafted to frame correctly and hold
//! garbage passes; no network was ever seen to be harmed by one, and the network refuses it).

use super::decode::MAX_ANIMATION_PIXELS;
use super::format::{Format, Header};

/// Whether `b` (whose header `h` was read and whose end was checked) is structurally sound
/// throughout; `false` on any doubt (the caller then decodes strictly).
pub fn sound(h: &Header, b: &[u8]) -> bool {
    match h.format {
        Format::Png => png(h, b).is_some(),
        Format::Jpeg => jpeg(h, b).is_some(),
        Format::Gif => gif(h, b).is_some(),
        Format::Webp => webp(h, b).is_some(),
    }
}

fn be32(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        b.get(i..i.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn be16(b: &[u8], i: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes(
        b.get(i..i.checked_add(2)?)?.try_into().ok()?,
    )))
}

fn le16(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        b.get(i..i.checked_add(2)?)?.try_into().ok()?,
    )))
}

fn le32(b: &[u8], i: usize) -> Option<usize> {
    usize::try_from(u32::from_le_bytes(
        b.get(i..i.checked_add(4)?)?.try_into().ok()?,
    ))
    .ok()
}

/// `Some(())` when `ok`, so that a failed step ends the walk with `?`.
fn ensure(ok: bool) -> Option<()> {
    ok.then_some(())
}

fn png(h: &Header, b: &[u8]) -> Option<()> {
    let mut i = 8;
    let (mut bits_per_pixel, mut palette, mut needs_palette) = (0u64, false, false);
    let (mut idat, mut idat_done, mut idat_bytes) = (false, false, 0u64);
    let mut zlib = [0u8; 2];
    let mut zlib_seen = 0;
    loop {
        let len = usize::try_from(be32(b, i)?).ok()?;
        ensure(len <= 0x7FFF_FFFF)?;
        let kind = b.get(i + 4..i + 8)?;
        ensure(kind.iter().all(u8::is_ascii_alphabetic))?;
        let end = i.checked_add(8 + len)?;
        let data = b.get(i + 8..end)?;
        ensure(crc32fast::hash(&b[i + 4..end]) == be32(b, end)?)?;
        if i == 8 {
            // IHDR first: the size read from the header, a depth the colour type allows, and
            // the only compression, filter and interlace methods there are.
            ensure(kind == b"IHDR" && len == 13)?;
            ensure(be32(data, 0)? == h.width && be32(data, 4)? == h.height)?;
            let (depth, colour) = (data[8], data[9]);
            let channels = match (colour, depth) {
                (0, 1 | 2 | 4 | 8 | 16) => 1,
                (3, 1 | 2 | 4 | 8) => {
                    needs_palette = true;
                    1
                }
                (2, 8 | 16) => 3,
                (4, 8 | 16) => 2,
                (6, 8 | 16) => 4,
                _ => return None,
            };
            bits_per_pixel = channels * u64::from(depth);
            ensure(data[10] == 0 && data[11] == 0 && data[12] <= 1)?;
        } else {
            match kind {
                b"IHDR" => return None,
                b"PLTE" => {
                    ensure(!idat && len > 0 && len % 3 == 0 && len <= 768)?;
                    palette = true;
                }
                b"IDAT" => {
                    ensure(!idat_done)?;
                    idat = true;
                    idat_bytes += len as u64;
                    for &x in data.iter().take(2 - zlib_seen) {
                        zlib[zlib_seen] = x;
                        zlib_seen += 1;
                    }
                }
                b"IEND" => break,
                _ => idat_done |= idat,
            }
        }
        i = end + 4;
    }
    ensure(idat && zlib_seen == 2 && (palette || !needs_palette))?;
    // The zlib header: deflate, a window within 32 KiB, its check bits, no preset dictionary.
    let (cmf, flg) = (zlib[0], zlib[1]);
    ensure(cmf & 0x0F == 8 && cmf >> 4 <= 7)?;
    ensure((u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0 && flg & 0x20 == 0)?;
    // Every row is a filter byte and its pixels; deflate turns a byte into at most 1,032.
    let row = (u64::from(h.width) * bits_per_pixel).div_ceil(8) + 1;
    let raw = row * u64::from(h.height);
    ensure(idat_bytes.saturating_mul(1_032) + 1_032 >= raw)
}

fn jpeg(h: &Header, b: &[u8]) -> Option<()> {
    let mut i = 2;
    let (mut frame, mut tables, mut scans) = (false, false, false);
    loop {
        ensure(*b.get(i)? == 0xFF)?;
        let marker = *b.get(i + 1)?;
        match marker {
            0xFF => {
                i += 1;
                continue;
            }
            0xD9 => return ensure(scans),
            // A second start of image, or a restart marker outside a scan.
            0xD8 | 0xD0..=0xD7 | 0x01 => return None,
            _ => {}
        }
        let len = be16(b, i + 2)?;
        ensure(len >= 2)?;
        let end = i + 2 + len;
        let seg = b.get(i + 4..end)?;
        match marker {
            // Baseline, extended sequential and progressive Huffman frames, 8-bit samples: what
            // the decoder reads; any other coding goes to it for its own verdict.
            0xC0..=0xC2 => {
                ensure(!frame && len >= 8)?;
                frame = true;
                let comps = usize::from(seg[5]);
                ensure(seg[0] == 8 && matches!(comps, 1 | 3) && len == 8 + 3 * comps)?;
                ensure(be16(seg, 1)? == h.height as usize && be16(seg, 3)? == h.width as usize)?;
            }
            0xC3 | 0xC5..=0xC7 | 0xC8..=0xCB | 0xCD..=0xCF => return None,
            0xC4 | 0xDB => tables = true,
            0xDA => {
                ensure(frame && tables && len >= 6)?;
                scans = true;
                i = entropy_coded_end(b, end)?;
                continue;
            }
            _ => {}
        }
        i = end;
    }
}

/// Where the entropy-coded data starting at `i` ends (the next marker's `FF`): inside it, an
/// `FF` is followed only by a stuffed `00`, a restart marker or more fill.
fn entropy_coded_end(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += memchr::memchr(0xFF, b.get(i..)?)?;
        match *b.get(i + 1)? {
            0x00 | 0xD0..=0xD7 => i += 2,
            0xFF => i += 1,
            _ => return Some(i),
        }
    }
}

fn gif(h: &Header, b: &[u8]) -> Option<()> {
    let flags = *b.get(10)?;
    let mut i = 13;
    if flags & 0x80 != 0 {
        i += 3 << ((flags & 7) + 1);
    }
    let mut frames: u64 = 0;
    loop {
        match *b.get(i)? {
            0x2C => {
                let (x, y) = (le16(b, i + 1)?, le16(b, i + 3)?);
                let (w, ht) = (le16(b, i + 5)?, le16(b, i + 7)?);
                ensure(w > 0 && ht > 0 && x + w <= h.width && y + ht <= h.height)?;
                let local = *b.get(i + 9)?;
                i += 10;
                if local & 0x80 != 0 {
                    i += 3 << ((local & 7) + 1);
                }
                ensure(matches!(*b.get(i)?, 2..=8))?;
                i = sub_blocks(b, i + 1)?;
                frames += 1;
                // Within what an animation may have; over it, the decoder refuses it.
                ensure(frames.saturating_mul(h.pixels()) <= MAX_ANIMATION_PIXELS)?;
            }
            0x21 => {
                b.get(i + 1)?;
                i = sub_blocks(b, i + 2)?;
            }
            0x3B => return ensure(frames > 0),
            _ => return None,
        }
    }
}

/// Past the sub-blocks starting at `i` (each a length byte and that many bytes, to a zero).
fn sub_blocks(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let n = usize::from(*b.get(i)?);
        i += 1;
        if n == 0 {
            return Some(i);
        }
        i += n;
        ensure(i <= b.len())?;
    }
}

fn webp(h: &Header, b: &[u8]) -> Option<()> {
    let riff_end = le32(b, 4)?.checked_add(8)?;
    ensure(riff_end <= b.len() && b.get(8..12)? == b"WEBP")?;
    let mut i = 12;
    let mut still = 0;
    while i < riff_end {
        let kind = b.get(i..i + 4)?;
        let len = le32(b, i + 4)?;
        let end = (i + 8).checked_add(len)?;
        ensure(end <= riff_end)?;
        let data = &b[i + 8..end];
        match kind {
            b"VP8 " => {
                still += 1;
                // A key frame, shown, version 0-3, its first partition within the chunk, the
                // start code, and the declared size.
                let tag = u32::from(data.get(..3)?[0])
                    | u32::from(data[1]) << 8
                    | u32::from(data[2]) << 16;
                ensure(tag & 1 == 0 && (tag >> 1) & 7 <= 3 && tag & 0x10 != 0)?;
                ensure((tag >> 5) as usize + 10 <= len && data.get(3..6)? == [0x9D, 0x01, 0x2A])?;
                ensure(le16(data, 6)? & 0x3FFF == h.width && le16(data, 8)? & 0x3FFF == h.height)?;
            }
            b"VP8L" => {
                still += 1;
                ensure(*data.first()? == 0x2F)?;
                let bits = u32::from_le_bytes(data.get(1..5)?.try_into().ok()?);
                ensure((bits & 0x3FFF) + 1 == h.width && ((bits >> 14) & 0x3FFF) + 1 == h.height)?;
                ensure(bits >> 29 == 0)?;
            }
            b"VP8X" => {
                ensure(i == 12 && len >= 10)?;
                // An animation: every frame must be decoded to be checked.
                ensure(data[0] & 0x02 == 0)?;
            }
            b"ANIM" | b"ANMF" => return None,
            _ => {}
        }
        i = end + (len & 1);
    }
    ensure(still == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::format::header;

    fn encoded(format: image::ImageFormat, w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbaImage::from_fn(w, h, |x, y| {
            image::Rgba([(x * 7) as u8, (y * 5) as u8, ((x ^ y) * 3) as u8, 255])
        });
        let img = if format == image::ImageFormat::Jpeg {
            image::DynamicImage::ImageRgba8(img).to_rgb8().into()
        } else {
            image::DynamicImage::ImageRgba8(img)
        };
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn check(b: &[u8]) -> bool {
        header(b).is_some_and(|h| sound(&h, b))
    }

    #[test]
    fn sound_covers_pass_in_every_format() {
        for f in [
            image::ImageFormat::Png,
            image::ImageFormat::Jpeg,
            image::ImageFormat::Gif,
            image::ImageFormat::WebP,
        ] {
            let b = encoded(f, 120, 90);
            assert!(check(&b), "{f:?}");
        }
    }

    #[test]
    fn any_changed_byte_of_a_png_sends_it_to_the_decoder() {
        let b = encoded(image::ImageFormat::Png, 64, 48);
        for at in (8..b.len()).step_by(7) {
            let mut bad = b.clone();
            bad[at] ^= 0x10;
            assert!(!check(&bad), "byte {at} of {}", b.len());
        }
    }

    #[test]
    fn a_jpeg_with_a_marker_inside_its_scan_or_a_lost_table_goes_to_the_decoder() {
        let b = encoded(image::ImageFormat::Jpeg, 64, 48);
        let sos = b.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let mut bad = b.clone();
        let mid = sos + (b.len() - sos) / 2;
        bad[mid] = 0xFF;
        bad[mid + 1] = 0xC4;
        assert!(!check(&bad));
        // Every table before the scan becomes an application segment: no tables at all.
        let mut bad = b.clone();
        let mut i = 2;
        while i < sos {
            if matches!(bad[i + 1], 0xC4 | 0xDB) {
                bad[i + 1] = 0xEE;
            }
            i += 2 + usize::from(u16::from_be_bytes([bad[i + 2], bad[i + 3]]));
        }
        assert!(check(&b) && !check(&bad));
    }

    #[test]
    fn a_header_that_lies_about_the_size_goes_to_the_decoder() {
        let b = encoded(image::ImageFormat::Png, 64, 48);
        let mut h = header(&b).unwrap();
        h.height = 4800;
        assert!(!sound(&h, &b));
        let b = encoded(image::ImageFormat::Gif, 64, 48);
        let mut h = header(&b).unwrap();
        h.width = 32;
        assert!(!sound(&h, &b), "a frame outside the canvas");
    }
}

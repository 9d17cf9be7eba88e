//! Real image files made by the tests (the images issue): noise that does not compress, WebP,
//! CMYK JPEG, animations, cut-short files, a decompression bomb, a file that lies about its
//! type. Everything is generated from a seed, so every run gets the same bytes.

use std::io::Cursor;

use image::codecs::png::PngEncoder;
use image::codecs::webp::WebPEncoder;
use image::{ImageEncoder, RgbImage, RgbaImage};

/// A xorshift stream: the same seed, the same pixels.
fn stream(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed.max(1);
    move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    }
}

/// RGB noise, which no codec compresses: `noise_png(1000, 1000, _)` is about 3 MB.
pub fn noise_png(width: u32, height: u32, seed: u32) -> Vec<u8> {
    let mut next = stream(seed);
    let img = RgbImage::from_fn(width, height, |_, _| {
        let v = next();
        image::Rgb([v as u8, (v >> 8) as u8, (v >> 16) as u8])
    });
    png(&img)
}

/// A smooth picture (gradients and bands): compresses well in every format.
pub fn smooth(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        let fx = x * 255 / width.max(1);
        let fy = y * 255 / height.max(1);
        image::Rgb([fx as u8, fy as u8, ((x / 16 + y / 16) % 2 * 120 + 60) as u8])
    })
}

pub fn png(img: &RgbImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    PngEncoder::new(&mut out)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .expect("encode PNG");
    out.into_inner()
}

/// A smooth PNG of this size.
pub fn smooth_png(width: u32, height: u32) -> Vec<u8> {
    png(&smooth(width, height))
}

/// A lossless WebP cover (the format static-site generators emit), half smooth, half noise so
/// that it is not tiny: `webp(1200, 630)` is a few hundred KB.
pub fn webp(width: u32, height: u32) -> Vec<u8> {
    let mut next = stream(7);
    let base = smooth(width, height);
    let img = RgbaImage::from_fn(width, height, |x, y| {
        let p = base.get_pixel(x, y).0;
        let n = if x < width / 2 {
            (next() % 64) as u8
        } else {
            0
        };
        image::Rgba([p[0] ^ n, p[1], p[2], 255])
    });
    let mut out = Vec::new();
    WebPEncoder::new_lossless(&mut out)
        .encode(img.as_raw(), width, height, image::ExtendedColorType::Rgba8)
        .expect("encode WebP");
    out
}

/// A baseline RGB JPEG of the smooth picture.
pub fn jpeg(width: u32, height: u32, quality: u8) -> Vec<u8> {
    let img = smooth(width, height);
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, quality)
        .encode(
            img.as_raw(),
            u16::try_from(width).expect("width"),
            u16::try_from(height).expect("height"),
            jpeg_encoder::ColorType::Rgb,
        )
        .expect("encode JPEG");
    out
}

/// A progressive JPEG of the smooth picture, 4:4:4 (no chroma subsampling): the JPEG that takes
/// its decoder the most memory a pixel (every coefficient of every component is held until the
/// last scan).
pub fn progressive_jpeg(width: u32, height: u32) -> Vec<u8> {
    let img = smooth(width, height);
    let mut out = Vec::new();
    let mut enc = jpeg_encoder::Encoder::new(&mut out, 75);
    enc.set_progressive(true);
    enc.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_4_4);
    enc.encode(
        img.as_raw(),
        u16::try_from(width).expect("width"),
        u16::try_from(height).expect("height"),
        jpeg_encoder::ColorType::Rgb,
    )
    .expect("encode progressive JPEG");
    out
}

/// A valid 16-bit RGBA PNG: one colour per row, so that it compresses to little.
pub fn png16(width: u32, height: u32) -> Vec<u8> {
    let mut raw = Vec::with_capacity(width as usize * height as usize * 8);
    for y in 0..height {
        for x in 0..width {
            let _ = x;
            let v = ((y * 65_535 / height.max(1)) as u16).to_ne_bytes();
            let w = (!(y as u16)).to_ne_bytes();
            raw.extend_from_slice(&[v[0], v[1], w[0], w[1], v[0], v[1], 0xFF, 0xFF]);
        }
    }
    let mut out = Cursor::new(Vec::new());
    PngEncoder::new_with_quality(
        &mut out,
        image::codecs::png::CompressionType::Default,
        image::codecs::png::FilterType::Sub,
    )
    .write_image(&raw, width, height, image::ExtendedColorType::Rgba16)
    .expect("encode 16-bit PNG");
    out.into_inner()
}

/// A CMYK JPEG (four components, as print workflows export them).
pub fn cmyk_jpeg(width: u32, height: u32) -> Vec<u8> {
    let mut data = Vec::with_capacity(width as usize * height as usize * 4);
    for y in 0..height {
        for x in 0..width {
            data.extend_from_slice(&[(x % 256) as u8, (y % 256) as u8, 40, 10]);
        }
    }
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 90)
        .encode(
            &data,
            u16::try_from(width).expect("width"),
            u16::try_from(height).expect("height"),
            jpeg_encoder::ColorType::Cmyk,
        )
        .expect("encode CMYK JPEG");
    out
}

/// An animated GIF of `frames` frames, each a different band pattern from a 4-colour palette.
pub fn animated_gif(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let (w, h) = (
        u16::try_from(width).expect("width"),
        u16::try_from(height).expect("height"),
    );
    let palette = [0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255];
    let mut out = Vec::new();
    {
        let mut enc = gif::Encoder::new(&mut out, w, h, &palette).expect("GIF header");
        enc.set_repeat(gif::Repeat::Infinite).expect("GIF loop");
        for f in 0..frames {
            let pixels: Vec<u8> = (0..width * height)
                .map(|i| (((i % width) / 8 + f) % 4) as u8)
                .collect();
            let mut frame = gif::Frame::from_indexed_pixels(w, h, pixels, None);
            frame.delay = 10;
            enc.write_frame(&frame).expect("GIF frame");
        }
    }
    out
}

/// The first `keep` bytes of `bytes` (a download cut short).
pub fn truncated(bytes: &[u8], keep: usize) -> Vec<u8> {
    bytes[..keep.min(bytes.len())].to_vec()
}

/// A file that starts like a PNG and is a JPEG after its signature.
pub fn lying_png() -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    b.extend_from_slice(&jpeg(64, 64, 80));
    b
}

/// A decompression bomb: a small, well-formed PNG whose header declares `side`×`side`
/// pixels (100,000 × 100,000 is 10 billion; 30 GB once decoded).
pub fn bomb_png(side: u32) -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut b, b"IHDR", &ihdr);
    // A stored (uncompressed) zlib stream of one row's worth of zeros: valid, and far short.
    let row = vec![0u8; 1024];
    let mut z = vec![0x78, 0x01, 0x01];
    z.extend_from_slice(&(row.len() as u16).to_le_bytes());
    z.extend_from_slice(&(!(row.len() as u16)).to_le_bytes());
    z.extend_from_slice(&row);
    z.extend_from_slice(&adler32(&row).to_be_bytes());
    chunk(&mut b, b"IDAT", &z);
    chunk(&mut b, b"IEND", &[]);
    b
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Width and height as the header declares them (the crate's own reader).
pub fn size_of(bytes: &[u8]) -> (u32, u32) {
    postonce::image::dimensions(bytes).expect("an image header")
}

/// SHA-256, hex: to compare what a fake received with what was served.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

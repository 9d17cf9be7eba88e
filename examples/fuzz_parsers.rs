//! A mutation fuzzer for the parsers that face the outside world, on the stable toolchain:
//! the CI body, the Telegram update and callback data, and the Lambda event. It starts from
//! valid seeds, mutates bytes (flip, insert, delete, duplicate, splice, interesting values),
//! and runs every parser under `catch_unwind`. Any panic is a crash: it prints the input and
//! exits non-zero.
//!
//! `cargo run --release --example fuzz_parsers -- [executions per target, default 1000000] [seed]`

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use postonce::image::OriginPolicy;
use serde_json::Value;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: fast, deterministic from the seed.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"\"\\u0000\"",
    b"\xff\xfe",
    b"\xe2\x80\xae",
    b"retry:",
    b"force:",
    b"done:",
    b"blog-",
    b"urn:li:person:",
    b"http://169.254.169.254/",
    b"file:///etc/passwd",
    b"https://[::1]/",
    b"%00",
    b"\"isBase64Encoded\":true",
];

fn mutate(rng: &mut Rng, seed: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let len = data.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                data.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(16).min(len - i);
                data.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(32).min(len - i);
                let chunk = data[i..i + n].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, chunk);
            }
            4 => {
                let token = INTERESTING[rng.below(INTERESTING.len())];
                let at = rng.below(len + 1);
                data.splice(at..at, token.iter().copied());
            }
            5 => {
                let other = &pool[rng.below(pool.len())];
                if !other.is_empty() {
                    let from = rng.below(other.len());
                    let n = rng.below(64).min(other.len() - from);
                    let at = rng.below(len + 1);
                    data.splice(at..at, other[from..from + n].iter().copied());
                }
            }
            _ => {
                if len > 0 {
                    let i = rng.below(len);
                    let alphabet = b"\"{}[],:0aZ-_\\/";
                    data[i] = alphabet[rng.below(alphabet.len())];
                }
            }
        }
    }
    data.truncate(300 * 1024);
    data
}

type Target = (&'static str, Vec<&'static [u8]>, fn(&[u8]));

fn ci(data: &[u8]) {
    let policy = OriginPolicy::any_public_https();
    let _ =
        postonce::triggers::ci::signature_valid(b"secret", data, std::str::from_utf8(data).ok());
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        if let Ok((_, Some(content))) = postonce::triggers::parse_draft(&v, true, &policy) {
            // Every target's text counted its network's way, on whatever got through.
            for text in content.captions.values().chain([&content.caption]) {
                let _ = postonce::networks::x::weighted_len(text);
                let _ = postonce::networks::telegram_channel::caption_len(text);
                let _ = postonce::networks::linkedin::little_text::char_count(text);
                let _ = postonce::networks::linkedin::little_text::escape(text);
            }
        }
        let _ = postonce::triggers::parse_draft(&v, false, &policy);
        let _ = postonce::triggers::parse_targets(&v);
    }
}

fn telegram(data: &[u8]) {
    let _ = postonce::triggers::telegram::parse_update(data);
}

fn callback(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(p) = postonce::triggers::telegram::parse_data(s) {
            assert!(s.len() <= 64, "accepted callback data longer than 64 bytes");
            assert!(p.key.to_string().len() <= 48);
        }
        let _ = postonce::key::PostKey::parse(s);
    }
}

fn lambda(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        let _ = postonce::lambda::http_request(&v);
        let _ = postonce::triggers::sweep::is_sweep_event(&v);
    }
}

/// A cover's bytes: the header read and the pixel cap applied without decoding; a tiny
/// declared image is decoded strictly too (whatever the bytes, an answer, never a panic).
fn image(data: &[u8]) {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = postonce::image::dimensions(data);
    if let Ok(img) = postonce::image::vet(bytes) {
        if u64::from(img.width) * u64::from(img.height) <= 1024 {
            // Decoded strictly; one input in 16 is also rendered (a 200-byte limit).
            let limits = postonce::image::ImageLimits {
                max_bytes: if data.len().is_multiple_of(16) {
                    200
                } else {
                    0
                },
                ..postonce::image::ImageLimits::default()
            };
            let _ = postonce::image::cover_blocking(&img, &limits, true);
        }
    }
}

/// Small valid covers in every format, as seeds for the image target.
fn image_seeds() -> Vec<&'static [u8]> {
    let img = image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([x as u8 * 30, y as u8 * 40, 90]));
    let mut out = Vec::new();
    for format in [
        image::ImageFormat::Png,
        image::ImageFormat::Jpeg,
        image::ImageFormat::Gif,
        image::ImageFormat::WebP,
    ] {
        let mut buf = std::io::Cursor::new(Vec::new());
        if format == image::ImageFormat::WebP {
            let rgba = image::DynamicImage::ImageRgb8(img.clone()).to_rgba8();
            rgba.write_to(&mut buf, format).expect("encode a seed");
        } else {
            img.write_to(&mut buf, format).expect("encode a seed");
        }
        let leaked: &'static [u8] = Box::leak(buf.into_inner().into_boxed_slice());
        out.push(leaked);
    }
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let per_target: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0x5eed_1234);
    let targets: Vec<Target> = vec![
        (
            "CI body",
            vec![
                r#"{"kind":"blog","slug":"hello-world","caption":"Hello #rust (v2)","image_url":"https://cdn.example.com/a.png","link":"https://x.dev/p","alt":"alt"}"#.as_bytes(),
                r#"{"kind":"blog","slug":"x"}"#.as_bytes(),
                r#"{"kind":"blog","slug":"t","caption":"Hi https://t.co/x 🎉","image_url":"https://cdn.example.com/a.png","targets":["linkedin","x","telegram"],"captions":{"x":"short <b>&amp;","telegram":"<i>tg</i>"}}"#.as_bytes(),
            ],
            ci,
        ),
        (
            "Telegram update",
            vec![
                r#"{"update_id":7,"callback_query":{"id":"q1","from":{"id":42,"is_bot":false,"first_name":"A"},"message":{"message_id":5,"date":1,"chat":{"id":99,"type":"private"}},"chat_instance":"c","data":"retry:blog-x"}}"#.as_bytes(),
                r#"{"update_id":8,"message":{"text":"hi"}}"#.as_bytes(),
            ],
            telegram,
        ),
        (
            "callback data",
            vec![
                "retry:blog-hello-world".as_bytes(),
                "done:blog-x".as_bytes(),
                "force:abc-d-e".as_bytes(),
                "retry:blog-x@x".as_bytes(),
                "force:blog-x@telegram".as_bytes(),
            ],
            callback,
        ),
        (
            "Lambda event",
            vec![
                r#"{"version":"2.0","rawPath":"/ci","headers":{"x-hub-signature-256":"sha256=00"},"requestContext":{"http":{"method":"POST"}},"body":"eyJraW5kIjoiYmxvZyJ9","isBase64Encoded":true}"#.as_bytes(),
                r#"{"postonce":"sweep"}"#.as_bytes(),
                r#"{"source":"aws.events","detail-type":"Scheduled Event"}"#.as_bytes(),
            ],
            lambda,
        ),
        ("cover image", image_seeds(), image),
    ];
    let mut rng = Rng(seed | 1);
    let mut crashes = 0;
    let mut total = 0;
    for (name, seeds, run) in &targets {
        // A cover is decoded (and one in 16 rendered) on every execution, about 20 times the
        // cost of a JSON body: it gets a fifth of the executions.
        let per_target = if *name == "cover image" {
            per_target / 5
        } else {
            per_target
        };
        total += per_target;
        let pool: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_vec()).collect();
        let begun = Instant::now();
        let mut corpus = pool.clone();
        for i in 0..per_target {
            let base = &corpus[rng.below(corpus.len())];
            let input = mutate(&mut rng, base, &pool);
            if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
                crashes += 1;
                eprintln!("CRASH in {name}: {:?}", String::from_utf8_lossy(&input));
            }
            // Keep some valid-looking mutants to go deeper.
            if i % 97 == 0 && corpus.len() < 256 && serde_json::from_slice::<Value>(&input).is_ok()
            {
                corpus.push(input);
            }
        }
        let secs = begun.elapsed().as_secs_f64();
        println!(
            "{name}: {per_target} executions in {secs:.1}s ({:.0}/s), crashes so far {crashes}",
            per_target as f64 / secs
        );
    }
    println!(
        "fuzz: {} targets, {total} executions, {crashes} crashes",
        targets.len()
    );
    if crashes > 0 {
        std::process::exit(1);
    }
}

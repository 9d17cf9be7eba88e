//! A mutation fuzzer for the parsers that face the outside world, on the stable toolchain:
//! the CI body, the Telegram update and callback data, the Lambda event, the cover image, and
//! every network's answers (status, headers and body through each network's classifier and
//! answer readers: LinkedIn, X, the Telegram channel, Mastodon, Bluesky, Threads). It starts from
//! valid seeds, mutates bytes (flip, insert, delete, duplicate, splice, interesting values),
//! and runs every parser under `catch_unwind`. Any panic is a crash: it prints the input and
//! exits non-zero.
//!
//! `cargo run --release --example fuzz_parsers -- [executions per target, default 1000000] [seed]`

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use postonce::image::OriginPolicy;
use reqwest::header::{HeaderMap, HeaderValue};
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

// ---------------------------------------------------------------------------------------------
// The networks' answers.

/// Statuses an answer is read with: every class the classifiers tell apart.
const STATUSES: &[u16] = &[400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503];

/// A network's answer made of fuzz bytes: the first line is a header value, given under every
/// rate-limit, paging and id header an adapter reads; the rest is the body (as text, and as
/// JSON when it is). The status is picked by the input's length.
struct Wire {
    status: u16,
    headers: HeaderMap,
    body: String,
    json: Option<Value>,
}

fn wire(data: &[u8]) -> Wire {
    let (head, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(head) {
        for name in [
            "retry-after",
            "x-rate-limit-reset",
            "x-ratelimit-reset",
            "ratelimit-reset",
            "link",
            "x-restli-id",
            "x-linkedin-id",
        ] {
            headers.insert(name, v.clone());
        }
    }
    Wire {
        status: STATUSES[data.len() % STATUSES.len()],
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
        json: serde_json::from_slice(body).ok(),
    }
}

/// One of `of`, picked by the input (apart from the status): each execution reads the answer
/// as one kind of call, so that a target costs about what a JSON body does.
fn pick<T: Copy>(data: &[u8], of: &[T]) -> T {
    let salt = data.last().map_or(0, |b| usize::from(*b));
    of[(data.len() / STATUSES.len() + salt) % of.len()]
}

/// Every value of an answer that looks like an item: the answer itself, its `data` array (a
/// list of posts), its `result` (the Bot API).
fn items(v: &Value) -> Vec<&Value> {
    let mut out = vec![v];
    if let Some(list) = v.get("data").and_then(Value::as_array) {
        out.extend(list);
    }
    out.extend(v.get("result"));
    out
}

fn linkedin_answers(data: &[u8]) {
    let w = wire(data);
    let _ = postonce::networks::linkedin::rest::classify(w.status, &w.headers, &w.body);
    let _ = postonce::networks::http::retry_after_seconds(&w.headers);
}

fn x_answers(data: &[u8]) {
    use postonce::networks::http::Op;
    let w = wire(data);
    let op = pick(data, &[Op::Upload, Op::Create, Op::Read, Op::Check]);
    let _ = postonce::networks::x::classify(op, w.status, &w.headers, &w.body);
    for item in w.json.iter().flat_map(items) {
        let _ = postonce::networks::x::sent_text(item);
    }
}

fn channel_answers(data: &[u8]) {
    let w = wire(data);
    let _ = postonce::networks::telegram_channel::classify(w.status, &w.body, "@channel");
    for item in w.json.iter().flat_map(items) {
        let id = item.get("message_id").and_then(Value::as_i64).unwrap_or(0);
        let chat = item.get("chat").unwrap_or(&Value::Null);
        let _ = postonce::networks::telegram_channel::message_url(chat, id);
    }
}

fn mastodon_answers(data: &[u8]) {
    use postonce::networks::mastodon::{self as m, Op};
    let w = wire(data);
    let op = pick(
        data,
        &[Op::Upload, Op::Create, Op::Read, Op::Check, Op::Instance],
    );
    let _ = m::classify(op, w.status, &w.headers, &w.body);
    let _ = m::next_max_id(&w.headers);
    let _ = m::retry_after(&w.headers);
    let _ = m::parse_time_ms(&w.body);
    for item in w.json.iter().flat_map(items) {
        if let Some(at) = item.get("created_at").and_then(Value::as_str) {
            let _ = m::parse_time_ms(at);
        }
        if let Some(text) = item.get("content").and_then(Value::as_str) {
            let _ = m::comparable(&m::plain_text(text));
        }
    }
}

fn bluesky_answers(data: &[u8]) {
    use postonce::networks::bluesky::{self as b, Op};
    let w = wire(data);
    let ops = [
        Op::Login,
        Op::Refresh,
        Op::Upload,
        Op::Put,
        Op::Get,
        Op::Check,
    ];
    let _ = b::classify(pick(data, &ops), w.status, &w.headers, &w.body);
    let _ = b::is_tid(&w.body);
    for item in w.json.iter().flat_map(items) {
        if let Some(uri) = item.get("uri").and_then(Value::as_str) {
            let _ = b::is_tid(uri.rsplit('/').next().unwrap_or(""));
        }
    }
}

fn threads_answers(data: &[u8]) {
    use postonce::networks::graph::wire::{self as t, Op};
    let w = wire(data);
    let ops = [
        Op::Container,
        Op::Status,
        Op::Publish,
        Op::Media,
        Op::List,
        Op::Check,
    ];
    // Both Graph dialects: Threads' field names and Instagram's.
    for d in [
        &postonce::networks::threads::DIALECT,
        &postonce::networks::instagram::DIALECT,
    ] {
        let _ = t::classify(d, pick(data, &ops), w.status, &w.headers, &w.body);
        if let Some(v) = &w.json {
            let _ = t::ContainerStatus::parse(d, v);
            for post in t::ListPage::parse(d, v).posts {
                let _ = post.timestamp.as_deref().map(t::parse_timestamp);
                let _ = post.text.as_deref().map(t::comparable);
            }
        }
    }
    // The Facebook Page: its classifier on top of the Graph one, its list of published posts.
    {
        use postonce::networks::facebook::wire as f;
        let _ = f::classify(pick(data, &ops), w.status, &w.headers, &w.body);
        if let Some(v) = &w.json {
            let _ = f::list_page(v);
            let _ = f::created(v);
        }
    }
    let _ = t::GraphError::parse(&w.body).map(|g| g.describe());
    let _ = t::parse_timestamp(&w.body);
    if let Some(v) = &w.json {
        let _ = t::id_of(v);
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
        (
            "LinkedIn answers",
            vec![
                r#"
{"message":"Content is a duplicate of urn:li:share:7000000000000000001","status":422,"errorDetails":{"inputErrors":[{"code":"DUPLICATE_POST","input":{"inputPath":{"fieldPath":"/commentary"}}}]}}"#.as_bytes(),
                "30\n{\"message\":\"Too many requests\",\"status\":429}".as_bytes(),
                r#"
{"serviceErrorCode":65601,"message":"The token used in the request has been revoked by the user","status":401}"#.as_bytes(),
            ],
            linkedin_answers,
        ),
        (
            "X answers",
            vec![
                r#"1733306400
{"title":"Too Many Requests","detail":"Too Many Requests","type":"about:blank","status":429}"#.as_bytes(),
                r#"
{"detail":"You are not allowed to create a Tweet with duplicate content.","type":"about:blank","title":"Forbidden","status":403}"#.as_bytes(),
                r#"
{"data":[{"id":"1","text":"Hello https://t.co/abc https://t.co/img","entities":{"urls":[{"start":6,"end":29,"url":"https://t.co/abc","expanded_url":"https://example.com/a"},{"start":30,"end":53,"url":"https://t.co/img","expanded_url":"https://x.com/u/status/1/photo/1","media_key":"3_1"}]}}]}"#.as_bytes(),
            ],
            x_answers,
        ),
        (
            "Telegram channel answers",
            vec![
                r#"
{"ok":true,"result":{"message_id":12,"chat":{"id":-1001234567890,"type":"channel","username":"mychannel"},"date":1}}"#.as_bytes(),
                r#"
{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#.as_bytes(),
                r#"
{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#.as_bytes(),
            ],
            channel_answers,
        ),
        (
            "Mastodon answers",
            vec![
                r#"<https://mastodon.example/api/v1/accounts/1/statuses?max_id=109>; rel="next", <https://mastodon.example/api/v1/accounts/1/statuses?min_id=111>; rel="prev"
[{"id":"111","created_at":"2026-12-04T10:15:00.123Z","content":"<p>Hello <a href=\"https://x.dev\">x.dev</a></p>","url":"https://mastodon.example/@a/111"}]"#.as_bytes(),
                r#"2026-12-04T10:15:30.000Z
{"error":"Too many requests"}"#.as_bytes(),
                r#"
{"error":"Validation failed: Text character limit of 500 exceeded"}"#.as_bytes(),
            ],
            mastodon_answers,
        ),
        (
            "Bluesky answers",
            vec![
                r#"1733306400
{"error":"RateLimitExceeded","message":"Rate Limit Exceeded"}"#.as_bytes(),
                r#"
{"error":"InvalidSwap","message":"Record was at bafyreia"}"#.as_bytes(),
                r#"
{"uri":"at://did:plc:abc/app.bsky.feed.post/3l4dwxhsjzs2b","cid":"bafyreib","value":{"text":"Hello","createdAt":"2026-12-04T10:15:00.000Z"}}"#.as_bytes(),
            ],
            bluesky_answers,
        ),
        (
            "Threads answers",
            vec![
                r#"
{"error":{"message":"Error validating access token","type":"OAuthException","code":190,"error_subcode":463,"fbtrace_id":"AbC"}}"#.as_bytes(),
                r#"
{"status":"ERROR","error_message":"FAILED_DOWNLOADING_VIDEO","id":"17889615691921648"}"#.as_bytes(),
                r#"
{"data":[{"id":"1","permalink":"https://www.threads.com/@a/post/C1","text":"Hello","timestamp":"2026-12-04T10:15:00+0000"}],"paging":{"cursors":{"after":"c"},"next":"https://x/next"}}"#.as_bytes(),
                "\n2026-12-04T10:15:00+0000".as_bytes(),
            ],
            threads_answers,
        ),
    ];
    let mut rng = Rng(seed | 1);
    let mut crashes = 0;
    let mut total = 0;
    for (name, seeds, run) in &targets {
        // A cover is decoded (and one in 16 rendered) on every execution, about 20 times the
        // cost of a JSON body: it gets a fifth of the executions. A network's answer goes
        // through its classifier and every reader of that network (several JSON reads, each
        // message formatted), at about a third of a JSON body's speed: a twentieth, which
        // keeps the six of them to about the time of one JSON target (and finds a panic like
        // issue 30's Threads timestamp within its first thousands).
        let per_target = if *name == "cover image" {
            per_target / 5
        } else if name.ends_with(" answers") {
            per_target / 20
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

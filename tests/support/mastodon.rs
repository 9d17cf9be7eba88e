//! A Mastodon fake that speaks its real wire format: `Authorization: Bearer` checked on
//! every authenticated call, `POST /api/v2/media` (multipart `file` + `description`) answering
//! 202 while the image is processing and `GET /api/v1/media/:id` answering 206 (no body) until
//! it is done, `POST /api/v1/statuses` with the **`Idempotency-Key` semantics that decide
//! exactly-once**, `verify_credentials`, the account's statuses rendered as Mastodon renders them
//! (HTML `content`, newest first, `Link` paging with `max_id`), `GET /api/v2/instance` with its
//! limits, and the documented `{"error":"…"}` bodies and rate-limit headers.
//!
//! The key memory, as in `PostStatusService`: after a status is created its key is stored per
//! account for one hour; a create carrying a remembered key answers the **original** status
//! (200, same id) whatever its body, and creates nothing. After the hour the key is forgotten
//! and the same request creates a second status: the fake can duplicate. The hour runs on the
//! fake's clock, which the test moves with [`MastodonFake::advance`] (the clock also dates the
//! statuses and the rate-limit resets, as a server's clock would).
//!
//! The upload holds an image to the instance's own limits, the ones `/api/v2/instance` states
//! (`configuration.media_attachments`): a type in `supported_mime_types` (judged by the bytes,
//! as Mastodon's attachment processing does), at most `image_size_limit` bytes, at most
//! `image_matrix_limit` pixels; each is a setting. Anything else is refused with Mastodon's 422,
//! and every image that arrived is kept ([`MastodonFake::images`]) with its hash and facts.
//!
//! Fault modes are applied before the key check (a rate limiter or a proxy answers before the
//! application sees the request).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use unicode_segmentation::UnicodeSegmentation;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;
use super::tg_channel::parse_multipart;

/// The account's access token (the `SECRET1` mark lets scripts/test.sh find it in logs).
pub const TOKEN: &str = "ZA-Yj3aBD8U8Cm7lKUp-lm9O9BmDgdhHzDe-mastodon-SECRET1";
pub const ACCOUNT_ID: &str = "109302054846453223";
pub const USERNAME: &str = "postonce_test";
/// How long a key is remembered.
pub const KEY_MEMORY: Duration = Duration::from_secs(3600);
/// The instance's defaults (the docs' example).
pub const MAX_CHARACTERS: usize = 500;
pub const IMAGE_SIZE_LIMIT: usize = 16_777_216;
pub const IMAGE_MATRIX_LIMIT: u64 = 33_177_600;
/// The image types of `supported_mime_types` (the instance lists video and audio too).
pub const IMAGE_MIME_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// How a call answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Answer this status with Mastodon's body for it (502/503/504: a proxy's HTML page).
    /// Nothing is created.
    Status(u16),
    /// 429 `Too many requests` with `X-RateLimit-*` headers, resetting in `reset_in` seconds.
    RateLimited {
        reset_in: u64,
    },
    /// Create nothing; answer 503 only after the delay.
    Hang(Duration),
    /// Create the status (and remember its key), then answer 200 only after the delay.
    AcceptThenHang(Duration),
}

/// How reading back answers (`verify_credentials` and the account's statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Normal,
    /// 403 `This action is outside the authorized scopes`: a token without read scopes.
    Refused,
    /// 429 with the rate-limit headers.
    RateLimited,
}

#[derive(Debug, Clone)]
pub struct MediaItem {
    pub id: String,
    pub bytes: usize,
    pub content_type: String,
    pub file_name: Option<String>,
    pub description: Option<String>,
    /// 206 answers still to give before the image is processed; `None`: processed.
    pub pending: Option<u32>,
    /// When processing ends on the real clock (Unix ms), for a slow instance
    /// ([`MastodonFake::set_processing_time`]); `None`: by the count of polls only.
    pub ready_at_ms: Option<i64>,
    pub attached_to: Option<String>,
    /// The file as the fake judged it.
    pub image: Received,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub id: String,
    /// The text as sent.
    pub text: String,
    pub media_ids: Vec<String>,
    pub visibility: String,
    pub language: Option<String>,
    /// Unix milliseconds on the fake's clock.
    pub created_ms: i64,
    pub idempotency_key: Option<String>,
}

struct State {
    base: String,
    clock_offset: Duration,
    seq: u64,
    media: HashMap<String, MediaItem>,
    statuses: Vec<Status>,
    /// (account, key) → (status id, stored at, ms).
    keys: HashMap<(String, String), (String, i64)>,
    /// Whether `Idempotency-Key` is honoured ([`MastodonFake::set_idempotency_keys`]).
    keys_honoured: bool,
    processing: Option<u32>,
    processing_time: Option<Duration>,
    create_mode: Mode,
    upload_mode: Mode,
    read_mode: Read,
    max_characters: usize,
    image_size_limit: usize,
    image_matrix_limit: u64,
    /// The image types of `supported_mime_types`.
    image_types: Vec<String>,
    /// Every file that reached `POST /api/v2/media` (taken or refused), in order.
    images: Vec<Received>,
    requests: u64,
    create_requests: u64,
    key_replays: u64,
    upload_requests: u64,
    media_polls: u64,
    verify_requests: u64,
    timeline_requests: u64,
    instance_requests: u64,
    bad_tokens: u64,
    /// The access token it accepts ([`MastodonFake::renew_token`]).
    token: String,
    last_create_body: Value,
    last_idempotency_key: Option<String>,
}

#[derive(Clone)]
pub struct MastodonFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

fn real_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

/// `2026-12-03T10:15:00.000Z` (`micros`: six fraction digits, as `X-RateLimit-Reset` has).
fn iso(ms: i64, micros: bool) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let frac = ms.rem_euclid(1000);
    let frac = if micros {
        format!("{:06}", frac * 1000)
    } else {
        format!("{frac:03}")
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{frac}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Mastodon's error bodies (403, 500 and the proxy pages as seen from
/// Mastodon's controllers and nginx, wording not confirmed).
pub fn error_answer(status: u16) -> ResponseTemplate {
    let error = match status {
        401 => "The access token is invalid",
        403 => "This action is outside the authorized scopes",
        404 => "Record not found",
        422 => "Validation failed: Text can't be blank",
        429 => "Too many requests",
        500 => "We're sorry, but something went wrong on our end.",
        502..=504 => {
            let title = match status {
                502 => "502 Bad Gateway",
                503 => "503 Service Temporarily Unavailable",
                _ => "504 Gateway Time-out",
            };
            return ResponseTemplate::new(status)
                .insert_header("content-type", "text/html")
                .set_body_string(format!(
                    "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
                ));
        }
        _ => "Error",
    };
    json_answer(status, json!({ "error": error }))
}

fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json; charset=utf-8")
        .set_body_json(body)
}

fn unprocessable(error: &str) -> ResponseTemplate {
    json_answer(422, json!({ "error": error }))
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// Rendering, as Mastodon's TextFormatter does for a plain-text status.

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn link(url: &str) -> String {
    let lower = url.to_ascii_lowercase();
    let mut prefix_len = if lower.starts_with("https://") { 8 } else { 7 };
    if lower[prefix_len..].starts_with("www.") {
        prefix_len += 4;
    }
    let (prefix, rest) = url.split_at(prefix_len);
    let display: String = rest.chars().take(30).collect();
    let suffix: String = rest.chars().skip(30).collect();
    let class = if rest.chars().count() > 30 {
        "ellipsis"
    } else {
        ""
    };
    format!(
        "<a href=\"{}\" target=\"_blank\" rel=\"nofollow noopener\" translate=\"no\"><span class=\"invisible\">{}</span><span class=\"{class}\">{}</span><span class=\"invisible\">{}</span></a>",
        escape(url),
        escape(prefix),
        escape(&display),
        escape(&suffix)
    )
}

fn word_end(s: &str, ok: impl Fn(char) -> bool) -> usize {
    s.char_indices()
        .find(|(_, c)| !ok(*c))
        .map_or(s.len(), |(i, _)| i)
}

/// One word (no spaces) as HTML: a URL, a hashtag, a mention, or text.
fn render_word(word: &str, base: &str) -> String {
    let lower = word.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        let url = word.trim_end_matches(['.', ',', '!', '?', ':', ';', ')', '"', '\'']);
        if url.len() > 8 {
            return format!("{}{}", link(url), escape(&word[url.len()..]));
        }
    }
    if let Some(tag) = word.strip_prefix('#') {
        let end = word_end(tag, |c| c.is_alphanumeric() || c == '_');
        if end > 0 {
            return format!(
                "<a href=\"{base}/tags/{}\" class=\"mention hashtag\" rel=\"tag\">#<span>{}</span></a>{}",
                tag[..end].to_lowercase(),
                escape(&tag[..end]),
                escape(&tag[end..])
            );
        }
    }
    if let Some(rest) = word.strip_prefix('@') {
        let end = word_end(rest, |c| c.is_ascii_alphanumeric() || c == '_');
        if end > 0 {
            let user = &rest[..end];
            let mut after = &rest[end..];
            let mut home = base.to_owned();
            if let Some(domain) = after.strip_prefix('@') {
                let d_end = word_end(domain, |c| c.is_alphanumeric() || c == '.' || c == '-');
                let d = domain[..d_end].trim_end_matches(['.', '-']);
                if d.contains('.') {
                    home = format!("https://{d}");
                    after = &domain[d.len()..];
                }
            }
            return format!(
                "<span class=\"h-card\" translate=\"no\"><a href=\"{home}/@{user}\" class=\"u-url mention\">@<span>{}</span></a></span>{}",
                escape(user),
                escape(after)
            );
        }
    }
    escape(word)
}

/// A status's `content`: paragraphs on blank lines, `<br />` for a line break, links,
/// hashtags and mentions made into anchors, the rest HTML-escaped.
pub fn render_content(text: &str, base: &str) -> String {
    let text = text.replace("\r\n", "\n");
    let text = text.trim();
    let mut paragraphs: Vec<Vec<&str>> = vec![vec![]];
    let mut blank = false;
    for line in text.split('\n') {
        if line.is_empty() {
            blank = true;
            continue;
        }
        if blank && !paragraphs.last().is_some_and(Vec::is_empty) {
            paragraphs.push(vec![]);
        }
        blank = false;
        if let Some(p) = paragraphs.last_mut() {
            p.push(line);
        }
    }
    paragraphs
        .iter()
        .filter(|p| !p.is_empty())
        .map(|lines| {
            let body = lines
                .iter()
                .map(|line| {
                    line.split(' ')
                        .map(|w| render_word(w, base))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
                .join("<br />");
            format!("<p>{body}</p>")
        })
        .collect()
}

/// The length the fake enforces, counted on its own: graphemes, a word starting with
/// `http(s)://` counts 23 (its trailing punctuation apart), `@user@domain` counts as `@user`.
pub fn fake_len(text: &str) -> usize {
    let mut countable = String::new();
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            countable.push(' ');
        }
        let lower = word.to_ascii_lowercase();
        if lower.starts_with("https://") || lower.starts_with("http://") {
            let url = word.trim_end_matches(['.', ',', '!', '?', ':', ';', ')', '"', '\'']);
            countable.push_str(&"\u{1}".repeat(23));
            countable.push_str(&word[url.len()..]);
        } else if let Some((user, _domain)) = word
            .strip_prefix('@')
            .and_then(|rest| rest.split_once('@'))
            .filter(|(u, d)| !u.is_empty() && d.contains('.'))
        {
            countable.push('@');
            countable.push_str(user);
        } else {
            countable.push_str(word);
        }
    }
    countable.graphemes(true).count()
}

// ---------------------------------------------------------------------------------------------
// The API.

struct Api {
    state: Arc<Mutex<State>>,
}

impl State {
    fn now_ms(&self) -> i64 {
        real_now_ms() + i64::try_from(self.clock_offset.as_millis()).unwrap_or(0)
    }

    /// A snowflake-like id: milliseconds on the clock, then a sequence (ids sort by time).
    fn next_id(&mut self, at_ms: i64) -> String {
        self.seq += 1;
        ((u64::try_from(at_ms).unwrap_or(0) << 16) | (self.seq & 0xffff)).to_string()
    }

    fn rate_headers(&self, t: ResponseTemplate, remaining: u32) -> ResponseTemplate {
        let reset = iso(self.now_ms() + 300_000, true);
        t.insert_header("x-ratelimit-limit", "300")
            .insert_header("x-ratelimit-remaining", remaining.to_string().as_str())
            .insert_header("x-ratelimit-reset", reset.as_str())
    }

    fn rate_limited(&self, reset_in: u64) -> ResponseTemplate {
        let reset_ms = self.now_ms() + i64::try_from(reset_in).unwrap_or(0) * 1000;
        error_answer(429)
            .insert_header("x-ratelimit-limit", "300")
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", iso(reset_ms, true).as_str())
    }

    /// A fault mode's answer; `None`: answer normally.
    fn fault(&self, mode: Mode) -> Option<ResponseTemplate> {
        match mode {
            Mode::Normal | Mode::AcceptThenHang(_) => None,
            Mode::Status(s) => Some(error_answer(s)),
            Mode::RateLimited { reset_in } => Some(self.rate_limited(reset_in)),
            Mode::Hang(d) => Some(error_answer(503).set_delay(d)),
        }
    }

    fn account(&self) -> Value {
        json!({
            "id": ACCOUNT_ID,
            "username": USERNAME,
            "acct": USERNAME,
            "display_name": "postonce test",
            "locked": false,
            "bot": false,
            "created_at": "2022-11-08T00:00:00.000Z",
            "note": "",
            "url": format!("{}/@{USERNAME}", self.base),
            "uri": format!("{}/users/{USERNAME}", self.base),
            "avatar": format!("{}/avatars/original/missing.png", self.base),
            "followers_count": 0,
            "following_count": 0,
            "statuses_count": self.statuses.len(),
        })
    }

    fn media_json(&self, m: &MediaItem) -> Value {
        let (w, h) = (m.image.width, m.image.height);
        let processed = m.pending.is_none();
        let url = processed.then(|| {
            format!(
                "{}/system/media_attachments/files/{}/original/cover.png",
                self.base, m.id
            )
        });
        json!({
            "id": m.id,
            "type": "image",
            "url": url,
            "preview_url": format!("{}/system/media_attachments/files/{}/small/cover.png", self.base, m.id),
            "remote_url": null,
            "text_url": null,
            "meta": {"original": {"width": w, "height": h, "size": format!("{w}x{h}"), "aspect": f64::from(w) / f64::from(h.max(1))}},
            "description": m.description,
            "blurhash": "UFBWY:8_0Jxv4mx]t8t64.%M-:IUWGWAt6M}",
        })
    }

    fn status_json(&self, s: &Status) -> Value {
        let media: Vec<Value> = s
            .media_ids
            .iter()
            .filter_map(|id| self.media.get(id))
            .map(|m| self.media_json(m))
            .collect();
        json!({
            "id": s.id,
            "created_at": iso(s.created_ms, false),
            "in_reply_to_id": null,
            "in_reply_to_account_id": null,
            "sensitive": false,
            "spoiler_text": "",
            "visibility": s.visibility,
            "language": s.language,
            "uri": format!("{}/users/{USERNAME}/statuses/{}", self.base, s.id),
            "url": format!("{}/@{USERNAME}/{}", self.base, s.id),
            "replies_count": 0,
            "reblogs_count": 0,
            "favourites_count": 0,
            "content": render_content(&s.text, &self.base),
            "reblog": null,
            "account": self.account(),
            "media_attachments": media,
            "mentions": [],
            "tags": [],
            "emojis": [],
            "card": null,
            "poll": null,
        })
    }

    /// Why the instance refuses this file, as its 422 `error`; `None`: within its limits.
    ///
    /// The type: Mastodon judges the file by its contents and answers the documented
    /// "File content type is invalid". The size: Paperclip's size validation
    /// (wording from the fake's earlier versions; not seen verbatim). The pixels: Mastodon's
    /// `check_image_dimension` raises a `DimensionsValidationError`, answered 422 with its
    /// message (`"<w>x<h> images are not supported"`, as read from Mastodon's source; not
    /// confirmed on the wire).
    fn image_refusal(&self, got: &Received) -> Option<String> {
        let supported = got
            .format
            .is_some_and(|f| self.image_types.iter().any(|t| t == f));
        if !supported || got.bytes == 0 {
            return Some("Validation failed: File content type is invalid, File is invalid".into());
        }
        if got.bytes > self.image_size_limit {
            return Some(format!(
                "Validation failed: File file size must be less than {} Bytes",
                self.image_size_limit
            ));
        }
        if got.pixels() > self.image_matrix_limit {
            return Some(format!(
                "{}x{} images are not supported",
                got.width, got.height
            ));
        }
        None
    }

    fn upload(&mut self, req: &Request) -> ResponseTemplate {
        if let Some(r) = self.fault(self.upload_mode) {
            return r;
        }
        let Ok(parts) = parse_multipart(header(req, "content-type"), &req.body) else {
            return unprocessable("Validation failed: File can't be blank");
        };
        let Some(file) = parts.iter().find(|p| p.name == "file") else {
            return unprocessable("Validation failed: File can't be blank");
        };
        let content_type = file.content_type.clone().unwrap_or_default();
        let got = Received::of(&file.data, &content_type);
        if let Some(why) = self.image_refusal(&got) {
            self.images.push(got.refused(why.clone()));
            return unprocessable(&why);
        }
        let description = parts
            .iter()
            .find(|p| p.name == "description")
            .map(|p| String::from_utf8_lossy(&p.data).into_owned());
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > 1500)
        {
            return unprocessable(
                "Validation failed: Description is too long (maximum is 1500 characters)",
            );
        }
        let now = self.now_ms();
        let id = self.next_id(now);
        let item = MediaItem {
            id: id.clone(),
            bytes: file.data.len(),
            content_type,
            file_name: file.file_name.clone(),
            description,
            pending: self.processing.or(self.processing_time.map(|_| u32::MAX)),
            ready_at_ms: self
                .processing_time
                .map(|d| real_now_ms() + i64::try_from(d.as_millis()).unwrap_or(0)),
            attached_to: None,
            image: got.clone(),
        };
        self.images.push(got);
        let status = if item.pending.is_some() { 202 } else { 200 };
        let body = self.media_json(&item);
        self.media.insert(id, item);
        self.rate_headers(json_answer(status, body), 29)
    }

    fn poll(&mut self, id: &str) -> ResponseTemplate {
        let Some(m) = self.media.get_mut(id) else {
            return error_answer(404);
        };
        if m.ready_at_ms.is_some_and(|at| at <= real_now_ms()) {
            m.pending = None;
        }
        if m.ready_at_ms.is_some_and(|at| at > real_now_ms()) {
            return ResponseTemplate::new(206);
        }
        match m.pending {
            Some(0) | None => {
                m.pending = None;
                let m = m.clone();
                json_answer(200, self.media_json(&m))
            }
            Some(n) => {
                m.pending = Some(n - 1);
                ResponseTemplate::new(206)
            }
        }
    }

    fn create(&mut self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        self.last_create_body = body.clone();
        let key = req
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        self.last_idempotency_key = key.clone();
        // A server that ignores the header (GoToSocial) neither looks the key up nor keeps it.
        let key = key.filter(|_| self.keys_honoured);
        let mode = self.create_mode;
        if let Some(r) = self.fault(mode) {
            return r;
        }
        let now = self.now_ms();
        let memory = i64::try_from(KEY_MEMORY.as_millis()).unwrap_or(i64::MAX);
        if let Some(k) = &key {
            let slot = (ACCOUNT_ID.to_owned(), k.clone());
            match self.keys.get(&slot) {
                Some((id, at)) if now - at < memory => {
                    let id = id.clone();
                    if let Some(original) = self.statuses.iter().find(|s| s.id == id).cloned() {
                        self.key_replays += 1;
                        let answer = json_answer(200, self.status_json(&original));
                        return self.rate_headers(answer, 298);
                    }
                }
                Some(_) => {
                    // Redis let it expire.
                    self.keys.remove(&slot);
                }
                None => {}
            }
        }
        if !header(req, "content-type").starts_with("application/json") || !body.is_object() {
            return unprocessable("Validation failed: Text can't be blank");
        }
        let text = body
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        let media_ids: Vec<String> = match body.get("media_ids") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|i| match i {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(_) => return unprocessable("Validation failed: Media ids is invalid"),
        };
        let visibility = body
            .get("visibility")
            .and_then(Value::as_str)
            .unwrap_or("public")
            .to_owned();
        if !["public", "unlisted", "private", "direct"].contains(&visibility.as_str()) {
            return unprocessable("Validation failed: Visibility is not included in the list");
        }
        if media_ids.len() > 4 {
            return unprocessable("Validation failed: Media attachments is too long");
        }
        let missing: Vec<&str> = media_ids
            .iter()
            .filter(|id| self.media.get(*id).is_none_or(|m| m.attached_to.is_some()))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return unprocessable(&format!(
                "Media {} not found or already attached to another post",
                missing.join(", ")
            ));
        }
        let now = real_now_ms();
        for id in &media_ids {
            if let Some(m) = self.media.get_mut(id) {
                if m.ready_at_ms.is_some_and(|at| at <= now) {
                    m.pending = None;
                }
            }
        }
        if media_ids
            .iter()
            .any(|id| self.media.get(id).is_some_and(|m| m.pending.is_some()))
        {
            return unprocessable(
                "Cannot attach files that have not finished processing. Try again in a moment!",
            );
        }
        if text.is_empty() && media_ids.is_empty() {
            return unprocessable("Validation failed: Text can't be blank");
        }
        if fake_len(&text) > self.max_characters {
            return unprocessable(&format!(
                "Validation failed: Text character limit of {} exceeded",
                self.max_characters
            ));
        }
        let id = self.next_id(now);
        for m in &media_ids {
            if let Some(item) = self.media.get_mut(m) {
                item.attached_to = Some(id.clone());
            }
        }
        let status = Status {
            id: id.clone(),
            text,
            media_ids,
            visibility,
            language: body
                .get("language")
                .and_then(Value::as_str)
                .map(str::to_owned),
            created_ms: now,
            idempotency_key: key.clone(),
        };
        let answer = self.rate_headers(json_answer(200, self.status_json(&status)), 299);
        self.statuses.push(status);
        if let Some(k) = key {
            self.keys.insert((ACCOUNT_ID.to_owned(), k), (id, now));
        }
        match mode {
            Mode::AcceptThenHang(d) => answer.set_delay(d),
            _ => answer,
        }
    }

    fn read_fault(&self) -> Option<ResponseTemplate> {
        match self.read_mode {
            Read::Normal => None,
            Read::Refused => Some(error_answer(403)),
            Read::RateLimited => Some(self.rate_limited(300)),
        }
    }

    fn timeline(&mut self, account: &str, req: &Request) -> ResponseTemplate {
        if let Some(r) = self.read_fault() {
            return r;
        }
        if account != ACCOUNT_ID {
            return error_answer(404);
        }
        let q: HashMap<String, String> = req.url.query_pairs().into_owned().collect();
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(20)
            .clamp(1, 40);
        let num = |k: &str| q.get(k).and_then(|v| v.parse::<u64>().ok());
        let (max_id, since_id, min_id) = (num("max_id"), num("since_id"), num("min_id"));
        let mut list: Vec<&Status> = self
            .statuses
            .iter()
            .filter(|s| {
                let id: u64 = s.id.parse().unwrap_or(0);
                max_id.is_none_or(|m| id < m)
                    && since_id.is_none_or(|m| id > m)
                    && min_id.is_none_or(|m| id > m)
            })
            .collect();
        list.sort_by_key(|s| std::cmp::Reverse(s.id.parse::<u64>().unwrap_or(0)));
        list.truncate(limit);
        let page: Vec<Value> = list.iter().map(|s| self.status_json(s)).collect();
        let mut answer = json_answer(200, Value::Array(page));
        if let (Some(first), Some(last)) = (list.first(), list.last()) {
            let path = format!("{}/api/v1/accounts/{ACCOUNT_ID}/statuses", self.base);
            let mut links = vec![];
            if list.len() == limit {
                links.push(format!(
                    "<{path}?limit={limit}&exclude_replies=true&exclude_reblogs=true&max_id={}>; rel=\"next\"",
                    last.id
                ));
            }
            links.push(format!(
                "<{path}?limit={limit}&exclude_replies=true&exclude_reblogs=true&min_id={}>; rel=\"prev\"",
                first.id
            ));
            answer = answer.insert_header("link", links.join(", ").as_str());
        }
        self.rate_headers(answer, 297)
    }

    fn instance(&self) -> ResponseTemplate {
        let domain = self
            .base
            .split("://")
            .nth(1)
            .unwrap_or(&self.base)
            .to_owned();
        json_answer(
            200,
            json!({
                "domain": domain,
                "title": "postonce test instance",
                "version": "4.5.0",
                "source_url": "https://github.com/mastodon/mastodon",
                "description": "A fake for tests",
                "usage": {"users": {"active_month": 1}},
                "configuration": {
                    "urls": {"streaming": format!("wss://{domain}")},
                    "accounts": {"max_featured_tags": 10, "max_pinned_statuses": 5},
                    "statuses": {
                        "max_characters": self.max_characters,
                        "max_media_attachments": 4,
                        "characters_reserved_per_url": 23
                    },
                    "media_attachments": {
                        "supported_mime_types": self.image_types.iter().map(String::as_str)
                            .chain(["video/webm", "video/mp4", "video/quicktime", "audio/mpeg"])
                            .collect::<Vec<_>>(),
                        "description_limit": 1500,
                        "image_size_limit": self.image_size_limit,
                        "image_matrix_limit": self.image_matrix_limit,
                        "video_size_limit": 103_809_024,
                        "video_frame_rate_limit": 120,
                        "video_matrix_limit": 8_294_400
                    },
                    "polls": {"max_options": 4, "max_characters_per_option": 50, "min_expiration": 300, "max_expiration": 2_629_746},
                    "translation": {"enabled": false}
                },
                "registrations": {"enabled": false, "approval_required": false, "message": null},
                "contact": {"email": "admin@example.com", "account": null},
                "rules": []
            }),
        )
    }
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let method = req.method.as_str().to_owned();
        let path = req.url.path().to_owned();
        match (method.as_str(), path.as_str()) {
            ("POST", "/api/v1/statuses") => st.create_requests += 1,
            ("POST", "/api/v2/media") => st.upload_requests += 1,
            ("GET", p) if p.starts_with("/api/v1/media/") => st.media_polls += 1,
            ("GET", "/api/v1/accounts/verify_credentials") => st.verify_requests += 1,
            ("GET", p) if p.starts_with("/api/v1/accounts/") && p.ends_with("/statuses") => {
                st.timeline_requests += 1;
            }
            ("GET", "/api/v2/instance") => {
                st.instance_requests += 1;
                // Public: no token needed.
                return st.instance();
            }
            _ => {}
        }
        if header(req, "authorization") != format!("Bearer {}", st.token) {
            st.bad_tokens += 1;
            return error_answer(401);
        }
        match (method.as_str(), path.as_str()) {
            ("POST", "/api/v2/media") => st.upload(req),
            ("GET", p) if p.starts_with("/api/v1/media/") => {
                let id = p["/api/v1/media/".len()..].to_owned();
                st.poll(&id)
            }
            ("POST", "/api/v1/statuses") => st.create(req),
            ("GET", "/api/v1/accounts/verify_credentials") => match st.read_fault() {
                Some(r) => r,
                None => {
                    let mut account = st.account();
                    account["source"] = json!({"privacy": "public", "sensitive": false, "language": "", "note": "", "fields": []});
                    st.rate_headers(json_answer(200, account), 296)
                }
            },
            ("GET", p) if p.starts_with("/api/v1/accounts/") && p.ends_with("/statuses") => {
                let account = p["/api/v1/accounts/".len()..p.len() - "/statuses".len()].to_owned();
                st.timeline(&account, req)
            }
            _ => error_answer(404),
        }
    }
}

impl MastodonFake {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State {
            base: server.uri(),
            clock_offset: Duration::ZERO,
            seq: 0,
            media: HashMap::new(),
            statuses: Vec::new(),
            keys: HashMap::new(),
            keys_honoured: true,
            processing: None,
            processing_time: None,
            create_mode: Mode::Normal,
            upload_mode: Mode::Normal,
            read_mode: Read::Normal,
            max_characters: MAX_CHARACTERS,
            image_size_limit: IMAGE_SIZE_LIMIT,
            image_matrix_limit: IMAGE_MATRIX_LIMIT,
            image_types: IMAGE_MIME_TYPES.iter().map(|t| (*t).to_owned()).collect(),
            images: Vec::new(),
            requests: 0,
            create_requests: 0,
            key_replays: 0,
            upload_requests: 0,
            media_polls: 0,
            verify_requests: 0,
            timeline_requests: 0,
            instance_requests: 0,
            bad_tokens: 0,
            token: TOKEN.to_owned(),
            last_create_body: Value::Null,
            last_idempotency_key: None,
        }));
        Mock::given(any())
            .respond_with(Api {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// Moves the fake's clock forward (key memory, statuses' dates, rate-limit resets).
    pub fn advance(&self, d: Duration) {
        self.with(|s| s.clock_offset += d);
    }

    /// Uploads answer 202 and the media then answers 206 `n` times before 200; `None`: 200 at
    /// once (processed synchronously).
    pub fn set_processing(&self, n: Option<u32>) {
        self.with(|s| s.processing = n);
    }

    /// A slow instance: each image uploaded from now on is processed this long after its
    /// upload (real time): `202`, then `206` to every poll until then. `None`: at once.
    pub fn set_processing_time(&self, d: Option<Duration>) {
        self.with(|s| s.processing_time = d);
    }

    pub fn set_create_mode(&self, mode: Mode) {
        self.with(|s| s.create_mode = mode);
    }

    pub fn set_upload_mode(&self, mode: Mode) {
        self.with(|s| s.upload_mode = mode);
    }

    pub fn set_read_mode(&self, mode: Read) {
        self.with(|s| s.read_mode = mode);
    }

    /// `false`: the server ignores `Idempotency-Key`, as GoToSocial does:
    /// every well-formed create makes a new status, a replay included. The
    /// setting for "exactly one post" proofs that must not lean on the key.
    pub fn set_idempotency_keys(&self, honoured: bool) {
        self.with(|s| s.keys_honoured = honoured);
    }

    pub fn set_max_characters(&self, n: usize) {
        self.with(|s| s.max_characters = n);
    }

    pub fn set_image_size_limit(&self, n: usize) {
        self.with(|s| s.image_size_limit = n);
    }

    /// The most pixels an image may have (`image_matrix_limit`).
    pub fn set_image_matrix_limit(&self, n: u64) {
        self.with(|s| s.image_matrix_limit = n);
    }

    /// The image types the instance takes (the image part of `supported_mime_types`).
    pub fn set_image_types(&self, types: &[&str]) {
        self.with(|s| s.image_types = types.iter().map(|t| (*t).to_owned()).collect());
    }

    /// Every file that reached `POST /api/v2/media` (taken or refused), in order.
    pub fn images(&self) -> Vec<Received> {
        self.with(|s| s.images.clone())
    }

    /// The images a status carries, as they were uploaded.
    pub fn images_of(&self, status: &Status) -> Vec<Received> {
        self.with(|s| {
            status
                .media_ids
                .iter()
                .filter_map(|id| s.media.get(id).map(|m| m.image.clone()))
                .collect()
        })
    }

    /// Adds a status as if it had been posted `age` ago (other statuses on the timeline).
    pub fn seed_status(&self, text: &str, age: Duration) -> String {
        self.with(|s| {
            let at = s.now_ms() - i64::try_from(age.as_millis()).unwrap_or(0);
            let id = s.next_id(at);
            s.statuses.push(Status {
                id: id.clone(),
                text: text.to_owned(),
                media_ids: vec![],
                visibility: "public".into(),
                language: None,
                created_ms: at,
                idempotency_key: None,
            });
            id
        })
    }

    /// Every `POST /api/v1/statuses` that reached the fake.
    pub fn create_requests(&self) -> u64 {
        self.with(|s| s.create_requests)
    }

    /// Creates answered with the original status for a remembered key.
    pub fn key_replays(&self) -> u64 {
        self.with(|s| s.key_replays)
    }

    /// Statuses that exist (created or seeded).
    pub fn statuses_created(&self) -> usize {
        self.with(|s| s.statuses.len())
    }

    pub fn statuses(&self) -> Vec<Status> {
        self.with(|s| s.statuses.clone())
    }

    pub fn media(&self, id: &str) -> Option<MediaItem> {
        self.with(|s| s.media.get(id).cloned())
    }

    pub fn upload_requests(&self) -> u64 {
        self.with(|s| s.upload_requests)
    }

    pub fn media_polls(&self) -> u64 {
        self.with(|s| s.media_polls)
    }

    pub fn verify_requests(&self) -> u64 {
        self.with(|s| s.verify_requests)
    }

    pub fn timeline_requests(&self) -> u64 {
        self.with(|s| s.timeline_requests)
    }

    pub fn instance_requests(&self) -> u64 {
        self.with(|s| s.instance_requests)
    }

    /// The owner authorized again: from now on only `token` is accepted, and the one before
    /// answers 401 as a revoked token does.
    pub fn renew_token(&self, token: &str) {
        self.with(|s| s.token = token.to_owned());
    }

    /// Requests refused for a missing or wrong token.
    pub fn bad_tokens(&self) -> u64 {
        self.with(|s| s.bad_tokens)
    }

    /// Every request that reached the fake.
    pub fn requests(&self) -> u64 {
        self.with(|s| s.requests)
    }

    pub fn last_create_body(&self) -> Value {
        self.with(|s| s.last_create_body.clone())
    }

    pub fn last_idempotency_key(&self) -> Option<String> {
        self.with(|s| s.last_idempotency_key.clone())
    }

    /// The most statuses that carry one text: 1 means no duplicate was created.
    pub fn max_posts_per_text(&self) -> usize {
        self.with(|s| {
            let mut counts = HashMap::new();
            for p in &s.statuses {
                *counts.entry(p.text.as_str()).or_insert(0usize) += 1;
            }
            counts.into_values().max().unwrap_or(0)
        })
    }
}

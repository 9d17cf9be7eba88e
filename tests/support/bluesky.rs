//! A Bluesky PDS fake that speaks its real wire format (AT Protocol): XRPC at
//! `/xrpc/<nsid>`, `{"error":"<Name>","message":"…"}` bodies, and the semantics exactly-once
//! depends on:
//!
//! - sessions: `createSession` with the app password, access tokens that expire (400
//!   `ExpiredToken`) on the fake's clock, `refreshSession` with the refresh token (a new pair;
//!   the old refresh token keeps working for a 2 h grace), refresh tokens that can be revoked;
//! - blobs: `uploadBlob` answers a content-addressed CID (a real CIDv1 `raw` of the bytes'
//!   SHA-256, `bafkrei…`) with the mime type sniffed from the bytes; a blob no record
//!   references vanishes after a grace period on the fake's clock, and a record naming it then
//!   gets 400 `BlobNotFound`;
//! - records: `putRecord` at a record key: the identical record (same CID) → the same uri and
//!   cid, no commit, nothing written (checked before the swap test); a different record with
//!   `"swapRecord": null` → 400 `InvalidSwap`; without `swapRecord` → overwritten (an edit);
//!   a new key → a new post. `getRecord` → the record or 400 `RecordNotFound`.
//!
//! - images: `uploadBlob` takes up to the upload cap (5 MiB, a PDS default; 413 over it); the
//!   image blob's `maxSize` (1,000,000 bytes by default, the limit every PDS takes) and its
//!   `accept` (`image/*`) are enforced when a record naming the blob is written, as a PDS
//!   does: 400 `BlobTooLarge` "This file is too large. It is 2.86MB but the maximum size is
//!   976.56KB." Every blob keeps what arrived ([`Blob::image`]); every record keeps, per image,
//!   the blob's real facts and the `aspectRatio` it sent ([`Record::images`]), which a PDS does
//!   not check: tests compare them.
//!
//! The record CID is a hash of the record's canonical JSON (sorted keys), not of its
//! DAG-CBOR encoding: it identifies content the same way, but its value differs from a real
//! PDS's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use unicode_segmentation::UnicodeSegmentation;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;

pub const HANDLE: &str = "postonce-test.bsky.social";
pub const DID: &str = "did:plc:ewvi7nxzyoun6zhxrhs64oiz";
pub const APP_PASSWORD: &str = "bsky-app-pass-SECRET3-wxyz";
pub const COLLECTION: &str = "app.bsky.feed.post";

/// PDS defaults.
pub const ACCESS_TTL: Duration = Duration::from_secs(120 * 60);
pub const REFRESH_TTL: Duration = Duration::from_secs(90 * 86_400);
pub const REFRESH_GRACE: Duration = Duration::from_secs(2 * 3600);
/// How long an unreferenced blob stays ("within minutes").
pub const BLOB_GRACE: Duration = Duration::from_secs(5 * 60);
/// The image blob's `maxSize` every PDS enforces (1,000,000 before atproto #4823, still on
/// older PDSs); [`BlueskyFake::set_max_image_bytes`] sets another (bsky.social's 2,000,000
/// since #4823).
pub const MAX_IMAGE_BYTES: u64 = 1_000_000;
/// The upload cap (PDS default).
pub const MAX_UPLOAD_BYTES: usize = 5 * 1024 * 1024;

/// How a call answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Answer this status with its XRPC error body.
    Status(u16),
    /// Answer this status `n` times, then normally.
    StatusTimes(u16, u32),
    /// 429 `RateLimitExceeded` with the `RateLimit-*` headers, resetting in `reset_in` s.
    RateLimited {
        reset_in: u64,
    },
    /// Write nothing; answer 504 `UpstreamTimeout` only after the delay.
    Hang(Duration),
    /// Do the call (write the record), then answer only after the delay.
    AcceptThenHang(Duration),
}

#[derive(Debug, Clone)]
pub struct Blob {
    pub cid: String,
    pub mime_type: String,
    pub size: u64,
    /// Fake-clock time of the last upload.
    uploaded: Duration,
    /// What arrived.
    pub image: Received,
}

/// One image of a record as the fake saw it written: the blob it names, that blob's real
/// facts, and the `aspectRatio` the record gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordImage {
    pub cid: String,
    pub image: Received,
    /// `aspectRatio` as sent: (width, height).
    pub aspect_ratio: Option<(u64, u64)>,
}

impl RecordImage {
    /// Whether the `aspectRatio` sent is the blob's real shape (`None`: none was sent).
    pub fn aspect_ratio_matches(&self) -> Option<bool> {
        self.aspect_ratio
            .map(|(w, h)| w * u64::from(self.image.height) == h * u64::from(self.image.width))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub rkey: String,
    pub uri: String,
    pub cid: String,
    pub value: Value,
    /// The record's images, as written (empty for a record another client wrote).
    pub images: Vec<RecordImage>,
}

impl Record {
    pub fn text(&self) -> &str {
        self.value.get("text").and_then(Value::as_str).unwrap_or("")
    }

    /// The text each link facet covers (its UTF-8 byte range) with the facet's `uri`: wrong
    /// offsets show as the wrong text, or as `None` when they do not fall on characters.
    pub fn faceted(&self) -> Vec<(Option<String>, String)> {
        self.features("app.bsky.richtext.facet#link", "uri")
    }

    /// The text each tag facet covers with the facet's `tag` (as [`Self::faceted`]).
    pub fn tagged(&self) -> Vec<(Option<String>, String)> {
        self.features("app.bsky.richtext.facet#tag", "tag")
    }

    /// The `$type` of every facet feature, in order.
    pub fn facet_types(&self) -> Vec<String> {
        self.facets()
            .iter()
            .flat_map(|f| {
                f.get("features")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|x| {
                x.get("$type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    }

    fn facets(&self) -> &[Value] {
        self.value
            .get("facets")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The facets whose first feature is of type `kind`: (the text covered, `field`).
    fn features(&self, kind: &str, field: &str) -> Vec<(Option<String>, String)> {
        let text = self.text();
        self.facets()
            .iter()
            .filter(|f| f.pointer("/features/0/$type").and_then(Value::as_str) == Some(kind))
            .map(|f| {
                let n = |p: &str| f.pointer(p).and_then(Value::as_u64).map(|n| n as usize);
                let covered = match (n("/index/byteStart"), n("/index/byteEnd")) {
                    (Some(s), Some(e)) => text.get(s..e).map(str::to_owned),
                    _ => None,
                };
                let value = f
                    .get("features")
                    .and_then(|fs| fs.get(0))
                    .and_then(|x| x.get(field))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                (covered, value)
            })
            .collect()
    }
}

struct RefreshToken {
    expires: Duration,
    /// When it was exchanged for a new pair; it keeps working for [`REFRESH_GRACE`].
    used: Option<Duration>,
    revoked: bool,
}

struct State {
    /// Added to the real clock: [`BlueskyFake::advance`].
    offset: Duration,
    access: HashMap<String, Duration>,
    refresh: HashMap<String, RefreshToken>,
    issued: Vec<String>,
    next: u64,
    blobs: HashMap<String, Blob>,
    /// Every body that reached `uploadBlob` (taken or refused), in order.
    uploads: Vec<Received>,
    blob_grace: Duration,
    max_image_bytes: u64,
    records: BTreeMap<String, Record>,
    posts_created: u64,
    edits: u64,
    noop_puts: u64,
    requests: u64,
    create_session_requests: u64,
    refresh_requests: u64,
    get_session_requests: u64,
    upload_requests: u64,
    put_requests: u64,
    get_requests: u64,
    token_refusals: u64,
    login_mode: Mode,
    upload_mode: Mode,
    put_mode: Mode,
    get_mode: Mode,
    last_put_body: Value,
    last_put_error: Option<String>,
    /// The app password was revoked ([`BlueskyFake::revoke_app_password`]).
    password_revoked: bool,
    /// An app password made after the first was revoked ([`BlueskyFake::grant_app_password`]).
    granted_password: Option<String>,
}

#[derive(Clone)]
pub struct BlueskyFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

fn xrpc_name(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("InvalidRequest", "Invalid request"),
        401 => ("AuthenticationRequired", "Authentication Required"),
        403 => ("Forbidden", "Forbidden"),
        404 => ("NotFound", "Not Found"),
        413 => ("PayloadTooLarge", "request entity too large"),
        429 => ("RateLimitExceeded", "Rate Limit Exceeded"),
        501 => ("MethodNotImplemented", "Method Not Implemented"),
        502 => ("UpstreamFailure", "Upstream Failure"),
        503 => ("NotEnoughResources", "Not Enough Resources"),
        504 => ("UpstreamTimeout", "Upstream Timeout"),
        _ => ("InternalServerError", "Internal Server Error"),
    }
}

fn error(status: u16, name: &str, message: &str) -> ResponseTemplate {
    json_answer(status, json!({"error": name, "message": message}))
}

fn error_status(status: u16) -> ResponseTemplate {
    let (name, message) = xrpc_name(status);
    error(status, name, message)
}

fn invalid(message: &str) -> ResponseTemplate {
    error(400, "InvalidRequest", message)
}

fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json; charset=utf-8")
        .set_body_json(body)
}

fn real_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn rate_limited(reset_in: u64) -> ResponseTemplate {
    error_status(429)
        .insert_header("ratelimit-limit", "5000")
        .insert_header("ratelimit-remaining", "0")
        // Unix seconds of the real clock: the client knows no other.
        .insert_header(
            "ratelimit-reset",
            (real_now_s() + reset_in).to_string().as_str(),
        )
        .insert_header("ratelimit-policy", "5000;w=3600")
}

/// Applies a fault mode; `None` means "answer normally".
fn fault(mode: &mut Mode) -> Option<ResponseTemplate> {
    match *mode {
        Mode::Normal | Mode::AcceptThenHang(_) => None,
        Mode::Status(s) => Some(error_status(s)),
        Mode::StatusTimes(s, n) => {
            *mode = if n <= 1 {
                Mode::Normal
            } else {
                Mode::StatusTimes(s, n - 1)
            };
            Some(error_status(s))
        }
        Mode::RateLimited { reset_in } => Some(rate_limited(reset_in)),
        Mode::Hang(d) => Some(error(504, "UpstreamTimeout", "Upstream Timeout").set_delay(d)),
    }
}

fn after(mode: Mode, answer: ResponseTemplate) -> ResponseTemplate {
    match mode {
        Mode::AcceptThenHang(d) => answer.set_delay(d),
        _ => answer,
    }
}

// ---------------------------------------------------------------------------------------------
// Content addressing, checked with this module's own code.

fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

fn cid(codec: u8, content: &[u8]) -> String {
    let mut bytes = vec![0x01, codec, 0x12, 0x20];
    bytes.extend_from_slice(&Sha256::digest(content));
    format!("b{}", base32_lower(&bytes))
}

/// The CID a blob of these bytes gets (CIDv1, `raw`, SHA-256: `bafkrei…`).
pub fn blob_cid(bytes: &[u8]) -> String {
    cid(0x55, bytes)
}

/// JSON with object keys sorted, so that equal content hashes equally.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}

/// The CID the fake gives a record (`bafyrei…`, over its canonical JSON).
pub fn record_cid(record: &Value) -> String {
    cid(0x71, canonical(record).as_bytes())
}

fn sniff(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if b.starts_with(&[0x89, b'P', b'N', b'G']) {
        Some("image/png")
    } else if b.starts_with(b"GIF8") {
        Some("image/gif")
    } else if b.len() > 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Every blob object (`{"$type":"blob","ref":{"$link":…}}`) in a value.
fn blobs_in(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(map) => {
            if map.get("$type") == Some(&json!("blob")) {
                out.push(v.clone());
            } else {
                map.values().for_each(|x| blobs_in(x, out));
            }
        }
        Value::Array(items) => items.iter().for_each(|x| blobs_in(x, out)),
        _ => {}
    }
}

fn is_tid(s: &str) -> bool {
    const ALPHABET: &str = "234567abcdefghijklmnopqrstuvwxyz";
    s.len() == 13
        && s.chars().all(|c| ALPHABET.contains(c))
        && s.starts_with(|c: char| "234567abcdefghij".contains(c))
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn is_datetime(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || b[10] != b'T'
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "Z" || (rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')))
}

/// The lexicon checks of `app.bsky.feed.post` the fake makes: `Err` is the message.
fn validate_post(r: &Value) -> Result<(), String> {
    let bad = |m: &str| Err(format!("Invalid app.bsky.feed.post record: {m}"));
    if r.get("$type").and_then(Value::as_str) != Some(COLLECTION) {
        return bad("Record/$type must be app.bsky.feed.post");
    }
    let Some(text) = r.get("text").and_then(Value::as_str) else {
        return bad("Record must have the property \"text\"");
    };
    if text.len() > 3000 {
        return bad("Record/text must not be longer than 3000 characters");
    }
    if text.graphemes(true).count() > 300 {
        return bad("Record/text must not be longer than 300 graphemes");
    }
    match r.get("createdAt").and_then(Value::as_str) {
        Some(t) if is_datetime(t) => {}
        Some(_) => return bad("Record/createdAt must be an valid atproto datetime"),
        None => return bad("Record must have the property \"createdAt\""),
    }
    if let Some(facets) = r.get("facets") {
        let Some(facets) = facets.as_array() else {
            return bad("Record/facets must be an array");
        };
        for (i, f) in facets.iter().enumerate() {
            let s = f.pointer("/index/byteStart").and_then(Value::as_u64);
            let e = f.pointer("/index/byteEnd").and_then(Value::as_u64);
            if s.is_none() || e.is_none() {
                return bad(&format!(
                    "Record/facets/{i}/index must have byteStart and byteEnd"
                ));
            }
            let features = f.get("features").and_then(Value::as_array);
            let ok = features.is_some_and(|fs| {
                fs.iter()
                    .all(|x| match x.get("$type").and_then(Value::as_str) {
                        Some("app.bsky.richtext.facet#link") => {
                            x.get("uri").and_then(Value::as_str).is_some()
                        }
                        // The lexicon: `tag` required, at most 640 bytes and 64 graphemes.
                        Some("app.bsky.richtext.facet#tag") => {
                            x.get("tag").and_then(Value::as_str).is_some_and(|t| {
                                !t.is_empty() && t.len() <= 640 && t.graphemes(true).count() <= 64
                            })
                        }
                        Some("app.bsky.richtext.facet#mention") => {
                            x.get("did").and_then(Value::as_str).is_some()
                        }
                        _ => false,
                    })
            });
            if !ok {
                return bad(&format!("Record/facets/{i}/features is invalid"));
            }
        }
    }
    if let Some(langs) = r.get("langs") {
        if langs.as_array().is_none_or(|l| l.len() > 3) {
            return bad("Record/langs must not have more than 3 elements");
        }
    }
    if let Some(embed) = r.get("embed") {
        if embed.get("$type").and_then(Value::as_str) != Some("app.bsky.embed.images") {
            return bad("Record/embed must be an app.bsky.embed.images in this fake");
        }
        let Some(images) = embed.get("images").and_then(Value::as_array) else {
            return bad("Record/embed must have the property \"images\"");
        };
        if images.is_empty() || images.len() > 4 {
            return bad("Record/embed/images must have 1 to 4 elements");
        }
        for (i, img) in images.iter().enumerate() {
            if img.get("alt").and_then(Value::as_str).is_none() {
                return bad(&format!(
                    "Record/embed/images/{i} must have the property \"alt\""
                ));
            }
            let blob = img.get("image");
            let well_formed = blob.is_some_and(|b| {
                b.get("$type") == Some(&json!("blob"))
                    && b.pointer("/ref/$link").and_then(Value::as_str).is_some()
                    && b.get("mimeType").and_then(Value::as_str).is_some()
                    && b.get("size").and_then(Value::as_u64).is_some()
            });
            if !well_formed {
                return bad(&format!(
                    "Record/embed/images/{i}/image should be a blob ref"
                ));
            }
            if let Some(ratio) = img.get("aspectRatio") {
                let dim = |k: &str| ratio.get(k).and_then(Value::as_u64).is_some_and(|n| n >= 1);
                if !(dim("width") && dim("height")) {
                    return bad(&format!("Record/embed/images/{i}/aspectRatio is invalid"));
                }
            }
        }
    }
    Ok(())
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn bearer(req: &Request) -> Option<&str> {
    header(req, "authorization").strip_prefix("Bearer ")
}

// ---------------------------------------------------------------------------------------------
// The server.

struct Api {
    state: Arc<Mutex<State>>,
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        st.collect_blobs();
        let Some(nsid) = req.url.path().strip_prefix("/xrpc/").map(str::to_owned) else {
            return error_status(404);
        };
        let method = req.method.as_str().to_owned();
        let want = match nsid.as_str() {
            "com.atproto.server.createSession"
            | "com.atproto.server.refreshSession"
            | "com.atproto.repo.uploadBlob"
            | "com.atproto.repo.putRecord" => "POST",
            "com.atproto.server.getSession" | "com.atproto.repo.getRecord" => "GET",
            _ => return error_status(501),
        };
        if method != want {
            return invalid("Incorrect HTTP method");
        }
        match nsid.as_str() {
            "com.atproto.server.createSession" => st.create_session(req),
            "com.atproto.server.refreshSession" => st.refresh_session(req),
            "com.atproto.server.getSession" => st.get_session(req),
            "com.atproto.repo.uploadBlob" => st.upload_blob(req),
            "com.atproto.repo.putRecord" => st.put_record(req),
            _ => st.get_record(req),
        }
    }
}

impl State {
    fn now(&self) -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            + self.offset
    }

    fn token(&mut self, kind: &str) -> String {
        self.next += 1;
        let t = format!(
            "bsky-{kind}-SECRET{}-{:08x}",
            if kind == "access" { 1 } else { 2 },
            self.next.wrapping_mul(0x9E37_79B9)
        );
        self.issued.push(t.clone());
        t
    }

    fn new_session(&mut self) -> Value {
        let now = self.now();
        let access = self.token("access");
        let refresh = self.token("refresh");
        self.access.insert(access.clone(), now + ACCESS_TTL);
        self.refresh.insert(
            refresh.clone(),
            RefreshToken {
                expires: now + REFRESH_TTL,
                used: None,
                revoked: false,
            },
        );
        json!({
            "accessJwt": access,
            "refreshJwt": refresh,
            "handle": HANDLE,
            "did": DID,
            "didDoc": {"@context": ["https://www.w3.org/ns/did/v1"], "id": DID, "alsoKnownAs": [format!("at://{HANDLE}")]},
            "active": true
        })
    }

    /// The access token check of an authorized call: `Some` is the refusal.
    fn authorize(&mut self, req: &Request) -> Option<ResponseTemplate> {
        let Some(token) = bearer(req) else {
            self.token_refusals += 1;
            return Some(error(401, "AuthMissing", "Authentication Required"));
        };
        let refusal = match self.access.get(token) {
            Some(&expires) if expires > self.now() => return None,
            Some(_) => error(400, "ExpiredToken", "Token has expired"),
            None if self.refresh.contains_key(token) => {
                error(400, "InvalidToken", "Bad token scope")
            }
            None => error(400, "InvalidToken", "Token could not be verified"),
        };
        self.token_refusals += 1;
        Some(refusal)
    }

    fn create_session(&mut self, req: &Request) -> ResponseTemplate {
        self.create_session_requests += 1;
        if let Some(r) = fault(&mut self.login_mode) {
            return r;
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let (Some(identifier), Some(password)) = (
            body.get("identifier").and_then(Value::as_str),
            body.get("password").and_then(Value::as_str),
        ) else {
            return invalid("Input must have the property \"identifier\" and \"password\"");
        };
        let known = identifier.eq_ignore_ascii_case(HANDLE) || identifier == DID;
        let accepted = (password == APP_PASSWORD && !self.password_revoked)
            || self.granted_password.as_deref() == Some(password);
        if !known || !accepted {
            return error(
                401,
                "AuthenticationRequired",
                "Invalid identifier or password",
            );
        }
        json_answer(200, self.new_session())
    }

    fn refresh_session(&mut self, req: &Request) -> ResponseTemplate {
        self.refresh_requests += 1;
        let now = self.now();
        let Some(token) = bearer(req).map(str::to_owned) else {
            return error(401, "AuthMissing", "Authentication Required");
        };
        if self.access.contains_key(&token) {
            return error(400, "InvalidToken", "Bad token scope");
        }
        let Some(t) = self.refresh.get_mut(&token) else {
            return error(400, "InvalidToken", "Token could not be verified");
        };
        let past_grace = t.used.is_some_and(|u| now > u + REFRESH_GRACE);
        if t.revoked || past_grace {
            return error(400, "ExpiredToken", "Token has been revoked");
        }
        if t.expires <= now {
            return error(400, "ExpiredToken", "Token has expired");
        }
        t.used.get_or_insert(now);
        json_answer(200, self.new_session())
    }

    fn get_session(&mut self, req: &Request) -> ResponseTemplate {
        self.get_session_requests += 1;
        if let Some(r) = self.authorize(req) {
            return r;
        }
        json_answer(
            200,
            json!({"handle": HANDLE, "did": DID, "active": true, "emailConfirmed": true}),
        )
    }

    /// Unreferenced blobs older than the grace period are gone.
    fn collect_blobs(&mut self) {
        let mut referenced = HashSet::new();
        for r in self.records.values() {
            let mut found = vec![];
            blobs_in(&r.value, &mut found);
            for b in found {
                if let Some(link) = b.pointer("/ref/$link").and_then(Value::as_str) {
                    referenced.insert(link.to_owned());
                }
            }
        }
        let now = self.now();
        let grace = self.blob_grace;
        self.blobs
            .retain(|cid, b| referenced.contains(cid) || now < b.uploaded + grace);
    }

    fn upload_blob(&mut self, req: &Request) -> ResponseTemplate {
        self.upload_requests += 1;
        if let Some(r) = self.authorize(req) {
            return r;
        }
        let mode = self.upload_mode;
        if let Some(r) = fault(&mut self.upload_mode) {
            return r;
        }
        if req.body.is_empty() {
            return invalid("Request body is empty");
        }
        let declared = header(req, "content-type");
        let got = Received::of(&req.body, declared);
        if req.body.len() > MAX_UPLOAD_BYTES {
            self.uploads.push(got.refused("PayloadTooLarge"));
            return error_status(413);
        }
        self.uploads.push(got.clone());
        let mime = sniff(&req.body).map(str::to_owned).unwrap_or_else(|| {
            if declared.is_empty() {
                "application/octet-stream".into()
            } else {
                declared.to_owned()
            }
        });
        let cid = blob_cid(&req.body);
        let size = req.body.len() as u64;
        let now = self.now();
        self.blobs.insert(
            cid.clone(),
            Blob {
                cid: cid.clone(),
                mime_type: mime.clone(),
                size,
                uploaded: now,
                image: got,
            },
        );
        after(
            mode,
            json_answer(
                200,
                json!({"blob": {"$type": "blob", "ref": {"$link": cid}, "mimeType": mime, "size": size}}),
            ),
        )
    }

    fn put_record(&mut self, req: &Request) -> ResponseTemplate {
        self.put_requests += 1;
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        self.last_put_body = body.clone();
        self.put_record_answer(req, &body)
    }

    fn put_record_answer(&mut self, req: &Request, body: &Value) -> ResponseTemplate {
        if let Some(r) = self.authorize(req) {
            return r;
        }
        let mode = self.put_mode;
        if let Some(r) = fault(&mut self.put_mode) {
            return r;
        }
        let refuse = |st: &mut Self, r: ResponseTemplate, what: String| {
            st.last_put_error = Some(what);
            r
        };
        if !header(req, "content-type").starts_with("application/json") {
            return invalid("Wrong request encoding (Content-Type): expected application/json");
        }
        let s = |k: &str| body.get(k).and_then(Value::as_str);
        let (Some(repo), Some(collection), Some(rkey), Some(record)) = (
            s("repo"),
            s("collection"),
            s("rkey"),
            body.get("record").filter(|r| r.is_object()),
        ) else {
            return invalid(
                "Input must have the properties \"repo\", \"collection\", \"rkey\", \"record\"",
            );
        };
        if !(repo == DID || repo.eq_ignore_ascii_case(HANDLE)) {
            return invalid(&format!("Could not find repo: {repo}"));
        }
        if collection != COLLECTION {
            return invalid(&format!("Invalid collection in this fake: {collection}"));
        }
        if !is_tid(rkey) {
            return invalid(&format!(
                "Invalid record key for app.bsky.feed.post: {rkey}"
            ));
        }
        if let Err(m) = validate_post(record) {
            return refuse(self, invalid(&m), "InvalidRequest".into());
        }
        let cid = record_cid(record);
        let uri = format!("at://{DID}/{COLLECTION}/{rkey}");
        let existing = self.records.get(rkey).map(|r| r.cid.clone());
        // The identical record: a no-op, checked before any swap test.
        if existing.as_deref() == Some(cid.as_str()) {
            self.noop_puts += 1;
            return after(
                mode,
                json_answer(
                    200,
                    json!({"uri": uri, "cid": cid, "validationStatus": "valid"}),
                ),
            );
        }
        let swap_ok = match body.get("swapRecord") {
            None => true,
            Some(Value::Null) => existing.is_none(),
            Some(Value::String(want)) => existing.as_deref() == Some(want.as_str()),
            Some(_) => return invalid("Input/swapRecord must be a cid string or null"),
        };
        if !swap_ok {
            let was = existing.unwrap_or_else(|| "null".into());
            return refuse(
                self,
                error(400, "InvalidSwap", &format!("Record was at {was}")),
                "InvalidSwap".into(),
            );
        }
        let mut refs = vec![];
        blobs_in(record, &mut refs);
        for b in refs {
            let link = b
                .pointer("/ref/$link")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some(stored) = self.blobs.get(link).cloned() else {
                return refuse(
                    self,
                    error(400, "BlobNotFound", &format!("Could not find blob: {link}")),
                    "BlobNotFound".into(),
                );
            };
            // The image blob's constraints (`maxSize`, `accept: image/*`), checked against the
            // stored blob as the PDS's `verifyBlob` does, first.
            if stored.size > self.max_image_bytes {
                return refuse(
                    self,
                    error(
                        400,
                        "BlobTooLarge",
                        &format!(
                            "This file is too large. It is {} but the maximum size is {}.",
                            pretty_size(stored.size),
                            pretty_size(self.max_image_bytes)
                        ),
                    ),
                    "BlobTooLarge".into(),
                );
            }
            if b.get("mimeType").and_then(Value::as_str) != Some(stored.mime_type.as_str()) {
                return refuse(
                    self,
                    error(
                        400,
                        "InvalidMimeType",
                        &format!(
                            "Referenced Mimetype does not match stored blob. Expected: {}",
                            stored.mime_type
                        ),
                    ),
                    "InvalidMimeType".into(),
                );
            }
            if !stored.mime_type.starts_with("image/") {
                return refuse(
                    self,
                    error(
                        400,
                        "InvalidMimeType",
                        &format!(
                            "Wrong type of file. It is {} but it must match image/*.",
                            stored.mime_type
                        ),
                    ),
                    "InvalidMimeType".into(),
                );
            }
            if b.get("size").and_then(Value::as_u64) != Some(stored.size) {
                return refuse(
                    self,
                    error(
                        400,
                        "InvalidSize",
                        "Referenced size does not match stored blob",
                    ),
                    "InvalidSize".into(),
                );
            }
        }
        let images = self.record_images(record);
        if existing.is_some() {
            self.edits += 1;
        } else {
            self.posts_created += 1;
        }
        self.records.insert(
            rkey.to_owned(),
            Record {
                rkey: rkey.to_owned(),
                uri: uri.clone(),
                cid: cid.clone(),
                value: record.clone(),
                images,
            },
        );
        self.next += 1;
        let commit = json!({"cid": cid_commit(self.next), "rev": format!("3l{:011}", self.next)});
        after(
            mode,
            json_answer(
                200,
                json!({"uri": uri, "cid": cid, "commit": commit, "validationStatus": "valid"}),
            ),
        )
    }

    fn get_record(&mut self, req: &Request) -> ResponseTemplate {
        self.get_requests += 1;
        if let Some(r) = fault(&mut self.get_mode) {
            return r;
        }
        let q: HashMap<String, String> = req.url.query_pairs().into_owned().collect();
        let (Some(repo), Some(collection), Some(rkey)) =
            (q.get("repo"), q.get("collection"), q.get("rkey"))
        else {
            return invalid("Params must have the properties \"repo\", \"collection\", \"rkey\"");
        };
        if !(repo == DID || repo.eq_ignore_ascii_case(HANDLE)) {
            return invalid(&format!("Could not find repo: {repo}"));
        }
        let uri = format!("at://{DID}/{collection}/{rkey}");
        match self
            .records
            .get(rkey.as_str())
            .filter(|_| collection == COLLECTION)
        {
            Some(r) => json_answer(200, json!({"uri": r.uri, "cid": r.cid, "value": r.value})),
            None => error(
                400,
                "RecordNotFound",
                &format!("Could not locate record: {uri}"),
            ),
        }
    }
}

impl State {
    /// The images of an `app.bsky.embed.images` record: each blob's real facts and the
    /// `aspectRatio` sent for it.
    fn record_images(&self, record: &Value) -> Vec<RecordImage> {
        let images = record
            .pointer("/embed/images")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        images
            .iter()
            .filter_map(|img| {
                let cid = img.pointer("/image/ref/$link").and_then(Value::as_str)?;
                let blob = self.blobs.get(cid)?;
                let n = |k: &str| img.pointer(k).and_then(Value::as_u64);
                Some(RecordImage {
                    cid: cid.to_owned(),
                    image: blob.image.clone(),
                    aspect_ratio: n("/aspectRatio/width").zip(n("/aspectRatio/height")),
                })
            })
            .collect()
    }
}

/// A size as the PDS's messages give it (the `bytes` package: 1024-based, up to two
/// decimals, trailing zeros dropped): `976.56KB`, `2.86MB`.
fn pretty_size(n: u64) -> String {
    let units = [("GB", 1u64 << 30), ("MB", 1 << 20), ("KB", 1 << 10)];
    for (unit, size) in units {
        if n >= size {
            let v = format!("{:.2}", n as f64 / size as f64);
            let v = v.trim_end_matches('0').trim_end_matches('.');
            return format!("{v}{unit}");
        }
    }
    format!("{n}B")
}

fn cid_commit(n: u64) -> String {
    cid(0x71, format!("commit-{n}").as_bytes())
}

impl BlueskyFake {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State {
            offset: Duration::ZERO,
            access: HashMap::new(),
            refresh: HashMap::new(),
            issued: vec![],
            next: 0,
            blobs: HashMap::new(),
            uploads: Vec::new(),
            blob_grace: BLOB_GRACE,
            max_image_bytes: MAX_IMAGE_BYTES,
            records: BTreeMap::new(),
            posts_created: 0,
            edits: 0,
            noop_puts: 0,
            requests: 0,
            create_session_requests: 0,
            refresh_requests: 0,
            get_session_requests: 0,
            upload_requests: 0,
            put_requests: 0,
            get_requests: 0,
            token_refusals: 0,
            login_mode: Mode::Normal,
            upload_mode: Mode::Normal,
            put_mode: Mode::Normal,
            get_mode: Mode::Normal,
            last_put_body: Value::Null,
            last_put_error: None,
            password_revoked: false,
            granted_password: None,
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

    /// Moves the fake's clock (token expiry, blob collection).
    pub fn advance(&self, d: Duration) {
        self.with(|s| s.offset += d);
    }

    /// Every access token issued so far has expired.
    pub fn expire_sessions(&self) {
        self.with(|s| {
            let now = s.now();
            for e in s.access.values_mut() {
                *e = now;
            }
        });
    }

    /// Every refresh token issued so far is revoked (answers 400 `ExpiredToken`).
    pub fn revoke_refresh_tokens(&self) {
        self.with(|s| s.refresh.values_mut().for_each(|t| t.revoked = true));
    }

    /// The owner made a new app password: `createSession` accepts it.
    pub fn grant_app_password(&self, password: &str) {
        self.with(|s| s.granted_password = Some(password.to_owned()));
    }

    /// The owner revoked the app password (Settings → App passwords): `createSession` with it
    /// answers 401 `AuthenticationRequired` "Invalid identifier or password", and the sessions
    /// made with it are gone (every access token expired, every refresh token revoked).
    pub fn revoke_app_password(&self) {
        self.expire_sessions();
        self.revoke_refresh_tokens();
        self.with(|s| s.password_revoked = true);
    }

    pub fn set_blob_grace(&self, d: Duration) {
        self.with(|s| s.blob_grace = d);
    }

    /// The image blob `maxSize` enforced when a record is written (default
    /// [`MAX_IMAGE_BYTES`]).
    pub fn set_max_image_bytes(&self, max: u64) {
        self.with(|s| s.max_image_bytes = max);
    }

    /// Another client writes `value` at `rkey` (overwriting whatever is there): someone else's
    /// record at the key. Not counted as a post, an edit or a request.
    pub fn write_record(&self, rkey: &str, value: Value) {
        self.with(|s| {
            let cid = record_cid(&value);
            let uri = format!("at://{DID}/{COLLECTION}/{rkey}");
            s.records.insert(
                rkey.to_owned(),
                Record {
                    rkey: rkey.to_owned(),
                    uri,
                    cid,
                    value,
                    images: vec![],
                },
            );
        });
    }

    pub fn set_login_mode(&self, mode: Mode) {
        self.with(|s| s.login_mode = mode);
    }

    pub fn set_upload_mode(&self, mode: Mode) {
        self.with(|s| s.upload_mode = mode);
    }

    pub fn set_put_mode(&self, mode: Mode) {
        self.with(|s| s.put_mode = mode);
    }

    pub fn set_get_mode(&self, mode: Mode) {
        self.with(|s| s.get_mode = mode);
    }

    /// Whether the blob is still stored (after collecting unreferenced ones).
    pub fn has_blob(&self, cid: &str) -> bool {
        self.with(|s| {
            s.collect_blobs();
            s.blobs.contains_key(cid)
        })
    }

    pub fn blob(&self, cid: &str) -> Option<Blob> {
        self.with(|s| {
            s.collect_blobs();
            s.blobs.get(cid).cloned()
        })
    }

    /// Every body that reached `uploadBlob` (taken or refused), in order.
    pub fn uploads(&self) -> Vec<Received> {
        self.with(|s| s.uploads.clone())
    }

    pub fn record(&self, rkey: &str) -> Option<Record> {
        self.with(|s| s.records.get(rkey).cloned())
    }

    pub fn records(&self) -> Vec<Record> {
        self.with(|s| s.records.values().cloned().collect())
    }

    /// Records written at a new key.
    pub fn posts_created(&self) -> u64 {
        self.with(|s| s.posts_created)
    }

    /// Records overwritten at an existing key (a put without `swapRecord`).
    pub fn edits(&self) -> u64 {
        self.with(|s| s.edits)
    }

    /// Puts answered as the identical record already there.
    pub fn noop_puts(&self) -> u64 {
        self.with(|s| s.noop_puts)
    }

    pub fn put_requests(&self) -> u64 {
        self.with(|s| s.put_requests)
    }

    pub fn upload_requests(&self) -> u64 {
        self.with(|s| s.upload_requests)
    }

    pub fn get_requests(&self) -> u64 {
        self.with(|s| s.get_requests)
    }

    pub fn create_session_requests(&self) -> u64 {
        self.with(|s| s.create_session_requests)
    }

    pub fn refresh_requests(&self) -> u64 {
        self.with(|s| s.refresh_requests)
    }

    pub fn get_session_requests(&self) -> u64 {
        self.with(|s| s.get_session_requests)
    }

    /// Calls refused for their access token (expired, unknown, missing).
    pub fn token_refusals(&self) -> u64 {
        self.with(|s| s.token_refusals)
    }

    /// Every request that reached the fake.
    pub fn requests(&self) -> u64 {
        self.with(|s| s.requests)
    }

    pub fn last_put_body(&self) -> Value {
        self.with(|s| s.last_put_body.clone())
    }

    /// The XRPC error name of the last refused put (`InvalidSwap`, `BlobNotFound`, …).
    pub fn last_put_error(&self) -> Option<String> {
        self.with(|s| s.last_put_error.clone())
    }

    /// Every access and refresh token the fake issued, to look for in logs and errors.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.with(|s| s.issued.clone())
    }

    /// The most records that carry one text: 1 means no duplicate was created.
    pub fn max_posts_per_text(&self) -> usize {
        self.with(|s| {
            let mut counts = HashMap::new();
            for r in s.records.values() {
                *counts.entry(r.text().to_owned()).or_insert(0usize) += 1;
            }
            counts.into_values().max().unwrap_or(0)
        })
    }
}

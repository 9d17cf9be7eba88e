//! The Bluesky adapter (AT Protocol XRPC on the account's PDS; wire facts in API-NOTES.md
//! "Bluesky / AT Protocol"): an app-password session kept for the process, the image blob
//! upload, the `app.bsky.feed.post` record written with `com.atproto.repo.putRecord` at a
//! record key the client chooses, and `getRecord` to tell whether the post exists. Holds no
//! policy: the pipeline decides.
//!
//! Exactly-once comes from the network here ([`Capabilities::client_chosen_id`]): the record
//! key (a TID) and the exact record (with its `createdAt`) are chosen by [`NetworkAdapter::prepare`]
//! and stored by the pipeline before the first call. A `putRecord` of byte-identical content at
//! that key is a no-op answering the same uri and cid, and `"swapRecord": null` makes the PDS
//! refuse (400 `InvalidSwap`) rather than overwrite a different record. So replaying the stored
//! request is safe at any time, a day later included. [`BlueskyDryRun`] is the variant without
//! credentials.

pub mod config;

pub use config::DEFINITION;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::Mutex;
use unicode_segmentation::UnicodeSegmentation;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::networks::show::{show, ShownBody};
use crate::networks::{
    SessionStore, Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::vars::Secret;

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "Bluesky";
/// `BLUESKY_PDS_URL`'s default.
pub const DEFAULT_PDS: &str = "https://bsky.social";
/// The post text limit, in graphemes (`app.bsky.feed.post` `maxGraphemes`).
pub const MAX_TEXT: usize = 300;
/// The post text limit in UTF-8 bytes (`maxLength`), the second limit the lexicon sets.
pub const MAX_TEXT_BYTES: usize = 3000;
/// The largest image blob sent, in bytes. The lexicon's image `maxSize` was 1,000,000 before
/// atproto #4823 (2,000,000 since), and older PDSs (the `@atproto/pds` 0.5.35 tried, many
/// self-hosted ones) still refuse more, and only at `putRecord`, after the upload. A larger
/// image is refused before any call.
pub const MAX_IMAGE_BLOB_BYTES: usize = 1_000_000;
/// The collection posts are written to.
pub const COLLECTION: &str = "app.bsky.feed.post";
/// What marks an id the dry run made up.
pub const DRY_RUN_MARK: &str = "dryrun-";

/// The public URL of a post (web-app convention; the DID form survives handle changes).
pub fn post_url(authority: &str, rkey: &str) -> String {
    format!("https://bsky.app/profile/{authority}/post/{rkey}")
}

/// The text's length in extended grapheme clusters (an emoji family, a flag, `e` with a
/// combining accent each count 1), as the lexicon counts `maxGraphemes`.
pub fn grapheme_len(text: &str) -> usize {
    text.graphemes(true).count()
}

/// The length [`NetworkAdapter::text_len`] answers: graphemes; a text over
/// [`MAX_TEXT_BYTES`] UTF-8 bytes (possible within 300 graphemes when they are long emoji
/// sequences) counts as at least `MAX_TEXT + 1`, because the network refuses it too.
pub fn text_len(text: &str) -> usize {
    let graphemes = grapheme_len(text);
    if text.len() > MAX_TEXT_BYTES {
        graphemes.max(MAX_TEXT + 1)
    } else {
        graphemes
    }
}

fn capabilities() -> Capabilities {
    Capabilities {
        idempotency: Idempotency::ClientChosenId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::Graphemes,
        },
        images: ImageLimits {
            formats: &["image/jpeg", "image/png", "image/webp"],
            max_bytes: MAX_IMAGE_BLOB_BYTES as u64,
            max_pixels: None,
        },
        links: Links::Facets,
        ..Capabilities::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Record keys and times.

const BASE32_SORTABLE: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";

/// A TID: the 64-bit value (top bit 0, 53 bits of microseconds since the Unix epoch, a 10-bit
/// clock id) in 13 characters of base32-sortable, most significant first.
pub fn tid(micros: u64, clock_id: u16) -> String {
    let mut v = ((micros & ((1 << 53) - 1)) << 10) | u64::from(clock_id & 0x3FF);
    let mut out = [0u8; 13];
    for c in out.iter_mut().rev() {
        *c = BASE32_SORTABLE[(v & 31) as usize];
        v >>= 5;
    }
    out.iter().map(|&b| char::from(b)).collect()
}

/// Whether `s` has a TID's syntax.
pub fn is_tid(s: &str) -> bool {
    s.len() == 13
        && s.bytes().all(|b| BASE32_SORTABLE.contains(&b))
        && s.as_bytes()
            .first()
            .is_some_and(|b| b"234567abcdefghij".contains(b))
}

/// Microseconds since the epoch, strictly increasing within the process (two posts prepared
/// in the same microsecond still get different keys).
fn now_micros() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let prev = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(now);
    now.max(prev + 1)
}

/// RFC 3339 UTC with milliseconds (`2026-12-03T10:00:00.000Z`).
pub fn created_at(micros: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

// ---------------------------------------------------------------------------------------------
// Links and the record.

/// A link in a post's text: UTF-8 byte offsets (start inclusive, end exclusive) and the URI
/// its facet points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub start: usize,
    pub end: usize,
    pub uri: String,
}

const GENERIC_TLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "edu", "gov", "io", "co", "me", "app", "dev", "page",
    "blog", "xyz", "online", "site", "tech", "store", "shop", "news", "club", "link", "live",
    "cloud", "art", "design", "studio", "social", "email", "website", "space", "ai",
];

/// The links in `text`: every `http://` / `https://` URL, and bare domains (`example.com/p`)
/// with a common generic top-level domain, or a two-letter country domain followed by a path.
/// A URL ends at whitespace, less trailing sentence punctuation and an unbalanced closing
/// bracket. A bare domain's facet points to `https://` + the text.
pub fn links(text: &str) -> Vec<Link> {
    let mut out = vec![];
    let mut prev: Option<char> = None;
    let mut skip_to = 0;
    for (i, c) in text.char_indices() {
        if i >= skip_to {
            let boundary = prev.is_none_or(|p| {
                !(p.is_alphanumeric() || matches!(p, '@' | '$' | '#' | '.' | '/' | '-' | '_' | ':'))
            });
            if boundary {
                if let Some(link) = link_at(text, i) {
                    skip_to = link.end;
                    out.push(link);
                }
            }
        }
        prev = Some(c);
    }
    out
}

fn link_at(text: &str, i: usize) -> Option<Link> {
    let rest = &text[i..];
    let starts = |p: &str| {
        rest.get(..p.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(p))
    };
    let scheme = if starts("https://") {
        8
    } else if starts("http://") {
        7
    } else {
        0
    };
    let host_start = i + scheme;
    let host_len: usize = text[host_start..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '.'))
        .map(char::len_utf8)
        .sum();
    let host = text[host_start..host_start + host_len].trim_end_matches('.');
    let host_end = host_start + host.len();
    let labels: Vec<&str> = host.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    if labels.len() < 2
        || labels.iter().any(|l| l.is_empty())
        || tld.chars().count() < 2
        || !tld.chars().all(char::is_alphabetic)
    {
        return None;
    }
    let mut end = host_end;
    if text[end..].starts_with(':') {
        let digits = text[end + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        if digits > 0 {
            end += 1 + digits;
        }
    }
    let has_path = text[end..].starts_with(['/', '?', '#']);
    if scheme == 0 {
        let tld = tld.to_ascii_lowercase();
        let generic = GENERIC_TLDS.contains(&tld.as_str());
        let country = tld.len() == 2 && tld.bytes().all(|b| b.is_ascii_lowercase());
        if !(generic || (country && has_path)) {
            return None;
        }
    }
    if has_path {
        end += text[end..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .map(char::len_utf8)
            .sum::<usize>();
        // Trailing punctuation belongs to the sentence; a closing bracket to the text around
        // the URL unless the URL opened one.
        while let Some(c) = text[host_end..end].chars().last() {
            let url = &text[host_end..end];
            let count = |b: char| url.matches(b).count();
            let unbalanced = match c {
                ')' => count('(') < count(')'),
                ']' => count('[') < count(']'),
                _ => false,
            };
            if matches!(c, '.' | ',' | ':' | ';' | '!' | '?' | '\'' | '"') || unbalanced {
                end -= c.len_utf8();
            } else {
                break;
            }
        }
    }
    let shown = &text[i..end];
    let uri = if scheme == 0 {
        format!("https://{shown}")
    } else {
        shown.to_owned()
    };
    Some(Link { start: i, end, uri })
}

/// A `#tag` in a post's text: UTF-8 byte offsets of `#tag` (the `#` included, start
/// inclusive, end exclusive) and the tag without its `#`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub start: usize,
    pub end: usize,
    pub tag: String,
}

/// The most graphemes a tag may have (`app.bsky.richtext.facet#tag`, `maxGraphemes`).
pub const MAX_TAG_GRAPHEMES: usize = 64;
/// The most UTF-8 bytes a tag may have (`maxLength`).
pub const MAX_TAG_BYTES: usize = 640;

/// Whitespace as JavaScript's `\s` counts it (the official clients' regular expressions).
fn js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// The invisible characters that end a tag in the official clients (soft hyphen, word
/// joiner, hair space, zero-width space / non-joiner / joiner, combining enclosing keycap).
fn zero_width(c: char) -> bool {
    matches!(
        c,
        '\u{ad}' | '\u{2060}' | '\u{200a}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{20e2}'
    )
}

/// Unicode punctuation (general category P*), JavaScript's `\p{P}`.
fn punctuation(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    matches!(
        get_general_category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// The `#tags` in `text`, by the rules of the official clients (`@atproto/api`'s
/// `detectFacets`): `#` (or the full-width `＃`) at the start or after whitespace, then
/// everything up to the next whitespace or invisible separator, less trailing punctuation.
/// A tag that is only digits and punctuation (`#2024`, `#1.5`), empty, over
/// [`MAX_TAG_GRAPHEMES`] graphemes or [`MAX_TAG_BYTES`] bytes, or that starts with the emoji
/// variation selector (`#️⃣`) is none. Inner punctuation stays (`#c++`, `#foo.bar`).
pub fn tags(text: &str) -> Vec<Tag> {
    let mut out = vec![];
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        let after_space = prev.is_none_or(js_space);
        prev = Some(c);
        if !(matches!(c, '#' | '＃') && after_space) {
            continue;
        }
        let body_start = i + c.len_utf8();
        let rest = &text[body_start..];
        if rest.starts_with('\u{fe0f}') {
            continue;
        }
        let body_len: usize = rest
            .chars()
            .take_while(|&c| !js_space(c) && !zero_width(c))
            .map(char::len_utf8)
            .sum();
        let body = &rest[..body_len];
        if !body.chars().any(|c| !c.is_ascii_digit() && !punctuation(c)) {
            continue;
        }
        let tag = body.trim_end_matches(punctuation);
        if tag.is_empty() || tag.len() > MAX_TAG_BYTES || grapheme_len(tag) > MAX_TAG_GRAPHEMES {
            continue;
        }
        out.push(Tag {
            start: i,
            end: body_start + tag.len(),
            tag: tag.to_owned(),
        });
    }
    out
}

/// The facets of `text`, in the order of their start: its links
/// (`app.bsky.richtext.facet#link`) and its tags (`#tag`), UTF-8 byte offsets. A pure
/// function of the text, so the record built from it is the same every time. Mentions get no
/// facet: a `#mention` needs the account's DID, and handles are not resolved, so an `@handle`
/// stays text.
pub fn facets(text: &str) -> Vec<Value> {
    let links = links(text).into_iter().map(|l| {
        (
            l.start,
            json!({
                "index": {"byteStart": l.start, "byteEnd": l.end},
                "features": [{"$type": "app.bsky.richtext.facet#link", "uri": l.uri}]
            }),
        )
    });
    let tags = tags(text).into_iter().map(|t| {
        (
            t.start,
            json!({
                "index": {"byteStart": t.start, "byteEnd": t.end},
                "features": [{"$type": "app.bsky.richtext.facet#tag", "tag": t.tag}]
            }),
        )
    });
    let mut all: Vec<(usize, Value)> = links.chain(tags).collect();
    all.sort_by_key(|(start, _)| *start);
    all.into_iter().map(|(_, f)| f).collect()
}

/// The `app.bsky.embed.images` embed for an uploaded image ([`MediaRef`] as
/// [`NetworkAdapter::upload`] builds it: `blob`, `alt`, `aspectRatio`). `None` for no image
/// (`MediaRef(Value::Null)`). A reference of another shape is put in as the image, so the PDS
/// refuses it rather than the image being dropped silently.
pub fn images_embed(media: &MediaRef) -> Option<Value> {
    if media.0.is_null() {
        return None;
    }
    let blob = media.0.get("blob").unwrap_or(&media.0);
    let alt = media.0.get("alt").and_then(Value::as_str).unwrap_or("");
    let mut image = json!({"alt": alt, "image": blob});
    if let Some(ratio) = media.0.get("aspectRatio").filter(|r| r.is_object()) {
        image["aspectRatio"] = ratio.clone();
    }
    Some(json!({"$type": "app.bsky.embed.images", "images": [image]}))
}

/// The `app.bsky.feed.post` record.
pub fn post_record(text: &str, created_at: &str, media: &MediaRef, langs: &[String]) -> Value {
    let mut record = json!({"$type": COLLECTION, "text": text, "createdAt": created_at});
    let facets = facets(text);
    if !facets.is_empty() {
        record["facets"] = Value::Array(facets);
    }
    if let Some(embed) = images_embed(media) {
        record["embed"] = embed;
    }
    if !langs.is_empty() {
        record["langs"] = json!(langs);
    }
    record
}

/// The `com.atproto.repo.putRecord` input: `repo` as configured (a handle or DID; the adapter
/// sends the session's DID for it), the record key, the record, and `"swapRecord": null`.
pub fn put_record_body(repo: &str, rkey: &str, record: Value) -> Value {
    json!({
        "repo": repo,
        "collection": COLLECTION,
        "rkey": rkey,
        "record": record,
        "swapRecord": null
    })
}

fn prepared(repo: &str, text: &str, media: &MediaRef, langs: &[String]) -> PreparedPost {
    let micros = now_micros();
    let rkey = tid(micros, rand::random::<u16>() & 0x3FF);
    let record = post_record(text, &created_at(micros), media, langs);
    PreparedPost {
        body: put_record_body(repo, &rkey, record),
        text: text.to_owned(),
        key: Some(rkey),
    }
}

/// The image a prepared record embeds (its blob object), if any.
fn record_blob(body: &Value) -> Option<&Value> {
    body.pointer("/record/embed/images/0/image")
}

fn blob_link(blob: &Value) -> Option<&str> {
    blob.pointer("/ref/$link").and_then(Value::as_str)
}

fn same_blob(a: &Value, b: &Value) -> bool {
    blob_link(a).is_some()
        && blob_link(a) == blob_link(b)
        && a.get("mimeType") == b.get("mimeType")
        && a.get("size") == b.get("size")
}

/// The record key and collection of a prepared `putRecord` body.
fn address(post: &PreparedPost) -> Result<(String, String), PostError> {
    let rkey = post.body.get("rkey").and_then(Value::as_str);
    let collection = post.body.get("collection").and_then(Value::as_str);
    match (rkey, collection) {
        (Some(rkey), Some(collection))
            if post.key.as_deref().is_none_or(|k| k == rkey) && post.body.get("record").is_some() =>
        {
            Ok((rkey.to_owned(), collection.to_owned()))
        }
        _ => Err(local_refusal(
            "the prepared post is not a putRecord body with its record key (was it prepared by another network's adapter?)",
        )),
    }
}

fn local_refusal(message: &str) -> PostError {
    PostError::Rejected {
        network: NETWORK,
        status: 0,
        message: message.to_owned(),
    }
}

/// `1000000` → `1,000,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An image over [`MAX_IMAGE_BLOB_BYTES`] is refused here, before any call.
fn check_blob_size(media: &Media) -> Result<(), PostError> {
    let size = media.bytes.len();
    if size <= MAX_IMAGE_BLOB_BYTES {
        return Ok(());
    }
    Err(local_refusal(&format!(
        "the image is {} bytes, over the PDS's image blob limit of {} bytes; nothing was sent to Bluesky. Use a smaller image",
        thousands(size),
        thousands(MAX_IMAGE_BLOB_BYTES)
    )))
}

/// The CID the PDS gives a blob of `bytes` (CIDv1, `raw` codec, SHA-256, base32: `bafkrei…`).
fn blob_cid(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut raw = vec![0x01, 0x55, 0x12, 0x20];
    raw.extend_from_slice(&Sha256::digest(bytes));
    let mut out = String::from("b");
    let (mut buffer, mut bits) = (0u32, 0u32);
    for b in raw {
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

/// Whether `blob` (a record's blob object) is the blob of `bytes`: same CID and size.
fn is_blob_of(blob: &Value, bytes: &[u8]) -> bool {
    blob_link(blob) == Some(blob_cid(bytes).as_str())
        && blob.get("size").and_then(Value::as_u64) == u64::try_from(bytes.len()).ok()
}

/// How long after an upload its blob is taken to be there for the create of the same attempt:
/// well inside the time a PDS keeps a blob no record references ("minutes").
const FRESH_FOR: Duration = Duration::from_secs(60);

/// The record keys prepared in this process just after their image was uploaded, and when.
/// The attempt's create that follows need not upload the image again; a replay (a later
/// attempt, or any second create of the key) does, because the PDS collects blobs no record
/// references.
#[derive(Debug, Default)]
struct FreshUploads(std::sync::Mutex<HashMap<String, Instant>>);

impl FreshUploads {
    fn mark(&self, post: &PreparedPost) {
        if record_blob(&post.body).is_none() {
            return;
        }
        if let Some(rkey) = &post.key {
            let mut fresh = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            fresh.retain(|_, at| at.elapsed() < FRESH_FOR);
            fresh.insert(rkey.clone(), Instant::now());
        }
    }

    /// Whether `rkey` was prepared just after its upload, recently enough; forgets it either
    /// way (only the first create may skip the upload).
    fn take(&self, rkey: &str) -> bool {
        let mut fresh = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        fresh
            .remove(rkey)
            .is_some_and(|at| at.elapsed() < FRESH_FOR)
    }
}

/// `at://<authority>/<collection>/<rkey>` → authority.
fn uri_authority(uri: &str) -> Option<&str> {
    uri.strip_prefix("at://")?.split('/').next()
}

// ---------------------------------------------------------------------------------------------
// The adapter.

/// The account's session: tokens kept only here, never logged or shown.
#[derive(Clone)]
struct Session {
    access: Secret,
    refresh: Secret,
    did: String,
    handle: String,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("did", &self.did)
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// Which call an answer belongs to: the same answer means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `com.atproto.server.createSession`.
    Login,
    /// `com.atproto.server.refreshSession`.
    Refresh,
    Upload,
    /// `com.atproto.repo.putRecord`: the create.
    Put,
    /// `com.atproto.repo.getRecord`.
    Get,
    /// `com.atproto.server.getSession` as the doctor's check.
    Check,
}

/// What `putRecord` answered: the record's at-uri and cid, the public URL, and whether the
/// PDS wrote anything (`false`: the identical record was already there, a no-op).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutAnswer {
    pub uri: String,
    /// `None` only if a 2xx came without one (the record exists all the same).
    pub cid: Option<String>,
    pub url: String,
    pub wrote: bool,
}

impl PutAnswer {
    pub fn created(&self) -> Created {
        Created {
            id: Some(self.uri.clone()),
            url: Some(self.url.clone()),
            cid: self.cid.clone(),
        }
    }
}

/// The name the session is kept under in the record store ([`SessionStore::save_secret`]).
pub const SESSION_NAME: &str = "bluesky";

/// Publishes to Bluesky through the account's PDS, logged in with an app password.
pub struct BlueskyAdapter {
    http: reqwest::Client,
    pds: String,
    identifier: String,
    password: Secret,
    session: Mutex<Option<Session>>,
    langs: Vec<String>,
    /// Where the session is kept between processes, and each call's budget there.
    store: Option<(Arc<dyn SessionStore>, Duration)>,
    fresh: FreshUploads,
}

/// What ties a kept session to the app password it was made with (a digest, kept only inside
/// the session blob, itself a secret): a changed `BLUESKY_APP_PASSWORD` logs in afresh, so a
/// wrong one is found at once (doctor included) instead of at the next refresh.
fn password_digest(identifier: &str, password: &Secret) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"postonce/bluesky/session/v1\n");
    h.update(identifier.to_ascii_lowercase().as_bytes());
    h.update(b"\n");
    h.update(password.expose().as_bytes());
    hex::encode(h.finalize())
}

/// The kept form of a session: the PDS, identifier and app password it belongs to, and its
/// tokens.
fn session_blob(pds: &str, identifier: &str, password: &Secret, s: &Session) -> Secret {
    Secret::new(
        json!({
            "v": 1,
            "pds": pds,
            "identifier": identifier,
            "password_sha256": password_digest(identifier, password),
            "did": s.did,
            "handle": s.handle,
            "accessJwt": s.access.expose(),
            "refreshJwt": s.refresh.expose(),
        })
        .to_string(),
    )
}

/// A kept session, if it is one of this PDS, identifier and app password.
fn session_from_blob(
    pds: &str,
    identifier: &str,
    password: &Secret,
    blob: &Secret,
) -> Option<Session> {
    let v: Value = serde_json::from_str(blob.expose()).ok()?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    if text("pds")? != pds
        || !text("identifier")?.eq_ignore_ascii_case(identifier)
        || text("password_sha256")? != password_digest(identifier, password)
    {
        return None;
    }
    Some(Session {
        access: Secret::new(text("accessJwt")?),
        refresh: Secret::new(text("refreshJwt")?),
        did: text("did")?.to_owned(),
        handle: text("handle").or(text("did"))?.to_owned(),
    })
}

impl fmt::Debug for BlueskyAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = self
            .session
            .try_lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| format!("@{} ({})", s.handle, s.did)));
        f.debug_struct("BlueskyAdapter")
            .field("pds", &self.pds)
            .field("identifier", &self.identifier)
            .field("app_password", &self.password)
            .field("session", &session)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum Body {
    None,
    Json(Value),
    Bytes(Bytes, &'static str),
}

/// A non-streamed answer.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn error_name(&self) -> String {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default()
    }

    /// The access token was refused: expired (400 `ExpiredToken`), not verifiable (400
    /// `InvalidToken`) or any 401.
    fn token_refused(&self) -> bool {
        self.status == 401
            || (self.status == 400
                && matches!(self.error_name().as_str(), "ExpiredToken" | "InvalidToken"))
    }

    /// The 2xx answer's JSON, or the answer described as a [`PostError`].
    fn json(self, op: Op) -> Result<Value, PostError> {
        if (200..300).contains(&self.status) {
            return serde_json::from_str(&self.body).map_err(|_| PostError::InDoubt {
                network: NETWORK,
                message: format!(
                    "Bluesky answered {} with a body that is not JSON",
                    self.status
                ),
            });
        }
        Err(classify(op, self.status, &self.headers, &self.body))
    }
}

async fn read(resp: reqwest::Response) -> Result<Answer, PostError> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.map_err(|e| transport(&e))?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

impl BlueskyAdapter {
    /// `pds_url` is the account's PDS (`https://bsky.social`, `BLUESKY_PDS_URL`);
    /// `identifier` the handle or DID (`BLUESKY_IDENTIFIER`); `http` the process's shared
    /// client ([`crate::app::http_client`]).
    pub fn new(
        http: reqwest::Client,
        pds_url: &str,
        identifier: &str,
        app_password: Secret,
    ) -> Self {
        Self {
            http,
            pds: pds_url.trim_end_matches('/').to_owned(),
            identifier: identifier.trim().trim_start_matches('@').to_owned(),
            password: app_password,
            session: Mutex::new(None),
            langs: vec![],
            store: None,
            fresh: FreshUploads::default(),
        }
    }

    /// Keeps the session in `store` (under [`SESSION_NAME`]), each store call bounded by
    /// `budget`: a new process reuses it, refreshing it when its access token has expired,
    /// and logs in (`createSession`, limited to 30 per 5 minutes per account and IP) only when
    /// there is none or it cannot be refreshed. The tokens are stored nowhere else.
    #[must_use]
    pub fn with_session_store(mut self, store: Arc<dyn SessionStore>, budget: Duration) -> Self {
        self.store = Some((store, budget));
        self
    }

    /// The session kept in the store, if any (and usable for this PDS and identifier).
    async fn kept_session(&self) -> Option<Session> {
        let (store, budget) = self.store.as_ref()?;
        match tokio::time::timeout(*budget, store.load_secret(SESSION_NAME)).await {
            Ok(Ok(Some(blob))) => {
                let s = session_from_blob(&self.pds, &self.identifier, &self.password, &blob);
                if s.is_none() {
                    tracing::info!(
                        "Bluesky: the kept session is for another PDS or account; logging in"
                    );
                }
                s
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "Bluesky: could not read the kept session; logging in");
                None
            }
            Err(_) => {
                tracing::warn!("Bluesky: reading the kept session took too long; logging in");
                None
            }
        }
    }

    /// Keeps `s` in the store for the next process (a failure is logged: the next process
    /// logs in again).
    async fn keep_session(&self, s: &Session) {
        let Some((store, budget)) = self.store.as_ref() else {
            return;
        };
        let blob = session_blob(&self.pds, &self.identifier, &self.password, s);
        match tokio::time::timeout(*budget, store.save_secret(SESSION_NAME, &blob)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "Bluesky: could not keep the session"),
            Err(_) => tracing::warn!("Bluesky: keeping the session took too long"),
        }
    }

    /// The record's `langs` (BCP-47 tags, at most 3 are kept). Default: none.
    #[must_use]
    pub fn with_langs(mut self, langs: Vec<String>) -> Self {
        self.langs = langs.into_iter().take(3).collect();
        self
    }

    async fn xrpc(
        &self,
        method: Method,
        nsid: &str,
        query: &[(&str, &str)],
        bearer: Option<&Secret>,
        body: Body,
    ) -> Result<Answer, PostError> {
        let url = format!("{}/xrpc/{nsid}", self.pds);
        let mut req = self.http.request(method, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(token) = bearer {
            req = req.header(AUTHORIZATION, format!("Bearer {}", token.expose()));
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req.json(&v),
            Body::Bytes(b, content_type) => req.header(CONTENT_TYPE, content_type).body(b),
        };
        read(req.send().await.map_err(|e| transport(&e))?).await
    }

    /// `createSession` with the app password.
    async fn login(&self) -> Result<Session, PostError> {
        let body = json!({"identifier": self.identifier, "password": self.password.expose()});
        let answer = self
            .xrpc(
                Method::POST,
                "com.atproto.server.createSession",
                &[],
                None,
                Body::Json(body),
            )
            .await?;
        let session = session_from(&answer.json(Op::Login)?)?;
        tracing::info!(did = %session.did, handle = %session.handle, "Bluesky: logged in with the app password");
        Ok(session)
    }

    /// `refreshSession` with the refresh token.
    async fn refresh(&self, stale: &Session) -> Result<Session, PostError> {
        let answer = self
            .xrpc(
                Method::POST,
                "com.atproto.server.refreshSession",
                &[],
                Some(&stale.refresh),
                Body::None,
            )
            .await?;
        session_from(&answer.json(Op::Refresh)?)
    }

    /// The process's session: the one it has, else the kept one (refreshed when a call finds
    /// its access token expired), else a new login (kept for the next process).
    async fn session(&self) -> Result<Session, PostError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        if let Some(s) = self.kept_session().await {
            tracing::info!(did = %s.did, "Bluesky: reusing the kept session");
            *guard = Some(s.clone());
            return Ok(s);
        }
        let s = self.login().await?;
        self.keep_session(&s).await;
        *guard = Some(s.clone());
        Ok(s)
    }

    /// A new session after `stale`'s access token was refused: refreshed with its refresh
    /// token, or, when that is refused too, logged in again. A caller that finds the session
    /// already renewed by another uses that one.
    async fn renew(&self, stale: &Session) -> Result<Session, PostError> {
        let mut guard = self.session.lock().await;
        if let Some(current) = guard.as_ref() {
            if current.access != stale.access {
                return Ok(current.clone());
            }
        }
        let fresh = match self.refresh(stale).await {
            Ok(s) => {
                tracing::info!("Bluesky: the access token had expired; the session was refreshed");
                s
            }
            Err(PostError::Rejected { message, .. }) => {
                tracing::info!(
                    "Bluesky: the session could not be refreshed ({message}); logging in again"
                );
                self.login().await?
            }
            Err(e) => return Err(e),
        };
        self.keep_session(&fresh).await;
        *guard = Some(fresh.clone());
        Ok(fresh)
    }

    /// One authorized call; when the access token is refused, the session is renewed and the
    /// call sent once more (a refused token means the PDS did nothing).
    async fn authed(
        &self,
        method: Method,
        nsid: &str,
        query: &[(&str, &str)],
        body: Body,
    ) -> Result<(Session, Answer), PostError> {
        let session = self.session().await?;
        let answer = self
            .xrpc(
                method.clone(),
                nsid,
                query,
                Some(&session.access),
                body.clone(),
            )
            .await?;
        if !answer.token_refused() {
            return Ok((session, answer));
        }
        let session = self.renew(&session).await?;
        let answer = self
            .xrpc(method, nsid, query, Some(&session.access), body)
            .await?;
        Ok((session, answer))
    }

    /// `uploadBlob` with the raw bytes → the blob object, verbatim.
    async fn upload_blob(&self, media: &Media) -> Result<Value, PostError> {
        let (_, answer) = self
            .authed(
                Method::POST,
                "com.atproto.repo.uploadBlob",
                &[],
                Body::Bytes(media.bytes.clone(), media.content_type),
            )
            .await?;
        let v = answer.json(Op::Upload)?;
        match v.get("blob") {
            Some(blob) if blob_link(blob).is_some() => Ok(blob.clone()),
            _ => Err(PostError::InDoubt {
                network: NETWORK,
                message: "uploadBlob answered without blob.ref".into(),
            }),
        }
    }

    /// Uploads the image again before a replay, and checks it is the blob the record names.
    async fn upload_again(&self, media: &Media, wanted: &Value) -> Result<(), PostError> {
        let got = self.upload_blob(media).await.map_err(before_put)?;
        if same_blob(&got, wanted) {
            return Ok(());
        }
        Err(local_refusal(&format!(
            "the image given is not the one the post was prepared with (uploaded {}, the record names {}); putRecord was not sent",
            blob_link(&got).unwrap_or("?"),
            blob_link(wanted).unwrap_or("?")
        )))
    }

    /// What [`NetworkAdapter::create`] does, with the whole answer: the cid, and whether the
    /// PDS wrote anything. See `create` for the steps.
    pub async fn put_record(
        &self,
        post: &PreparedPost,
        media: &Media,
    ) -> Result<PutAnswer, PostError> {
        let (rkey, collection) = address(post)?;
        if !media.bytes.is_empty() {
            check_blob_size(media)?;
        }
        let session = self.session().await?;
        let repo = post.body.get("repo").and_then(Value::as_str).unwrap_or("");
        let ours = [
            session.did.as_str(),
            session.handle.as_str(),
            self.identifier.as_str(),
        ];
        if !ours.iter().any(|o| o.eq_ignore_ascii_case(repo)) {
            return Err(local_refusal(&format!(
                "the post was prepared for the repo {repo}, but BLUESKY_IDENTIFIER logs in as @{} ({}); nothing was sent",
                session.handle, session.did
            )));
        }
        let wanted = record_blob(&post.body).filter(|_| !media.bytes.is_empty());
        // The attempt's own upload of these very bytes, a moment ago: the blob is there.
        let mut fresh =
            wanted.is_some_and(|w| self.fresh.take(&rkey) && is_blob_of(w, &media.bytes));
        let mut body = post.body.clone();
        body["repo"] = json!(session.did);
        body["swapRecord"] = Value::Null;
        let (session, answer) = loop {
            if let Some(wanted) = wanted.filter(|_| !fresh) {
                self.upload_again(media, wanted).await?;
            }
            let (session, answer) = self
                .authed(
                    Method::POST,
                    "com.atproto.repo.putRecord",
                    &[],
                    Body::Json(body.clone()),
                )
                .await?;
            // Collected sooner than expected: the refused put wrote nothing, so the image is
            // uploaded and the record written once more.
            if fresh && answer.status == 400 && answer.error_name() == "BlobNotFound" {
                tracing::info!(
                    "Bluesky: the image blob uploaded a moment ago is gone; uploading it again"
                );
                fresh = false;
                continue;
            }
            break (session, answer);
        };
        let status = answer.status;
        let at = format!("at://{}/{collection}/{rkey}", session.did);
        let swap = status == 400 && answer.error_name() == "InvalidSwap";
        let v = answer.json(Op::Put).map_err(|e| match e {
            // Name the key: the owner can look at what is there.
            PostError::Rejected {
                status, message, ..
            } if swap => PostError::Rejected {
                network: NETWORK,
                status,
                message: format!("{message} ({at})"),
            },
            e => e,
        })?;
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .map_or(at, str::to_owned);
        let cid = v.get("cid").and_then(Value::as_str).map(str::to_owned);
        if cid.is_none() {
            tracing::warn!(
                status,
                "Bluesky wrote the record but its answer carried no cid"
            );
        }
        let authority = uri_authority(&uri).unwrap_or(&session.did).to_owned();
        Ok(PutAnswer {
            url: post_url(&authority, &rkey),
            uri,
            cid,
            wrote: v.get("commit").is_some_and(|c| !c.is_null()),
        })
    }
}

fn session_from(v: &Value) -> Result<Session, PostError> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    if v.get("active") == Some(&Value::Bool(false)) {
        let status = s("status").unwrap_or("inactive");
        return Err(PostError::Rejected {
            network: NETWORK,
            status: 200,
            message: format!(
                "the account is not active ({status}); it cannot post until it is reactivated"
            ),
        });
    }
    match (s("accessJwt"), s("refreshJwt"), s("did")) {
        (Some(access), Some(refresh), Some(did)) => Ok(Session {
            access: Secret::new(access),
            refresh: Secret::new(refresh),
            did: did.to_owned(),
            handle: s("handle").unwrap_or(did).to_owned(),
        }),
        _ => Err(PostError::InDoubt {
            network: NETWORK,
            message: "the session answer lacked accessJwt, refreshJwt or did".into(),
        }),
    }
}

/// A failed re-upload before `putRecord`: the create itself was not sent.
fn before_put(e: PostError) -> PostError {
    match e {
        PostError::InDoubt { message, .. } | PostError::NotSent { message, .. } => {
            PostError::NotSent {
                network: NETWORK,
                message: format!(
                    "re-uploading the image failed ({message}); putRecord was not sent"
                ),
            }
        }
        PostError::Rejected {
            status, message, ..
        } => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("re-uploading the image: {message}; putRecord was not sent"),
        },
        other => other,
    }
}

/// The error and its causes, one line.
fn chain(e: &reqwest::Error) -> String {
    let mut parts = vec![];
    let mut src: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = src {
        parts.push(err.to_string());
        src = err.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// A failure below HTTP: nothing sent (connect, DNS, a request that could not be built), or
/// sent with no clear answer (timeout after sending, a broken exchange, an unreadable body).
fn transport(e: &reqwest::Error) -> PostError {
    if e.is_connect() || e.is_builder() {
        PostError::NotSent {
            network: NETWORK,
            message: chain(e),
        }
    } else {
        PostError::InDoubt {
            network: NETWORK,
            message: chain(e),
        }
    }
}

/// When a 429 ends: `RateLimit-Reset` (Unix seconds), counted from now.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let reset: u64 = headers
        .get("ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Some(Duration::from_secs(reset.saturating_sub(now)))
}

/// Turns a non-2xx XRPC answer (`{"error":"<Name>","message":"…"}`) into a [`PostError`]
/// whose message names the fix (API-NOTES.md "Bluesky / AT Protocol", Errors).
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let name = v.get("error").and_then(Value::as_str).unwrap_or("");
    let message = v.get("message").and_then(Value::as_str).unwrap_or("");
    let detail = match (name.is_empty(), message.is_empty()) {
        (false, false) => format!("{name}: {message}"),
        (false, true) => name.to_owned(),
        (true, false) => message.to_owned(),
        (true, true) => body.chars().take(300).collect(),
    };
    let rejected = |message: String| PostError::Rejected {
        network: NETWORK,
        status,
        message,
    };
    let token = status == 401 || matches!(name, "ExpiredToken" | "InvalidToken");
    match status {
        429 => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers),
            message: format!("{detail}; nothing was written"),
        },
        500..=599 => PostError::InDoubt {
            network: NETWORK,
            message: format!("Bluesky answered {status}: {detail}"),
        },
        _ if op == Op::Login && token => rejected(format!(
            "the identifier or app password was refused ({detail}); check BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD (create a new app password in Settings → Privacy and security → App passwords if it was revoked)"
        )),
        _ if token => rejected(format!(
            "the session was refused ({detail}) and could not be renewed; check BLUESKY_APP_PASSWORD"
        )),
        400 if name == "InvalidSwap" => rejected(format!(
            "{detail}: a different record is already at this record key, so nothing was overwritten; this key does not hold this post"
        )),
        400 if name == "BlobNotFound" => rejected(format!(
            "{detail}: the image blob is gone (unreferenced blobs are collected within minutes); upload the image again"
        )),
        400 if matches!(name, "InvalidMimeType" | "InvalidSize" | "BlobTooLarge") => rejected(format!(
            "{detail}: the image does not match its blob or is too large for a post (2,000,000 bytes on bsky.social, 1,000,000 on older PDSs)"
        )),
        413 => rejected(format!("{detail}: the image is larger than the PDS takes")),
        _ => rejected(detail),
    }
}

#[async_trait]
impl NetworkAdapter for BlueskyAdapter {
    fn network(&self) -> Network {
        Network::Bluesky
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        false
    }

    fn text_len(&self, text: &str) -> usize {
        text_len(text)
    }

    /// `uploadBlob` with the raw bytes and their Content-Type. The [`MediaRef`] holds the
    /// returned blob object verbatim (`blob`), the alt text (`alt`, empty when there is none)
    /// and the image's `aspectRatio` read from its header (left out if unreadable). An image
    /// over [`MAX_IMAGE_BLOB_BYTES`] is `Rejected` before any call.
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        check_blob_size(media)?;
        let blob = self.upload_blob(media).await?;
        let mut r = json!({"blob": blob, "alt": media.alt.as_deref().unwrap_or("")});
        if let Some((width, height)) =
            crate::image::dimensions(&media.bytes).filter(|(w, h)| *w > 0 && *h > 0)
        {
            r["aspectRatio"] = json!({"width": width, "height": height});
        }
        Ok(MediaRef(r))
    }

    /// Chooses the record key (a TID from the current microsecond and a random clock id) and
    /// builds the exact record (`createdAt` now, link and tag facets, the image embed),
    /// returned as the whole `putRecord` input; `key` is the record key. `idempotency` is not
    /// used: the record key plays its part, and must be stored with the record before
    /// `create`. Remembers that the image was just uploaded for this key (the create that
    /// follows need not upload it again).
    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        let post = prepared(&self.identifier, text, media, &self.langs);
        self.fresh.mark(&post);
        post
    }

    /// Writes the stored record at the stored key, the same way on the first attempt and on
    /// every replay:
    ///
    /// 1. An image over [`MAX_IMAGE_BLOB_BYTES`] is `Rejected` before any call.
    /// 2. When the record embeds an image and `media.bytes` is not empty, the bytes are
    ///    uploaded again first: the PDS deletes blobs no record references within minutes,
    ///    so a replay after a failed first write would otherwise fail with `BlobNotFound`.
    ///    The blob is content-addressed, so the same bytes give the same blob and the record
    ///    stays byte-identical; different bytes are refused here, before `putRecord`. A failed
    ///    re-upload is reported as `NotSent` (or its 429 / refusal): the create was not sent.
    ///    With empty bytes nothing is uploaded (the blob must still be there). Not on the
    ///    attempt's first create, right after [`NetworkAdapter::prepare`] in this process, with
    ///    the bytes of the blob the record names: that upload was a moment ago (once per
    ///    attempt). Should the PDS have collected it all the same (400 `BlobNotFound`, nothing
    ///    written), it is uploaded and the record written once more.
    /// 3. `putRecord` with the session's DID as `repo` and `"swapRecord": null`. The identical
    ///    record already there is a no-op answering the same uri (→ `Created`, as on the first
    ///    write); a different record there is 400 `InvalidSwap` (→ `Rejected` naming the
    ///    record's at-uri, nothing overwritten). 429 → `RateLimited` (`RateLimit-Reset`); 5xx or
    ///    a timeout after sending → `InDoubt`; a connect error → `NotSent`.
    ///
    /// An expired access token (400 `ExpiredToken`) renews the session and the call is sent
    /// once more.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        self.put_record(post, media).await.map(|p| p.created())
    }

    /// `getRecord` at the stored key (no auth; `since` is not needed). The identical record
    /// → the post; `RecordNotFound` → `None`; a different record there → `None` too: this
    /// post is not on Bluesky under its key (a replay is then refused with `InvalidSwap`,
    /// nothing overwritten).
    async fn find(&self, post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        let (rkey, collection) = address(post)?;
        let session = self.session().await?;
        let answer = self
            .xrpc(
                Method::GET,
                "com.atproto.repo.getRecord",
                &[
                    ("repo", session.did.as_str()),
                    ("collection", collection.as_str()),
                    ("rkey", rkey.as_str()),
                ],
                None,
                Body::None,
            )
            .await?;
        if answer.status == 400 && answer.error_name() == "RecordNotFound" {
            return Ok(None);
        }
        let v = answer.json(Op::Get)?;
        let uri = v.get("uri").and_then(Value::as_str).map_or_else(
            || format!("at://{}/{collection}/{rkey}", session.did),
            str::to_owned,
        );
        if v.get("value") != post.body.get("record") {
            let cid = v.get("cid").and_then(Value::as_str).unwrap_or("?");
            tracing::warn!(
                %uri,
                cid,
                "Bluesky: a different record is at the post's record key; the post is not there"
            );
            return Ok(None);
        }
        let authority = uri_authority(&uri).unwrap_or(&session.did).to_owned();
        Ok(Some(Created {
            url: Some(post_url(&authority, &rkey)),
            id: Some(uri),
            cid: v.get("cid").and_then(Value::as_str).map(str::to_owned),
        }))
    }

    /// Logs in (`createSession`, unless the process has a session) and reads
    /// `getSession` with the access token.
    async fn check(&self) -> Result<String, PostError> {
        let (_, answer) = self
            .authed(
                Method::GET,
                "com.atproto.server.getSession",
                &[],
                Body::None,
            )
            .await?;
        let v = answer.json(Op::Check)?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?");
        Ok(format!("Bluesky: @{} ({})", s("handle"), s("did")))
    }
}

// ---------------------------------------------------------------------------------------------
// The dry run.

/// The Bluesky adapter without credentials: sends nothing, logs at info the exact requests it
/// would send (the app password and tokens as placeholders), and answers ids marked `dryrun-`.
#[derive(Debug)]
pub struct BlueskyDryRun {
    pds: String,
    identifier: String,
    langs: Vec<String>,
    logged_in: AtomicBool,
    fresh: FreshUploads,
}

const DRY_AUTH: (&str, &str) = ("Authorization", "Bearer <accessJwt from createSession>");

fn dry_id() -> String {
    format!("{DRY_RUN_MARK}{:016x}", rand::random::<u64>())
}

impl BlueskyDryRun {
    /// `identifier`: `BLUESKY_IDENTIFIER` when set without a password.
    pub fn new(pds_url: &str, identifier: Option<&str>) -> Self {
        Self {
            pds: pds_url.trim_end_matches('/').to_owned(),
            identifier: identifier
                .map(|i| i.trim().trim_start_matches('@').to_owned())
                .filter(|i| !i.is_empty())
                .unwrap_or_else(|| "<BLUESKY_IDENTIFIER>".into()),
            langs: vec![],
            logged_in: AtomicBool::new(false),
            fresh: FreshUploads::default(),
        }
    }

    #[must_use]
    pub fn with_langs(mut self, langs: Vec<String>) -> Self {
        self.langs = langs.into_iter().take(3).collect();
        self
    }

    fn log_login(&self) {
        if !self.logged_in.swap(true, Ordering::SeqCst) {
            show(
                "POST",
                &format!("{}/xrpc/com.atproto.server.createSession", self.pds),
                &[("Content-Type", "application/json")],
                ShownBody::Json(
                    &json!({"identifier": self.identifier, "password": "<BLUESKY_APP_PASSWORD>"}),
                ),
            );
        }
    }

    fn log_upload(&self, media: &Media) {
        show(
            "POST",
            &format!("{}/xrpc/com.atproto.repo.uploadBlob", self.pds),
            &[DRY_AUTH, ("Content-Type", media.content_type)],
            ShownBody::Lines(vec![format!("<{} bytes>", media.bytes.len())]),
        );
    }
}

#[async_trait]
impl NetworkAdapter for BlueskyDryRun {
    fn network(&self) -> Network {
        Network::Bluesky
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        text_len(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        check_blob_size(media)?;
        self.log_login();
        self.log_upload(media);
        let blob = json!({"$type": "blob", "ref": {"$link": dry_id()}, "mimeType": media.content_type, "size": media.bytes.len()});
        let mut r = json!({"blob": blob, "alt": media.alt.as_deref().unwrap_or("")});
        if let Some((width, height)) =
            crate::image::dimensions(&media.bytes).filter(|(w, h)| *w > 0 && *h > 0)
        {
            r["aspectRatio"] = json!({"width": width, "height": height});
        }
        Ok(MediaRef(r))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        let post = prepared(&self.identifier, text, media, &self.langs);
        self.fresh.mark(&post);
        post
    }

    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let (rkey, _) = address(post)?;
        if !media.bytes.is_empty() {
            check_blob_size(media)?;
        }
        self.log_login();
        let fresh = self.fresh.take(&rkey);
        if record_blob(&post.body).is_some() && !media.bytes.is_empty() && !fresh {
            self.log_upload(media);
        }
        let mut body = post.body.clone();
        body["repo"] = json!("<session did>");
        show(
            "POST",
            &format!("{}/xrpc/com.atproto.repo.putRecord", self.pds),
            &[DRY_AUTH, ("Content-Type", "application/json")],
            ShownBody::Json(&body),
        );
        let id = dry_id();
        Ok(Created {
            url: Some(post_url(&id, &rkey)),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        let (rkey, collection) = address(post)?;
        show(
            "GET",
            &format!(
                "{}/xrpc/com.atproto.repo.getRecord?repo=<session did>&collection={collection}&rkey={rkey}",
                self.pds
            ),
            &[],
            ShownBody::None,
        );
        Ok(None)
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD are not both set, nothing is sent to Bluesky".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn tids_have_the_syntax_and_sort_by_time() {
        let a = tid(1_700_000_000_000_000, 0);
        let b = tid(1_700_000_000_000_001, 0);
        let c = tid(1_700_000_000_000_001, 1023);
        assert!(is_tid(&a) && is_tid(&b) && is_tid(&c), "{a} {b} {c}");
        assert!(a < b && b < c);
        // The spec's example shape: 13 chars, first in 234567abcdefghij.
        assert!(is_tid("3jzfcijpj2z2a"));
        assert!(!is_tid("kjzfcijpj2z2a") && !is_tid("3jzfcijpj2z2") && !is_tid("3jzfcijpj2z21"));
        assert_eq!(tid(0, 0), "2222222222222");
        // The largest 53-bit time with the largest clock id stays in range.
        assert!(is_tid(&tid(u64::MAX, u16::MAX)));
        let x = now_micros();
        let y = now_micros();
        assert!(y > x);
    }

    #[test]
    fn created_at_has_milliseconds() {
        assert_eq!(
            created_at(1_796_292_000_123_456),
            "2026-12-03T10:00:00.123Z"
        );
        assert_eq!(created_at(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn links_are_found_with_utf8_byte_offsets() {
        let text = "New post: example.com/p";
        assert_eq!(
            links(text),
            vec![Link {
                start: 10,
                end: 23,
                uri: "https://example.com/p".into()
            }]
        );
        let text = "Café ☕ — voir https://example.com/é?x=1. Et (https://a.io/b) me@example.com";
        let found = links(text);
        assert_eq!(found.len(), 2, "{found:?}");
        let first = "https://example.com/é?x=1";
        assert_eq!(found[0].start, text.find(first).unwrap());
        assert_eq!(&text[found[0].start..found[0].end], first);
        assert_eq!(found[0].uri, first);
        assert_eq!(&text[found[1].start..found[1].end], "https://a.io/b");
        assert!(links("x.y and example.jp and 1.5 and e.g.").is_empty());
        assert_eq!(links("see t.co/abc")[0].uri, "https://t.co/abc");
        assert_eq!(links("HTTPS://EXAMPLE.COM")[0].end, 19);
        assert_eq!(
            links("(https://en.wikipedia.org/wiki/Rust_(language))")[0].end,
            46
        );
    }

    #[test]
    fn tags_follow_the_official_clients_rules() {
        let found = |text: &str| -> Vec<(String, String)> {
            tags(text)
                .into_iter()
                .map(|t| (text[t.start..t.end].to_owned(), t.tag))
                .collect()
        };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(found("#rust"), pairs(&[("#rust", "rust")]));
        // Ends at whitespace; trailing punctuation left out, inner punctuation kept.
        assert_eq!(
            found("Hi #rust, #c++ #foo.bar! #end..."),
            pairs(&[
                ("#rust", "rust"),
                ("#c++", "c++"),
                ("#foo.bar", "foo.bar"),
                ("#end", "end")
            ])
        );
        // Only after whitespace or at the start.
        assert!(found("a#b (#c) x.com/#d").is_empty());
        // Not all digits (or digits and punctuation).
        assert!(found("#2024 #1.5 #!!! # #").is_empty());
        assert_eq!(found("#2024a"), pairs(&[("#2024a", "2024a")]));
        // UTF-8 byte offsets, the full-width sign, other scripts.
        let text = "Café ☕ #日本語 ＃été";
        let t = tags(text);
        assert_eq!(t[0].start, text.find("#日本語").unwrap());
        assert_eq!(t[0].end, t[0].start + "#日本語".len());
        assert_eq!(
            (t[1].tag.as_str(), &text[t[1].start..t[1].end]),
            ("été", "＃été")
        );
        // Invisible separators end a tag; the emoji keycap is not one.
        assert_eq!(found("#ab\u{200b}cd"), pairs(&[("#ab", "ab")]));
        assert!(found("#\u{fe0f}\u{20e3}").is_empty());
        // At most 64 graphemes.
        let ok = "é".repeat(64);
        assert_eq!(tags(&format!("#{ok}")).len(), 1);
        assert!(tags(&format!("#{ok}x")).is_empty());
        // Links and tags, in text order; mentions stay text.
        let f = facets("#a example.com/p #b @alice.bsky.social");
        let kinds: Vec<&str> = f
            .iter()
            .map(|x| x["features"][0]["$type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "app.bsky.richtext.facet#tag",
                "app.bsky.richtext.facet#link",
                "app.bsky.richtext.facet#tag"
            ]
        );
        assert_eq!(f[2]["features"][0]["tag"], json!("b"));
    }

    #[test]
    fn blob_cids_and_sizes() {
        // The CID of no bytes (SHA-256 e3b0c442…), a well-known value.
        assert_eq!(
            blob_cid(b""),
            "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
        );
        let blob = json!({"$type": "blob", "ref": {"$link": blob_cid(b"abc")}, "mimeType": "image/png", "size": 3});
        assert!(is_blob_of(&blob, b"abc"));
        assert!(!is_blob_of(&blob, b"abd"));
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        let media = |n: usize| Media {
            bytes: Bytes::from(vec![0u8; n]),
            content_type: "image/png",
            alt: None,
        };
        assert!(check_blob_size(&media(MAX_IMAGE_BLOB_BYTES)).is_ok());
        assert!(check_blob_size(&media(MAX_IMAGE_BLOB_BYTES + 1)).is_err());
    }

    #[test]
    fn graphemes_count_as_bluesky_counts() {
        assert_eq!(text_len("👨\u{200D}👩\u{200D}👧\u{200D}👦"), 1);
        assert_eq!(text_len("🇫🇷"), 1);
        assert_eq!(text_len("cafe\u{301}"), 4);
        assert_eq!(text_len("日本語"), 3);
        assert_eq!(text_len(&"x".repeat(300)), 300);
        // 300 families fit the grapheme limit but not the byte limit.
        let families = "👨\u{200D}👩\u{200D}👧\u{200D}👦".repeat(300);
        assert_eq!(grapheme_len(&families), 300);
        assert!(text_len(&families) > MAX_TEXT);
    }

    #[test]
    fn the_record_has_the_documented_shape() {
        let media = MediaRef(json!({
            "blob": {"$type": "blob", "ref": {"$link": "bafkreitest"}, "mimeType": "image/png", "size": 10},
            "alt": "A cover",
            "aspectRatio": {"width": 1200, "height": 627}
        }));
        let r = post_record(
            "New post: example.com/p",
            "2026-12-03T10:00:00.000Z",
            &media,
            &["en".into()],
        );
        assert_eq!(
            r,
            json!({"$type":"app.bsky.feed.post","text":"New post: example.com/p","createdAt":"2026-12-03T10:00:00.000Z","langs":["en"],
             "facets":[{"index":{"byteStart":10,"byteEnd":23},"features":[{"$type":"app.bsky.richtext.facet#link","uri":"https://example.com/p"}]}],
             "embed":{"$type":"app.bsky.embed.images","images":[{"alt":"A cover","image":{"$type":"blob","ref":{"$link":"bafkreitest"},"mimeType":"image/png","size":10},"aspectRatio":{"width":1200,"height":627}}]}})
        );
        let no_image = post_record("plain", "t", &MediaRef(Value::Null), &[]);
        assert_eq!(
            no_image,
            json!({"$type": COLLECTION, "text": "plain", "createdAt": "t"})
        );

        let p = prepared("alice.bsky.social", "hi", &media, &[]);
        let rkey = p.key.clone().unwrap();
        assert!(is_tid(&rkey));
        assert_eq!(p.body["rkey"], json!(rkey));
        assert_eq!(p.body["repo"], json!("alice.bsky.social"));
        assert_eq!(p.body["collection"], json!(COLLECTION));
        assert!(p.body.get("swapRecord").is_some_and(Value::is_null));
        assert_eq!(address(&p).unwrap(), (rkey, COLLECTION.to_owned()));
    }

    #[test]
    fn classifies_the_documented_answers() {
        let none = HeaderMap::new();
        let body = |e: &str, m: &str| json!({"error": e, "message": m}).to_string();
        assert!(matches!(
            classify(Op::Put, 400, &none, &body("InvalidSwap", "Record was at bafyreiabc")),
            PostError::Rejected { status: 400, message, .. } if message.contains("different record") && message.contains("bafyreiabc")
        ));
        assert!(matches!(
            classify(Op::Put, 400, &none, &body("BlobNotFound", "Could not find blob: bafkrei")),
            PostError::Rejected { message, .. } if message.contains("upload the image again")
        ));
        assert!(matches!(
            classify(Op::Login, 401, &none, &body("AuthenticationRequired", "Invalid identifier or password")),
            PostError::Rejected { status: 401, message, .. } if message.contains("BLUESKY_APP_PASSWORD")
        ));
        for s in [500, 502, 503, 504] {
            assert!(classify(
                Op::Put,
                s,
                &none,
                &body("InternalServerError", "Internal Server Error")
            )
            .may_exist());
        }
        let mut h = HeaderMap::new();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        h.insert(
            "ratelimit-reset",
            HeaderValue::from_str(&(now + 120).to_string()).unwrap(),
        );
        match classify(
            Op::Put,
            429,
            &h,
            &body("RateLimitExceeded", "Rate Limit Exceeded"),
        ) {
            PostError::RateLimited {
                retry_after: Some(d),
                ..
            } => {
                assert!(d <= Duration::from_secs(120) && d >= Duration::from_secs(110));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(Op::Put, 400, &none, "not json"),
            PostError::Rejected { status: 400, message, .. } if message == "not json"
        ));
    }
}

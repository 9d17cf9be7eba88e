//! Bluesky's wire types: the record key (a TID) and `createdAt`, the `app.bsky.feed.post`
//! record with its facets and image embed, the `com.atproto.repo.putRecord` input built once
//! and stored for replays, and the image blob (its content address, and the PDS's size limit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::text::facets;
use super::xrpc::local_refusal;
use super::{COLLECTION, MAX_IMAGE_BLOB_BYTES};
use crate::networks::{Media, MediaRef, PostError, PreparedPost};

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
// The record and the putRecord input.

/// The `app.bsky.embed.images` embed for an uploaded image ([`MediaRef`] as
/// [`NetworkAdapter::upload`](crate::networks::NetworkAdapter::upload) builds it: `blob`, `alt`, `aspectRatio`). `None` for no image
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

pub(super) fn prepared(repo: &str, text: &str, media: &MediaRef, langs: &[String]) -> PreparedPost {
    let micros = now_micros();
    let rkey = tid(micros, rand::random::<u16>() & 0x3FF);
    let record = post_record(text, &created_at(micros), media, langs);
    PreparedPost {
        body: put_record_body(repo, &rkey, record),
        text: text.to_owned(),
        key: Some(rkey),
    }
}

/// The record key and collection of a prepared `putRecord` body.
pub(super) fn address(post: &PreparedPost) -> Result<(String, String), PostError> {
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

/// `at://<authority>/<collection>/<rkey>` → authority.
pub(super) fn uri_authority(uri: &str) -> Option<&str> {
    uri.strip_prefix("at://")?.split('/').next()
}

// ---------------------------------------------------------------------------------------------
// The image blob.

/// The image a prepared record embeds (its blob object), if any.
pub(super) fn record_blob(body: &Value) -> Option<&Value> {
    body.pointer("/record/embed/images/0/image")
}

pub(super) fn blob_link(blob: &Value) -> Option<&str> {
    blob.pointer("/ref/$link").and_then(Value::as_str)
}

pub(super) fn same_blob(a: &Value, b: &Value) -> bool {
    blob_link(a).is_some()
        && blob_link(a) == blob_link(b)
        && a.get("mimeType") == b.get("mimeType")
        && a.get("size") == b.get("size")
}

/// The CID the PDS gives a blob of `bytes` (CIDv1, `raw` codec, SHA-256, base32: `bafkrei…`).
pub(super) fn blob_cid(bytes: &[u8]) -> String {
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
pub(super) fn is_blob_of(blob: &Value, bytes: &[u8]) -> bool {
    blob_link(blob) == Some(blob_cid(bytes).as_str())
        && blob.get("size").and_then(Value::as_u64) == u64::try_from(bytes.len()).ok()
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
pub(super) fn check_blob_size(media: &Media) -> Result<(), PostError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

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
}

//! The record types' stored forms.

use super::*;

/// A draft file as today's local store writes it (and the intent and record copy
/// a database keeps as JSON): the stored names `commentary`, `image_urn` and `urn` read
/// into the neutral ones, and are written back unchanged.
#[test]
fn files_written_with_the_stored_names_read_into_the_neutral_ones() {
    let mut file = serde_json::to_value(Draft::empty("blog-a", DraftStatus::Unknown, None, 1))
        .expect("a draft");
    file["pending"] = serde_json::json!({
        "commentary": "Hi", "image_urn": "urn:li:image:C4", "alt": null, "at": 2, "run": "r"
    });
    file["record"] = serde_json::json!({
        "key": "blog-a", "urn": "urn:li:share:7", "posted_at": 1, "run": "r",
        "source": "ci", "caption_hash": null
    });
    let d: Draft = serde_json::from_value(file.clone()).expect("today's file parses");
    let pending = d.pending.clone().expect("the intent");
    assert_eq!(
        (pending.text.as_str(), pending.media_id.as_str()),
        ("Hi", "urn:li:image:C4")
    );
    assert_eq!(
        d.record.as_ref().and_then(|r| r.post_id.as_deref()),
        Some("urn:li:share:7")
    );
    let again = serde_json::to_value(&d).expect("written");
    assert_eq!(again["pending"]["commentary"], "Hi");
    assert_eq!(again["pending"]["image_urn"], "urn:li:image:C4");
    assert_eq!(again["record"]["urn"], "urn:li:share:7");
    assert!(again["pending"].get("text").is_none() && again["record"].get("post_id").is_none());
}

/// A record written before `cid` existed (the local store's JSON) still parses, and a
/// record without one writes none.
#[test]
fn records_without_a_cid_still_parse() {
    let old = r#"{"key":"blog-x@bluesky","urn":"at://did:plc:a/app.bsky.feed.post/3k","posted_at":1,"run":"r","source":"ci","caption_hash":null,"url":"https://bsky.app/profile/did:plc:a/post/3k"}"#;
    let mut r: PostedRecord = serde_json::from_str(old).expect("an old record parses");
    assert_eq!(r.cid, None);
    assert!(!serde_json::to_string(&r).expect("json").contains("cid"));
    r.cid = Some("bafyreib".into());
    let back: PostedRecord =
        serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parses");
    assert_eq!(back.cid.as_deref(), Some("bafyreib"));
}

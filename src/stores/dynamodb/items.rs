//! Items ⇄ records and drafts: every mapping between a DynamoDB item and [`PostedRecord`] /
//! [`Draft`] lives here (the adapter keeps its mapping; the pipeline never sees an item).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::record::{Draft, DraftContent, DraftStatus, PendingPost, PostedRecord, StoreError};

pub(super) type Item = HashMap<String, AttributeValue>;

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn pk(name: String) -> Item {
    HashMap::from([("pk".to_owned(), s(name))])
}

pub(super) fn get_s(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

pub(super) fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

pub(super) fn get_bool(item: &Item, name: &str) -> Option<bool> {
    item.get(name).and_then(|v| v.as_bool().ok()).copied()
}

pub(super) fn record_from_item(item: &Item) -> Result<PostedRecord, StoreError> {
    let key = get_s(item, "key").ok_or_else(|| StoreError("posted item without key".into()))?;
    Ok(PostedRecord {
        key,
        post_id: get_s(item, "urn"),
        posted_at: get_n(item, "posted_at").unwrap_or(0),
        run: get_s(item, "run").unwrap_or_default(),
        source: get_s(item, "source").unwrap_or_default(),
        caption_hash: get_s(item, "caption_hash"),
        url: get_s(item, "url"),
        cid: get_s(item, "cid"),
    })
}

pub(super) fn record_to_item(ns: &str, r: &PostedRecord) -> Item {
    let mut item = pk(format!("{ns}posted:{}", r.key));
    item.insert("key".into(), s(&r.key));
    item.insert("posted_at".into(), n(r.posted_at));
    item.insert("run".into(), s(&r.run));
    item.insert("source".into(), s(&r.source));
    if let Some(urn) = &r.post_id {
        item.insert("urn".into(), s(urn));
    }
    if let Some(h) = &r.caption_hash {
        item.insert("caption_hash".into(), s(h));
    }
    if let Some(url) = &r.url {
        item.insert("url".into(), s(url));
    }
    if let Some(cid) = &r.cid {
        item.insert("cid".into(), s(cid));
    }
    item
}

pub(super) fn draft_from_item(item: &Item) -> Result<Draft, StoreError> {
    let key = get_s(item, "key").ok_or_else(|| StoreError("draft item without key".into()))?;
    let content = match (get_s(item, "caption"), get_s(item, "image")) {
        (Some(caption), Some(image)) => Some(DraftContent {
            caption,
            image,
            link: get_s(item, "link"),
            alt: get_s(item, "alt"),
            ..Default::default()
        }),
        _ => None,
    };
    let pending = match (
        get_s(item, "pending_commentary"),
        get_s(item, "pending_image_urn"),
        get_n(item, "pending_at"),
    ) {
        (Some(commentary), Some(image_urn), Some(at)) => Some(PendingPost {
            text: commentary,
            media_id: image_urn,
            alt: get_s(item, "pending_alt"),
            at,
            run: get_s(item, "pending_run").unwrap_or_default(),
            caption_hash: get_s(item, "pending_caption_hash"),
            last_sent_at: get_n(item, "pending_last_at"),
            request: get_s(item, "pending_request").and_then(|r| serde_json::from_str(&r).ok()),
        }),
        _ => None,
    };
    let status_raw = get_s(item, "status").unwrap_or_else(|| "new".into());
    let status = DraftStatus::parse(&status_raw)
        .ok_or_else(|| StoreError(format!("draft {key} has an unknown status {status_raw:?}")))?;
    Ok(Draft {
        content,
        status,
        attempts: get_n(item, "attempts")
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(0),
        last_error: get_s(item, "last_error"),
        retryable: get_bool(item, "retryable").unwrap_or(true),
        next_retry_at: get_n(item, "next_retry_at"),
        pending,
        reminded: get_bool(item, "reminded").unwrap_or(false),
        source: get_s(item, "source"),
        created_at: get_n(item, "created_at").unwrap_or(0),
        updated_at: get_n(item, "updated_at").unwrap_or(0),
        expires_at: get_n(item, "expires_at"),
        delay_told: get_bool(item, "delay_told").unwrap_or(false),
        publish_at: get_n(item, "publish_at"),
        due_at: get_n(item, "due_at"),
        started: get_n(item, "started").is_some_and(|v| v > 0),
        record: get_s(item, "record").and_then(|r| serde_json::from_str(&r).ok()),
        key,
    })
}

/// The record's copy a posted draft keeps ([`Draft::record`]), as JSON.
pub(super) fn record_copy(record: &PostedRecord) -> AttributeValue {
    s(serde_json::to_string(record).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items as today's tables hold them (`urn`, `pending_commentary`, `pending_image_urn`)
    /// read into the neutral names, and are written back under the same attribute names.
    #[test]
    fn items_with_the_stored_attribute_names_read_into_the_neutral_ones() {
        let mut record = pk("posted:blog-a".into());
        for (name, value) in [("key", "blog-a"), ("urn", "urn:li:share:7"), ("run", "r")] {
            record.insert(name.into(), s(value));
        }
        record.insert("posted_at".into(), n(1));
        let r = record_from_item(&record).expect("a record item");
        assert_eq!(r.post_id.as_deref(), Some("urn:li:share:7"));
        assert_eq!(
            record_to_item("", &r)
                .get("urn")
                .and_then(|v| v.as_s().ok())
                .map(String::as_str),
            Some("urn:li:share:7")
        );

        let mut draft = pk("draft:blog-a".into());
        for (name, value) in [
            ("key", "blog-a"),
            ("status", "unknown"),
            ("pending_commentary", "Hi"),
            ("pending_image_urn", "urn:li:image:C4"),
            (
                "record",
                r#"{"key":"blog-a","urn":"urn:li:share:7","posted_at":1,"run":"r","source":"ci","caption_hash":null}"#,
            ),
        ] {
            draft.insert(name.into(), s(value));
        }
        draft.insert("pending_at".into(), n(2));
        let d = draft_from_item(&draft).expect("a draft item");
        let pending = d.pending.expect("the intent");
        assert_eq!(
            (pending.text.as_str(), pending.media_id.as_str()),
            ("Hi", "urn:li:image:C4")
        );
        assert_eq!(
            d.record.and_then(|r| r.post_id).as_deref(),
            Some("urn:li:share:7")
        );
    }
}

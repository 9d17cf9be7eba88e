//! Rows as the store reads them: every read selects `to_jsonb(row)`, decoded here, so one
//! mapping serves every statement.

use serde::Deserialize;
use tokio_postgres::types::{FromSql, Type};

use crate::record::{Draft, DraftContent, DraftStatus, PendingPost, PostedRecord, StoreError};

/// A `postonce_drafts` row.
#[derive(Deserialize)]
struct DraftRow {
    key: String,
    caption: Option<String>,
    image: Option<String>,
    link: Option<String>,
    alt: Option<String>,
    status: String,
    attempts: i64,
    last_error: Option<String>,
    retryable: bool,
    next_retry_at: Option<i64>,
    pending: Option<PendingPost>,
    reminded: bool,
    source: Option<String>,
    created_at: i64,
    updated_at: i64,
    expires_at: Option<i64>,
    publish_at: Option<i64>,
    due_at: Option<i64>,
    delay_told: bool,
    record: Option<PostedRecord>,
    #[serde(default)]
    started: i64,
}

/// A `to_jsonb(row)` column as the server sent it: its JSON text, decoded straight into the row
/// type ([`draft`], [`record`]) without a `serde_json::Value` in between (issue 34: the tree
/// of values was a tenth of an already-posted run). Its UTF-8 is checked once, here, so that
/// the decoder does not check every string in it again (some 4,000 instructions a row).
pub struct Jsonb(String);

impl<'a> FromSql<'a> for Jsonb {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        // `jsonb`'s binary form is a version byte (1) before the text; `json`'s is the text.
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, text)) => text,
                _ => return Err("an unknown jsonb version".into()),
            }
        } else {
            raw
        };
        Ok(Self(String::from_utf8(text.to_vec())?))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB || *ty == Type::JSON
    }
}

/// A draft from its row's JSON.
///
/// # Errors
/// When the row does not hold a draft (a store error, never a guess).
pub fn draft(v: Jsonb) -> Result<Draft, StoreError> {
    let row: DraftRow = serde_json::from_str(&v.0)
        .map_err(|e| StoreError(format!("PostgreSQL: a draft row cannot be read ({e})")))?;
    let status = DraftStatus::parse(&row.status).ok_or_else(|| {
        StoreError(format!(
            "draft {} has an unknown status {:?}",
            row.key, row.status
        ))
    })?;
    let content = match (row.caption, row.image) {
        (Some(caption), Some(image)) => Some(DraftContent {
            caption,
            image,
            link: row.link,
            alt: row.alt,
            ..Default::default()
        }),
        _ => None,
    };
    Ok(Draft {
        key: row.key,
        content,
        status,
        attempts: u32::try_from(row.attempts).unwrap_or(0),
        last_error: row.last_error,
        retryable: row.retryable,
        next_retry_at: row.next_retry_at,
        pending: row.pending,
        reminded: row.reminded,
        source: row.source,
        created_at: row.created_at,
        updated_at: row.updated_at,
        expires_at: row.expires_at,
        publish_at: row.publish_at,
        started: row.started > 0,
        due_at: row.due_at,
        delay_told: row.delay_told,
        record: row.record,
    })
}

/// A record from its row's JSON.
///
/// # Errors
/// When the row does not hold a record.
pub fn record(v: Jsonb) -> Result<PostedRecord, StoreError> {
    serde_json::from_str(&v.0)
        .map_err(|e| StoreError(format!("PostgreSQL: a record row cannot be read ({e})")))
}

/// SQL true when the record in `urn` (an expression) is a dry run's
/// ([`crate::networks::is_dry_run_urn`]).
pub fn dry_urn(urn: &str) -> String {
    format!(
        "(strpos({urn}, '{}') > 0 OR starts_with({urn}, 'dryrun-'))",
        crate::networks::show::MARK
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: serde_json::Value) -> Jsonb {
        Jsonb(v.to_string())
    }

    /// Rows as today's tables hold them (`to_jsonb` of a `postonce_records` row and of a
    /// `postonce_drafts` row whose `pending` and `record` keep their stored names) read into
    /// the neutral names.
    #[test]
    fn rows_written_with_the_stored_names_read_into_the_neutral_ones() {
        let r = record(row(serde_json::json!({
            "ns": "", "key": "blog-a", "urn": "urn:li:share:7", "posted_at": 1, "run": "r",
            "source": "ci", "caption_hash": null, "url": null, "cid": null, "expires_at": null
        })))
        .expect("a record row");
        assert_eq!(r.post_id.as_deref(), Some("urn:li:share:7"));
        let d = draft(row(serde_json::json!({
            "ns": "", "key": "blog-a", "caption": "Hi", "image": "https://e.org/a.png",
            "link": null, "alt": null, "status": "unknown", "attempts": 1, "last_error": null,
            "retryable": true, "next_retry_at": null, "reminded": false, "source": "ci",
            "created_at": 1, "updated_at": 2, "expires_at": null, "publish_at": null,
            "due_at": 2, "delay_told": false, "started": 0,
            "pending": {"commentary": "Hi", "image_urn": "urn:li:image:C4", "alt": null,
                        "at": 2, "run": "r"},
            "record": {"key": "blog-a", "urn": "urn:li:share:7", "posted_at": 1, "run": "r",
                       "source": "ci", "caption_hash": null}
        })))
        .expect("a draft row");
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

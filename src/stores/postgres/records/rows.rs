//! Rows as the store reads them: every read selects `to_jsonb(row)`, decoded here, so one
//! mapping serves every statement.

use serde::Deserialize;

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

/// A draft from its row's JSON.
///
/// # Errors
/// When the row does not hold a draft (a store error, never a guess).
pub fn draft(v: serde_json::Value) -> Result<Draft, StoreError> {
    let row: DraftRow = serde_json::from_value(v)
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
pub fn record(v: serde_json::Value) -> Result<PostedRecord, StoreError> {
    serde_json::from_value(v)
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

//! The two writes that start a draft's state in one request (issue 30, findings 2 and 3): a
//! draft stored scheduled, and an attempt started (see [`crate::record::RecordStore`]).

use super::{err, rows, update, PgStore};
use crate::key::PostKey;
use crate::record::{Draft, DraftContent, DraftStatus, StoreError};

pub(super) async fn save_scheduled(
    store: &PgStore,
    key: &PostKey,
    content: &DraftContent,
    source: &str,
    at: i64,
    now: i64,
) -> Result<Option<Draft>, StoreError> {
    let sql = update::SAVE_SCHEDULED;
    let (ns, k) = (store.ns.to_owned(), key.to_string());
    let c2 = content.clone();
    let source = source.to_owned();
    let open: Vec<String> = crate::record::SCHEDULABLE
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    let v: Option<rows::Jsonb> = store
        .db
        .with("save scheduled draft", |c| async move {
            let st = c.prepare_cached(sql).await?;
            let row = c
                .query_opt(
                    &st,
                    &[
                        &ns,
                        &k,
                        &c2.caption,
                        &c2.image,
                        &c2.link,
                        &c2.alt,
                        &source,
                        &now,
                        &at,
                        &open,
                    ],
                )
                .await?;
            row.map(|r| r.try_get(0)).transpose()
        })
        .await
        .map_err(err)?;
    v.map(rows::draft).transpose()
}

pub(super) async fn start_attempt(
    store: &PgStore,
    key: &PostKey,
    from: &[DraftStatus],
    now: i64,
) -> Result<Option<Draft>, StoreError> {
    let (ns, k) = (store.ns.to_owned(), key.to_string());
    let open: Vec<String> = from
        .iter()
        .filter(|s| **s != DraftStatus::Scheduled)
        .map(|s| s.as_str().to_owned())
        .collect();
    let scheduled = from.contains(&DraftStatus::Scheduled);
    let v: Option<rows::Jsonb> = store
        .db
        .with("start attempt", |c| async move {
            let st = c.prepare_cached(update::START_ATTEMPT).await?;
            let row = c
                .query_opt(&st, &[&ns, &k, &open, &now, &scheduled])
                .await?;
            row.map(|r| r.try_get(0)).transpose()
        })
        .await
        .map_err(err)?;
    v.map(rows::draft).transpose()
}

//! The due index's queries (what the sweeper lists) and the pacing slots.

use std::sync::atomic::Ordering;

use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

use super::items::{draft_from_item, get_n, n, s, Item};
use super::{sdk_err, DynamoStore, DUE_INDEX};
use crate::record::{pace_name, Draft, DraftStatus, Slot, StoreError};

/// [`RecordStore::due_drafts`](crate::record::RecordStore::due_drafts): one query of the due index per status, page by page.
pub(super) async fn due_drafts(
    store: &DynamoStore,
    statuses: &[DraftStatus],
    before: i64,
) -> Result<Vec<Draft>, StoreError> {
    let mut drafts = Vec::new();
    for status in statuses {
        let mut start: Option<Item> = None;
        loop {
            let out = store
                .client
                .query()
                .table_name(&store.table)
                .index_name(DUE_INDEX)
                .key_condition_expression("#q = :q AND #d <= :b")
                .expression_attribute_names("#q", "queue")
                .expression_attribute_names("#d", "due_at")
                .expression_attribute_values(":q", s(format!("{}{}", store.ns, status.as_str())))
                .expression_attribute_values(":b", n(before))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_err(&format!("Query (index {DUE_INDEX})"), e))?;
            store.due_items_read.fetch_add(
                u64::try_from(out.scanned_count()).unwrap_or(0),
                Ordering::Relaxed,
            );
            for item in out.items() {
                let draft = draft_from_item(item)?;
                // The index lags writes a little: the item's own status is what counts.
                if draft.status == *status {
                    drafts.push(draft);
                }
            }
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => break,
            }
        }
    }
    drafts.sort_by(|a, b| (a.due_at, &a.key).cmp(&(b.due_at, &b.key)));
    Ok(drafts)
}

/// [`RecordStore::take_slot`](crate::record::RecordStore::take_slot): one conditional `UpdateItem` of the network's pace item.
pub(super) async fn take_slot(
    store: &DynamoStore,
    network: &str,
    interval_ms: i64,
    now_ms: i64,
) -> Result<Slot, StoreError> {
    let result = store
        .client
        .update_item()
        .table_name(&store.table)
        .set_key(Some(store.key(pace_name(network))))
        .update_expression("SET last_ms = :now")
        .condition_expression("attribute_not_exists(last_ms) OR last_ms <= :cut")
        .expression_attribute_values(":now", n(now_ms))
        .expression_attribute_values(":cut", n(now_ms.saturating_sub(interval_ms)))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    match result {
        Ok(_) => Ok(Slot::Taken),
        Err(err) => match err.as_service_error() {
            Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => {
                let last_ms = c.item().and_then(|i| get_n(i, "last_ms")).unwrap_or(now_ms);
                Ok(Slot::Busy { last_ms })
            }
            _ => Err(sdk_err("UpdateItem (pace)", err)),
        },
    }
}

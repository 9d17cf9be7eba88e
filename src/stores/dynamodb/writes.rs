//! The conditional writes: the draft saved, the record with its draft's `posted` mark (one
//! `TransactWriteItems`), a draft change, and an intent with its checks. A failed condition is
//! an answer (the record that exists, the caption's owner, a refusal), never an error.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use super::items::{draft_from_item, get_s, n, record_from_item, record_to_item, s, Item};
use super::update::{draft_update, posted_draft_update, Expr};
use super::{sdk_err, DynamoStore};
use crate::key::PostKey;
use crate::record::{
    caption_name, draft_name, record_name, Draft, DraftContent, DraftStatus, DraftUpdate, Intent,
    PostedRecord, PutPosted, RecordStore, StoreError,
};

/// In the real namespace, the condition under which a `posted:` item does not count as a post:
/// a dry run's record (only an older version could write one there), whose post id (stored as `urn`) carries the
/// mark (LinkedIn's) or starts with it (the other networks'); see
/// [`crate::networks::is_dry_run_urn`]. Uses `#urn`, `:dry` and `:dryid`.
const DRY_RECORD: &str = "contains(#urn, :dry) OR begins_with(#urn, :dryid)";

/// The condition of a record's write (or check) in namespace `ns`, with the names and values it
/// uses: no record is there or, in the real namespace, only a dry run's ([`DRY_RECORD`]), which
/// proves nothing was posted.
fn no_record(ns: &str) -> (String, Option<HashMap<String, String>>, Option<Item>) {
    if !ns.is_empty() {
        return ("attribute_not_exists(pk)".into(), None, None);
    }
    (
        format!("attribute_not_exists(pk) OR {DRY_RECORD}"),
        Some(HashMap::from([("#urn".into(), "urn".into())])),
        Some(HashMap::from([
            (":dry".into(), s(crate::networks::show::MARK)),
            (":dryid".into(), s("dryrun-")),
        ])),
    )
}

impl DynamoStore {
    /// An `UpdateItem` of `key`'s draft by `e`, applied only under `condition`.
    fn update_draft_item(
        &self,
        key: &PostKey,
        e: Expr,
        condition: String,
    ) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(draft_name(key))))
            .update_expression(e.expression())
            .condition_expression(condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
    }
}

/// The `ConditionalCheckFailed` reasons of a transaction cancelled by its conditions, in the
/// order of its items: `Some(item)` for each item whose condition failed (with the item, when
/// DynamoDB returned it), `None` for the others. `None` when the error is not a cancelled
/// transaction, or when any item was cancelled for another reason (a conflict with another
/// transaction, throttling): that is a failure to retry, not an answer.
fn failed_checks(
    err: &aws_sdk_dynamodb::error::SdkError<
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
    >,
) -> Option<Vec<Option<Option<Item>>>> {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    match err.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(tce) => {
            let reasons = tce.cancellation_reasons();
            let other = reasons
                .iter()
                .any(|r| !matches!(r.code(), None | Some("None" | "ConditionalCheckFailed")));
            (!other).then(|| {
                reasons
                    .iter()
                    .map(|r| {
                        (r.code() == Some("ConditionalCheckFailed")).then(|| r.item().cloned())
                    })
                    .collect()
            })
        }
        _ => None,
    }
}

/// [`RecordStore::save_draft`]: one conditional `UpdateItem`, which leaves a posted draft alone
/// and returns it.
pub(super) async fn save_draft(
    store: &DynamoStore,
    key: &PostKey,
    content: &DraftContent,
    source: &str,
    now: i64,
) -> Result<Draft, StoreError> {
    let mut e = Expr::default();
    e.set("key", s(key.to_string()))
        .set("caption", s(&content.caption))
        .set("image", s(&content.image))
        .set_opt("link", content.link.as_ref().map(s))
        .set_opt("alt", content.alt.as_ref().map(s))
        .set("updated_at", n(now))
        .set_if_absent("status", s(DraftStatus::New.as_str()))
        .set_if_absent(
            "queue",
            s(format!("{}{}", store.ns, DraftStatus::New.as_str())),
        )
        .set_if_absent("due_at", n(now))
        .set_if_absent("attempts", n(0))
        .set_if_absent("retryable", AttributeValue::Bool(true))
        .set_if_absent("created_at", n(now))
        .set_if_absent("source", s(source))
        // The run that stores it starts an attempt (issue 30, finding 3).
        .set("started", n(1));
    // A posted draft that holds its record's copy is left alone, and its copy comes back
    // with the failed condition: the caller learns it is posted from this one request.
    let (st, rec) = (e.name("status"), e.name("record"));
    let posted = e.value(s(DraftStatus::Posted.as_str()));
    let mut condition = format!("attribute_not_exists({rec}) OR {st} <> {posted}");
    if store.ns.is_empty() {
        // The copy of a dry run's record (see `DRY_RECORD`), in its JSON.
        let dry = e.value(s(crate::networks::show::MARK));
        let dry_id = e.value(s("\"urn\":\"dryrun-"));
        condition.push_str(&format!(
            " OR contains({rec}, {dry}) OR contains({rec}, {dry_id})"
        ));
    }
    let result = store
        .update_draft_item(key, e, condition)
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    let item = match result {
        Ok(out) => out.attributes,
        Err(err) => match err.into_service_error() {
            aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c) => {
                c.item
            }
            other => return Err(sdk_err("UpdateItem (draft)", other)),
        },
    };
    match item {
        Some(item) => draft_from_item(&item),
        // Only a server that does not return items with a failed condition gets here.
        None => store
            .load(key, None)
            .await?
            .draft
            .ok_or_else(|| StoreError(format!("the draft {key} vanished"))),
    }
}

/// [`RecordStore::save_scheduled`]: one conditional `UpdateItem` that stores the content and
/// the schedule together; `None` when the draft is in a status it may not be scheduled from.
pub(super) async fn save_scheduled(
    store: &DynamoStore,
    key: &PostKey,
    content: &DraftContent,
    source: &str,
    at: i64,
    now: i64,
) -> Result<Option<Draft>, StoreError> {
    let mut e = draft_update(store.ns, &DraftUpdate::Schedule { at }, now);
    e.set("key", s(key.to_string()))
        .set("caption", s(&content.caption))
        .set("image", s(&content.image))
        .set_opt("link", content.link.as_ref().map(s))
        .set_opt("alt", content.alt.as_ref().map(s))
        .set_if_absent("attempts", n(0))
        .set_if_absent("created_at", n(now))
        .set_if_absent("source", s(source));
    let st = e.name("status");
    let open: Vec<String> = crate::record::SCHEDULABLE
        .iter()
        .map(|f| e.value(s(f.as_str())))
        .collect();
    let condition = format!("attribute_not_exists(pk) OR {st} IN ({})", open.join(", "));
    let result = store
        .update_draft_item(key, e, condition)
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match result {
        Ok(out) => match out.attributes {
            Some(item) => draft_from_item(&item).map(Some),
            None => Err(StoreError(format!("the draft {key} was not returned"))),
        },
        Err(err) => match err.into_service_error() {
            aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_) => Ok(None),
            other => Err(sdk_err("UpdateItem (draft)", other)),
        },
    }
}

/// [`RecordStore::start_attempt`]: one conditional `UpdateItem` that returns the draft.
pub(super) async fn start_attempt(
    store: &DynamoStore,
    key: &PostKey,
    from: &[DraftStatus],
    now: i64,
) -> Result<Option<Draft>, StoreError> {
    let mut e = Expr::default();
    e.count_started()
        .set("started", n(1))
        .set("updated_at", n(now));
    let (st, due) = (e.name("status"), e.name("due_at"));
    let mut open = Vec::new();
    for f in from.iter().filter(|f| **f != DraftStatus::Scheduled) {
        open.push(e.value(s(f.as_str())));
    }
    let mut condition = format!("attribute_exists(pk) AND ({st} IN ({})", open.join(", "));
    if from.contains(&DraftStatus::Scheduled) {
        let (sched, now_v) = (e.value(s(DraftStatus::Scheduled.as_str())), e.value(n(now)));
        condition.push_str(&format!(" OR ({st} = {sched} AND {due} <= {now_v})"));
    }
    condition.push(')');
    let result = store
        .update_draft_item(key, e, condition)
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match result {
        Ok(out) => out.attributes.map(|item| draft_from_item(&item)).transpose(),
        Err(err) => match err.into_service_error() {
            aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_) => Ok(None),
            other => Err(sdk_err("UpdateItem (draft)", other)),
        },
    }
}

/// [`RecordStore::put_posted`]: the record (if absent), the draft's mark and the caption index
/// in one transaction; a record already there is returned.
pub(super) async fn put_posted(
    store: &DynamoStore,
    record: &PostedRecord,
    now: i64,
    draft_expires_at: i64,
) -> Result<PutPosted, StoreError> {
    // A dry run's record in the real namespace (only an older version could write one) proves
    // nothing was posted: a real record may replace it.
    let (condition, names, values) = no_record(store.ns);
    let put = Put::builder()
        .table_name(&store.table)
        .set_item(Some(record_to_item(store.ns, record)))
        .condition_expression(condition)
        .set_expression_attribute_names(names)
        .set_expression_attribute_values(values)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| sdk_err("TransactWriteItems", e))?;
    let e = posted_draft_update(record, now, draft_expires_at);
    let update = Update::builder()
        .table_name(&store.table)
        .set_key(Some(store.key(format!("draft:{}", record.key))))
        .update_expression(e.expression())
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .build()
        .map_err(|e| sdk_err("TransactWriteItems", e))?;
    let mut request = store
        .client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().update(update).build());
    if let Some(h) = &record.caption_hash {
        let mut item = store.key(caption_name(h));
        item.insert("key".into(), s(&record.key));
        if let Some(urn) = &record.post_id {
            item.insert("urn".into(), s(urn));
        }
        let index = Put::builder()
            .table_name(&store.table)
            .set_item(Some(item))
            .build()
            .map_err(|e| sdk_err("TransactWriteItems", e))?;
        request = request.transact_items(TransactWriteItem::builder().put(index).build());
    }
    let result = request.send().await;
    let err = match result {
        Ok(_) => return Ok(PutPosted::Created),
        Err(err) => err,
    };
    let existing = failed_checks(&err).and_then(|c| c.into_iter().next().flatten());
    match existing {
        Some(Some(item)) => Ok(PutPosted::Exists(record_from_item(&item)?)),
        Some(None) => match store.get_record_consistent(&record.key).await? {
            Some(r) => Ok(PutPosted::Exists(r)),
            None => Err(StoreError(
                "record condition failed but no record is there".into(),
            )),
        },
        None => Err(sdk_err("TransactWriteItems (record)", err)),
    }
}

/// [`RecordStore::update_draft`]: one `UpdateItem` under the update's condition.
pub(super) async fn update_draft(
    store: &DynamoStore,
    key: &PostKey,
    update: &DraftUpdate,
    from: &[DraftStatus],
    now: i64,
) -> Result<bool, StoreError> {
    let mut e = draft_update(store.ns, update, now);
    let condition = e.applies(update, from);
    let result = store.update_draft_item(key, e, condition).send().await;
    match result {
        Ok(_) => Ok(true),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|se| se.is_conditional_check_failed_exception()) =>
        {
            Ok(false)
        }
        Err(err) => Err(sdk_err("UpdateItem (draft)", err)),
    }
}

/// [`RecordStore::take_intent`]: the draft's change with its checks (no record, the caption
/// not another key's) in one transaction.
pub(super) async fn take_intent(
    store: &DynamoStore,
    key: &PostKey,
    update: &DraftUpdate,
    from: &[DraftStatus],
    caption_hash: Option<&str>,
    now: i64,
) -> Result<Intent, StoreError> {
    let tx = |e| sdk_err("TransactWriteItems (intent)", e);
    let mut e = draft_update(store.ns, update, now);
    let condition = e.applies(update, from);
    let intent = Update::builder()
        .table_name(&store.table)
        .set_key(Some(store.key(draft_name(key))))
        .update_expression(e.expression())
        .condition_expression(condition)
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .build()
        .map_err(tx)?;
    let (condition, names, values) = no_record(store.ns);
    let no_record = ConditionCheck::builder()
        .table_name(&store.table)
        .set_key(Some(store.key(record_name(key))))
        .condition_expression(condition)
        .set_expression_attribute_names(names)
        .set_expression_attribute_values(values)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    let mut request = store
        .client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(intent).build())
        .transact_items(
            TransactWriteItem::builder()
                .condition_check(no_record.build().map_err(tx)?)
                .build(),
        );
    if let Some(h) = caption_hash {
        let caption = ConditionCheck::builder()
            .table_name(&store.table)
            .set_key(Some(store.key(caption_name(h))))
            .condition_expression("attribute_not_exists(pk) OR #key = :key")
            .expression_attribute_names("#key", "key")
            .expression_attribute_values(":key", s(key.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(tx)?;
        request = request.transact_items(
            TransactWriteItem::builder()
                .condition_check(caption)
                .build(),
        );
    }
    let err = match request.send().await {
        Ok(_) => return Ok(Intent::Taken),
        Err(err) => err,
    };
    let Some(checks) = failed_checks(&err) else {
        return Err(sdk_err("TransactWriteItems (intent)", err));
    };
    // The record decides first, then the caption, then the draft's own state.
    if let Some(Some(item)) = checks.get(1) {
        return Ok(match item {
            Some(item) => Intent::Recorded(record_from_item(item)?),
            None => match store.get_record_consistent(&key.to_string()).await? {
                Some(r) => Intent::Recorded(r),
                None => Intent::Refused,
            },
        });
    }
    if let Some(Some(item)) = checks.get(2) {
        let other = match item {
            Some(item) => get_s(item, "key"),
            None => {
                store
                    .caption_owner(caption_hash.unwrap_or_default())
                    .await?
            }
        };
        return Ok(other.map_or(Intent::Refused, Intent::CaptionOwner));
    }
    Ok(Intent::Refused)
}

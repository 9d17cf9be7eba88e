//! The DynamoDB record store: one table, partition key `pk` (S), TTL attribute `expires_at`.
//!
//! `posted:<key>` items are the durable records (never expire); `draft:<key>` items hold the
//! content and its state. All mapping between items and [`PostedRecord`] / [`Draft`] lives here.
//! The record write and the draft's `posted` mark go in one `TransactWriteItems`, so the happy
//! path costs one write and the draft never disagrees with the record.
//!
//! The due index (DESIGN.md "Scheduling") is a sparse global secondary index, [`DUE_INDEX`]:
//! partition `queue` (the namespace and the status, e.g. `scheduled` or `dryrun:failed`), sort
//! `due_at` (Unix seconds). Every open draft carries both; a draft that is done (posted,
//! cancelled) carries neither, so the sweeper queries what is due and never scans the table.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_dynamodb::error::{BoxError, DisplayErrorContext};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck,
    CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex, GlobalSecondaryIndexUpdate,
    KeySchemaElement, KeyType, KeysAndAttributes, Projection, ProjectionType, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TimeToLiveSpecification,
    TimeToLiveStatus, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use super::{
    caption_name, draft_name, pace_name, record_name, secret_name, Draft, DraftContent,
    DraftStatus, DraftUpdate, Intent, PendingPost, PostedRecord, PutPosted, RecordStore, Slot,
    Snapshot, StoreError,
};

/// The due index's name.
pub const DUE_INDEX: &str = "due";
use crate::config::{Config, Secret};
use crate::key::PostKey;

type Item = HashMap<String, AttributeValue>;

/// Records in a DynamoDB table.
pub struct DynamoStore {
    client: Client,
    table: String,
    requests: Arc<AtomicU64>,
    /// Items the server says it read for the due index's queries (their `ScannedCount`).
    due_items_read: AtomicU64,
    /// Prefix of every item's key: empty, or `dryrun:` for the dry-run publisher's runs, so a
    /// dry run never leaves a record that would stop the first real post.
    ns: &'static str,
}

/// Counts the HTTP requests the client sends (retries included), for the request-count figures.
#[derive(Debug)]
struct CountRequests(Arc<AtomicU64>);

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "CountRequests"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn sdk_err(what: &str, e: impl std::error::Error) -> StoreError {
    StoreError(format!("DynamoDB {what}: {}", DisplayErrorContext(e)))
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn pk(name: String) -> Item {
    HashMap::from([("pk".to_owned(), s(name))])
}

fn get_s(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn get_bool(item: &Item, name: &str) -> Option<bool> {
    item.get(name).and_then(|v| v.as_bool().ok()).copied()
}

fn record_from_item(item: &Item) -> Result<PostedRecord, StoreError> {
    let key = get_s(item, "key").ok_or_else(|| StoreError("posted item without key".into()))?;
    Ok(PostedRecord {
        key,
        urn: get_s(item, "urn"),
        posted_at: get_n(item, "posted_at").unwrap_or(0),
        run: get_s(item, "run").unwrap_or_default(),
        source: get_s(item, "source").unwrap_or_default(),
        caption_hash: get_s(item, "caption_hash"),
        url: get_s(item, "url"),
        cid: get_s(item, "cid"),
    })
}

fn record_to_item(ns: &str, r: &PostedRecord) -> Item {
    let mut item = pk(format!("{ns}posted:{}", r.key));
    item.insert("key".into(), s(&r.key));
    item.insert("posted_at".into(), n(r.posted_at));
    item.insert("run".into(), s(&r.run));
    item.insert("source".into(), s(&r.source));
    if let Some(urn) = &r.urn {
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

fn draft_from_item(item: &Item) -> Result<Draft, StoreError> {
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
            commentary,
            image_urn,
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
        record: get_s(item, "record").and_then(|r| serde_json::from_str(&r).ok()),
        key,
    })
}

/// In the real namespace, the condition under which a `posted:` item does not count as a post:
/// a dry run's record (only an older version could write one there), whose URN carries the
/// mark (LinkedIn's) or starts with it (the other networks'); see
/// [`crate::networks::is_dry_run_urn`]. Uses `#urn`, `:dry` and `:dryid`.
const DRY_RECORD: &str = "contains(#urn, :dry) OR begins_with(#urn, :dryid)";

/// The record's copy a posted draft keeps ([`Draft::record`]), as JSON.
fn record_copy(record: &PostedRecord) -> AttributeValue {
    s(serde_json::to_string(record).unwrap_or_default())
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

/// An update expression under construction, with every attribute name behind a placeholder
/// (`status`, `key` and `source` are reserved words).
#[derive(Default)]
struct Expr {
    set: Vec<String>,
    remove: Vec<String>,
    names: HashMap<String, String>,
    values: Item,
}

impl Expr {
    fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    fn value(&mut self, v: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), v);
        placeholder
    }

    fn set(&mut self, attr: &str, v: AttributeValue) -> &mut Self {
        let (a, v) = (self.name(attr), self.value(v));
        self.set.push(format!("{a} = {v}"));
        self
    }

    fn set_if_absent(&mut self, attr: &str, v: AttributeValue) -> &mut Self {
        let (a, v) = (self.name(attr), self.value(v));
        self.set.push(format!("{a} = if_not_exists({a}, {v})"));
        self
    }

    fn set_opt(&mut self, attr: &str, v: Option<AttributeValue>) -> &mut Self {
        match v {
            Some(v) => self.set(attr, v),
            None => self.remove(attr),
        }
    }

    fn increment(&mut self, attr: &str) -> &mut Self {
        let a = self.name(attr);
        let zero = self.value(n(0));
        let one = self.value(n(1));
        self.set
            .push(format!("{a} = if_not_exists({a}, {zero}) + {one}"));
        self
    }

    fn remove(&mut self, attr: &str) -> &mut Self {
        let a = self.name(attr);
        self.remove.push(a);
        self
    }

    /// Sets the status and, with it, the due index's partition (`queue`).
    fn status(&mut self, ns: &str, status: DraftStatus) -> &mut Self {
        self.set("status", s(status.as_str()))
            .set("queue", s(format!("{ns}{}", status.as_str())))
    }

    /// Takes the draft out of the due index (it is done).
    fn unindex(&mut self) -> &mut Self {
        self.remove("queue").remove("due_at")
    }

    /// Removes the kept create-post request (the attempt is settled).
    fn clear_pending(&mut self) -> &mut Self {
        for attr in [
            "pending_commentary",
            "pending_image_urn",
            "pending_alt",
            "pending_at",
            "pending_run",
            "pending_caption_hash",
            "pending_last_at",
            "pending_request",
        ] {
            self.remove(attr);
        }
        self
    }

    fn expression(&self) -> String {
        let mut e = String::new();
        if !self.set.is_empty() {
            e.push_str("SET ");
            e.push_str(&self.set.join(", "));
        }
        if !self.remove.is_empty() {
            e.push_str(" REMOVE ");
            e.push_str(&self.remove.join(", "));
        }
        e
    }

    /// When `update` applies to a draft (see [`RecordStore::update_draft`]): it exists, its
    /// status is in `from` (any, if empty), a change bound to an attempt finds that attempt
    /// kept, and a delay is told only once.
    fn applies(&mut self, update: &DraftUpdate, from: &[DraftStatus]) -> String {
        let mut condition = self.condition(from);
        if let DraftUpdate::Resend { prev_run: run, .. } | DraftUpdate::IfAttempt { run, .. } =
            update
        {
            let (a, v) = (self.name("pending_run"), self.value(s(run)));
            condition.push_str(&format!(" AND {a} = {v}"));
        }
        if matches!(update, DraftUpdate::DelayTold) {
            let (a, f) = (
                self.name("delay_told"),
                self.value(AttributeValue::Bool(false)),
            );
            condition.push_str(&format!(" AND (attribute_not_exists({a}) OR {a} = {f})"));
        }
        condition
    }

    /// `attribute_exists(pk)` and, when `from` is not empty, `status IN (…)`.
    fn condition(&mut self, from: &[DraftStatus]) -> String {
        let mut c = "attribute_exists(pk)".to_owned();
        if !from.is_empty() {
            let st = self.name("status");
            let vals: Vec<String> = from.iter().map(|f| self.value(s(f.as_str()))).collect();
            c.push_str(&format!(" AND {st} IN ({})", vals.join(", ")));
        }
        c
    }
}

fn posted_draft_update(record: &PostedRecord, now: i64, expires_at: i64) -> Expr {
    let mut e = Expr::default();
    e.set("key", s(&record.key))
        .set("status", s(DraftStatus::Posted.as_str()))
        .unindex()
        .set("updated_at", n(now))
        .set("expires_at", n(expires_at))
        .set_if_absent("created_at", n(now))
        .set_if_absent("attempts", n(0))
        .remove("next_retry_at")
        .set("record", record_copy(record))
        .clear_pending();
    e
}

fn draft_update(ns: &str, update: &DraftUpdate, now: i64) -> Expr {
    if let DraftUpdate::IfAttempt { update, .. } = update {
        return draft_update(ns, update, now);
    }
    let mut e = Expr::default();
    e.set("updated_at", n(now));
    match update.due_at(now) {
        Some(Some(at)) => {
            e.set("due_at", n(at));
        }
        Some(None) => {
            e.unindex();
        }
        None => {}
    }
    match update {
        DraftUpdate::IfAttempt { .. } => {}
        DraftUpdate::Intent(p) => {
            e.status(ns, DraftStatus::Unknown)
                .set("pending_commentary", s(&p.commentary))
                .set("pending_image_urn", s(&p.image_urn))
                .set_opt("pending_alt", p.alt.as_ref().map(s))
                .set("pending_at", n(p.at))
                .set("pending_run", s(&p.run))
                .set_opt("pending_caption_hash", p.caption_hash.as_ref().map(s))
                .set_opt(
                    "pending_request",
                    p.request
                        .as_ref()
                        .and_then(|r| serde_json::to_string(r).ok())
                        .map(|r| s(&r)),
                )
                .remove("pending_last_at")
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true));
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            e.status(ns, DraftStatus::Failed)
                .set("reminded", AttributeValue::Bool(false))
                .increment("attempts")
                .set("last_error", s(error))
                .set("retryable", AttributeValue::Bool(*retryable))
                .set_opt("next_retry_at", next_retry_at.map(n))
                .clear_pending();
        }
        DraftUpdate::Ambiguous { error, ask_owner } => {
            e.status(ns, DraftStatus::Unknown)
                .set("reminded", AttributeValue::Bool(false))
                .increment("attempts")
                .set("last_error", s(error))
                .set("retryable", AttributeValue::Bool(!ask_owner));
        }
        DraftUpdate::Resend { at, run, .. } => {
            e.set("pending_last_at", n(*at)).set("pending_run", s(run));
        }
        DraftUpdate::NeedsReview { error } => {
            e.status(ns, DraftStatus::NeedsReview)
                .set("last_error", s(error))
                .set("reminded", AttributeValue::Bool(false))
                .remove("next_retry_at");
        }
        DraftUpdate::Reminded => {
            e.set("reminded", AttributeValue::Bool(true));
        }
        DraftUpdate::DelayTold => {
            e.set("delay_told", AttributeValue::Bool(true));
        }
        DraftUpdate::Recorded { expires_at, record } => {
            e.set("status", s(DraftStatus::Posted.as_str()))
                .set("record", record_copy(record))
                .set("expires_at", n(*expires_at))
                .remove("next_retry_at")
                .clear_pending();
        }
        DraftUpdate::Schedule { at } => {
            e.status(ns, DraftStatus::Scheduled)
                .set("publish_at", n(*at))
                .remove("delay_told")
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true))
                .remove("last_error")
                .remove("next_retry_at")
                .clear_pending();
        }
        DraftUpdate::Defer { reason, told, .. } => {
            if *told {
                e.set("delay_told", AttributeValue::Bool(true));
            }
            e.status(ns, DraftStatus::Scheduled)
                .set("last_error", s(reason))
                .set("retryable", AttributeValue::Bool(true))
                .clear_pending();
        }
        DraftUpdate::Revive => {
            e.status(ns, DraftStatus::New)
                .remove("publish_at")
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true));
        }
        DraftUpdate::Cancel => {
            e.set("status", s(DraftStatus::Cancelled.as_str()))
                .remove("next_retry_at")
                .clear_pending();
        }
    }
    e
}

fn due_index_keys() -> Result<Vec<KeySchemaElement>, StoreError> {
    Ok(vec![
        KeySchemaElement::builder()
            .attribute_name("queue")
            .key_type(KeyType::Hash)
            .build()
            .map_err(|e| sdk_err("due index", e))?,
        KeySchemaElement::builder()
            .attribute_name("due_at")
            .key_type(KeyType::Range)
            .build()
            .map_err(|e| sdk_err("due index", e))?,
    ])
}

/// Every attribute the table's keys use: `pk`, and the due index's `queue` and `due_at`.
fn due_index_attributes() -> Result<Vec<AttributeDefinition>, StoreError> {
    [
        ("pk", ScalarAttributeType::S),
        ("queue", ScalarAttributeType::S),
        ("due_at", ScalarAttributeType::N),
    ]
    .into_iter()
    .map(|(name, kind)| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .map_err(|e| sdk_err("attribute definition", e))
    })
    .collect()
}

fn due_index() -> Result<GlobalSecondaryIndex, StoreError> {
    GlobalSecondaryIndex::builder()
        .index_name(DUE_INDEX)
        .set_key_schema(Some(due_index_keys()?))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| sdk_err("due index", e))
}

impl DynamoStore {
    /// Builds the client once per process from `config` (region, endpoint, static credentials
    /// when given, the SDK's chain otherwise), with the DynamoDB budget as the attempt timeout.
    pub async fn connect(config: &Config, table: &str, dry_run: bool) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        match &config.aws_region {
            Some(r) => loader = loader.region(Region::new(r.clone())),
            None if config.dynamodb_endpoint.is_some() => {
                loader = loader.region(Region::new("us-east-1"))
            }
            None => {}
        }
        if let Some((id, secret)) = &config.aws_credentials {
            loader = loader.credentials_provider(Credentials::new(
                id,
                secret.expose(),
                None,
                None,
                "postonce-env",
            ));
        }
        let budget = config.timeouts.dynamodb;
        loader = loader
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(budget.min(Duration::from_secs(3)))
                    .operation_attempt_timeout(budget)
                    .build(),
            )
            .retry_config(RetryConfig::standard().with_max_attempts(3));
        let shared = loader.load().await;
        let requests = Arc::new(AtomicU64::new(0));
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&shared)
            .interceptor(CountRequests(requests.clone()));
        if let Some(ep) = &config.dynamodb_endpoint {
            builder = builder.endpoint_url(ep);
        }
        Self {
            client: Client::from_conf(builder.build()),
            table: table.to_owned(),
            requests,
            due_items_read: AtomicU64::new(0),
            ns: if dry_run { "dryrun:" } else { "" },
        }
    }

    fn key(&self, name: String) -> Item {
        pk(format!("{}{name}", self.ns))
    }

    /// Items DynamoDB read to answer the due index's queries so far, as the server counted
    /// them (`ScannedCount`): what a sweep's listing costs.
    pub fn due_items_read(&self) -> u64 {
        self.due_items_read.load(Ordering::Relaxed)
    }

    /// HTTP requests sent to DynamoDB so far by this client.
    pub fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Creates the table (`pk` S, pay per request, the due index) and turns TTL on for
    /// `expires_at`. An existing table keeps its items; one without the due index gets it.
    /// Returns what was done.
    ///
    /// # Errors
    /// When DynamoDB refuses or cannot be reached.
    pub async fn create_table(&self) -> Result<String, StoreError> {
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("pk")
                    .key_type(KeyType::Hash)
                    .build()
                    .map_err(|e| sdk_err("create_table", e))?,
            )
            .set_attribute_definitions(Some(due_index_attributes()?))
            .global_secondary_indexes(due_index()?)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        let mut said = match created {
            Ok(_) => format!("created table {} with the due index", self.table),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_resource_in_use_exception()) =>
            {
                let mut said = format!("table {} already exists", self.table);
                said.push_str(&self.ensure_due_index().await?);
                said
            }
            Err(e) => return Err(sdk_err("CreateTable", e)),
        };
        let ttl = self
            .client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name("expires_at")
                    .build()
                    .map_err(|e| sdk_err("UpdateTimeToLive", e))?,
            )
            .send()
            .await;
        match ttl {
            Ok(_) => said.push_str("; TTL on expires_at enabled"),
            // Already enabled: DynamoDB refuses to enable it twice.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| format!("{se:?}").contains("already enabled")) =>
            {
                said.push_str("; TTL on expires_at already enabled");
            }
            Err(e) => return Err(sdk_err("UpdateTimeToLive", e)),
        }
        Ok(said)
    }

    /// Whether the table has the due index.
    async fn has_due_index(&self) -> Result<bool, StoreError> {
        let table = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| sdk_err(&format!("DescribeTable {}", self.table), e))?;
        Ok(table.table().is_some_and(|t| {
            t.global_secondary_indexes()
                .iter()
                .any(|i| i.index_name() == Some(DUE_INDEX))
        }))
    }

    /// Adds the due index to a table an older version created, and indexes the open drafts
    /// that table already holds (one scan, once), so the sweeper still finds them.
    async fn ensure_due_index(&self) -> Result<String, StoreError> {
        if self.has_due_index().await? {
            return Ok("; due index present".into());
        }
        let index = CreateGlobalSecondaryIndexAction::builder()
            .index_name(DUE_INDEX)
            .set_key_schema(Some(due_index_keys()?))
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::All)
                    .build(),
            )
            .build()
            .map_err(|e| sdk_err("UpdateTable", e))?;
        self.client
            .update_table()
            .table_name(&self.table)
            .set_attribute_definitions(Some(due_index_attributes()?))
            .global_secondary_index_updates(
                GlobalSecondaryIndexUpdate::builder().create(index).build(),
            )
            .send()
            .await
            .map_err(|e| sdk_err("UpdateTable (add the due index)", e))?;
        let mut indexed = 0;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("begins_with(pk, :d) AND attribute_not_exists(due_at)")
                .expression_attribute_values(":d", s(format!("{}draft:", self.ns)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_err("Scan (index the open drafts)", e))?;
            for item in out.items() {
                let d = draft_from_item(item)?;
                if matches!(d.status, DraftStatus::Posted | DraftStatus::Cancelled) {
                    continue;
                }
                let Some(pk) = item.get("pk").cloned() else {
                    continue;
                };
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .key("pk", pk)
                    .update_expression("SET #q = :q, due_at = :d")
                    .expression_attribute_names("#q", "queue")
                    .expression_attribute_values(
                        ":q",
                        s(format!("{}{}", self.ns, d.status.as_str())),
                    )
                    .expression_attribute_values(":d", n(d.next_retry_at.unwrap_or(d.updated_at)))
                    .send()
                    .await
                    .map_err(|e| sdk_err("UpdateItem (index a draft)", e))?;
                indexed += 1;
            }
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => break,
            }
        }
        Ok(format!("; due index added ({indexed} open drafts indexed)"))
    }

    /// One item, strongly consistent (`what` names it in an error).
    async fn get_consistent(&self, name: String, what: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(self.key(name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_err(what, e))?;
        Ok(out.item)
    }

    async fn get_record_consistent(&self, key: &str) -> Result<Option<PostedRecord>, StoreError> {
        self.get_consistent(format!("posted:{key}"), "GetItem")
            .await?
            .as_ref()
            .map(record_from_item)
            .transpose()
    }
}

#[async_trait]
impl RecordStore for DynamoStore {
    async fn save_draft(
        &self,
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
                s(format!("{}{}", self.ns, DraftStatus::New.as_str())),
            )
            .set_if_absent("due_at", n(now))
            .set_if_absent("attempts", n(0))
            .set_if_absent("retryable", AttributeValue::Bool(true))
            .set_if_absent("created_at", n(now))
            .set_if_absent("source", s(source));
        // A posted draft that holds its record's copy is left alone, and its copy comes back
        // with the failed condition: the caller learns it is posted from this one request.
        let (st, rec) = (e.name("status"), e.name("record"));
        let posted = e.value(s(DraftStatus::Posted.as_str()));
        let mut condition = format!("attribute_not_exists({rec}) OR {st} <> {posted}");
        if self.ns.is_empty() {
            // The copy of a dry run's record (see `DRY_RECORD`), in its JSON.
            let dry = e.value(s(crate::networks::show::MARK));
            let dry_id = e.value(s("\"urn\":\"dryrun-"));
            condition.push_str(&format!(
                " OR contains({rec}, {dry}) OR contains({rec}, {dry_id})"
            ));
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(draft_name(key))))
            .update_expression(e.expression())
            .condition_expression(condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
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
            None => self
                .load(key, None)
                .await?
                .draft
                .ok_or_else(|| StoreError(format!("the draft {key} vanished"))),
        }
    }

    async fn load(
        &self,
        key: &PostKey,
        caption_hash: Option<&str>,
    ) -> Result<Snapshot, StoreError> {
        let mut wanted = vec![self.key(record_name(key)), self.key(draft_name(key))];
        if let Some(h) = caption_hash {
            wanted.push(self.key(caption_name(h)));
        }
        let mut snapshot = Snapshot::default();
        // BatchGetItem may leave keys unprocessed under throttling; ask again for those.
        for _ in 0..5 {
            let request = KeysAndAttributes::builder()
                .set_keys(Some(wanted))
                .consistent_read(true)
                .build()
                .map_err(|e| sdk_err("BatchGetItem", e))?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|e| sdk_err("BatchGetItem", e))?;
            for item in out
                .responses()
                .and_then(|r| r.get(&self.table))
                .into_iter()
                .flatten()
            {
                let name =
                    get_s(item, "pk").map(|p| p.strip_prefix(self.ns).unwrap_or(&p).to_owned());
                match name {
                    Some(p) if p.starts_with("posted:") => {
                        snapshot.record = Some(record_from_item(item)?)
                    }
                    Some(p) if p.starts_with("draft:") => {
                        snapshot.draft = Some(draft_from_item(item)?)
                    }
                    Some(p) if p.starts_with("caption:") => {
                        snapshot.caption_owner = get_s(item, "key")
                    }
                    _ => {}
                }
            }
            match out.unprocessed_keys().and_then(|u| u.get(&self.table)) {
                Some(left) if !left.keys().is_empty() => wanted = left.keys().to_vec(),
                _ => return Ok(snapshot),
            }
        }
        Err(StoreError(
            "DynamoDB BatchGetItem: keys left unprocessed after 5 tries (throttled)".into(),
        ))
    }

    async fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        let item = self
            .get_consistent(caption_name(caption_hash), "GetItem (caption)")
            .await?;
        Ok(item.and_then(|i| get_s(&i, "key")))
    }

    async fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError> {
        let mut put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record_to_item(self.ns, record)));
        put = if self.ns.is_empty() {
            // A dry run's record in the real namespace (only an older version could write one)
            // proves nothing was posted: a real record may replace it.
            put.condition_expression(format!("attribute_not_exists(pk) OR {DRY_RECORD}"))
                .expression_attribute_names("#urn", "urn")
                .expression_attribute_values(":dry", s(crate::networks::show::MARK))
                .expression_attribute_values(":dryid", s("dryrun-"))
        } else {
            put.condition_expression("attribute_not_exists(pk)")
        };
        let put = put
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| sdk_err("TransactWriteItems", e))?;
        let e = posted_draft_update(record, now, draft_expires_at);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(format!("draft:{}", record.key))))
            .update_expression(e.expression())
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
            .build()
            .map_err(|e| sdk_err("TransactWriteItems", e))?;
        let mut request = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().update(update).build());
        if let Some(h) = &record.caption_hash {
            let mut item = self.key(caption_name(h));
            item.insert("key".into(), s(&record.key));
            if let Some(urn) = &record.urn {
                item.insert("urn".into(), s(urn));
            }
            let index = Put::builder()
                .table_name(&self.table)
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
            Some(None) => match self.get_record_consistent(&record.key).await? {
                Some(r) => Ok(PutPosted::Exists(r)),
                None => Err(StoreError(
                    "record condition failed but no record is there".into(),
                )),
            },
            None => Err(sdk_err("TransactWriteItems (record)", err)),
        }
    }

    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut e = draft_update(self.ns, update, now);
        let condition = e.applies(update, from);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(draft_name(key))))
            .update_expression(e.expression())
            .condition_expression(condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
            .send()
            .await;
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

    async fn take_intent(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError> {
        let tx = |e| sdk_err("TransactWriteItems (intent)", e);
        let mut e = draft_update(self.ns, update, now);
        let condition = e.applies(update, from);
        let intent = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(draft_name(key))))
            .update_expression(e.expression())
            .condition_expression(condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
            .build()
            .map_err(tx)?;
        let mut no_record = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(record_name(key))))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        no_record = if self.ns.is_empty() {
            no_record
                .condition_expression(format!("attribute_not_exists(pk) OR {DRY_RECORD}"))
                .expression_attribute_names("#urn", "urn")
                .expression_attribute_values(":dry", s(crate::networks::show::MARK))
                .expression_attribute_values(":dryid", s("dryrun-"))
        } else {
            no_record.condition_expression("attribute_not_exists(pk)")
        };
        let mut request = self
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
                .table_name(&self.table)
                .set_key(Some(self.key(caption_name(h))))
                .condition_expression("attribute_not_exists(pk) OR #key = :key")
                .expression_attribute_names("#key", "key")
                .expression_attribute_values(":key", s(key.to_string()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
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
                None => match self.get_record_consistent(&key.to_string()).await? {
                    Some(r) => Intent::Recorded(r),
                    None => Intent::Refused,
                },
            });
        }
        if let Some(Some(item)) = checks.get(2) {
            let other = match item {
                Some(item) => get_s(item, "key"),
                None => self.caption_owner(caption_hash.unwrap_or_default()).await?,
            };
            return Ok(other.map_or(Intent::Refused, Intent::CaptionOwner));
        }
        Ok(Intent::Refused)
    }

    async fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError> {
        let mut drafts = Vec::new();
        for status in statuses {
            let mut start: Option<Item> = None;
            loop {
                let out = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(DUE_INDEX)
                    .key_condition_expression("#q = :q AND #d <= :b")
                    .expression_attribute_names("#q", "queue")
                    .expression_attribute_names("#d", "due_at")
                    .expression_attribute_values(":q", s(format!("{}{}", self.ns, status.as_str())))
                    .expression_attribute_values(":b", n(before))
                    .set_exclusive_start_key(start.take())
                    .send()
                    .await
                    .map_err(|e| sdk_err(&format!("Query (index {DUE_INDEX})"), e))?;
                self.due_items_read.fetch_add(
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

    async fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(pace_name(network))))
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

    async fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError> {
        let item = self
            .get_consistent(pace_name(network), "GetItem (pace)")
            .await?;
        Ok(item.and_then(|i| get_n(&i, "last_ms")))
    }

    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, StoreError> {
        let item = self
            .get_consistent(secret_name(name)?, "GetItem (secret)")
            .await?;
        Ok(item.and_then(|i| get_s(&i, "secret")).map(Secret::new))
    }

    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), StoreError> {
        let mut item = self.key(secret_name(name)?);
        item.insert("secret".into(), s(value.expose()));
        item.insert("updated_at".into(), n(super::now_s()));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| sdk_err("PutItem (secret)", e))?;
        Ok(())
    }

    async fn check(&self) -> Result<String, StoreError> {
        let table = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| sdk_err(&format!("DescribeTable {}", self.table), e))?;
        let desc = table
            .table()
            .ok_or_else(|| StoreError("DescribeTable answered no table".into()))?;
        let key_ok = desc.key_schema().len() == 1
            && desc.key_schema()[0].attribute_name() == "pk"
            && desc.key_schema()[0].key_type() == &KeyType::Hash
            && desc.attribute_definitions().iter().any(|a| {
                a.attribute_name() == "pk" && a.attribute_type() == &ScalarAttributeType::S
            });
        if !key_ok {
            return Err(StoreError(format!(
                "table {} must have exactly one key, pk of type S (postonce table create makes it)",
                self.table
            )));
        }
        if !desc
            .global_secondary_indexes()
            .iter()
            .any(|i| i.index_name() == Some(DUE_INDEX))
        {
            return Err(StoreError(format!(
                "table {} has no index {DUE_INDEX} (queue S, due_at N), which the sweeper reads: run postonce table create against it, or deploy the template, to add it",
                self.table
            )));
        }
        let ttl = self
            .client
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| sdk_err("DescribeTimeToLive", e))?;
        let ttl_ok = ttl.time_to_live_description().is_some_and(|d| {
            d.attribute_name() == Some("expires_at")
                && matches!(
                    d.time_to_live_status(),
                    Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
                )
        });
        if !ttl_ok {
            return Err(StoreError(format!(
                "table {}: TTL is not enabled on expires_at (aws dynamodb update-time-to-live --table-name {} --time-to-live-specification Enabled=true,AttributeName=expires_at)",
                self.table, self.table
            )));
        }
        Ok(format!(
            "table {}: key pk (S), index {DUE_INDEX}, TTL on expires_at",
            self.table
        ))
    }
}

//! The table's schema: `postonce table create` (the key, the due index, TTL), the due index
//! added to a table an older version made, and the check `doctor` runs.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TableDescription, TimeToLiveSpecification, TimeToLiveStatus,
};

use super::items::{draft_from_item, n, s, Item};
use super::{sdk_err, DynamoStore, DUE_INDEX};
use crate::record::{DraftStatus, StoreError};

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

/// The due index's projection: whole items, so a sweep reads each due draft from the index.
fn all_attributes() -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::All)
        .build()
}

/// Whether the table `desc` describes has the due index.
fn has_due_index(desc: &TableDescription) -> bool {
    desc.global_secondary_indexes()
        .iter()
        .any(|i| i.index_name() == Some(DUE_INDEX))
}

fn due_index() -> Result<GlobalSecondaryIndex, StoreError> {
    GlobalSecondaryIndex::builder()
        .index_name(DUE_INDEX)
        .set_key_schema(Some(due_index_keys()?))
        .projection(all_attributes())
        .build()
        .map_err(|e| sdk_err("due index", e))
}

impl DynamoStore {
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

    /// The table's description, as `DescribeTable` answers it.
    async fn describe(&self) -> Result<Option<TableDescription>, StoreError> {
        let out = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| sdk_err(&format!("DescribeTable {}", self.table), e))?;
        Ok(out.table)
    }

    /// Adds the due index to a table an older version created, and indexes the open drafts
    /// that table already holds (one scan, once), so the sweeper still finds them.
    async fn ensure_due_index(&self) -> Result<String, StoreError> {
        if self.describe().await?.is_some_and(|t| has_due_index(&t)) {
            return Ok("; due index present".into());
        }
        let index = CreateGlobalSecondaryIndexAction::builder()
            .index_name(DUE_INDEX)
            .set_key_schema(Some(due_index_keys()?))
            .projection(all_attributes())
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
}

/// [`RecordStore::check`](crate::record::RecordStore::check): the key, the due index and TTL, as `doctor` reports them.
pub(super) async fn check(store: &DynamoStore) -> Result<String, StoreError> {
    let desc = store
        .describe()
        .await?
        .ok_or_else(|| StoreError("DescribeTable answered no table".into()))?;
    let key_ok = desc.key_schema().len() == 1
        && desc.key_schema()[0].attribute_name() == "pk"
        && desc.key_schema()[0].key_type() == &KeyType::Hash
        && desc
            .attribute_definitions()
            .iter()
            .any(|a| a.attribute_name() == "pk" && a.attribute_type() == &ScalarAttributeType::S);
    if !key_ok {
        return Err(StoreError(format!(
            "table {} must have exactly one key, pk of type S (postonce table create makes it)",
            store.table
        )));
    }
    if !has_due_index(&desc) {
        return Err(StoreError(format!(
            "table {} has no index {DUE_INDEX} (queue S, due_at N), which the sweeper reads: run postonce table create against it, or deploy the template, to add it",
            store.table
        )));
    }
    let ttl = store
        .client
        .describe_time_to_live()
        .table_name(&store.table)
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
            store.table, store.table
        )));
    }
    Ok(format!(
        "table {}: key pk (S), index {DUE_INDEX}, TTL on expires_at",
        store.table
    ))
}

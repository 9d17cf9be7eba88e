//! The DynamoDB record store: one table, partition key `pk` (S), TTL attribute `expires_at`.
//!
//! `posted:<key>` items are the durable records (never expire); `draft:<key>` items hold the
//! content and its state. All mapping between items and [`PostedRecord`] / [`Draft`] lives here.
//! The record write and the draft's `posted` mark go in one `TransactWriteItems`, so the happy
//! path costs one write and the draft never disagrees with the record.
//!
//! The due index (README "Scheduling") is a sparse global secondary index, [`DUE_INDEX`]:
//! partition `queue` (the namespace and the status, e.g. `scheduled` or `dryrun:failed`), sort
//! `due_at` (Unix seconds). Every open draft carries both; a draft that is done (posted,
//! cancelled) carries neither, so the sweeper queries what is due and never scans the table.
//!
//! The adapter's parts: `items` maps items to and from records and drafts, `update` builds a
//! draft change's update expression, `writes` holds the conditional writes (the draft saved,
//! the record with its draft mark, a draft change, an intent and its checks), `due` the due
//! index's queries and the pacing slots, and `table` the table's schema (`table create`,
//! `doctor`). This file holds the store, its client and reads, and the [`RecordStore`] impl.

#[cfg(feature = "cli")]
pub mod admin;
pub mod config;
mod due;
mod items;
mod table;
mod update;
mod writes;

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, RuntimeComponents};
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;

use self::config::DynamoConfig;
use self::items::{draft_from_item, get_n, get_s, n, pk, record_from_item, s, Item};
use super::StoreConfig;
use crate::key::PostKey;
use crate::record::{
    caption_name, draft_name, pace_name, record_name, secret_name, Draft, DraftContent,
    DraftStatus, DraftUpdate, Intent, PostedRecord, PutPosted, RecordStore, Slot, Snapshot,
    StoreError,
};
use crate::vars::Secret;

/// The due index's name.
pub const DUE_INDEX: &str = "due";

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

/// Counts the HTTP requests the client sends (retries included), for the request-count figures,
/// where they leave: at its HTTP client. (An interceptor counted them before; the SDK asks every
/// interceptor whether it is enabled at each of a request's hooks, which cost a new key some
/// 19,000 instructions for one counter: issue 34.)
#[derive(Debug)]
struct Counted {
    inner: SharedHttpClient,
    sent: Arc<AtomicU64>,
}

impl HttpClient for Counted {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(CountedConnector {
            inner: self.inner.http_connector(settings, components),
            sent: self.sent.clone(),
        })
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        self.inner.connector_metadata()
    }
}

#[derive(Debug)]
struct CountedConnector {
    inner: SharedHttpConnector,
    sent: Arc<AtomicU64>,
}

impl HttpConnector for CountedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.inner.call(request)
    }
}

fn sdk_err(what: &str, e: impl std::error::Error) -> StoreError {
    StoreError(format!("DynamoDB {what}: {}", DisplayErrorContext(e)))
}

/// The AWS SDK's configuration for `config`, loaded once per thread and settings: a start's
/// read of the stored credentials and the run's stores (a dry run's too) then share one HTTPS
/// client and its connections, so a start opens one connection to DynamoDB, not one per store
/// (issue 34: the cold start). Per thread, because the client's connections belong to the
/// runtime they were opened on: a thread belongs to one runtime for its life (a start runs on
/// its main thread), and a store opened elsewhere only misses the cache.
async fn sdk_config(config: &DynamoConfig) -> aws_config::SdkConfig {
    static LOADED: Mutex<Vec<(u64, aws_config::SdkConfig)>> = Mutex::new(Vec::new());
    let settings = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::thread::current().id().hash(&mut h);
        (&config.region, &config.endpoint, config.budget).hash(&mut h);
        if let Some((id, secret, token)) = &config.credentials {
            (id, secret.expose(), token.as_ref().map(Secret::expose)).hash(&mut h);
        }
        h.finish()
    };
    let known = LOADED.lock().ok().and_then(|l| {
        l.iter()
            .find(|(k, _)| *k == settings)
            .map(|(_, c)| c.clone())
    });
    if let Some(shared) = known {
        return shared;
    }
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).http_client(crate::aws_http::client());
    match &config.region {
        Some(r) => loader = loader.region(Region::new(r.clone())),
        None if config.endpoint.is_some() => loader = loader.region(Region::new("us-east-1")),
        None => {}
    }
    if let Some((id, secret, token)) = &config.credentials {
        loader = loader.credentials_provider(Credentials::new(
            id,
            secret.expose(),
            token.as_ref().map(|t| t.expose().to_owned()),
            None,
            "postonce-env",
        ));
    }
    let budget = config.budget;
    loader = loader
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(budget.min(Duration::from_secs(3)))
                .operation_attempt_timeout(budget)
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(3));
    let shared = loader.load().await;
    if let Ok(mut l) = LOADED.lock() {
        l.push((settings, shared.clone()));
    }
    shared
}

impl DynamoStore {
    /// Builds the client once per process from `config` (region, endpoint, static credentials
    /// when given, the SDK's chain otherwise), with the DynamoDB budget as the attempt timeout.
    /// `config` is the stores' configuration, or the whole [`crate::config::Config`].
    pub async fn connect(config: &impl AsRef<StoreConfig>, table: &str, dry_run: bool) -> Self {
        let config = &config.as_ref().dynamodb;
        let shared = sdk_config(config).await;
        let requests = Arc::new(AtomicU64::new(0));
        let http = shared.http_client().unwrap_or_else(crate::aws_http::client);
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&shared).http_client(Counted {
            inner: http,
            sent: requests.clone(),
        });
        if let Some(ep) = &config.endpoint {
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
        writes::save_draft(self, key, content, source, now).await
    }

    async fn save_scheduled(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        writes::save_scheduled(self, key, content, source, at, now).await
    }

    async fn start_attempt(
        &self,
        key: &PostKey,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        writes::start_attempt(self, key, from, now).await
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
        writes::put_posted(self, record, now, draft_expires_at).await
    }

    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        writes::update_draft(self, key, update, from, now).await
    }

    async fn take_intent(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError> {
        writes::take_intent(self, key, update, from, caption_hash, now).await
    }

    async fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError> {
        due::due_drafts(self, statuses, before).await
    }

    async fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError> {
        due::take_slot(self, network, interval_ms, now_ms).await
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
        item.insert("updated_at".into(), n(crate::record::now_s()));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| sdk_err("PutItem (secret)", e))?;
        Ok(())
    }

    async fn swap_secret(
        &self,
        name: &str,
        expected: Option<&Secret>,
        value: &Secret,
    ) -> Result<bool, StoreError> {
        let mut item = self.key(secret_name(name)?);
        item.insert("secret".into(), s(value.expose()));
        item.insert("updated_at".into(), n(crate::record::now_s()));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item));
        let put = match expected {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(old) => put
                .condition_expression("secret = :old")
                .expression_attribute_values(":old", s(old.expose())),
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(e) => match e.as_service_error() {
                Some(
                    aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(_),
                ) => Ok(false),
                _ => Err(sdk_err("PutItem (secret, conditional)", e)),
            },
        }
    }

    async fn check(&self) -> Result<String, StoreError> {
        table::check(self).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_sdk_dynamodb::config::ProvideCredentials;

    use super::*;
    use crate::vars::Vars;

    /// Lambda's temporary credentials come as three variables: the session token travels with
    /// the key, or every signature is refused.
    #[tokio::test]
    async fn lambdas_session_token_signs_with_the_key() {
        let env: HashMap<&str, &str> = [
            ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "secret-SECRET1"),
            ("AWS_SESSION_TOKEN", "token-SECRET2"),
            ("AWS_REGION", "eu-west-1"),
        ]
        .into();
        let get = |k: &str| env.get(k).map(|v| (*v).to_owned());
        let config = DynamoConfig::load(Vars::new(&get)).expect("config");
        let shared = sdk_config(&config).await;
        let creds = shared
            .credentials_provider()
            .expect("a provider")
            .provide_credentials()
            .await
            .expect("credentials");
        assert_eq!(creds.access_key_id(), "ASIAEXAMPLE");
        assert_eq!(creds.session_token(), Some("token-SECRET2"));
        assert!(!format!("{config:?}").contains("SECRET"), "{config:?}");
    }
}

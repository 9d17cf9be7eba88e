//! The benchmark's bare client: the Redis, DynamoDB and image requests that one postonce run
//! makes, in the same order, with the same crates (tokio, redis's `ConnectionManager`,
//! `aws-sdk-dynamodb`, reqwest), and nothing else: no HTTP server, no signature, no JSON body,
//! no logging, no pipeline. `bench/bench.py` checks that its requests are postonce's (names,
//! order and count) before it compares their CPU.
//!
//! Protocol: one tab-separated line per run on stdin, one line back on stdout.
//! `new  <key> <caption> <image URL> <link> <caption hash>` → a new key's run;
//! `posted <key> <caption> <image URL> <link> <caption hash>` → an already-posted key's run;
//! each answers `ok <outcome>`. It prints `ready` once its clients are built and it has made
//! the one request postonce's start makes before a dry run (the stored credentials' GetItem),
//! so that a cold run of each makes the same requests.
//!
//! Configuration: the same variables as postonce (`REDIS_URL`, `POSTONCE_TABLE`,
//! `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_REGION`, static credentials); with `DATABASE_URL`, the
//! PostgreSQL mode instead ([`pg`]: the self-hosters' store, the claims in the database).
//!
//! `bench_bare serve --addr ADDR`: the same runs behind postonce's entry instead of stdin
//! ([`entry`]: a signed `POST /ci`, checked, its JSON read, a JSON answer).

// postonce's own files: the SDK's requests go out on the same client as postonce's.
#[path = "../../../src/aws_http.rs"]
mod aws_http;
mod entry;
mod pg;
#[path = "../../../src/tls.rs"]
mod tls;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

type Item = HashMap<String, AttributeValue>;
type Error = Box<dyn std::error::Error + Send + Sync>;

const RELEASE: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
/// The dry-run publisher's namespace: postonce's dry runs use these names.
const NS: &str = "dryrun:";

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn pk(name: String) -> Item {
    HashMap::from([("pk".to_owned(), AttributeValue::S(name))])
}

fn now() -> i64 {
    now_ms() / 1000
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

/// The cover's GET, read to its end (both modes).
async fn fetch_image(http: &reqwest::Client, r: &Run<'_>) -> Result<usize, Error> {
    let mut resp = http.get(r.image).send().await?.error_for_status()?;
    let mut len = 0;
    while let Some(chunk) = resp.chunk().await? {
        len += chunk.len();
    }
    Ok(len)
}

fn http_client() -> Result<reqwest::Client, Error> {
    Ok(reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()?)
}

struct Bare {
    redis: ConnectionManager,
    release: Script,
    dynamo: Client,
    table: String,
    http: reqwest::Client,
    runs: u64,
}

struct Run<'a> {
    key: &'a str,
    caption: &'a str,
    image: &'a str,
    link: &'a str,
    hash: &'a str,
}

impl Bare {
    async fn build() -> Result<Self, Error> {
        let timeout = Duration::from_secs(8);
        let client = redis::Client::open(std::env::var("REDIS_URL")?)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let redis = ConnectionManager::new_with_config(client, config).await?;
        let shared = aws_config::defaults(BehaviorVersion::latest())
            .http_client(aws_http::client())
            .region(Region::new(
                std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
            ))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(3))
                    .operation_attempt_timeout(timeout)
                    .build(),
            )
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .load()
            .await;
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&shared);
        if let Ok(ep) = std::env::var("AWS_ENDPOINT_URL_DYNAMODB") {
            builder = builder.endpoint_url(ep);
        }
        let http = http_client()?;
        Ok(Self {
            redis,
            release: Script::new(RELEASE),
            dynamo: Client::from_conf(builder.build()),
            table: std::env::var("POSTONCE_TABLE")?,
            http,
            runs: 0,
        })
    }

    fn name(&self, what: &str, key: &str) -> String {
        format!("{NS}{what}:{key}")
    }

    /// What postonce's start reads before its first run when some network has no credential
    /// in its variables, as in a dry run: the stored credentials, one consistent GetItem of
    /// `secret:credentials` (README "Getting credentials"). Absent here; only the request counts.
    async fn stored_credentials(&self) -> Result<(), Error> {
        self.dynamo
            .get_item()
            .table_name(&self.table)
            .set_key(Some(pk("secret:credentials".to_owned())))
            .consistent_read(true)
            .send()
            .await?;
        Ok(())
    }

    /// The draft the trigger carried: one UpdateItem, conditional on the draft not being
    /// posted with its record's copy; whether it is (the failed condition returns it).
    async fn save_draft(&self, r: &Run<'_>) -> Result<bool, Error> {
        let t = now();
        let values: Item = HashMap::from([
            (":v0".into(), s(r.key)),
            (":v1".into(), s(r.caption)),
            (":v2".into(), s(r.image)),
            (":v3".into(), s(r.link)),
            (":v4".into(), n(t)),
            (":v5".into(), s("new")),
            (":v6".into(), s(&format!("{NS}new"))),
            (":v7".into(), n(t)),
            (":v8".into(), n(0)),
            (":v9".into(), AttributeValue::Bool(true)),
            (":v10".into(), n(t)),
            (":v11".into(), s("ci")),
            (":v12".into(), s("posted")),
        ]);
        let names: HashMap<String, String> = [
            "key",
            "caption",
            "image",
            "link",
            "alt",
            "updated_at",
            "status",
            "queue",
            "due_at",
            "attempts",
            "retryable",
            "created_at",
            "source",
            "record",
        ]
        .iter()
        .map(|a| (format!("#{a}"), (*a).to_owned()))
        .collect();
        let out = self
            .dynamo
            .update_item()
            .table_name(&self.table)
            .set_key(Some(pk(self.name("draft", r.key))))
            .update_expression("SET #key = :v0, #caption = :v1, #image = :v2, #link = :v3, #updated_at = :v4, #status = if_not_exists(#status, :v5), #queue = if_not_exists(#queue, :v6), #due_at = if_not_exists(#due_at, :v7), #attempts = if_not_exists(#attempts, :v8), #retryable = if_not_exists(#retryable, :v9), #created_at = if_not_exists(#created_at, :v10), #source = if_not_exists(#source, :v11) REMOVE #alt")
            .condition_expression("attribute_not_exists(#record) OR #status <> :v12")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match out {
            Ok(_) => Ok(false),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(c) => Ok(c
                    .item()
                    .and_then(|i| i.get("status"))
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|st| st == "posted")),
                other => Err(other.into()),
            },
        }
    }

    /// `SET claim NX EX ttl`.
    async fn claim(&self, r: &Run<'_>, token: &str) -> Result<bool, Error> {
        let mut c = self.redis.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(self.name("claim", r.key))
            .arg(token)
            .arg("NX")
            .arg("EX")
            .arg(120)
            .query_async(&mut c)
            .await?;
        Ok(set.is_some())
    }

    /// The intent: a conditional update of the draft, with the checks that decide the run (no
    /// record; the caption not another key's), in one TransactWriteItems.
    async fn intent(&self, r: &Run<'_>, token: &str) -> Result<(), Error> {
        let t = now();
        let request = format!(
            "{{\"body\":{{\"commentary\":\"{}\",\"image\":\"urn:li:image:dry-run\"}},\"text\":\"{}\"}}",
            r.caption, r.caption
        );
        let names: HashMap<String, String> = [
            "updated_at",
            "status",
            "pending_commentary",
            "pending_image_urn",
            "pending_alt",
            "pending_at",
            "pending_run",
            "pending_caption_hash",
            "pending_request",
            "pending_last_at",
            "reminded",
            "retryable",
            "due_at",
            "queue",
        ]
        .iter()
        .map(|a| (format!("#{a}"), (*a).to_owned()))
        .collect();
        let values: Item = HashMap::from([
            (":v13".into(), n(t)),
            (":v14".into(), s(&format!("{NS}unknown"))),
            (":v0".into(), n(t)),
            (":v1".into(), s("unknown")),
            (":v2".into(), s(&format!("{}\n\n{}", r.caption, r.link))),
            (":v3".into(), s("urn:li:image:dry-run")),
            (":v4".into(), n(t)),
            (":v5".into(), s(token)),
            (":v6".into(), s(r.hash)),
            (":v7".into(), s(&request)),
            (":v8".into(), AttributeValue::Bool(false)),
            (":v9".into(), AttributeValue::Bool(true)),
            (":v10".into(), s("new")),
            (":v11".into(), s("failed")),
            (":v12".into(), s("needs_review")),
        ]);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(pk(self.name("draft", r.key))))
            .update_expression("SET #updated_at = :v0, #due_at = :v13, #status = :v1, #queue = :v14, #pending_commentary = :v2, #pending_image_urn = :v3, #pending_at = :v4, #pending_run = :v5, #pending_caption_hash = :v6, #pending_request = :v7, #reminded = :v8, #retryable = :v9 REMOVE #pending_alt, #pending_last_at")
            .condition_expression("attribute_exists(pk) AND #status IN (:v10, :v11, :v12)")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()?;
        let record = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(pk(self.name("posted", r.key))))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()?;
        let caption = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(pk(self.name("caption", r.hash))))
            .condition_expression("attribute_not_exists(pk) OR #key = :key")
            .expression_attribute_names("#key", "key")
            .expression_attribute_values(":key", s(r.key))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()?;
        self.dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(update).build())
            .transact_items(TransactWriteItem::builder().condition_check(record).build())
            .transact_items(
                TransactWriteItem::builder()
                    .condition_check(caption)
                    .build(),
            )
            .send()
            .await?;
        Ok(())
    }

    /// The record, the draft's `posted` mark and the caption index: one TransactWriteItems.
    async fn record(&self, r: &Run<'_>, token: &str) -> Result<(), Error> {
        let t = now();
        let urn = format!("urn:li:share:dry-run-{}", self.runs);
        let mut item = pk(self.name("posted", r.key));
        item.insert("key".into(), s(r.key));
        item.insert("posted_at".into(), n(t));
        item.insert("run".into(), s(token));
        item.insert("source".into(), s("ci"));
        item.insert("urn".into(), s(&urn));
        item.insert("caption_hash".into(), s(r.hash));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()?;
        let names: HashMap<String, String> = [
            "key",
            "status",
            "updated_at",
            "expires_at",
            "created_at",
            "attempts",
            "next_retry_at",
            "pending_commentary",
            "pending_image_urn",
            "pending_alt",
            "pending_at",
            "pending_run",
            "pending_caption_hash",
            "pending_last_at",
            "pending_request",
            "queue",
            "due_at",
            "record",
        ]
        .iter()
        .map(|a| (format!("#{a}"), (*a).to_owned()))
        .collect();
        let copy = format!(
            "{{\"key\":\"{}\",\"urn\":\"{urn}\",\"posted_at\":{t},\"run\":\"{token}\",\"source\":\"ci\",\"caption_hash\":\"{}\"}}",
            r.key, r.hash
        );
        let values: Item = HashMap::from([
            (":v6".into(), s(&copy)),
            (":v0".into(), s(r.key)),
            (":v1".into(), s("posted")),
            (":v2".into(), n(t)),
            (":v3".into(), n(t + 30 * 24 * 3600)),
            (":v4".into(), n(t)),
            (":v5".into(), n(0)),
        ]);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(pk(self.name("draft", r.key))))
            .update_expression("SET #key = :v0, #status = :v1, #updated_at = :v2, #expires_at = :v3, #created_at = if_not_exists(#created_at, :v4), #attempts = if_not_exists(#attempts, :v5), #record = :v6 REMOVE #queue, #due_at, #next_retry_at, #pending_commentary, #pending_image_urn, #pending_alt, #pending_at, #pending_run, #pending_caption_hash, #pending_last_at, #pending_request")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()?;
        let mut index = pk(self.name("caption", r.hash));
        index.insert("key".into(), s(r.key));
        index.insert("urn".into(), s(&urn));
        let index = Put::builder()
            .table_name(&self.table)
            .set_item(Some(index))
            .build()?;
        self.dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().update(update).build())
            .transact_items(TransactWriteItem::builder().put(index).build())
            .send()
            .await?;
        Ok(())
    }

    /// Compare-and-delete of the claim (EVALSHA, EVAL once if the script is not loaded).
    async fn release(&self, r: &Run<'_>, token: &str) -> Result<(), Error> {
        let mut c = self.redis.clone();
        let _: i64 = self
            .release
            .key(self.name("claim", r.key))
            .arg(token)
            .invoke_async(&mut c)
            .await?;
        Ok(())
    }

    async fn run(&mut self, r: &Run<'_>, token: &str) -> Result<&'static str, Error> {
        if self.save_draft(r).await? {
            return Ok("already_posted");
        }
        if !self.claim(r, token).await? {
            return Ok("being_posted");
        }
        fetch_image(&self.http, r).await?;
        self.intent(r, token).await?;
        self.record(r, token).await?;
        self.release(r, token).await?;
        Ok("posted")
    }
}

/// The store the runs go to: DynamoDB and Redis, or PostgreSQL alone.
enum Mode {
    Aws(Bare),
    Pg(pg::Pg),
}

impl Mode {
    async fn build() -> Result<Self, Error> {
        match std::env::var("DATABASE_URL") {
            Ok(url) => Ok(Self::Pg(pg::Pg::build(&url, http_client()?).await?)),
            Err(_) => {
                let bare = Bare::build().await?;
                bare.stored_credentials().await?;
                Ok(Self::Aws(bare))
            }
        }
    }

    /// One run; with `new`, an error unless it posted (`Some(true)`) or found the key posted
    /// (`Some(false)`).
    async fn run(&mut self, new: Option<bool>, r: &Run<'_>, n: u64) -> Result<&'static str, Error> {
        let token = format!("run-{n:032x}");
        let outcome = match self {
            Self::Aws(b) => {
                b.runs = n;
                b.run(r, &token).await?
            }
            Self::Pg(p) => p.run(r, &token, n).await?,
        };
        if new.is_some_and(|new| new != (outcome == "posted")) {
            return Err(format!(
                "expected {}, got {outcome}",
                if new == Some(true) {
                    "posted"
                } else {
                    "already_posted"
                }
            )
            .into());
        }
        Ok(outcome)
    }
}

// The same runtime flavour as postonce's binary (src/main.rs), so the ratio compares work.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let mut mode = Mode::build().await?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [serve, flag, addr] = &args[..] {
        if serve == "serve" && flag == "--addr" {
            return entry::serve(addr, mode).await;
        }
    }
    let mut runs = 0;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        let f: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
        let [what, key, caption, image, link, hash] = f[..] else {
            writeln!(out, "error: expected 6 tab-separated fields")?;
            continue;
        };
        let run = Run {
            key,
            caption,
            image,
            link,
            hash,
        };
        runs += 1;
        match mode.run(Some(what == "new"), &run, runs).await {
            Ok(outcome) => writeln!(out, "ok {outcome}")?,
            Err(e) => writeln!(out, "error: {e}")?,
        }
        out.flush()?;
    }
}

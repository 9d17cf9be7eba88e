//! The PostgreSQL record store: the meaning of the DynamoDB store ([`crate::stores::dynamodb`]) in
//! tables (schema: `src/stores/postgres/migrations/`).
//!
//! - The record per key is `INSERT … ON CONFLICT DO NOTHING` (or, in the real namespace, a
//!   replace of a dry run's record only); a loser reads the winner. The record, the draft's
//!   `posted` mark and the caption index are written by one statement.
//! - Intents and draft changes are `UPDATE`s conditioned on the state they expect; an intent's
//!   checks (no record, the caption not posted by another key) are in the same statement.
//! - The due index is a partial index on (ns, status, due_at); the listings (a sweep's, and
//!   `status --all`, `schedule list`) read it with a plain snapshot read, which never waits on
//!   a writer and never misses a row being written (see [`PgStore::due_drafts`]).
//! - Pacing slots are a conditional upsert.
//!
//! Every statement runs under the database budget ([`crate::stores::postgres::Database::with`]). A
//! record write whose answer was lost is answered by reading what is stored, never guessed.

mod joint;
mod rows;
mod secrets;
mod starts;
mod update;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use crate::claim::{Acquire, ClaimAsk};
use crate::key::PostKey;
use crate::record::{
    Draft, DraftContent, DraftStatus, DraftUpdate, Intent, PostedRecord, PutPosted, RecordStore,
    Slot, Snapshot, StoreError,
};
use crate::stores::postgres::{Database, DbError};
use crate::vars::Secret;
use update::Sql;

/// Records, drafts and pacing in PostgreSQL.
pub struct PgStore {
    db: Arc<Database>,
    /// `''`, or `dryrun:` for the dry-run publisher's runs.
    ns: &'static str,
    /// Rows the due listing returned so far (each read once: the index holds only open drafts).
    due_rows_read: AtomicU64,
    /// When this process last deleted expired drafts (Unix seconds): a sweep lists once per
    /// status, and one delete per sweep is enough.
    forgot_at: AtomicI64,
    /// The joined statements' text, made at first use.
    texts: Texts,
}

/// The text of the statements that depend only on the store's namespace, made once: making
/// one at every call (its `format!`s, over 1 KB of SQL each) cost an already-posted run some
/// 4,000 instructions (issue 34).
#[derive(Default)]
struct Texts {
    save_claiming: OnceLock<String>,
    claim_and_start: OnceLock<String>,
    /// [`joint::record_statement`] without and with the claim's release.
    record: [OnceLock<String>; 2],
}

fn err(e: DbError) -> StoreError {
    StoreError(e.to_string())
}

impl PgStore {
    pub fn new(db: Arc<Database>, dry_run: bool) -> Self {
        Self {
            db,
            ns: if dry_run { "dryrun:" } else { "" },
            due_rows_read: AtomicU64::new(0),
            forgot_at: AtomicI64::new(i64::MIN),
            texts: Texts::default(),
        }
    }

    /// Whether `ask`'s claim store keeps its claims in this database and namespace, so that a
    /// claim can be joined to this store's writes ([`joint`]).
    fn joins(&self, ask: ClaimAsk<'_>) -> bool {
        ask.claims.place() == Some(crate::stores::postgres::claims::place(&self.db, self.ns))
    }

    /// Rows the due listing has read so far.
    pub fn due_rows_read(&self) -> u64 {
        self.due_rows_read.load(Ordering::Relaxed)
    }

    /// The condition that a stored record of `key` counts (`$ns`, `$key` are placeholders):
    /// outside the dry-run namespace, a dry run's record does not.
    fn counting_record(&self, ns: &str, key: &str) -> String {
        let mut c = format!("r.ns = {ns} AND r.key = {key}");
        if self.ns.is_empty() {
            c.push_str(&format!(
                " AND NOT coalesce({}, false)",
                rows::dry_urn("r.urn")
            ));
        }
        c
    }

    async fn record_of(&self, key: &str) -> Result<Option<PostedRecord>, StoreError> {
        let (ns, key) = (self.ns.to_owned(), key.to_owned());
        let v: Option<rows::Jsonb> = self
            .db
            .with("read record", |c| async move {
                let st = c
                    .prepare_cached(
                        "SELECT to_jsonb(r) FROM postonce_records r WHERE r.ns = $1 AND r.key = $2",
                    )
                    .await?;
                let row = c.query_opt(&st, &[&ns, &key]).await?;
                row.map(|r| r.try_get(0)).transpose()
            })
            .await
            .map_err(err)?;
        v.map(rows::record).transpose()
    }

    /// Deletes up to 500 drafts past their `expires_at` (posted drafts, as DynamoDB's TTL
    /// does; their records stay), through the expiry index. A sweep calls it; a failure only
    /// leaves them for the next sweep.
    async fn forget_expired(&self) {
        let (ns, now) = (self.ns.to_owned(), crate::record::now_s());
        // Once per sweep (its listings come within moments of each other), at most every 30 s.
        let last = self.forgot_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) < 30
            || self
                .forgot_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let deleted = self
            .db
            .with("forget expired drafts", |c| async move {
                let st = c
                    .prepare_cached(
                        "DELETE FROM postonce_drafts
                         WHERE expires_at < $2 AND ns = $1 AND ctid IN (
                            SELECT ctid FROM postonce_drafts
                            WHERE expires_at IS NOT NULL AND expires_at < $2 AND ns = $1
                            LIMIT 500)",
                    )
                    .await?;
                c.execute(&st, &[&ns, &now]).await
            })
            .await;
        if let Err(e) = deleted {
            tracing::warn!(error = %e, "could not delete expired drafts; the next sweep tries again");
        }
    }

    /// Runs an update built by [`update::statement`]; `true` when a row changed.
    async fn run_update(&self, what: &str, sql: String, q: Sql) -> Result<bool, StoreError> {
        self.db
            .with(what, |c| async move {
                let st = c.prepare_cached(&sql).await?;
                Ok(c.query_opt(&st, &q.refs()).await?.is_some())
            })
            .await
            .map_err(err)
    }
}

#[async_trait]
impl RecordStore for PgStore {
    async fn save_draft(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        now: i64,
    ) -> Result<Draft, StoreError> {
        let sql = format!(
            "WITH {}
            SELECT * FROM up
            UNION ALL
            SELECT to_jsonb(d) FROM postonce_drafts d
                WHERE d.ns = $1 AND d.key = $2 AND NOT EXISTS (SELECT 1 FROM up)",
            joint::save_part(self.ns)
        );
        let (ns, k) = (self.ns.to_owned(), key.to_string());
        let c2 = content.clone();
        let source = source.to_owned();
        let v: Option<rows::Jsonb> = self
            .db
            .with("save draft", |c| async move {
                let st = c.prepare_cached(&sql).await?;
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
                        ],
                    )
                    .await?;
                row.map(|r| r.try_get(0)).transpose()
            })
            .await
            .map_err(err)?;
        match v {
            Some(v) => rows::draft(v),
            // A racing writer inserted it after this statement's snapshot: read it now.
            None => self
                .load(key, None)
                .await?
                .draft
                .ok_or_else(|| StoreError(format!("the draft {key} vanished"))),
        }
    }

    async fn save_scheduled(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        starts::save_scheduled(self, key, content, source, at, now).await
    }

    async fn start_attempt(
        &self,
        key: &PostKey,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        starts::start_attempt(self, key, from, now).await
    }

    async fn load(
        &self,
        key: &PostKey,
        caption_hash: Option<&str>,
    ) -> Result<Snapshot, StoreError> {
        let (ns, k, h) = (
            self.ns.to_owned(),
            key.to_string(),
            caption_hash.map(str::to_owned),
        );
        let (record, draft, owner): (
            Option<rows::Jsonb>,
            Option<rows::Jsonb>,
            Option<String>,
        ) = self
            .db
            .with("load", |c| async move {
                let st = c
                    .prepare_cached(
                        "SELECT (SELECT to_jsonb(r) FROM postonce_records r WHERE r.ns = $1 AND r.key = $2),
                                (SELECT to_jsonb(d) FROM postonce_drafts d WHERE d.ns = $1 AND d.key = $2),
                                (SELECT c.key FROM postonce_captions c WHERE c.ns = $1 AND c.hash = $3)",
                    )
                    .await?;
                let row = c.query_one(&st, &[&ns, &k, &h]).await?;
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            })
            .await
            .map_err(err)?;
        Ok(Snapshot {
            record: record.map(rows::record).transpose()?,
            draft: draft.map(rows::draft).transpose()?,
            caption_owner: owner,
        })
    }

    async fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        let (ns, h) = (self.ns.to_owned(), caption_hash.to_owned());
        self.db
            .with("caption owner", |c| async move {
                let st = c
                    .prepare_cached("SELECT key FROM postonce_captions WHERE ns = $1 AND hash = $2")
                    .await?;
                let row = c.query_opt(&st, &[&ns, &h]).await?;
                row.map(|r| r.try_get(0)).transpose()
            })
            .await
            .map_err(err)
    }

    async fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError> {
        Ok(joint::put_posted(self, record, now, draft_expires_at, None)
            .await?
            .0)
    }

    async fn save_draft_claiming(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        now: i64,
        ask: ClaimAsk<'_>,
    ) -> Result<(Draft, Option<Acquire>), StoreError> {
        if !self.joins(ask) {
            return Ok((self.save_draft(key, content, source, now).await?, None));
        }
        joint::save_draft_claiming(self, key, content, source, now, ask).await
    }

    async fn claim_and_start(
        &self,
        key: &PostKey,
        ask: ClaimAsk<'_>,
        from: &[DraftStatus],
        now: i64,
    ) -> Option<Result<(Acquire, Option<Draft>), StoreError>> {
        if !self.joins(ask) {
            return None;
        }
        Some(joint::claim_and_start(self, key, ask, from, now).await)
    }

    async fn put_posted_releasing(
        &self,
        key: &PostKey,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
        ask: ClaimAsk<'_>,
    ) -> Result<(PutPosted, bool), StoreError> {
        if !self.joins(ask) {
            return Ok((self.put_posted(record, now, draft_expires_at).await?, false));
        }
        joint::put_posted(self, record, now, draft_expires_at, Some((key, ask))).await
    }

    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let (sql, q) = update::statement(self.ns, &key.to_string(), update, from, now, |_| {
            String::new()
        });
        self.run_update("update draft", sql, q).await
    }

    async fn take_intent(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError> {
        let mut places = (String::new(), String::new(), String::new());
        let (update_sql, q) =
            update::statement(self.ns, &key.to_string(), update, from, now, |q| {
                // $1 and $2 are the namespace and the key.
                let h = q.param(caption_hash.map(str::to_owned));
                let record = self.counting_record("$1", "$2");
                let c = format!(
                    "NOT EXISTS (SELECT 1 FROM postonce_records r WHERE {record})
                     AND NOT EXISTS (SELECT 1 FROM postonce_captions c
                         WHERE c.ns = $1 AND c.hash = {h}::text AND c.key <> $2)"
                );
                places = (record, h, String::new());
                c
            });
        let (record_cond, h, _) = places;
        let sql = format!(
            "WITH u AS ({update_sql})
            SELECT (SELECT count(*) FROM u),
                   (SELECT to_jsonb(r) FROM postonce_records r WHERE {record_cond}),
                   (SELECT c.key FROM postonce_captions c
                        WHERE c.ns = $1 AND c.hash = {h}::text AND c.key <> $2)"
        );
        let (taken, rec, owner): (i64, Option<rows::Jsonb>, Option<String>) = self
            .db
            .with("intent", |c| async move {
                let st = c.prepare_cached(&sql).await?;
                let row = c.query_one(&st, &q.refs()).await?;
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            })
            .await
            .map_err(err)?;
        if taken > 0 {
            return Ok(Intent::Taken);
        }
        // The record decides first, then the caption, then the draft's own state.
        if let Some(r) = rec {
            return Ok(Intent::Recorded(rows::record(r)?));
        }
        if let Some(other) = owner {
            return Ok(Intent::CaptionOwner(other));
        }
        Ok(Intent::Refused)
    }

    async fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError> {
        // A plain read, without `FOR UPDATE SKIP LOCKED`, on purpose. Each statement here is
        // its own transaction, so a row lock would end with the listing and hold nothing while
        // the sweep posts; and the lock cannot be held longer: the sweep's runs write the draft
        // through other pooled connections (they would wait on it until their budget ran out),
        // and a transaction left open across a network call is what the budgets forbid. What
        // keeps racing sweeps from posting a draft twice is what keeps any two runs apart, here
        // as on DynamoDB and files, which have no row locks: the claim, the record check under
        // it, and the intent conditioned on the state it expects; a sweep that loses the claim
        // moves on at once (never waits). What SKIP LOCKED would add is harm: a listing would
        // leave out a draft whose row another run is updating at that moment, so
        // `status --all`, `schedule list` and the MCP tools could miss a waiting draft. A
        // snapshot read never waits on a writer and sees the last committed version of every
        // row (tests/store_conformance.rs: a listing while another connection holds the row).
        let ns = self.ns.to_owned();
        let wanted: Vec<String> = statuses.iter().map(|s| s.as_str().to_owned()).collect();
        let found: Vec<rows::Jsonb> = self
            .db
            .with("due drafts", |c| async move {
                let st = c
                    .prepare_cached(
                        "SELECT to_jsonb(d) FROM postonce_drafts d
                         WHERE d.ns = $1 AND d.status = ANY($2) AND d.due_at IS NOT NULL
                           AND d.due_at <= $3
                         ORDER BY d.due_at, d.key",
                    )
                    .await?;
                c.query(&st, &[&ns, &wanted, &before])
                    .await?
                    .iter()
                    .map(|r| r.try_get(0))
                    .collect()
            })
            .await
            .map_err(err)?;
        self.due_rows_read
            .fetch_add(found.len() as u64, Ordering::Relaxed);
        if before != i64::MAX {
            self.forget_expired().await;
        }
        found.into_iter().map(rows::draft).collect()
    }

    async fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError> {
        let (ns, net) = (self.ns.to_owned(), network.to_owned());
        let cut = now_ms.saturating_sub(interval_ms);
        let taken: bool = self
            .db
            .with("take slot", |c| async move {
                let st = c
                    .prepare_cached(
                        "INSERT INTO postonce_pace AS p (ns, network, last_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (ns, network) DO UPDATE SET last_ms = EXCLUDED.last_ms
                         WHERE p.last_ms <= $4
                         RETURNING 1",
                    )
                    .await?;
                Ok(c.query_opt(&st, &[&ns, &net, &now_ms, &cut])
                    .await?
                    .is_some())
            })
            .await
            .map_err(err)?;
        if taken {
            return Ok(Slot::Taken);
        }
        let last_ms = self.last_slot(network).await?.unwrap_or(now_ms);
        Ok(Slot::Busy { last_ms })
    }

    async fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError> {
        let (ns, net) = (self.ns.to_owned(), network.to_owned());
        self.db
            .with("last slot", |c| async move {
                let st = c
                    .prepare_cached(
                        "SELECT last_ms FROM postonce_pace WHERE ns = $1 AND network = $2",
                    )
                    .await?;
                let row = c.query_opt(&st, &[&ns, &net]).await?;
                row.map(|r| r.try_get(0)).transpose()
            })
            .await
            .map_err(err)
    }

    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, StoreError> {
        secrets::load(self, name).await
    }

    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), StoreError> {
        secrets::save(self, name, value).await
    }

    async fn swap_secret(
        &self,
        name: &str,
        expected: Option<&Secret>,
        value: &Secret,
    ) -> Result<bool, StoreError> {
        secrets::swap(self, name, expected, value).await
    }

    async fn check(&self) -> Result<String, StoreError> {
        let version = self
            .db
            .check_schema()
            .await
            .map_err(|e| StoreError(e.to_string()))?;
        Ok(format!(
            "PostgreSQL reachable, schema version {version} (tables postonce_*)"
        ))
    }
}

//! Claims in PostgreSQL, with Redis's meaning (used when `DATABASE_URL` is set and `REDIS_URL`
//! is not): a row per claim name holding the value and its expiry, timed by the database's
//! clock, so that hosts with different clocks agree. A row whose expiry has passed is absent.
//!
//! - acquire: one statement inserts, or takes over an expired claim;
//! - release: deletes only where the value matches (and the claim has not expired);
//! - keep_posted: rewrites the run's token to `posted:<id>` with its own expiry, or sets it if
//!   the claim expired meanwhile.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::claim::{claim_name, Acquire, ClaimError, ClaimStore, ClaimValue, Place};
use crate::key::PostKey;
use crate::stores::postgres::{Database, DbError};

/// Sets `$1` to `$2` for `$3` milliseconds unless a live claim holds it.
const SET_NX: &str = "INSERT INTO postonce_claims AS c (name, value, expires_at)
    VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
    WHERE c.expires_at <= clock_timestamp()
    RETURNING 1";

/// [`SET_NX`] as a part of a record store's statement ([`super::records`]), the claim joined to
/// its write: the rows `{from}` gives (`VALUES (…)`, or a `SELECT … FROM` a part before it)
/// are the claim to set; it returns a row when set.
pub(super) fn set_nx_from(from: &str) -> String {
    format!(
        "INSERT INTO postonce_claims AS c (name, value, expires_at)
    {from}
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
    WHERE c.expires_at <= clock_timestamp()
    RETURNING 1"
    )
}

/// The claim's live value (named by `{name}`, a placeholder), as a scalar subquery.
pub(super) fn live_value(name: &str) -> String {
    format!(
        "(SELECT value FROM postonce_claims WHERE name = {name} AND expires_at > clock_timestamp())"
    )
}

/// Where claims of a namespace live on `db` ([`Place`]): its pool's identity in this process.
pub(super) fn place(db: &Arc<Database>, ns: &'static str) -> Place {
    Place {
        id: Arc::as_ptr(db).addr(),
        ns,
    }
}

/// The claim of `key` in namespace `ns`, as stored.
pub(super) fn name_in(ns: &str, key: &PostKey) -> String {
    format!("{ns}{}", claim_name(key))
}

/// Rewrites `$1` from `$4` to `$2` for `$3` milliseconds, or sets it if absent or expired.
const KEEP: &str = "INSERT INTO postonce_claims AS c (name, value, expires_at)
    VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
    WHERE c.value = $4 OR c.expires_at <= clock_timestamp()
    RETURNING 1";

/// Claims in PostgreSQL.
pub struct PgClaims {
    db: Arc<Database>,
    /// `''`, or `dryrun:` for the dry-run publisher's runs (as in Redis).
    ns: &'static str,
}

fn err(e: DbError) -> ClaimError {
    ClaimError(e.to_string())
}

/// A TTL in milliseconds, as the statements take it (at least a second, as in Redis).
pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1_000)
}

impl PgClaims {
    pub fn new(db: Arc<Database>, dry_run: bool) -> Self {
        Self {
            db,
            ns: if dry_run {
                crate::stores::redis::DRY_RUN_NS
            } else {
                ""
            },
        }
    }

    fn claim(&self, key: &PostKey) -> String {
        name_in(self.ns, key)
    }

    async fn set_nx(&self, name: String, value: String, ttl: Duration) -> Result<bool, ClaimError> {
        let ttl = ms(ttl);
        self.db
            .with("claim", |c| async move {
                let st = c.prepare_cached(SET_NX).await?;
                Ok(c.query_opt(&st, &[&name, &value, &ttl]).await?.is_some())
            })
            .await
            .map_err(err)
    }

    async fn live(&self, name: String) -> Result<Option<(String, i64)>, ClaimError> {
        self.db
            .with("read claim", |c| async move {
                let st = c
                    .prepare_cached(
                        "SELECT value, (extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint
                         FROM postonce_claims WHERE name = $1 AND expires_at > clock_timestamp()",
                    )
                    .await?;
                let row = c.query_opt(&st, &[&name]).await?;
                row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
            })
            .await
            .map_err(err)
    }
}

#[async_trait]
impl ClaimStore for PgClaims {
    async fn acquire(
        &self,
        key: &PostKey,
        token: &str,
        ttl: Duration,
    ) -> Result<Acquire, ClaimError> {
        let name = self.claim(key);
        if self.set_nx(name.clone(), token.to_owned(), ttl).await? {
            return Ok(Acquire::Acquired);
        }
        let holder = self.live(name).await?;
        Ok(Acquire::Held(holder.map(|(v, _)| ClaimValue::parse(&v))))
    }

    async fn release(&self, key: &PostKey, value: &str) -> Result<bool, ClaimError> {
        let (name, value) = (self.claim(key), value.to_owned());
        self.db
            .with("release claim", |c| async move {
                let st = c
                    .prepare_cached(
                        "DELETE FROM postonce_claims WHERE name = $1 AND value = $2
                         RETURNING expires_at > clock_timestamp()",
                    )
                    .await?;
                let row = c.query_opt(&st, &[&name, &value]).await?;
                row.map_or(Ok(false), |r| r.try_get(0))
            })
            .await
            .map_err(err)
    }

    async fn keep_posted(
        &self,
        key: &PostKey,
        token: &str,
        urn: &str,
        ttl: Duration,
    ) -> Result<bool, ClaimError> {
        let (name, token) = (self.claim(key), token.to_owned());
        let posted = ClaimValue::Posted(urn.to_owned()).raw();
        let ttl = ms(ttl);
        self.db
            .with("keep claim", |c| async move {
                let st = c.prepare_cached(KEEP).await?;
                Ok(c.query_opt(&st, &[&name, &posted, &ttl, &token])
                    .await?
                    .is_some())
            })
            .await
            .map_err(err)
    }

    async fn inspect(
        &self,
        key: &PostKey,
    ) -> Result<Option<(ClaimValue, Option<Duration>)>, ClaimError> {
        let live = self.live(self.claim(key)).await?;
        Ok(live.map(|(v, left)| {
            (
                ClaimValue::parse(&v),
                u64::try_from(left).ok().map(Duration::from_millis),
            )
        }))
    }

    async fn first_sighting(&self, name: &str, ttl: Duration) -> Result<bool, ClaimError> {
        let first = self
            .set_nx(format!("{}{name}", self.ns), "1".to_owned(), ttl)
            .await?;
        if first {
            // Every update id leaves a row: remove a few expired ones (Redis expires them).
            let swept = self
                .db
                .with("forget expired claims", |c| async move {
                    let st = c
                        .prepare_cached(
                            // The expiry is checked on the row deleted itself, so a claim
                            // taken over meanwhile (a new expiry) is never deleted.
                            "DELETE FROM postonce_claims
                             WHERE expires_at < clock_timestamp() AND name IN (
                                SELECT name FROM postonce_claims
                                WHERE expires_at < clock_timestamp() LIMIT 100)",
                        )
                        .await?;
                    c.execute(&st, &[]).await
                })
                .await;
            if let Err(e) = swept {
                tracing::debug!(error = %e, "expired claims left for later");
            }
        }
        Ok(first)
    }

    fn place(&self) -> Option<Place> {
        Some(place(&self.db, self.ns))
    }

    async fn ping(&self) -> Result<(), ClaimError> {
        self.db
            .with("ping", |c| async move {
                c.simple_query("SELECT 1").await?;
                Ok(())
            })
            .await
            .map_err(err)
    }
}

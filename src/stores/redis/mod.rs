//! The Redis claim store: `SET NX EX` to claim, a compare-and-delete script to release.
//!
//! The connection is made lazily on first use (a cold start with Redis down must still answer
//! "failed, retryable" rather than crash) and shared afterwards through a `ConnectionManager`,
//! which reconnects by itself. Every command is bounded by the manager's response timeout; the
//! pipeline adds its own budget on top.

pub mod config;

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use tokio::sync::OnceCell;

use crate::claim::{claim_name, Acquire, ClaimError, ClaimStore, ClaimValue};
use crate::key::PostKey;
use crate::vars::Secret;

const RELEASE: &str = r"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

const KEEP_POSTED: &str = r"local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
elseif not v then
  local ok = redis.call('set', KEYS[1], ARGV[2], 'NX', 'EX', ARGV[3])
  if ok then return 1 end
end
return 0";

/// The namespace of the dry-run publisher's claims.
pub const DRY_RUN_NS: &str = "dryrun:";

/// Claims in Redis.
pub struct RedisClaims {
    /// Put before every name: empty, or `dryrun:` for the dry-run publisher's runs, so that a
    /// dry run pointed at the real Redis never holds, keeps or frees a real claim.
    ns: &'static str,
    client: redis::Client,
    config: ConnectionManagerConfig,
    connection: OnceCell<ConnectionManager>,
    release: Script,
    keep_posted: Script,
}

fn err(e: redis::RedisError) -> ClaimError {
    ClaimError(format!("Redis: {e}"))
}

impl RedisClaims {
    /// Prepares the client; nothing is connected yet.
    ///
    /// # Errors
    /// When the URL cannot be parsed (the message does not repeat the URL: it may hold a password).
    pub fn new(url: &Secret, timeout: Duration, dry_run: bool) -> Result<Self, ClaimError> {
        let client = redis::Client::open(url.expose()).map_err(|e| {
            ClaimError(format!(
                "REDIS_URL is not a valid Redis URL ({})",
                e.kind_str()
            ))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        Ok(Self {
            ns: if dry_run { DRY_RUN_NS } else { "" },
            client,
            config,
            connection: OnceCell::new(),
            release: Script::new(RELEASE),
            keep_posted: Script::new(KEEP_POSTED),
        })
    }

    /// The Redis name of a key's claim in this store's namespace.
    fn claim(&self, key: &PostKey) -> String {
        format!("{}{}", self.ns, claim_name(key))
    }

    async fn conn(&self) -> Result<ConnectionManager, ClaimError> {
        let manager = self
            .connection
            .get_or_try_init(|| {
                ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
            })
            .await
            .map_err(err)?;
        Ok(manager.clone())
    }
}

/// `SET name value NX EX ttl`: `true` when this call set it.
async fn set_nx(
    c: &mut ConnectionManager,
    name: &str,
    value: &str,
    ttl: Duration,
) -> Result<bool, ClaimError> {
    let set: Option<String> = redis::cmd("SET")
        .arg(name)
        .arg(value)
        .arg("NX")
        .arg("EX")
        .arg(ttl.as_secs().max(1))
        .query_async(c)
        .await
        .map_err(err)?;
    Ok(set.is_some())
}

trait KindStr {
    fn kind_str(&self) -> String;
}

impl KindStr for redis::RedisError {
    fn kind_str(&self) -> String {
        format!("{:?}", self.kind())
    }
}

#[async_trait]
impl ClaimStore for RedisClaims {
    async fn acquire(
        &self,
        key: &PostKey,
        token: &str,
        ttl: Duration,
    ) -> Result<Acquire, ClaimError> {
        let mut c = self.conn().await?;
        let name = self.claim(key);
        if set_nx(&mut c, &name, token, ttl).await? {
            return Ok(Acquire::Acquired);
        }
        let holder: Option<String> = c.get(&name).await.map_err(err)?;
        Ok(Acquire::Held(holder.as_deref().map(ClaimValue::parse)))
    }

    async fn release(&self, key: &PostKey, value: &str) -> Result<bool, ClaimError> {
        let mut c = self.conn().await?;
        let deleted: i64 = self
            .release
            .key(self.claim(key))
            .arg(value)
            .invoke_async(&mut c)
            .await
            .map_err(err)?;
        Ok(deleted == 1)
    }

    async fn keep_posted(
        &self,
        key: &PostKey,
        token: &str,
        urn: &str,
        ttl: Duration,
    ) -> Result<bool, ClaimError> {
        let mut c = self.conn().await?;
        let kept: i64 = self
            .keep_posted
            .key(self.claim(key))
            .arg(token)
            .arg(ClaimValue::Posted(urn.to_owned()).raw())
            .arg(ttl.as_secs().max(1))
            .invoke_async(&mut c)
            .await
            .map_err(err)?;
        Ok(kept == 1)
    }

    async fn inspect(
        &self,
        key: &PostKey,
    ) -> Result<Option<(ClaimValue, Option<Duration>)>, ClaimError> {
        let mut c = self.conn().await?;
        let name = self.claim(key);
        let (value, ttl_ms): (Option<String>, i64) = redis::pipe()
            .get(&name)
            .cmd("PTTL")
            .arg(&name)
            .query_async(&mut c)
            .await
            .map_err(err)?;
        let ttl = u64::try_from(ttl_ms).ok().map(Duration::from_millis);
        Ok(value.map(|v| (ClaimValue::parse(&v), ttl)))
    }

    async fn first_sighting(&self, name: &str, ttl: Duration) -> Result<bool, ClaimError> {
        let mut c = self.conn().await?;
        set_nx(&mut c, &format!("{}{name}", self.ns), "1", ttl).await
    }

    async fn ping(&self) -> Result<(), ClaimError> {
        let mut c = self.conn().await?;
        let _: String = redis::cmd("PING").query_async(&mut c).await.map_err(err)?;
        Ok(())
    }
}

//! In-process claims: the same semantics as Redis, TTL included (on tokio's clock, so a test with
//! paused time can expire a claim), for runs inside one process. The binary does not use them:
//! local mode uses [`crate::stores::local::claims`], which also protects separate processes on one machine.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::claim::{claim_name, Acquire, ClaimError, ClaimStore, ClaimValue};
use crate::key::PostKey;

/// Claims in a map guarded by a mutex; entries expire like Redis keys.
#[derive(Default)]
pub struct MemoryClaims {
    entries: Mutex<HashMap<String, (String, Instant)>>,
}

impl MemoryClaims {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, (String, Instant)>) -> T) -> T {
        // A poisoned lock only means another thread panicked mid-update of a plain map.
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, (_, expires)| *expires > now);
        f(&mut map)
    }
}

#[async_trait]
impl ClaimStore for MemoryClaims {
    async fn acquire(
        &self,
        key: &PostKey,
        token: &str,
        ttl: Duration,
    ) -> Result<Acquire, ClaimError> {
        let name = claim_name(key);
        Ok(self.with(|map| match map.get(&name) {
            Some((value, _)) => Acquire::Held(Some(ClaimValue::parse(value))),
            None => {
                map.insert(name, (token.to_owned(), Instant::now() + ttl));
                Acquire::Acquired
            }
        }))
    }

    async fn release(&self, key: &PostKey, value: &str) -> Result<bool, ClaimError> {
        let name = claim_name(key);
        Ok(self.with(|map| {
            if map.get(&name).is_some_and(|(v, _)| v == value) {
                map.remove(&name);
                true
            } else {
                false
            }
        }))
    }

    async fn keep_posted(
        &self,
        key: &PostKey,
        token: &str,
        urn: &str,
        ttl: Duration,
    ) -> Result<bool, ClaimError> {
        let name = claim_name(key);
        let value = ClaimValue::Posted(urn.to_owned()).raw();
        Ok(self.with(|map| match map.get(&name) {
            Some((v, _)) if v != token => false,
            _ => {
                map.insert(name, (value, Instant::now() + ttl));
                true
            }
        }))
    }

    async fn inspect(
        &self,
        key: &PostKey,
    ) -> Result<Option<(ClaimValue, Option<Duration>)>, ClaimError> {
        let name = claim_name(key);
        Ok(self.with(|map| {
            map.get(&name).map(|(v, expires)| {
                (
                    ClaimValue::parse(v),
                    Some(expires.saturating_duration_since(Instant::now())),
                )
            })
        }))
    }

    async fn first_sighting(&self, name: &str, ttl: Duration) -> Result<bool, ClaimError> {
        Ok(self.with(|map| {
            if map.contains_key(name) {
                false
            } else {
                map.insert(name.to_owned(), ("1".to_owned(), Instant::now() + ttl));
                true
            }
        }))
    }

    async fn ping(&self) -> Result<(), ClaimError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PostKey {
        PostKey::new("blog", "x").unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn claims_exclude_expire_and_release_only_their_own() {
        let store = MemoryClaims::new();
        let ttl = Duration::from_secs(120);
        assert_eq!(
            store.acquire(&key(), "a", ttl).await.unwrap(),
            Acquire::Acquired
        );
        assert_eq!(
            store.acquire(&key(), "b", ttl).await.unwrap(),
            Acquire::Held(Some(ClaimValue::Run("a".into())))
        );
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(
            store.acquire(&key(), "b", ttl).await.unwrap(),
            Acquire::Acquired
        );
        // a's claim expired and b took it: a's release must not delete b's claim.
        assert!(!store.release(&key(), "a").await.unwrap());
        assert!(store.inspect(&key()).await.unwrap().is_some());
        assert!(store.release(&key(), "b").await.unwrap());
        assert!(store.inspect(&key()).await.unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn keep_posted_rewrites_only_its_own_claim() {
        let store = MemoryClaims::new();
        store
            .acquire(&key(), "a", Duration::from_secs(120))
            .await
            .unwrap();
        assert!(!store
            .keep_posted(&key(), "b", "urn:li:share:1", Duration::from_secs(600))
            .await
            .unwrap());
        assert!(store
            .keep_posted(&key(), "a", "urn:li:share:1", Duration::from_secs(600))
            .await
            .unwrap());
        let (value, ttl) = store.inspect(&key()).await.unwrap().unwrap();
        assert_eq!(value, ClaimValue::Posted("urn:li:share:1".into()));
        assert_eq!(ttl, Some(Duration::from_secs(600)));
    }
}

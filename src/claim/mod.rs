//! Claims: the short lock that says "this run is posting `<key>`" (rules 1, 5, 6 in
//! `pipeline/mod.rs`).
//!
//! A claim is `claim:<key>` holding the run's token, set only if absent, with a TTL longer than
//! any run. After posted-but-not-recorded it holds `posted:<post id>` with a long TTL instead. The
//! store only carries out these operations; when to take, keep or release a claim is decided by
//! the pipeline.

use std::time::Duration;

use async_trait::async_trait;

use crate::key::PostKey;

/// The claim store's name of a key's claim.
pub fn claim_name(key: &PostKey) -> String {
    format!("claim:{key}")
}

/// Prefix of a claim value that holds a post id (posted but not recorded).
pub const POSTED_PREFIX: &str = "posted:";

/// What a claim holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimValue {
    /// A run's token: that run is posting now.
    Run(String),
    /// A post that the network accepted but that was not recorded: its post id.
    Posted(String),
}

impl ClaimValue {
    pub fn parse(raw: &str) -> Self {
        match raw.strip_prefix(POSTED_PREFIX) {
            Some(post_id) => Self::Posted(post_id.to_owned()),
            None => Self::Run(raw.to_owned()),
        }
    }

    /// The stored form.
    pub fn raw(&self) -> String {
        match self {
            Self::Run(token) => token.clone(),
            Self::Posted(post_id) => format!("{POSTED_PREFIX}{post_id}"),
        }
    }
}

/// The result of trying to take a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// This run holds the claim now.
    Acquired,
    /// Someone else holds it (`None`: it vanished between the attempt and the look).
    Held(Option<ClaimValue>),
}

/// Where a claim store keeps its claims, when a record store can keep its rows in the same place
/// (one database: the pool's identity in this process, and the namespace) and so take or release
/// a claim in the same request as its own write (`RecordStore::save_draft_claiming` and the
/// methods beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub id: usize,
    pub ns: &'static str,
}

/// A claim to take or release in the same request as a record store's write, where the record
/// store keeps its rows in the claim store's [`Place`]; otherwise the caller takes or releases it
/// itself, as before.
#[derive(Clone, Copy)]
pub struct ClaimAsk<'a> {
    pub claims: &'a dyn ClaimStore,
    /// The run's token (the value to set, or to compare before deleting).
    pub token: &'a str,
    pub ttl: Duration,
}

/// The claim store could not be used. Always retryable; never means "claimed".
#[derive(Debug, Clone, thiserror::Error)]
#[error("claim store unavailable: {0}")]
pub struct ClaimError(pub String);

/// The claim operations the pipeline needs. Each store that offers claims implements them in
/// its folder under `src/stores/` (one of them shared by the processes of one machine, for
/// local mode; one in-process, for tests); the registry there chooses one.
#[async_trait]
pub trait ClaimStore: Send + Sync {
    /// `SET claim:<key> <token> NX EX <ttl>`; on failure, reads who holds it.
    async fn acquire(
        &self,
        key: &PostKey,
        token: &str,
        ttl: Duration,
    ) -> Result<Acquire, ClaimError>;

    /// Deletes the claim only if it still holds `value` (compare-and-delete). `Ok(false)` when
    /// it held something else or nothing.
    async fn release(&self, key: &PostKey, value: &str) -> Result<bool, ClaimError>;

    /// Rewrites the claim from `token` to `posted:<post id>` with `ttl`, only if it still holds
    /// `token`; if it expired meanwhile, sets it only if absent. `Ok(false)` when another run
    /// holds it.
    async fn keep_posted(
        &self,
        key: &PostKey,
        token: &str,
        post_id: &str,
        ttl: Duration,
    ) -> Result<bool, ClaimError>;

    /// The claim as stored now, with its remaining TTL (for `status`).
    async fn inspect(
        &self,
        key: &PostKey,
    ) -> Result<Option<(ClaimValue, Option<Duration>)>, ClaimError>;

    /// `SET <name> 1 NX EX <ttl>`: `true` the first time a name is seen (Telegram update ids).
    async fn first_sighting(&self, name: &str, ttl: Duration) -> Result<bool, ClaimError>;

    /// A round trip to the store (doctor).
    async fn ping(&self) -> Result<(), ClaimError>;

    /// Where it keeps its claims, when a record store may join its claims to its own writes
    /// ([`Place`]); `None` (the default): no record store does.
    fn place(&self) -> Option<Place> {
        None
    }
}

//! Durable state: the `posted:<key>` record that decides "already on the network", and the
//! `draft:<key>` item that holds the content to post and where its attempts stand.
//!
//! Each store that offers records implements [`RecordStore`] in its folder under `src/stores/`
//! (one of them files on disk, for local mode); the registry there chooses one. All give the
//! pipeline the same guarantees: consistent reads, and a record write that succeeds only if no
//! record exists (rule 3 in `pipeline/mod.rs`). Policy (what to write when) is the pipeline's.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::claim::{Acquire, ClaimAsk};
use crate::key::PostKey;
use crate::networks::{Network, PreparedPost};
use crate::vars::Secret;

mod clock;
mod kept;
pub use clock::{now_ms, now_s, rfc3339};
pub use kept::{secret_name, KeptSecrets};

/// Where the durable record of a key lives.
pub fn record_name(key: &PostKey) -> String {
    format!("posted:{key}")
}

/// Where the draft of a key lives.
pub fn draft_name(key: &PostKey) -> String {
    format!("draft:{key}")
}

/// Where a network's pacing state lives.
pub fn pace_name(network: &str) -> String {
    format!("pace:{network}")
}

/// Where the caption index entry lives: which key posted a caption (content guard).
pub fn caption_name(hash: &str) -> String {
    format!("caption:{hash}")
}

/// Proof that a key is on its network. Never expires.
///
/// Stored names: the Rust names are the network-neutral ones; where a stored attribute,
/// column or JSON field kept the name it had when LinkedIn was the only network, a `rename`
/// says it, so that items written by earlier versions are read as they are: a record's
/// `post_id` is stored as `urn`; an intent's ([`PendingPost`]) `text` as `commentary` (as a
/// table attribute `pending_commentary`) and `media_id` as `image_urn` (`pending_image_urn`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedRecord {
    pub key: String,
    /// The post's id on its network (a URN, a status id, a message id, an AT URI, …);
    /// `None` when the owner confirmed it by hand (`done:`). Stored as `urn`.
    #[serde(rename = "urn")]
    pub post_id: Option<String>,
    /// Unix seconds.
    pub posted_at: i64,
    /// The run that recorded it.
    pub run: String,
    /// What recorded it: ci, telegram, console, cli, sweep, repair, reconcile (a re-send or
    /// replay answered with the post), lookup (found among the account's posts), force, owner.
    pub source: String,
    /// Hash of the normalized caption, when known.
    pub caption_hash: Option<String>,
    /// The post's public URL, when the network gave one (X, the channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The network's content id of the post as recorded (an AT Protocol record's cid), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid: Option<String>,
}

/// The content of a draft as a trigger delivers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftContent {
    pub caption: String,
    /// An `https://` URL, or (from the CLI only) an absolute local path.
    pub image: String,
    pub link: Option<String>,
    pub alt: Option<String>,
    /// A caption per network, in place of `caption` there (`captions` in the CI body,
    /// `--caption-for` on the CLI). Each target's state item stores its own resolved content
    /// ([`DraftContent::for_target`]), so this is empty once stored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub captions: BTreeMap<Network, String>,
}

impl DraftContent {
    /// The content `network` posts: its own caption if the draft has one.
    #[must_use]
    pub fn for_target(&self, network: Network) -> Self {
        Self {
            caption: self.captions.get(&network).unwrap_or(&self.caption).clone(),
            image: self.image.clone(),
            link: self.link.clone(),
            alt: self.alt.clone(),
            captions: BTreeMap::new(),
        }
    }
}

/// Where a draft stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftStatus {
    New,
    Failed,
    /// A create-post was sent and its result is not known: it may be on the network.
    Unknown,
    NeedsReview,
    Posted,
    /// Waits for its `publish_at` (or, delayed by pacing, for its network's next slot).
    Scheduled,
    /// The owner cancelled it: never posted unless sent again.
    Cancelled,
}

impl DraftStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::NeedsReview => "needs_review",
            Self::Posted => "posted",
            Self::Scheduled => "scheduled",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "new" => Self::New,
            "failed" => Self::Failed,
            "unknown" => Self::Unknown,
            "needs_review" => Self::NeedsReview,
            "posted" => Self::Posted,
            "scheduled" => Self::Scheduled,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// The exact create-post a run sent (or is about to send), kept so a later run can settle an
/// ambiguous create its network's way (README "Targets": re-send or replay it identically,
/// look its text up among the account's posts, or read its container).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingPost {
    /// The text the create-post carries. Stored as `commentary` (see [`PostedRecord`]).
    #[serde(rename = "commentary")]
    pub text: String,
    /// The uploaded image as the network names it (its media id). Stored as `image_urn`.
    #[serde(rename = "image_urn")]
    pub media_id: String,
    pub alt: Option<String>,
    /// Unix seconds of the first attempt.
    pub at: i64,
    pub run: String,
    /// Hash of the full text this request carries ([`crate::pipeline::caption_hash`]), so a
    /// reconcile records what was sent even if the draft was edited since.
    #[serde(default)]
    pub caption_hash: Option<String>,
    /// Unix seconds of the latest re-send of this request, if any (the quiet period runs
    /// from the latest send; the window from the first).
    #[serde(default)]
    pub last_sent_at: Option<i64>,
    /// The exact create request as the target's adapter prepared it, replayed as is. `None`
    /// in intents written before targets existed: those are the first network's, and `text`,
    /// `media_id` and `alt` are the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PreparedPost>,
}

/// A stored draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draft {
    pub key: String,
    /// `None` for a stub (a record was written for a key whose content was never stored here).
    pub content: Option<DraftContent>,
    pub status: DraftStatus,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// Whether the last failure may succeed when retried.
    pub retryable: bool,
    pub next_retry_at: Option<i64>,
    pub pending: Option<PendingPost>,
    /// The owner has been reminded of this unknown / needs_review draft.
    pub reminded: bool,
    pub source: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the record store may delete it (set once posted: by its own expiry, or a sweep).
    pub expires_at: Option<i64>,
    /// When the owner wants it out (Unix seconds), if it was sent with a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_at: Option<i64>,
    /// When the sweeper should next look at it (the due index, README "Scheduling"):
    /// `publish_at` or a pacing delay while scheduled, the retry time when failed, the last
    /// change otherwise; absent once it is done (posted, cancelled). Kept by the stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<i64>,
    /// The owner was told that pacing delays it (once per schedule; a new time clears it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delay_told: bool,
    /// A run began its risky phases (the cover, the upload) and has not ended them (issue 30,
    /// finding 3): set by the write that starts an attempt (the draft's save, or
    /// [`RecordStore::start_attempt`]), cleared by the writes that end one (a failure, an
    /// intent). Still set once no run can be live (a claim's time after `updated_at`), it
    /// means the run died without a word: it counts as an attempt ([`Draft::attempts_counted`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started: bool,
    /// A copy of the record, written with it (in the same request) when the draft becomes
    /// `posted`: a trigger that sends the draft again learns from its one write that it is
    /// posted, and needs neither a read nor a claim (a record never expires,
    /// so finding one is final). `None` on drafts an older version marked posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<PostedRecord>,
}

impl Draft {
    /// When a scheduled draft goes: its pacing delay if it has one, else its `publish_at`.
    #[must_use]
    pub fn goes_at(&self) -> Option<i64> {
        self.due_at.or(self.publish_at)
    }

    /// Attempts made, counting a run that started and died (see [`Draft::started`]) once no
    /// run can be live: `stale` is whether a claim's time has passed since `updated_at`.
    #[must_use]
    pub fn attempts_counted(&self, stale: bool) -> u32 {
        self.attempts + u32::from(self.started && stale)
    }

    /// A draft item that holds no content yet.
    #[must_use]
    pub fn empty(key: &str, status: DraftStatus, source: Option<&str>, now: i64) -> Self {
        Self {
            key: key.to_owned(),
            content: None,
            status,
            attempts: 0,
            last_error: None,
            retryable: status != DraftStatus::Posted,
            next_retry_at: None,
            pending: None,
            reminded: false,
            source: source.map(str::to_owned),
            created_at: now,
            updated_at: now,
            expires_at: None,
            publish_at: None,
            due_at: (status != DraftStatus::Posted).then_some(now),
            delay_told: false,
            started: false,
            record: None,
        }
    }
}

/// Record and draft of one key, read together and consistently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub record: Option<PostedRecord>,
    pub draft: Option<Draft>,
    /// The key that already posted the caption asked about, if any.
    pub caption_owner: Option<String>,
}

/// What an intent write found (see [`RecordStore::take_intent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Written: this run's attempt is the draft's.
    Taken,
    /// Not written: the key has a record (this is it).
    Recorded(PostedRecord),
    /// Not written: the caption is indexed under this other key (content guard).
    CaptionOwner(String),
    /// Not written: the draft is gone or no longer in a state the intent may take.
    Refused,
}

/// The result of a conditional record write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutPosted {
    Created,
    /// A record already existed: this is it (a duplicate, unless it is our own retry).
    Exists(PostedRecord),
}

/// The statuses a draft can be (re)scheduled, cancelled or delayed from: not in flight, not
/// posted.
pub const SCHEDULABLE: [DraftStatus; 5] = [
    DraftStatus::New,
    DraftStatus::Failed,
    DraftStatus::NeedsReview,
    DraftStatus::Scheduled,
    DraftStatus::Cancelled,
];

/// A change of a draft's state. Applied only if the draft exists and its status is one of
/// `from` (empty: any status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftUpdate {
    /// About to send create-post: status `unknown` with the request, before it is sent.
    Intent(PendingPost),
    /// The attempt failed and nothing was posted.
    Failed {
        error: String,
        retryable: bool,
        next_retry_at: Option<i64>,
    },
    /// The attempt's result is not known; the draft stays `unknown`. `ask_owner`: the network
    /// offers no way to find out, so only the owner can settle it (the sweeper leaves it to
    /// them: the draft is marked not retryable).
    Ambiguous { error: String, ask_owner: bool },
    /// A reconcile is about to re-send the kept request: the attempt is now this run's and
    /// was last sent at `at` (so the quiet period restarts; the window still counts from the
    /// first attempt). Applied only if the kept attempt is still `prev_run`'s: of two runs that
    /// would re-send, one does.
    Resend {
        prev_run: String,
        at: i64,
        run: String,
    },
    /// `update`, applied only if the draft's kept attempt is still `run`'s: a change that
    /// settles or replaces one attempt never lands on another run's newer attempt.
    IfAttempt {
        run: String,
        update: Box<DraftUpdate>,
    },
    /// Retries exhausted or the owner must decide.
    NeedsReview { error: String },
    /// The owner was told about this draft.
    Reminded,
    /// The owner is about to be told of a pacing delay: applied only if nobody told them of
    /// one since the draft was (re)scheduled, so of two sweeps that would tell, one does, once.
    DelayTold,
    /// A record exists: the draft is done, keeps a copy of it, and expires at this time.
    Recorded {
        expires_at: i64,
        record: Box<PostedRecord>,
    },
    /// Wait for `at` (Unix seconds): status `scheduled`, due then; told afresh.
    Schedule { at: i64 },
    /// Pacing holds it back until `until` (Unix seconds): status `scheduled`, due then, the
    /// reason kept in `last_error`; `told`: the run that delays it reports the delay itself,
    /// so the owner has been told (see [`Draft::delay_told`]).
    Defer {
        until: i64,
        reason: String,
        told: bool,
    },
    /// The owner cancelled it: status `cancelled`, out of the due index.
    Cancel,
    /// A recorded post its network can still spread (capability `spreads`: the places that
    /// still lack it), applied to a `posted` draft: `pending`, when given, is kept
    /// as the request a later sweep sends again; due again at `next` (Unix seconds), or, with
    /// `next: None`, done spreading: the request is dropped and the draft leaves the due index.
    Spread {
        pending: Option<Box<PendingPost>>,
        next: Option<i64>,
    },
    /// Sent again after a cancel, or sent again without a time while scheduled: an ordinary
    /// `new` draft again.
    Revive,
}

impl DraftUpdate {
    /// When the sweeper should next look at a draft after this update (`Some(None)`: never,
    /// it is done; `None`: unchanged). The stores keep the due index with it.
    #[must_use]
    pub fn due_at(&self, now: i64) -> Option<Option<i64>> {
        match self {
            Self::IfAttempt { update, .. } => update.due_at(now),
            Self::Intent(_) | Self::Ambiguous { .. } | Self::NeedsReview { .. } | Self::Revive => {
                Some(Some(now))
            }
            Self::Failed { next_retry_at, .. } => Some(Some(next_retry_at.unwrap_or(now))),
            Self::Schedule { at } => Some(Some(*at)),
            Self::Defer { until, .. } => Some(Some(*until)),
            Self::Recorded { .. } | Self::Cancel => Some(None),
            Self::Spread { next, .. } => Some(*next),
            Self::Resend { .. } | Self::Reminded | Self::DelayTold => None,
        }
    }
}

/// The answer to taking a network's posting slot (pacing, README "Scheduling").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// This run may post now; the slot is stamped with its time.
    Taken,
    /// The last slot was taken at this time (Unix milliseconds), too recently.
    Busy { last_ms: i64 },
}

/// The record store could not be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("record store unavailable: {0}")]
pub struct StoreError(pub String);

/// What the pipeline and the sweeper need from durable storage.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// Stores a draft's content (creating it as `new`), keeping its status and history, and
    /// returns the draft as it now stands: in one request. A draft that is `posted` and holds
    /// its record's copy ([`Draft::record`]) is left as it is and returned as it is, so the
    /// caller learns it is posted from this one write (outside the dry-run namespace, a copy
    /// of a dry run's record does not count, as in [`Self::put_posted`]).
    async fn save_draft(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        now: i64,
    ) -> Result<Draft, StoreError>;

    /// [`Self::save_draft`] and, in the same request, the claim `ask` on `key` (as
    /// [`crate::claim::ClaimStore::acquire`]) unless the draft is posted with its record's copy
    /// that counts, where this store keeps its rows in the claim store's
    /// [`crate::claim::Place`]. The claim's answer is `None` where it was not asked here
    /// (the default, for every store that keeps no claims: the caller takes it as before).
    /// A write whose answer was lost leaves no claim of `ask`'s behind.
    async fn save_draft_claiming(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        now: i64,
        ask: ClaimAsk<'_>,
    ) -> Result<(Draft, Option<Acquire>), StoreError> {
        let _ = ask;
        Ok((self.save_draft(key, content, source, now).await?, None))
    }

    /// Stores a draft's content and schedules it for `at` (Unix seconds) in the same one
    /// request (issue 30, finding 2: a draft sent with a time is never stored due before it):
    /// status `scheduled`, `publish_at` and the due time `at`, told afresh, no error or retry
    /// time kept. Applied only to a draft that is absent or in one of the statuses a draft can
    /// be (re)scheduled from ([`SCHEDULABLE`]); otherwise (an attempt is out, or it is posted)
    /// nothing is written and the answer is `None`.
    async fn save_scheduled(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Draft>, StoreError>;

    /// Counts an attempt as started before its risky phases (issue 30, finding 3), in the
    /// one request that also reads the draft under the claim: applied only if the draft is in
    /// one of `from` (a `scheduled` one only once due at `now`), it adds a run that started
    /// and died (a [`Draft::started`] mark still set) to `attempts`, sets the mark for this
    /// run, and returns the draft as it now stands; `None` (nothing written) otherwise.
    async fn start_attempt(
        &self,
        key: &PostKey,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<Option<Draft>, StoreError>;

    /// The claim `ask` on `key` and, only if it was taken, [`Self::start_attempt`], in one
    /// request, where this store keeps its rows in the claim store's [`crate::claim::Place`].
    /// `None` (the default): nothing was done; the caller takes the claim, then starts.
    /// A request whose answer was lost leaves no claim of `ask`'s behind.
    async fn claim_and_start(
        &self,
        key: &PostKey,
        ask: ClaimAsk<'_>,
        from: &[DraftStatus],
        now: i64,
    ) -> Option<Result<(Acquire, Option<Draft>), StoreError>> {
        let _ = (key, ask, from, now);
        None
    }

    /// The record and the draft, strongly consistent; with `caption_hash`, also which key
    /// already posted that caption (one request).
    async fn load(&self, key: &PostKey, caption_hash: Option<&str>)
        -> Result<Snapshot, StoreError>;

    /// Which key already posted the caption with this hash.
    async fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError>;

    /// Writes the record if none exists (`attribute_not_exists(pk)`) or, outside the dry-run
    /// namespace, if the one there is a dry run's (its post id is marked, see
    /// [`crate::networks::is_dry_run_urn`]); and in the same request
    /// marks the draft `posted`, expiring at `draft_expires_at`, and indexes the caption hash.
    async fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError>;

    /// [`Self::put_posted`] and, only if it wrote the record, the release of the claim `ask`
    /// on `key`, the record's (compare-and-delete), in the same request, where this store keeps
    /// its rows in the claim store's [`crate::claim::Place`]; a write that fails leaves the
    /// claim as it was. `true`: released here. The default writes the record alone (`false`:
    /// the caller releases the claim as before).
    async fn put_posted_releasing(
        &self,
        key: &PostKey,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
        ask: ClaimAsk<'_>,
    ) -> Result<(PutPosted, bool), StoreError> {
        let _ = (key, ask);
        Ok((self.put_posted(record, now, draft_expires_at).await?, false))
    }

    /// Applies `update` if the draft exists and its status is in `from` (any, if empty).
    /// `Ok(false)` when the condition did not hold.
    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError>;

    /// Writes the intent `update` (an [`DraftUpdate::Intent`], or one inside
    /// [`DraftUpdate::IfAttempt`]) as [`Self::update_draft`] would, in one atomic request with
    /// the checks that decide it (pipeline rule 2, made while the claim is held): no record
    /// of `key` exists (outside the dry-run namespace, a dry run's record does not count),
    /// and, with `caption_hash`, no other key has posted that caption (the content guard).
    async fn take_intent(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError>;

    /// Drafts in any of `statuses` whose due time (see [`Draft::due_at`]) is at or before
    /// `before`, oldest due first, read through the due index: never a scan of every draft.
    /// The index may lag a write by moments; whoever acts re-reads under the claim.
    async fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError>;

    /// Stamps `network`'s posting slot with `now_ms` if the last stamp is at least
    /// `interval_ms` old (or there is none), in one conditional write shared by every process.
    async fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError>;

    /// When `network`'s posting slot was last stamped (Unix milliseconds), if ever.
    async fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError>;

    /// Checks that the store is usable (doctor): a description of what was checked.
    async fn check(&self) -> Result<String, StoreError>;

    /// The secret an adapter keeps under `name` (a network's name: its login
    /// session), as it last stored it, strongly consistent; `None` if there is none. The value
    /// is opaque to the store, which never logs or shows it.
    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, StoreError>;

    /// Stores (replaces) the secret kept under `name`. Last writer wins.
    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), StoreError>;

    /// Replaces the secret kept under `name` with `value` only if it is `expected` now (`None`:
    /// only if there is none), in one conditional write: `Ok(false)` when it was not (another
    /// process wrote first). The stored credentials ([`crate::credentials`]) rest on it.
    async fn swap_secret(
        &self,
        name: &str,
        expected: Option<&Secret>,
        value: &Secret,
    ) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests;

//! One run: every target of the draft concurrently, each: draft stored (or read) → claim → check
//! → post → record → release; then one report for all. A record found on the way (records never
//! expire) answers at once, without a claim. And every rule that makes it correct (the numbered
//! list below; README "How it decides" walks through a run). This is the only module that
//! decides anything; the stores, the network adapters and the notifier only carry out calls, and
//! the triggers only translate.
//!
//! One phase per file, so that each rule has one home:
//! 1. no post without a claim — [`guard`]: the run returns before any upload when the claim
//!    store fails;
//! 2. the record check happens while the claim is held — [`decide`]: for a plain post, as the
//!    conditions of the intent write itself ([`RecordStore::take_intent`]), so the check and the
//!    attempt are one request;
//! 3. the record write is conditional — [`record`] (`RecordStore::put_posted`);
//! 4. every outbound call has a budget — every call goes through [`Deadline`]; create-post gets
//!    its whole budget or is not sent ([`publish`]), and only if it would be over before its
//!    quiet period ends ([`create`]);
//! 5. the claim is released on every path, compare-and-delete, awaited — [`guard`];
//! 6. posted-but-not-recorded keeps the claim, holding the post id — [`guard`], and [`repair`] for
//!    the runs that meet it; when the claim cannot be kept, [`record`] writes the record once
//!    more and says what is true;
//! 7. ambiguous create-posts are not retried blindly — the intent write in [`publish`], the one
//!    send in [`create`], the quiet period and each network's way to settle ([`Settle`]: the
//!    identical re-send, a read-back, a replay with its key, or the owner) in [`reconcile`];
//! 8. retries are bounded and only for safe calls — [`retry`]; across runs, [`sweep`];
//! 9. keys are validated — [`PostKey`].
//!
//! Failures that posted nothing are noted in [`failure`]; the content guard is [`content_guard`].
//! [`targets`] runs one lane per target and combines their outcomes; [`cover`] picks the image
//! each network gets; [`schedule`] stores a draft for its time and paces posts to a network;
//! [`spread`] sends a recorded post's own request again to the places that still lack it.

mod content_guard;
mod cover;
mod create;
mod decide;
mod failure;
mod guard;
mod parked;
mod publish;
mod reconcile;
mod record;
mod refused;
mod repair;
mod retry;
mod schedule;
mod spread;
mod sweep;
mod sweep_report;
mod targets;
mod waiting;

pub use content_guard::{caption_hash, full_text};
pub use retry::backoff;
pub use schedule::PACING_MARGIN;
pub use sweep_report::{Delayed, Spreading, SweepReport, Waiting};
pub use targets::TextError;

use guard::{Finish, Progress, Seen, Stage, Unrecorded};
use retry::{rate_limit_wait, retry_within, Gave};

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;

use crate::budget::{BudgetError, Deadline};
use crate::claim::{Acquire, ClaimAsk, ClaimStore, ClaimValue};
use crate::config::{Config, Timeouts};
use crate::image::{ImageError, ImageFetcher};
use crate::key::PostKey;
use crate::networks::capabilities::Idempotency;
use crate::networks::{
    is_dry_run_urn, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use crate::notify::{MessageRef, Notifier};
use crate::outcome::{Outcome, OutcomeKind};
use crate::record::{
    now_ms, now_s, Draft, DraftContent, DraftStatus, DraftUpdate, Intent, PendingPost,
    PostedRecord, PutPosted, RecordStore, Slot, Snapshot,
};

/// What the trigger asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Post (CI webhook, console, CLI) or retry (Telegram Retry, sweeper).
    Post,
    /// The owner confirms the post is on the network (`done:<key>`).
    Done,
    /// The owner says "post anyway" after an unknown (`force:<key>`).
    Force,
    /// Post a scheduled draft without waiting for its time (`now:<key>`).
    Now,
    /// Cancel a scheduled draft (`cancel:<key>`).
    Cancel,
}

/// Which trigger started the run (kept in the record, and decides report noise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Ci,
    Telegram,
    Console,
    Cli,
    /// A tool call of the MCP server (`postonce mcp`).
    Mcp,
    Sweep,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ci => "ci",
            Self::Telegram => "telegram",
            Self::Console => "console",
            Self::Cli => "cli",
            Self::Mcp => "mcp",
            Self::Sweep => "sweep",
        }
    }
}

/// One run's input, whatever the trigger.
#[derive(Debug, Clone)]
pub struct PostRequest {
    pub key: PostKey,
    /// The draft, when the trigger carried one; otherwise the stored draft is posted.
    pub content: Option<DraftContent>,
    pub action: Action,
    pub source: Source,
    /// Unique per run (the Lambda request id, or random); the claim's token.
    pub run_id: String,
    /// The Telegram report to edit, for runs started from its button.
    pub reply_to: Option<MessageRef>,
    /// The targets to run (`retry:<key>@x`, `targets` in the CI body, `--targets`). Empty:
    /// the draft's own — those named when it was sent, else `POSTONCE_TARGETS`; a run without
    /// content does every target the draft has state for.
    pub targets: Vec<Network>,
    /// When the draft the trigger carried should go out (Unix seconds; `publish_at`,
    /// `--at`). Still to come: it is scheduled, not posted. `None` or past: posted now.
    pub publish_at: Option<i64>,
}

/// A fresh run id: `run-` and 32 hex digits (written by `hex`, not `format!`'s padding: some
/// 900 instructions a run).
pub fn new_run_id() -> String {
    let mut digits = [0u8; 32];
    let _ = hex::encode_to_slice(rand::random::<u128>().to_be_bytes(), &mut digits);
    let mut id = String::with_capacity(36);
    id.push_str("run-");
    id.push_str(std::str::from_utf8(&digits).unwrap_or_default());
    id
}

/// The pipeline's knobs, from [`Config`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub claim_ttl: Duration,
    pub posted_claim_ttl: Duration,
    pub timeouts: Timeouts,
    pub reconcile_window: Duration,
    /// The quiet period after an ambiguous attempt during which nothing is re-sent.
    pub reconcile_after: Duration,
    pub max_attempts: u32,
    /// How long a posted draft is kept before the record store removes it (each store its own
    /// way: an expiry attribute, or a sweep of old rows).
    pub draft_expiry: Duration,
    /// First cross-run retry delay (the sweeper's backoff doubles from here).
    pub retry_base: Duration,
    /// Tries of a safe call inside one run.
    pub call_tries: u32,
    /// Pacing: the least time between two posts to a network (absent or zero: none).
    pub min_gap: BTreeMap<Network, Duration>,
}

impl Settings {
    pub fn from_config(c: &Config) -> Self {
        Self {
            claim_ttl: c.claim_ttl,
            posted_claim_ttl: c.posted_claim_ttl,
            timeouts: c.timeouts,
            reconcile_window: c.reconcile_window,
            reconcile_after: c.reconcile_after,
            max_attempts: c.max_attempts,
            draft_expiry: Duration::from_secs(30 * 24 * 3600),
            retry_base: Duration::from_secs(60),
            call_tries: 3,
            min_gap: c.min_gap.clone(),
        }
    }
}

/// A fail point (tests only, feature `failpoints`): `Some(text)` when configured to `return`,
/// an async pause for `return(sleep:<ms>)`, a panic for `panic`. Compiled to nothing otherwise.
#[cfg(feature = "failpoints")]
async fn fault(name: &str) -> Option<String> {
    let hit = fail::eval(name, |arg| arg.unwrap_or_default())?;
    if let Some(ms) = hit.strip_prefix("sleep:") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
        return None;
    }
    Some(format!("fail point {name}"))
}

#[cfg(not(feature = "failpoints"))]
async fn fault(_name: &str) -> Option<String> {
    None
}

/// A fail point that fires only for the target `key` when configured with `return(<key>)`
/// (or for every key with a bare `return`), so a test can fail one draft's step while other
/// tests run beside it. `return(abort)` (or `return(abort:<key>)`) ends the process on the
/// spot (SIGABRT), as a kill or an out-of-memory end would: nothing after it runs, no drop, no
/// release; `return(hang:<key>)` makes that key's run wait until it is dropped.
#[cfg(feature = "failpoints")]
async fn fault_for(name: &str, key: &PostKey) -> Option<String> {
    let hit = fail::eval(name, |arg| arg.unwrap_or_default())?;
    if hit == "abort" || hit == format!("abort:{key}") {
        std::process::abort();
    }
    if hit == format!("hang:{key}") {
        // A run that never ends by itself: the test ends it, as a kill would.
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
    if hit.contains(':') {
        return None;
    }
    (hit.is_empty() || hit == key.to_string()).then(|| format!("fail point {name}"))
}

#[cfg(not(feature = "failpoints"))]
async fn fault_for(_name: &str, _key: &PostKey) -> Option<String> {
    None
}

/// The run, wired to its ports. Built once per process.
pub struct Pipeline {
    /// One lane per network a draft can go to.
    pub lanes: BTreeMap<Network, Arc<Lane>>,
    /// The first network's claim store (`claim:<key>`), for tools that look at it directly.
    pub claims: Arc<dyn ClaimStore>,
    /// The first network's record store; every real target shares it (each in its own names).
    pub records: Arc<dyn RecordStore>,
    pub notifier: Arc<dyn Notifier>,
    pub settings: Settings,
    /// The targets of a draft that names none (`POSTONCE_TARGETS`).
    pub default_targets: Vec<Network>,
}

/// One target's run (README "Targets"): every rule of the pipeline, applied to one
/// (draft, network) pair with that network's adapter, claim and record names and budget. The
/// stores are the dry-run ones when the adapter is a dry run, so a dry run never touches real
/// state.
pub struct Lane {
    pub network: Network,
    pub adapter: Arc<dyn NetworkAdapter>,
    pub claims: Arc<dyn ClaimStore>,
    pub records: Arc<dyn RecordStore>,
    pub images: Arc<ImageFetcher>,
    /// Where covers are hosted for a network that fetches the image itself (`None`: not
    /// hosted; such a network gets the draft's own URL, the original or nothing).
    pub covers: Option<Arc<dyn crate::covers::CoverHost>>,
    pub settings: Settings,
    /// The budget of one call to this network.
    pub budget: Duration,
    /// The variables still to set for this network to post for real (empty when it does):
    /// why its drafts in the real stores wait (the `parked` phase).
    pub missing: Vec<&'static str>,
    /// The fingerprint of the credential this lane posts with ([`Config::fingerprints`]): a
    /// draft refused under it waits until the credential in use differs (the `refused`
    /// phase).
    pub fingerprint: String,
    /// This process saw its network refuse that credential: no run of this lane is started
    /// while it is in place (its due drafts are held, never sent with a dead credential).
    pub refused: std::sync::atomic::AtomicBool,
}

fn failed(key: &PostKey, retryable: bool, detail: impl Into<String>) -> Outcome {
    Outcome::new(key, OutcomeKind::Failed, detail).retryable(retryable)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// How a network lets an ambiguous create be settled (README "Targets"), chosen from what
/// its adapter says it can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// After the quiet period and within the window, re-send the identical request: the
    /// network's duplicate answer names the post.
    Resend,
    /// After the quiet period, read the account's recent posts for the exact text; not
    /// found, re-send (a duplicate answer then means it exists) (X).
    ReadBack,
    /// Nothing can tell: the owner is asked at once and nothing is re-sent (a channel).
    AskOwner,
    /// After the quiet period, replay the identical request with its key: the network answers
    /// with the post the key already made instead of a new one (an idempotency key
    /// the server remembers for `window`; a record key the client chose, always). Past `window`, the post is looked up
    /// among the account's recent posts; not found, the owner is asked (never a re-send
    /// without the key's protection).
    Replay { window: Option<Duration> },
}

impl Lane {
    /// This network's way to settle an ambiguous create.
    pub(crate) fn settle(&self) -> Settle {
        let caps = self.adapter.capabilities();
        match caps.idempotency {
            Idempotency::ClientChosenId => Settle::Replay { window: None },
            Idempotency::Key(window) => Settle::Replay {
                window: Some(window),
            },
            Idempotency::DuplicateNamesPost => Settle::Resend,
            _ if caps.reads_back => Settle::ReadBack,
            _ => Settle::AskOwner,
        }
    }

    /// The caption hash this target indexes (content guard): the first network's is the bare hash, so
    /// existing entries still count; every other network has its own.
    pub(crate) fn text_hash(&self, content: &DraftContent) -> String {
        let hash = caption_hash(&full_text(content));
        let n = self.network;
        if n.bare_names() {
            return hash;
        }
        // Hex like the bare hash (the stores name index entries by it), apart per network.
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(format!("{}:{hash}", n.as_str()).as_bytes()))
    }

    /// One target's run: `req.key` names the target. `seen`: its draft as the run's plan
    /// read it, for a trigger that carried none. `announce`: log the target's own `target
    /// ended` line (a draft with more than one target; with one, the run's `run ended` line
    /// says the same).
    /// Its log lines carry the target's key; the run's id and source are the enclosing `run`
    /// span's ([`Pipeline::run`], the only caller), not repeated on every line.
    ///
    /// The run is boxed inside its span: the span's wrapper would otherwise hold the whole
    /// state machine (kilobytes) and copy it at each of its moves, which cost a run some 19,000
    /// instructions (issue 34).
    pub async fn run(
        &self,
        req: &PostRequest,
        dl: Deadline,
        seen: Option<Draft>,
        announce: bool,
    ) -> Outcome {
        use tracing::Instrument;
        let span = tracing::info_span!("target", target = %req.key);
        Box::pin(async move {
            let mut outcome = self.decide(req, &dl, seen).await;
            outcome.dry_run = self.adapter.is_dry_run()
                && outcome.post_id.as_deref().is_some_and(is_dry_run_urn);
            if announce {
                tracing::info!(outcome = outcome.outcome.as_str(), id = outcome.post_id.as_deref(), retryable = outcome.retryable, detail = %outcome.detail, "target ended");
            }
            outcome
        })
        .instrument(span)
        .await
    }
}

impl Pipeline {
    /// Sends the run's report; whether it was delivered.
    pub(super) async fn report(&self, req: &PostRequest, outcome: &Outcome, dl: &Deadline) -> bool {
        match dl
            .finish(
                self.settings.timeouts.telegram,
                self.notifier.report(outcome, req.reply_to),
            )
            .await
        {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "report failed; the outcome stands");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "report failed; the outcome stands");
                false
            }
        }
    }

    /// A delivered report told the owner of each target refused for good (a bad cover, revoked
    /// credentials) whose block it carried whole: marked told, so the sweeper does not tell
    /// them again. A report that was not delivered, or a block cut off at Telegram's limit,
    /// leaves them to the sweeper, which tells them once.
    pub(super) async fn told_of_refusals(
        &self,
        req: &PostRequest,
        outcome: &Outcome,
        dl: &Deadline,
    ) {
        let parts = if outcome.parts.is_empty() {
            std::slice::from_ref(outcome)
        } else {
            outcome.parts.as_slice()
        };
        let refused =
            |p: &Outcome| p.outcome == OutcomeKind::Failed && !p.retryable && !p.misconfigured;
        if !parts.iter().any(refused) {
            // Nothing to mark: the report's text is not made again to find what it carried.
            return;
        }
        let whole = outcome.reported_in_full();
        for part in parts {
            if !refused(part) {
                continue;
            }
            if !whole.contains(&part.network) {
                continue;
            }
            if let Some(lane) = self.lane(part.network) {
                lane.note(
                    &req.key.on(part.network),
                    dl,
                    &DraftUpdate::Reminded,
                    &[DraftStatus::Failed],
                    "that the run's report told the owner",
                )
                .await;
            }
        }
    }

    /// The lane of `network`, if this process has one.
    pub fn lane(&self, network: Network) -> Option<&Arc<Lane>> {
        self.lanes.get(&network)
    }

    /// The record, draft and claim of `key` (a per-target key names its target) as stored
    /// now (`postonce status`).
    ///
    /// # Errors
    /// A message naming the store that failed.
    pub async fn status(&self, key: &PostKey, dl: &Deadline) -> Result<Status, String> {
        let lane = self
            .lane(key.network())
            .ok_or_else(|| format!("{} is not a target of this version", key.network().as_str()))?;
        let t = self.settings.timeouts;
        let snapshot: Snapshot =
            flatten_value(dl.work(t.records, lane.records.load(key, None)).await)?;
        let claim = flatten_value(dl.work(t.claims, lane.claims.inspect(key)).await)?;
        Ok(Status { snapshot, claim })
    }
}

/// What `postonce status` shows.
#[derive(Debug, Clone)]
pub struct Status {
    pub snapshot: Snapshot,
    pub claim: Option<(ClaimValue, Option<Duration>)>,
}

/// A bounded call's error, if any, as text.
fn flatten<T, E: std::fmt::Display>(r: Result<Result<T, E>, BudgetError>) -> Option<String> {
    flatten_value(r).err()
}

/// A bounded call's value, or its error (call or budget) as text.
fn flatten_value<T, E: std::fmt::Display>(
    r: Result<Result<T, E>, BudgetError>,
) -> Result<T, String> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(b) => Err(b.to_string()),
    }
}

#[cfg(test)]
mod tests {
    /// `run-` and 32 lowercase hex digits, as `format!("run-{:032x}")` wrote them; a new one
    /// each time.
    #[test]
    fn run_ids_are_run_and_32_hex_digits() {
        let id = super::new_run_id();
        let digits = id.strip_prefix("run-").expect("the prefix");
        assert_eq!(digits.len(), 32, "{id}");
        assert!(
            digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
        assert_ne!(id, super::new_run_id());
    }
}

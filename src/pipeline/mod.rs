//! One run: claim → check → post → record → release, and every rule of DESIGN.md that makes
//! it correct. This is the only module that decides anything; the stores, the publisher and the
//! notifier only carry out calls, and the triggers only translate.
//!
//! One phase per file, so that each rule has one home:
//! 1. no post without a claim — [`guard`]: the run returns before any upload when the claim
//!    store fails;
//! 2. the record check happens while the claim is held — [`decide`];
//! 3. the record write is conditional — [`record`] (`RecordStore::put_posted`);
//! 4. every outbound call has a budget — every call goes through [`Deadline`]; create-post gets
//!    its whole budget or is not sent ([`publish`]);
//! 5. the claim is released on every path, compare-and-delete, awaited — [`guard`];
//! 6. posted-but-not-recorded keeps the claim, holding the URN — [`guard`], and [`repair`] for
//!    the runs that meet it;
//! 7. ambiguous create-posts are not retried blindly — the intent write in [`publish`], the
//!    quiet period and the re-send in [`reconcile`];
//! 8. retries are bounded and only for safe calls — [`retry`]; across runs, [`sweep`];
//! 9. keys are validated — [`PostKey`].
//!
//! Failures that posted nothing are noted in [`failure`]; the content guard is [`content_guard`].

mod content_guard;
mod decide;
mod failure;
mod guard;
mod publish;
mod reconcile;
mod record;
mod repair;
mod retry;
mod sweep;

pub use content_guard::{caption_hash, full_text};
pub use retry::backoff;
pub use sweep::{SweepReport, Waiting};

use guard::{Finish, Progress, Stage};
use retry::{rate_limit_wait, retry_within, Gave};

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;

use crate::budget::{BudgetError, Deadline};
use crate::claim::{Acquire, ClaimStore, ClaimValue};
use crate::config::{Config, Timeouts};
use crate::image::{ImageError, ImageFetcher};
use crate::key::PostKey;
use crate::notify::{MessageRef, Notifier};
use crate::outcome::{Outcome, OutcomeKind};
use crate::publish::little_text::{self, MAX_CHARS};
use crate::publish::network::Network;
use crate::publish::{is_dry_run_urn, NewPost, PublishError, Publisher};
use crate::record::{
    now_s, Draft, DraftContent, DraftStatus, DraftUpdate, PendingPost, PostedRecord, PutPosted,
    RecordStore, Snapshot,
};

/// What the trigger asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Post (CI webhook, console, CLI) or retry (Telegram Retry, sweeper).
    Post,
    /// The owner confirms the post is on LinkedIn (`done:<key>`).
    Done,
    /// The owner says "post anyway" after an unknown (`force:<key>`).
    Force,
}

/// Which trigger started the run (kept in the record, and decides report noise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Ci,
    Telegram,
    Console,
    Cli,
    Sweep,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ci => "ci",
            Self::Telegram => "telegram",
            Self::Console => "console",
            Self::Cli => "cli",
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
}

/// A fresh run id.
pub fn new_run_id() -> String {
    format!("run-{:032x}", rand::random::<u128>())
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
    /// How long a posted draft is kept before DynamoDB's TTL removes it.
    pub draft_expiry: Duration,
    /// First cross-run retry delay (the sweeper's backoff doubles from here).
    pub retry_base: Duration,
    /// Tries of a safe call inside one run.
    pub call_tries: u32,
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

/// The run, wired to its ports. Built once per process.
pub struct Pipeline {
    pub claims: Arc<dyn ClaimStore>,
    pub records: Arc<dyn RecordStore>,
    pub publisher: Arc<dyn Publisher>,
    pub images: Arc<ImageFetcher>,
    pub notifier: Arc<dyn Notifier>,
    pub settings: Settings,
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

impl Pipeline {
    /// Runs the pipeline for `req` within `dl`, reports the outcome, and returns it.
    #[tracing::instrument(name = "run", skip_all, fields(key = %req.key, run = %req.run_id, source = req.source.as_str()))]
    pub async fn run(&self, req: PostRequest, dl: Deadline) -> Outcome {
        let mut outcome = self.decide(&req, &dl).await;
        outcome.dry_run = self.publisher.is_dry_run()
            && outcome.urn.as_deref().is_some_and(|u| u.contains("dryrun"));
        tracing::info!(outcome = outcome.outcome.as_str(), urn = ?outcome.urn, retryable = outcome.retryable, detail = %outcome.detail, "run ended");
        self.report(&req, &outcome, &dl).await;
        outcome
    }

    pub(super) async fn report(&self, req: &PostRequest, outcome: &Outcome, dl: &Deadline) {
        // The sweeper's own "another run is posting" is noise: the run holding the claim
        // reports. Every trigger's outcome is reported, as the outcomes table says.
        if outcome.outcome == OutcomeKind::BeingPosted && req.source == Source::Sweep {
            return;
        }
        match dl
            .finish(
                self.settings.timeouts.telegram,
                self.notifier.report(outcome, req.reply_to),
            )
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "report failed; the outcome stands"),
            Err(e) => tracing::warn!(error = %e, "report failed; the outcome stands"),
        }
    }

    /// The record, draft and claim of `key` as stored now (`postonce status`).
    ///
    /// # Errors
    /// A message naming the store that failed.
    pub async fn status(&self, key: &PostKey, dl: &Deadline) -> Result<Status, String> {
        let t = self.settings.timeouts;
        let snapshot: Snapshot =
            flatten_value(dl.work(t.dynamodb, self.records.load(key, None)).await)?;
        let claim = flatten_value(dl.work(t.redis, self.claims.inspect(key)).await)?;
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

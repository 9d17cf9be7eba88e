//! One run: claim → check → post → record → release, and every rule of DESIGN.md that makes
//! it correct. This is the only module that decides anything; the stores, the publisher and the
//! notifier only carry out calls, and the triggers only translate.
//!
//! The rules, where they live here:
//! 1. no post without a claim — [`Pipeline::decide`] returns before any upload when the claim
//!    store fails;
//! 2. the record check happens while the claim is held — [`Pipeline::claimed`];
//! 3. the record write is conditional — [`Pipeline::record`] (`RecordStore::put_posted`);
//! 4. every outbound call has a budget — every call goes through [`Deadline`];
//! 5. the claim is released on every path, compare-and-delete, awaited — [`ClaimGuard`];
//! 6. posted-but-not-recorded keeps the claim, holding the URN — [`Finish::Keep`], and
//!    [`Pipeline::repair`] for the runs that meet it;
//! 7. ambiguous create-posts are not retried blindly — the intent write before create-post,
//!    [`Pipeline::reconcile`];
//! 8. retries are bounded and only for safe calls — [`Pipeline::with_retries`];
//! 9. keys are validated — [`PostKey`].

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

use crate::budget::{BudgetError, Deadline};
use crate::claim::{Acquire, ClaimStore, ClaimValue};
use crate::config::{Config, Timeouts};
use crate::image::{ImageError, ImageFetcher};
use crate::key::PostKey;
use crate::notify::{MessageRef, Notifier};
use crate::outcome::{Outcome, OutcomeKind};
use crate::publish::little_text::{self, MAX_CHARS};
use crate::publish::{NewPost, PublishError, Publisher};
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

/// What happens to the claim when a claimed run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finish {
    Release,
    /// Posted but not recorded: keep the claim, rewritten to hold this URN.
    Keep(Option<String>),
}

/// Why a bounded, possibly retried call gave up.
enum Gave<E> {
    Error(E),
    Budget(BudgetError),
}

/// Holds a claim until it is released or kept; if the run is dropped early (cancelled), the
/// drop spawns the release as a safety net. Normal paths await the release instead.
struct ClaimGuard {
    claims: Arc<dyn ClaimStore>,
    key: PostKey,
    token: String,
    armed: bool,
}

impl ClaimGuard {
    async fn release(mut self, dl: &Deadline, budget: Duration) {
        self.armed = false;
        match dl
            .finish(budget, self.claims.release(&self.key, &self.token))
            .await
        {
            Ok(Ok(true)) => tracing::debug!("claim released"),
            Ok(Ok(false)) => {
                tracing::warn!("claim was no longer this run's (expired and taken?); left alone")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "claim release failed; its TTL will end it"),
            Err(e) => tracing::warn!(error = %e, "claim release failed; its TTL will end it"),
        }
    }

    async fn keep(mut self, dl: &Deadline, budget: Duration, urn: &str, ttl: Duration) {
        self.armed = false;
        match dl
            .finish(
                budget,
                self.claims.keep_posted(&self.key, &self.token, urn, ttl),
            )
            .await
        {
            Ok(Ok(true)) => tracing::warn!(urn, "claim kept on purpose: it now holds the post URN"),
            Ok(Ok(false)) => tracing::error!(urn, "could not keep the claim: another run holds it"),
            Ok(Err(e)) => {
                tracing::error!(urn, error = %e, "could not keep the claim; the draft stays unknown so no run re-posts blindly")
            }
            Err(e) => {
                tracing::error!(urn, error = %e, "could not keep the claim; the draft stays unknown so no run re-posts blindly")
            }
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (claims, key, token) = (self.claims.clone(), self.key.clone(), self.token.clone());
            handle.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), claims.release(&key, &token))
                    .await;
            });
        }
    }
}

/// The URN of a post this run created, so a panic after create-post still keeps the claim.
#[derive(Default)]
struct Progress(Mutex<Option<Option<String>>>);

impl Progress {
    fn created(&self, urn: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(urn);
    }

    fn take(&self) -> Option<Option<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
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

/// Hash of the normalized caption: NFC, whitespace collapsed and trimmed, `utm_*` and other
/// tracking parameters removed from links.
pub fn caption_hash(caption: &str) -> String {
    let nfc: String = caption.nfc().collect();
    let words: Vec<String> = nfc.split_whitespace().map(strip_tracking).collect();
    let digest = Sha256::digest(words.join(" ").as_bytes());
    hex::encode(digest)
}

fn strip_tracking(word: &str) -> String {
    if !(word.starts_with("http://") || word.starts_with("https://")) {
        return word.to_owned();
    }
    let Ok(mut url) = url::Url::parse(word) else {
        return word.to_owned();
    };
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| {
            !(k.starts_with("utm_")
                || matches!(k.as_ref(), "fbclid" | "gclid" | "mc_cid" | "mc_eid"))
        })
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    url.to_string()
}

/// The text of the post: the caption, and the link on its own line unless the caption has it.
pub fn full_text(content: &DraftContent) -> String {
    match &content.link {
        Some(link) if !content.caption.contains(link.as_str()) => {
            format!("{}\n\n{link}", content.caption.trim_end())
        }
        _ => content.caption.clone(),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Capped exponential backoff with full jitter: a random delay in `[0, min(cap, base·2^n)]`.
pub fn backoff(base: Duration, attempt: u32, cap: Duration) -> Duration {
    let ceiling = base
        .saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(cap);
    ceiling.mul_f64(rand::random::<f64>())
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

    async fn report(&self, req: &PostRequest, outcome: &Outcome, dl: &Deadline) {
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

    /// Everything up to and including the claim; then [`Self::claimed`] under the claim.
    async fn decide(&self, req: &PostRequest, dl: &Deadline) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        if dl.remaining() >= self.settings.claim_ttl {
            return failed(
                key,
                false,
                format!(
                    "refused: this run's deadline ({}s away) would outlast the claim TTL ({}s); set POSTONCE_CLAIM_TTL_S above the function timeout",
                    dl.remaining().as_secs(),
                    self.settings.claim_ttl.as_secs()
                ),
            );
        }

        if let Some(content) = &req.content {
            let saved = dl
                .work(
                    t.dynamodb,
                    self.records
                        .save_draft(key, content, req.source.as_str(), now_s()),
                )
                .await;
            if let Some(e) = flatten(saved) {
                return failed(
                    key,
                    true,
                    format!("could not store the draft ({e}); nothing was posted"),
                );
            }
        }

        if let Some(why) = fault("before-claim").await {
            return failed(key, true, format!("{why}; nothing was posted"));
        }
        let acquired = match dl
            .work(
                t.redis,
                self.claims
                    .acquire(key, &req.run_id, self.settings.claim_ttl),
            )
            .await
        {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(e)) => Err(e.to_string()),
            Err(b) => Err(format!("claim store unavailable: {b}")),
        };
        let acquired = match acquired {
            Ok(a) => a,
            Err(e) => {
                // A SET whose answer was lost may have landed: take back our own claim, if any.
                let _ = dl
                    .finish(t.redis, self.claims.release(key, &req.run_id))
                    .await;
                let detail =
                    format!("{e}; nothing was uploaded or posted (no post without a claim)");
                self.mark_failed(
                    key,
                    dl,
                    &detail,
                    true,
                    0,
                    None,
                    &[DraftStatus::New, DraftStatus::Failed],
                )
                .await;
                return failed(key, true, detail);
            }
        };
        match acquired {
            Acquire::Acquired => {}
            Acquire::Held(Some(ClaimValue::Run(token))) if token == req.run_id => {}
            Acquire::Held(Some(ClaimValue::Posted(urn))) => return self.repair(req, dl, urn).await,
            Acquire::Held(_) => {
                return Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    "another run holds the claim and is posting this draft now; nothing was done",
                )
                .retryable(true)
            }
        }

        let guard = ClaimGuard {
            claims: self.claims.clone(),
            key: key.clone(),
            token: req.run_id.clone(),
            armed: true,
        };
        let progress = Progress::default();
        let (outcome, finish) = match AssertUnwindSafe(self.claimed(req, dl, &progress))
            .catch_unwind()
            .await
        {
            Ok(done) => done,
            Err(panic) => {
                let why = panic_text(panic.as_ref());
                tracing::error!(panic = %why, "the run panicked while holding the claim");
                match progress.take() {
                    Some(urn) => (
                        Outcome::new(
                            key,
                            OutcomeKind::PostedNotRecorded,
                            format!("LinkedIn accepted the post, then the run failed ({why}); the claim keeps the URN"),
                        )
                        .with_urn(urn.clone()),
                        Finish::Keep(urn),
                    ),
                    None => (failed(key, true, format!("internal error ({why}); nothing more was done")), Finish::Release),
                }
            }
        };
        if fault("before-release").await.is_some() {
            // Simulates a process that dies before releasing: the claim stays until its TTL.
            let mut guard = guard;
            guard.armed = false;
            return outcome;
        }
        match finish {
            Finish::Release => guard.release(dl, t.redis).await,
            Finish::Keep(urn) => {
                guard
                    .keep(
                        dl,
                        t.redis,
                        urn.as_deref().unwrap_or(""),
                        self.settings.posted_claim_ttl,
                    )
                    .await;
            }
        }
        outcome
    }

    /// The run while it holds the claim.
    async fn claimed(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let t = self.settings.timeouts;
        if let Some(why) = fault("after-claim").await {
            return (failed(key, true, why), Finish::Release);
        }

        let hash_hint = req.content.as_ref().map(|c| caption_hash(&full_text(c)));
        let loaded = dl
            .work(t.dynamodb, self.records.load(key, hash_hint.as_deref()))
            .await;
        let snapshot = match flatten_value(loaded) {
            Ok(s) => s,
            Err(e) => {
                return (
                    failed(key, true, format!("{e}; nothing was posted")),
                    Finish::Release,
                )
            }
        };
        if let Some(record) = snapshot.record {
            // A draft stored again after its record (a redelivery after the draft expired)
            // is done: mark it so the sweeper leaves it alone.
            if snapshot
                .draft
                .as_ref()
                .is_some_and(|d| d.status != DraftStatus::Posted)
            {
                let expires_at =
                    now_s() + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
                let open = [
                    DraftStatus::New,
                    DraftStatus::Failed,
                    DraftStatus::Unknown,
                    DraftStatus::NeedsReview,
                ];
                self.note(
                    key,
                    dl,
                    &DraftUpdate::Recorded { expires_at },
                    &open,
                    "the record",
                )
                .await;
            }
            let how = match record.source.as_str() {
                "owner" => "confirmed by the owner",
                _ => "recorded",
            };
            let outcome = Outcome::new(
                key,
                OutcomeKind::AlreadyPosted,
                format!("{how} at {} by {}", record.posted_at, record.source),
            )
            .with_urn(record.urn);
            return (outcome, Finish::Release);
        }
        if let Some(why) = fault("after-check").await {
            return (failed(key, true, why), Finish::Release);
        }

        if req.action == Action::Done {
            return self
                .confirm_by_owner(req, dl, snapshot.draft.as_ref())
                .await;
        }
        let content = req
            .content
            .clone()
            .or_else(|| snapshot.draft.as_ref().and_then(|d| d.content.clone()));
        let Some(content) = content else {
            return (
                failed(
                    key,
                    false,
                    format!("no draft is stored for {key}: send it with a caption and an image (the CI webhook, or postonce post --caption … --image …)"),
                ),
                Finish::Release,
            );
        };
        let draft = snapshot.draft.as_ref();
        if req.action != Action::Force {
            // Content guard: the same caption (normalized) already posted under another key.
            let hash = caption_hash(&full_text(&content));
            let owner = if hash_hint.as_deref() == Some(hash.as_str()) {
                Ok(snapshot.caption_owner.clone())
            } else {
                flatten_value(dl.work(t.dynamodb, self.records.caption_owner(&hash)).await)
            };
            match owner {
                Err(e) => {
                    return (
                        failed(key, true, format!("{e}; nothing was posted")),
                        Finish::Release,
                    )
                }
                Ok(Some(other)) if other != key.to_string() => {
                    let why = format!(
                        "this caption was already posted as {other}; press Post anyway if {key} should carry it too"
                    );
                    let attempts = draft.map_or(0, |d| d.attempts);
                    let (mut outcome, finish) =
                        self.fail(key, dl, why, false, attempts, None).await;
                    outcome.offer_force = true;
                    return (outcome, finish);
                }
                Ok(_) => {}
            }
        }
        if let Some(d) = draft.filter(|d| d.status == DraftStatus::Unknown) {
            if req.action != Action::Force {
                return self.reconcile(req, dl, d, progress).await;
            }
            tracing::warn!("the owner chose Post anyway after an unknown outcome");
        }
        let attempts = draft.map_or(0, |d| d.attempts);
        self.publish(req, dl, &content, attempts, progress).await
    }

    /// Image → initializeUpload → upload → intent → create-post → record.
    async fn publish(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        content: &DraftContent,
        attempts: u32,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let t = self.settings.timeouts;
        let chars = little_text::char_count(&full_text(content));
        if chars == 0 || chars > MAX_CHARS {
            let why =
                format!("the caption has {chars} characters; LinkedIn takes 1 to {MAX_CHARS}");
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        let image = match self
            .with_retries(
                dl,
                t.image,
                || self.images.fetch(&content.image),
                ImageError::is_transient,
                |_| None,
            )
            .await
        {
            Ok(image) => image,
            Err(Gave::Error(e)) => {
                let retryable = e.is_transient();
                return self
                    .fail(key, dl, e.to_string(), retryable, attempts, None)
                    .await;
            }
            Err(Gave::Budget(b)) => {
                return self
                    .fail(key, dl, format!("cover image: {b}"), true, attempts, None)
                    .await
            }
        };
        if let Some(why) = fault("after-image").await {
            return (failed(key, true, why), Finish::Release);
        }

        let target = match self
            .with_retries(
                dl,
                t.linkedin,
                || self.publisher.initialize_upload(),
                PublishError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(target) => target,
            Err(gave) => {
                return self
                    .fail_publish(key, dl, "initializeUpload", gave, attempts)
                    .await
            }
        };
        if let Some(why) = fault("after-initialize-upload").await {
            return (failed(key, true, why), Finish::Release);
        }

        let uploaded = self
            .with_retries(
                dl,
                t.linkedin,
                || {
                    self.publisher
                        .upload_image(&target, image.bytes.clone(), image.content_type)
                },
                PublishError::is_transient,
                rate_limit_wait,
            )
            .await;
        if let Err(gave) = uploaded {
            return self
                .fail_publish(key, dl, "image upload", gave, attempts)
                .await;
        }
        if let Some(why) = fault("after-upload").await {
            return (failed(key, true, why), Finish::Release);
        }

        let post = NewPost {
            commentary: little_text::escape(&full_text(content)),
            image_urn: target.image_urn,
            alt: content.alt.clone(),
        };
        // create-post gets its whole budget or is not sent: a sliver would only turn a clean
        // failure into an `unknown`.
        if dl.for_work(t.linkedin) != Some(t.linkedin) {
            let why = format!(
                "not enough time left in this run to give create-post its full {:?}; retry",
                t.linkedin
            );
            return self.fail(key, dl, why, true, attempts, None).await;
        }
        // Only a draft that no other attempt is in flight for may take the intent: the write is
        // conditional, so two runs that both got past a lost claim cannot both post.
        let intent_from: &[DraftStatus] = if req.action == Action::Force {
            &[
                DraftStatus::New,
                DraftStatus::Failed,
                DraftStatus::NeedsReview,
                DraftStatus::Unknown,
            ]
        } else {
            &[
                DraftStatus::New,
                DraftStatus::Failed,
                DraftStatus::NeedsReview,
            ]
        };
        // The intent goes to durable storage before the request leaves: if this process dies
        // after sending, the draft says `unknown` and no later run re-posts blindly (rule 7).
        let pending = PendingPost {
            commentary: post.commentary.clone(),
            image_urn: post.image_urn.clone(),
            alt: post.alt.clone(),
            at: now_s(),
            run: req.run_id.clone(),
        };
        let intent = dl
            .work(
                t.dynamodb,
                self.records
                    .update_draft(key, &DraftUpdate::Intent(pending), intent_from, now_s()),
            )
            .await;
        match flatten_value(intent) {
            Ok(true) => {}
            Ok(false) => {
                // Another run wrote its intent first (possible only if this run's claim was
                // lost, e.g. Redis restarted empty): the conditional intent is the second lock.
                tracing::error!("another run's intent is on the draft; not posting");
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    "another run is posting this draft (its attempt is recorded); nothing was posted",
                )
                .retryable(true);
                return (outcome, Finish::Release);
            }
            Err(e) => {
                let why = format!(
                    "could not record the attempt before posting ({e}); nothing was posted"
                );
                return (failed(key, true, why), Finish::Release);
            }
        }
        self.create(req, dl, &post, &full_text(content), false, progress)
            .await
    }

    /// Sends create-post once and classifies the answer. `reconciling`: this is the identical
    /// re-send after an unknown outcome.
    async fn create(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        post: &NewPost,
        caption: &str,
        reconciling: bool,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let t = self.settings.timeouts;
        if let Some(why) = fault("before-create-post").await {
            return (
                self.fail_after_intent(key, dl, why, true).await,
                Finish::Release,
            );
        }
        let answer = dl.work(t.linkedin, self.publisher.create_post(post)).await;
        match answer {
            Ok(Ok(urn)) => {
                progress.created(urn.clone());
                if let Some(why) = fault("after-create-post").await {
                    return (
                        Outcome::new(key, OutcomeKind::PostedNotRecorded, why)
                            .with_urn(urn.clone()),
                        Finish::Keep(urn.clone()),
                    );
                }
                self.record(
                    req,
                    dl,
                    urn,
                    caption,
                    OutcomeKind::Posted,
                    req.source.as_str(),
                )
                .await
            }
            // The earlier attempt (reconciling), or the post the owner suspected was missing
            // (Post anyway), is on LinkedIn: record it, so no later Retry posts it again.
            Ok(Err(PublishError::Duplicate { urn }))
                if reconciling || req.action == Action::Force =>
            {
                progress.created(Some(urn.clone()));
                let source = if reconciling { "reconcile" } else { "force" };
                self.record(
                    req,
                    dl,
                    Some(urn),
                    caption,
                    OutcomeKind::AlreadyPosted,
                    source,
                )
                .await
            }
            Ok(Err(PublishError::Duplicate { urn })) => {
                let why = format!(
                    "LinkedIn already has this exact text as {urn} (posted by hand, or under another key); nothing new was posted. Change the caption to post it again"
                );
                let outcome = self
                    .fail_after_intent(key, dl, why, false)
                    .await
                    .with_urn(Some(urn));
                (outcome, Finish::Release)
            }
            Ok(Err(e)) if e.is_ambiguous() => (
                self.ambiguous(key, dl, e.to_string()).await,
                Finish::Release,
            ),
            Err(BudgetError::TimedOut(b)) => {
                let why = format!("LinkedIn did not answer create-post within {b:?}");
                (self.ambiguous(key, dl, why).await, Finish::Release)
            }
            Ok(Err(e)) if reconciling => {
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!("could not check with LinkedIn ({e}); the earlier attempt may be on LinkedIn. Retry later, or check and tell me"),
                )
                .retryable(e.is_transient());
                (outcome, Finish::Release)
            }
            Err(BudgetError::NoTimeLeft) if reconciling => (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    "no time left to check with LinkedIn; retry",
                )
                .retryable(true),
                Finish::Release,
            ),
            Ok(Err(e)) => {
                let retryable = e.is_transient();
                (
                    self.fail_after_intent(key, dl, e.to_string(), retryable)
                        .await,
                    Finish::Release,
                )
            }
            Err(BudgetError::NoTimeLeft) => (
                self.fail_after_intent(
                    key,
                    dl,
                    "no time left to send create-post; nothing was posted".into(),
                    true,
                )
                .await,
                Finish::Release,
            ),
        }
    }

    /// A draft left `unknown`: within the window, re-send the identical request so LinkedIn's
    /// duplicate answer reveals an existing post; past it, ask the owner.
    async fn reconcile(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let ask = |why: String| {
            (
                Outcome::new(key, OutcomeKind::Unknown, why).with_urn(None),
                Finish::Release,
            )
        };
        let Some(pending) = &draft.pending else {
            return ask("an earlier attempt's result is unknown and its request was not kept; check LinkedIn, then press It's on LinkedIn or Post anyway".into());
        };
        let age = now_s().saturating_sub(pending.at);
        let quiet = i64::try_from(self.settings.reconcile_after.as_secs()).unwrap_or(i64::MAX);
        if age < quiet {
            // The first request may still be in flight at LinkedIn, whose duplicate check sees
            // only posts that already exist: a re-send now could make a second post.
            let at = pending.at.saturating_add(quiet);
            return (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!(
                        "an attempt {age}s ago may still be in flight at LinkedIn; nothing was sent. It is checked from {} ({}s after that attempt) on: the sweeper does it, or Retry then",
                        crate::record::rfc3339(at),
                        quiet
                    ),
                )
                .retryable(true),
                Finish::Release,
            );
        }
        if age > i64::try_from(self.settings.reconcile_window.as_secs()).unwrap_or(i64::MAX) {
            return ask(format!(
                "an earlier attempt {age}s ago may have posted it, and that is too long ago for LinkedIn's duplicate check to tell; nothing was sent"
            ));
        }
        tracing::warn!(
            first_attempt = pending.at,
            "re-sending the identical create-post to reconcile an unknown outcome"
        );
        let post = NewPost {
            commentary: pending.commentary.clone(),
            image_urn: pending.image_urn.clone(),
            alt: pending.alt.clone(),
        };
        let caption = draft.content.as_ref().map(full_text).unwrap_or_default();
        self.create(req, dl, &post, &caption, true, progress).await
    }

    /// Writes the durable record (conditional) and decides what happens to the claim.
    async fn record(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        urn: Option<String>,
        caption: &str,
        kind: OutcomeKind,
        source: &str,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let now = now_s();
        let record = PostedRecord {
            key: key.to_string(),
            urn: urn.clone(),
            posted_at: now,
            run: req.run_id.clone(),
            source: source.to_owned(),
            caption_hash: (!caption.is_empty()).then(|| caption_hash(caption)),
        };
        let expires = now + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
        let written = dl
            .finish(
                self.settings.timeouts.dynamodb,
                self.records.put_posted(&record, now, expires),
            )
            .await;
        match flatten_value(written) {
            Ok(PutPosted::Created) => {
                if let Some(why) = fault("after-record").await {
                    return (
                        Outcome::new(key, kind, why).with_urn(urn.clone()),
                        Finish::Release,
                    );
                }
                let detail = match kind {
                    OutcomeKind::AlreadyPosted => "LinkedIn's duplicate answer showed the earlier attempt is on LinkedIn; recorded it",
                    _ => "posted and recorded",
                };
                (
                    Outcome::new(key, kind, detail).with_urn(urn),
                    Finish::Release,
                )
            }
            Ok(PutPosted::Exists(other))
                if other.run == req.run_id || (urn.is_some() && other.urn == urn) =>
            {
                (
                    Outcome::new(key, kind, "posted and recorded").with_urn(urn),
                    Finish::Release,
                )
            }
            Ok(PutPosted::Exists(other)) => {
                tracing::error!(
                    this_urn = ?urn,
                    recorded_urn = ?other.urn,
                    recorded_by = %other.run,
                    "DUPLICATE POST: a record appeared for this key while this run held the claim"
                );
                let detail = format!(
                    "duplicate: {key} was already recorded as {} by {}; this run also created {}. Delete one of them on LinkedIn",
                    other.urn.as_deref().unwrap_or("(no URN)"),
                    other.run,
                    urn.as_deref().unwrap_or("(no URN)")
                );
                (
                    Outcome::new(key, OutcomeKind::Posted, detail).with_urn(urn),
                    Finish::Release,
                )
            }
            Err(e) => {
                tracing::error!(urn = ?urn, error = %e, "LinkedIn accepted the post but the record write failed; keeping the claim");
                let detail = format!(
                    "LinkedIn accepted the post but the record could not be written ({e}). The claim is kept with the URN so no run posts it again; Retry repairs the record"
                );
                (
                    Outcome::new(key, OutcomeKind::PostedNotRecorded, detail).with_urn(urn.clone()),
                    Finish::Keep(urn),
                )
            }
        }
    }

    /// A claim that holds a URN: write the record from it, then drop the claim.
    async fn repair(&self, req: &PostRequest, dl: &Deadline, urn: String) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        let urn = (!urn.is_empty()).then_some(urn);
        let now = now_s();
        let record = PostedRecord {
            key: key.to_string(),
            urn: urn.clone(),
            posted_at: now,
            run: req.run_id.clone(),
            source: "repair".into(),
            caption_hash: None,
        };
        let expires = now + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
        match flatten_value(dl.work(t.dynamodb, self.records.put_posted(&record, now, expires)).await) {
            Ok(written) => {
                let value = ClaimValue::Posted(urn.clone().unwrap_or_default()).raw();
                if let Err(e) = flatten_value(dl.finish(t.redis, self.claims.release(key, &value)).await) {
                    tracing::warn!(error = %e, "record repaired; the kept claim stays until its TTL");
                }
                let detail = match written {
                    PutPosted::Created => "the record was missing; repaired it from the kept claim",
                    PutPosted::Exists(other) if urn.is_some() && other.urn.is_some() && other.urn != urn => {
                        tracing::error!(
                            kept_urn = ?urn,
                            recorded_urn = ?other.urn,
                            "DUPLICATE POST: the kept claim and the record name different posts"
                        );
                        "recorded, but under a different post than the kept claim: one of them is a duplicate"
                    }
                    PutPosted::Exists(_) => "recorded",
                };
                tracing::warn!(urn = ?urn, "{detail}");
                Outcome::new(key, OutcomeKind::AlreadyPosted, detail).with_urn(urn)
            }
            Err(e) => Outcome::new(
                key,
                OutcomeKind::PostedNotRecorded,
                format!("on LinkedIn, and the record still cannot be written ({e}); the claim keeps the URN. Retry later"),
            )
            .with_urn(urn),
        }
    }

    /// `done:<key>`: the owner says it is on LinkedIn.
    async fn confirm_by_owner(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: Option<&Draft>,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let caption = draft
            .and_then(|d| d.content.as_ref())
            .map(full_text)
            .unwrap_or_default();
        let (outcome, _) = self
            .record(req, dl, None, &caption, OutcomeKind::AlreadyPosted, "owner")
            .await;
        match outcome.outcome {
            OutcomeKind::PostedNotRecorded => (
                failed(
                    key,
                    true,
                    format!(
                        "could not record your confirmation ({}); press it again",
                        outcome.detail
                    ),
                ),
                Finish::Release,
            ),
            _ => (
                Outcome::new(key, OutcomeKind::AlreadyPosted, "confirmed by the owner")
                    .with_urn(outcome.urn),
                Finish::Release,
            ),
        }
    }

    /// A create-post that may have worked: the draft stays `unknown` (the intent said so).
    async fn ambiguous(&self, key: &PostKey, dl: &Deadline, why: String) -> Outcome {
        let update = DraftUpdate::Ambiguous { error: why.clone() };
        self.note(
            key,
            dl,
            &update,
            &[DraftStatus::Unknown],
            "the ambiguous attempt (the draft already says unknown)",
        )
        .await;
        Outcome::new(
            key,
            OutcomeKind::Unknown,
            format!(
                "{why}; the post may exist. Nothing is re-sent for {}s (the request may still be in flight); then, within {}s of the attempt, the identical request is re-sent so LinkedIn's duplicate check can tell. Otherwise check LinkedIn and tell me",
                self.settings.reconcile_after.as_secs(),
                self.settings.reconcile_window.as_secs()
            ),
        )
    }

    /// Nothing was posted after the intent was written: back from `unknown` to `failed`.
    async fn fail_after_intent(
        &self,
        key: &PostKey,
        dl: &Deadline,
        why: String,
        retryable: bool,
    ) -> Outcome {
        let (outcome, _) = self
            .fail_from(key, dl, why, retryable, 0, None, &[DraftStatus::Unknown])
            .await;
        outcome
    }

    async fn fail_publish(
        &self,
        key: &PostKey,
        dl: &Deadline,
        step: &str,
        gave: Gave<PublishError>,
        attempts: u32,
    ) -> (Outcome, Finish) {
        match gave {
            Gave::Error(e) => {
                let retry_after = match &e {
                    PublishError::RateLimited { retry_after, .. } => *retry_after,
                    _ => None,
                };
                let retryable = e.is_transient();
                self.fail(
                    key,
                    dl,
                    format!("{step}: {e}"),
                    retryable,
                    attempts,
                    retry_after,
                )
                .await
            }
            Gave::Budget(b) => {
                self.fail(key, dl, format!("{step}: {b}"), true, attempts, None)
                    .await
            }
        }
    }

    /// Nothing was posted: note the failure on the draft and say so.
    async fn fail(
        &self,
        key: &PostKey,
        dl: &Deadline,
        why: String,
        retryable: bool,
        attempts: u32,
        retry_after: Option<Duration>,
    ) -> (Outcome, Finish) {
        // Before this run's intent, an `unknown` draft belongs to another attempt (its result
        // is still open): it is never overwritten from here.
        let before_intent = [
            DraftStatus::New,
            DraftStatus::Failed,
            DraftStatus::NeedsReview,
        ];
        self.fail_from(
            key,
            dl,
            why,
            retryable,
            attempts,
            retry_after,
            &before_intent,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn fail_from(
        &self,
        key: &PostKey,
        dl: &Deadline,
        why: String,
        retryable: bool,
        attempts: u32,
        retry_after: Option<Duration>,
        from: &[DraftStatus],
    ) -> (Outcome, Finish) {
        let detail = format!("{why}; nothing was posted");
        self.mark_failed(key, dl, &detail, retryable, attempts, retry_after, from)
            .await;
        (failed(key, retryable, detail), Finish::Release)
    }

    /// Notes a failure on the draft (if it exists and its status is in `from`), with the time
    /// the sweeper may retry it: capped exponential backoff with jitter, at least `retry_after`.
    #[allow(clippy::too_many_arguments)]
    async fn mark_failed(
        &self,
        key: &PostKey,
        dl: &Deadline,
        detail: &str,
        retryable: bool,
        attempts: u32,
        retry_after: Option<Duration>,
        from: &[DraftStatus],
    ) {
        let delay = backoff(
            self.settings.retry_base,
            attempts,
            Duration::from_secs(6 * 3600),
        )
        .max(self.settings.retry_base / 2)
        .max(retry_after.unwrap_or_default());
        let update = DraftUpdate::Failed {
            error: detail.to_owned(),
            retryable,
            next_retry_at: retryable.then(|| now_s() + i64::try_from(delay.as_secs()).unwrap_or(0)),
        };
        self.note(key, dl, &update, from, "the failure").await;
    }

    /// Applies a draft update as a finishing call; a failure is logged, not fatal. Returns
    /// whether the update was applied.
    async fn note(
        &self,
        key: &PostKey,
        dl: &Deadline,
        update: &DraftUpdate,
        from: &[DraftStatus],
        what: &str,
    ) -> bool {
        let applied = dl
            .finish(
                self.settings.timeouts.dynamodb,
                self.records.update_draft(key, update, from, now_s()),
            )
            .await;
        match flatten_value(applied) {
            Ok(applied) => applied,
            Err(e) => {
                tracing::warn!(error = %e, "could not note {what} on the draft");
                false
            }
        }
    }

    /// Runs a call that is safe to repeat, retrying transient failures with capped exponential
    /// backoff and full jitter while the deadline allows (rule 8).
    async fn with_retries<T, E, F, Fut>(
        &self,
        dl: &Deadline,
        budget: Duration,
        mut call: F,
        transient: impl Fn(&E) -> bool,
        wait_hint: impl Fn(&E) -> Option<Duration>,
    ) -> Result<T, Gave<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        let tries = self.settings.call_tries.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (gave, hint) = match dl.work(budget, call()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if transient(&e) && attempt < tries => {
                    let hint = wait_hint(&e);
                    tracing::warn!(attempt, error = %e, "transient failure; retrying");
                    (Gave::Error(e), hint)
                }
                Ok(Err(e)) => return Err(Gave::Error(e)),
                Err(BudgetError::TimedOut(b)) if attempt < tries => {
                    tracing::warn!(attempt, budget = ?b, "call timed out; retrying");
                    (Gave::Budget(BudgetError::TimedOut(b)), None)
                }
                Err(b) => return Err(Gave::Budget(b)),
            };
            let pause = hint.unwrap_or_else(|| {
                backoff(
                    Duration::from_millis(200),
                    attempt - 1,
                    Duration::from_secs(2),
                )
            });
            // Only wait if a further try still fits before the reserve.
            if dl
                .for_work(pause + Duration::from_millis(100))
                .is_none_or(|left| left < pause + Duration::from_millis(100))
            {
                return Err(gave);
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// A report that is not a run's outcome (sweeper reminders).
    pub async fn tell(&self, text: &str, outcome: &Outcome, dl: &Deadline) {
        if let Some(e) = flatten(
            dl.finish(
                self.settings.timeouts.telegram,
                self.notifier.tell(text, outcome),
            )
            .await,
        ) {
            tracing::warn!(error = %e, "could not tell the owner");
        }
    }

    /// The sweeper: re-runs retryable failed drafts whose time has come, and drafts whose run
    /// never finished; marks drafts out of attempts `needs_review` and tells the owner; reminds
    /// the owner once of each `unknown` draft past the reconciliation window. It posts only
    /// through [`Self::run`], so a draft with a record is never posted again.
    ///
    /// # Errors
    /// When the drafts cannot be listed.
    pub async fn sweep(&self, dl: &Deadline) -> Result<SweepReport, String> {
        let t = self.settings.timeouts;
        let statuses = [DraftStatus::New, DraftStatus::Failed, DraftStatus::Unknown];
        let drafts = flatten_value(
            dl.work(t.dynamodb, self.records.drafts_with_status(&statuses))
                .await,
        )?;
        let now = now_s();
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        // A `new` draft untouched for a claim TTL has no live run: its trigger died.
        let stale = secs(self.settings.claim_ttl);
        let window = secs(self.settings.reconcile_window);
        let quiet = secs(self.settings.reconcile_after);
        let mut report = SweepReport::default();
        for draft in drafts {
            let Ok(key) = PostKey::parse(&draft.key) else {
                tracing::warn!(key = %draft.key, "skipping a draft with an invalid key");
                continue;
            };
            report.examined += 1;
            let due = match draft.status {
                DraftStatus::Failed => {
                    draft.retryable && draft.next_retry_at.is_none_or(|at| at <= now)
                }
                DraftStatus::New => now - draft.updated_at > stale,
                DraftStatus::Unknown => {
                    let at = draft.pending.as_ref().map_or(draft.updated_at, |p| p.at);
                    if now - at < quiet {
                        // Too early: the attempt may still be in flight.
                        false
                    } else if now - at > window {
                        if !draft.reminded {
                            self.remind(&key, dl, &draft).await;
                            report.reminded.push(key.to_string());
                        }
                        false
                    } else {
                        // Within the window: reconcile now (or repair from a kept claim). A run
                        // still in flight holds the claim, so this cannot post twice.
                        true
                    }
                }
                DraftStatus::NeedsReview | DraftStatus::Posted => false,
            };
            if !due {
                continue;
            }
            if draft.status == DraftStatus::Failed && draft.attempts >= self.settings.max_attempts {
                self.give_up(&key, dl, &draft).await;
                report.needs_review.push(key.to_string());
                continue;
            }
            // Leave the rest for the next sweep rather than start a run that cannot finish.
            if dl.for_work(t.linkedin * 3 + t.image).is_none() {
                report.left_for_later += 1;
                continue;
            }
            let request = PostRequest {
                key,
                content: None,
                action: Action::Post,
                source: Source::Sweep,
                run_id: new_run_id(),
                reply_to: None,
            };
            report.runs.push(self.run(request, *dl).await);
        }
        Ok(report)
    }

    async fn give_up(&self, key: &PostKey, dl: &Deadline, draft: &Draft) {
        let last = draft.last_error.clone().unwrap_or_default();
        let update = DraftUpdate::NeedsReview {
            error: last.clone(),
        };
        if !self
            .note(key, dl, &update, &[DraftStatus::Failed], "needs_review")
            .await
        {
            return;
        }
        let outcome = failed(key, false, last);
        let text = format!(
            "Gave up on {key} after {} attempts; it needs you. Fix the cause, then press Retry.",
            draft.attempts
        );
        self.tell(&text, &outcome, dl).await;
    }

    async fn remind(&self, key: &PostKey, dl: &Deadline, draft: &Draft) {
        let outcome = Outcome::new(
            key,
            OutcomeKind::Unknown,
            draft.last_error.clone().unwrap_or_default(),
        );
        let text = format!("Reminder: {key} may or may not be on LinkedIn, and it is too late to find out automatically.");
        self.tell(&text, &outcome, dl).await;
        self.note(
            key,
            dl,
            &DraftUpdate::Reminded,
            &[DraftStatus::Unknown],
            "the reminder (the owner may be reminded again)",
        )
        .await;
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

/// What a sweep did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SweepReport {
    pub examined: usize,
    pub runs: Vec<Outcome>,
    pub needs_review: Vec<String>,
    pub reminded: Vec<String>,
    pub left_for_later: usize,
}

/// What `postonce status` shows.
#[derive(Debug, Clone)]
pub struct Status {
    pub snapshot: Snapshot,
    pub claim: Option<(ClaimValue, Option<Duration>)>,
}

fn rate_limit_wait(e: &PublishError) -> Option<Duration> {
    match e {
        PublishError::RateLimited { retry_after, .. } => *retry_after,
        _ => None,
    }
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
    use super::*;

    #[test]
    fn caption_hash_normalizes() {
        let a = caption_hash("Hello  world\n https://x.com/p?utm_source=li&id=3 ");
        let b = caption_hash("Hello world https://x.com/p?id=3");
        assert_eq!(a, b);
        assert_ne!(a, caption_hash("Hello world https://x.com/p?id=4"));
        assert_eq!(caption_hash("Cafe\u{301}"), caption_hash("Café"));
    }

    #[test]
    fn backoff_is_capped_and_jittered() {
        for attempt in 0..30 {
            let d = backoff(Duration::from_secs(60), attempt, Duration::from_secs(3600));
            assert!(d <= Duration::from_secs(3600));
        }
    }
}

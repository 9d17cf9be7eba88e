//! The claim around a run (rules 1, 5 and 6 in `mod.rs`): take it before anything is uploaded,
//! release it (compare-and-delete, awaited) on every path, keep it holding the post id when the
//! network accepted the post but the record could not be written, and a drop guard as the net.

use super::*;

/// What happens to the claim when a claimed run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Finish {
    Release,
    /// Released already, by the record's own write (the claims live beside the records).
    Released,
    /// Posted but not recorded: keep the claim, rewritten to hold this post id.
    Keep(Option<String>),
}

/// Holds a claim until it is released or kept. If the run is dropped before it finishes
/// (cancelled: a client hang-up in a transport that does not detach the run, a shutdown), the
/// drop is the safety net, and it keeps rule 6: it releases the claim only while nothing can
/// have been sent; once create-post may have been sent it leaves the claim to its TTL, and
/// once the post is known to exist it rewrites the claim to hold the post id. Normal paths await
/// the release or keep instead.
pub(super) struct ClaimGuard {
    claims: Arc<dyn ClaimStore>,
    key: PostKey,
    token: String,
    progress: Arc<Progress>,
    posted_claim_ttl: Duration,
    armed: bool,
}

impl ClaimGuard {
    pub(super) async fn release(mut self, dl: &Deadline, budget: Duration) {
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

    /// Rewrites the claim to hold `post_id` (rule 6). `Err` says why it could not be kept.
    pub(super) async fn keep(
        mut self,
        dl: &Deadline,
        budget: Duration,
        post_id: &str,
        ttl: Duration,
    ) -> Result<(), String> {
        self.armed = false;
        let kept = dl
            .finish(
                budget,
                self.claims
                    .keep_posted(&self.key, &self.token, post_id, ttl),
            )
            .await;
        match flatten_value(kept) {
            Ok(true) => {
                tracing::warn!(post_id, "claim kept on purpose: it now holds the post id");
                Ok(())
            }
            Ok(false) => {
                tracing::error!(post_id, "could not keep the claim: another run holds it");
                Err("another run holds it now".into())
            }
            Err(e) => {
                tracing::error!(post_id, error = %e, "could not keep the claim; the draft stays unknown so no run re-posts blindly");
                Err(e)
            }
        }
    }

    /// Leaves the claim as it is (a simulated crash before release, or released already).
    pub(super) fn abandon(mut self) {
        self.armed = false;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let stage = self.progress.stage();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (claims, key, token) = (self.claims.clone(), self.key.clone(), self.token.clone());
        match stage {
            Stage::Claimed | Stage::Intent | Stage::Recorded(..) => {
                handle.spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(5), claims.release(&key, &token))
                            .await;
                });
            }
            Stage::Sent => {
                tracing::error!("the run was dropped while create-post was in flight; the claim stays until its TTL and the draft says unknown");
            }
            Stage::Created(post_id) => {
                tracing::error!(post_id = post_id.as_deref(), network = self.key.network().label(), "the run was dropped after the network accepted the post; keeping the claim with the post id");
                let ttl = self.posted_claim_ttl;
                handle.spawn(async move {
                    let post_id = post_id.unwrap_or_default();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        claims.keep_posted(&key, &token, &post_id, ttl),
                    )
                    .await;
                });
            }
        }
    }
}

/// How far a claimed run got: what its claim must protect if it ends abnormally.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Stage {
    /// Nothing durable written, nothing sent.
    #[default]
    Claimed,
    /// The intent is written (the draft says `unknown`); create-post not sent yet.
    Intent,
    /// create-post may have been sent; no answer yet.
    Sent,
    /// The network accepted the post (with its post id, when it named one).
    Created(Option<String>),
    /// The durable record is written (the post's id, and what the run answers): the record
    /// now stops every later run, so the claim is released on every path, a panic included.
    Recorded(Option<String>, OutcomeKind),
}

/// The run's [`Stage`], shared with its guard so that a panic or a drop still keeps rule 6;
/// the record it could not write, for one more try if the claim cannot be kept either; and
/// the kept request of the attempt it sends or settles (for [`Lane::keep_spreading`]).
#[derive(Default)]
pub(super) struct Progress(
    Mutex<Stage>,
    Mutex<Option<Unrecorded>>,
    Mutex<Option<PendingPost>>,
);

/// A post the network accepted whose record write failed: what [`Lane::record`] was given.
pub(super) struct Unrecorded {
    pub post: Created,
    pub caption_hash: Option<String>,
    pub kind: OutcomeKind,
    pub source: String,
    /// Why the write failed.
    pub error: String,
}

impl Progress {
    pub(super) fn set(&self, stage: Stage) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = stage;
    }

    pub(super) fn created(&self, post_id: Option<String>) {
        self.set(Stage::Created(post_id));
    }

    pub(super) fn stage(&self) -> Stage {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn unrecorded(&self, post: Unrecorded) {
        *self.1.lock().unwrap_or_else(|p| p.into_inner()) = Some(post);
    }

    pub(super) fn take_unrecorded(&self) -> Option<Unrecorded> {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The attempt's kept request, as its intent wrote it (or the draft kept it).
    pub(super) fn attempt(&self, pending: &PendingPost) {
        *self.2.lock().unwrap_or_else(|p| p.into_inner()) = Some(pending.clone());
    }

    pub(super) fn attempted(&self) -> Option<PendingPost> {
        self.2.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The states a run that reads its draft under the claim starts an attempt from (issue 30,
/// finding 3).
pub(super) const STARTS_FROM: [DraftStatus; 4] = [
    DraftStatus::New,
    DraftStatus::Failed,
    DraftStatus::NeedsReview,
    DraftStatus::Scheduled,
];

/// Whether this run starts its attempt where it reads its draft, under the claim: a plain
/// post that carried no draft and read none before (a sweep's run); a trigger's draft write
/// started the attempt already.
pub(super) fn starts(req: &PostRequest, seen: Option<&Draft>) -> bool {
    seen.is_none() && req.content.is_none() && req.action == Action::Post
}

/// The draft as the run knows it when it holds the claim.
pub(super) enum Seen {
    /// As the trigger stored it or the run's plan read it, before the claim (`None`: unread).
    Before(Option<Draft>),
    /// As the claim's own request started the attempt, where the claims live beside the
    /// records ([`RecordStore::claim_and_start`]; `None`: not in a state to start).
    Started(Option<Draft>),
}

impl Lane {
    /// The claim of this run, as the record store's joined writes take or release it.
    pub(super) fn ask<'a>(&'a self, req: &'a PostRequest) -> ClaimAsk<'a> {
        ClaimAsk {
            claims: self.claims.as_ref(),
            token: &req.run_id,
            ttl: self.settings.claim_ttl,
        }
    }

    /// Everything up to and including the claim; then [`Self::claimed`] under the claim.
    /// `seen`: the draft as this run's plan read it, for a trigger that carried none.
    pub(super) async fn decide(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        mut seen: Option<Draft>,
    ) -> Outcome {
        // The claim may go with the draft's write (one request, where the claim store has a
        // place the record store may share) when nothing stands between them: a run the
        // claim's TTL outlasts, and no fault before the claim (a test's, looked at first here).
        let mut early = None;
        if req.content.is_some()
            && self.claims.place().is_some()
            && dl.remaining() < self.settings.claim_ttl
        {
            early = Some(fault("before-claim").await);
        }
        let join = early == Some(None);
        let pre = match self.store_carried(req, dl, &mut seen, join).await {
            Ok(pre) => pre,
            Err(done) => return done,
        };
        if let Some(refused) = self.refuse_outlasting_claim(&req.key, dl).await {
            return refused;
        }
        let seen = match self.take_claim(req, dl, pre, early, seen).await {
            Ok(seen) => seen,
            Err(done) => return done,
        };
        // Boxed: what runs under the claim (the cover, the network's calls, the record) is
        // most of the run's state machine, some 9 KB. Inline, every run would carry it and move
        // it into its box, an already-posted draft's too, which never gets here (issue 34).
        Box::pin(self.under_claim(req, dl, seen)).await
    }

    /// The draft a trigger carried is stored first, whatever happens next: nothing is lost.
    /// `Err`: the run ends here (it could not be stored, or it is posted already); otherwise
    /// `seen` is the draft as stored, and with `join` the claim's answer if the write took it.
    async fn store_carried(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        seen: &mut Option<Draft>,
        join: bool,
    ) -> Result<Option<Acquire>, Outcome> {
        let key = &req.key;
        let t = self.settings.timeouts;
        let mut pre = None;
        if let Some(content) = &req.content {
            let (source, now) = (req.source.as_str(), now_s());
            let saved = if join {
                let ask = self.ask(req);
                dl.work(
                    t.records,
                    self.records
                        .save_draft_claiming(key, content, source, now, ask),
                )
                .await
            } else {
                dl.work(t.records, async {
                    let saved = self.records.save_draft(key, content, source, now).await;
                    saved.map(|d| (d, None))
                })
                .await
            };
            if join && saved.is_err() {
                // Given up on before its answer: the write may have taken the claim (a failed
                // write's own claim is released by the store).
                let _ = dl
                    .finish(t.claims, self.claims.release(key, &req.run_id))
                    .await;
            }
            let draft = match flatten_value(saved) {
                Ok((draft, claimed)) => {
                    pre = claimed;
                    draft
                }
                Err(e) => {
                    return Err(failed(
                        key,
                        true,
                        format!("could not store the draft ({e}); nothing was posted"),
                    ));
                }
            };
            match draft.status {
                // Posted: the write found the record's copy, and a record is final (no claim).
                DraftStatus::Posted => {
                    if let Some(record) = draft.record.as_ref().filter(|r| self.counts(r)) {
                        if let Some(Acquire::Acquired) = pre {
                            // Not asked where the copy counts; released all the same.
                            let _ = dl
                                .finish(t.claims, self.claims.release(key, &req.run_id))
                                .await;
                        }
                        return Err(self.already(key, dl, record, false).await);
                    }
                }
                // Sent again after a cancel, or again without a time while scheduled: an
                // ordinary draft again, posted now (and retried by the sweeper if this run
                // cannot finish).
                was @ (DraftStatus::Cancelled | DraftStatus::Scheduled) => {
                    self.note(
                        key,
                        dl,
                        &DraftUpdate::Revive,
                        &[was],
                        "that it was sent again",
                    )
                    .await;
                }
                _ => *seen = Some(draft),
            }
        }
        Ok(pre)
    }

    /// A run whose deadline would outlast the claim's TTL could post after its claim expired:
    /// refused, a configuration error rather than a bad draft (the draft is stored and waits).
    async fn refuse_outlasting_claim(&self, key: &PostKey, dl: &Deadline) -> Option<Outcome> {
        if dl.remaining() < self.settings.claim_ttl {
            return None;
        }
        let mut outcome = failed(
            key,
            false,
            format!(
                "refused: this run's deadline ({}s away) would outlast the claim TTL ({}s), so the claim could expire while it posts; set POSTONCE_CLAIM_TTL_S above the function timeout. The draft is stored; nothing was posted",
                dl.remaining().as_secs(),
                self.settings.claim_ttl.as_secs()
            ),
        );
        outcome.misconfigured = true;
        // Noted as a permanent failure, so the sweeper does not re-run it every minute and
        // the owner is told once (it waits for a person: the setting).
        self.mark_failed(
            key,
            dl,
            &outcome.detail,
            false,
            0,
            None,
            &[DraftStatus::New, DraftStatus::Failed],
        )
        .await;
        Some(outcome)
    }

    /// Takes the claim (no post without one), unless the draft's write took it (`pre`), and
    /// where the claims live beside the records, starts a sweep's attempt in the same request.
    /// `early`: the fault point before the claim, if it was looked at already. `Ok`: the draft
    /// as the run knows it now. `Err`: what this run answers instead (the claim store failed,
    /// another run holds it, or the draft is posted and its record is repaired).
    async fn take_claim(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        pre: Option<Acquire>,
        early: Option<Option<String>>,
        seen: Option<Draft>,
    ) -> Result<Seen, Outcome> {
        let key = &req.key;
        let t = self.settings.timeouts;
        let hit = match early {
            Some(hit) => hit,
            None => fault("before-claim").await,
        };
        if let Some(why) = hit {
            return Err(failed(key, true, format!("{why}; nothing was posted")));
        }
        let mut started = None;
        let mut acquired = match pre {
            Some(a) => Ok(a),
            None if starts(req, seen.as_ref()) => match self.claim_and_start(req, dl).await {
                Some(Ok((a, s))) => {
                    if a == Acquire::Acquired {
                        started = Some(s);
                    }
                    Ok(a)
                }
                Some(Err(e)) => Err(e),
                None => self.acquire(req, dl).await,
            },
            None => self.acquire(req, dl).await,
        };
        if let Ok(Acquire::Held(Some(ClaimValue::Posted(post_id)))) = &acquired {
            if is_dry_run_urn(post_id) && !self.adapter.is_dry_run() {
                // A dry run's kept claim in the real namespace (only an older version could
                // leave one): it proves nothing was posted. Drop it and claim again.
                tracing::warn!(post_id = %post_id, "ignoring a dry run's kept claim; removing it");
                let value = ClaimValue::Posted(post_id.clone()).raw();
                let _ = dl.finish(t.claims, self.claims.release(key, &value)).await;
                acquired = self.acquire(req, dl).await;
            }
        }
        let acquired = match acquired {
            Ok(a) => a,
            Err(e) => {
                // A SET whose answer was lost may have landed: take back our own claim, if any.
                let _ = dl
                    .finish(t.claims, self.claims.release(key, &req.run_id))
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
                return Err(failed(key, true, detail));
            }
        };
        let seen = match started {
            Some(s) => Seen::Started(s),
            None => Seen::Before(seen),
        };
        match acquired {
            Acquire::Acquired => Ok(seen),
            Acquire::Held(Some(ClaimValue::Run(token))) if token == req.run_id => Ok(seen),
            Acquire::Held(Some(ClaimValue::Posted(post_id)))
                if self.adapter.is_dry_run() || !is_dry_run_urn(&post_id) =>
            {
                Err(self.repair(req, dl, post_id).await)
            }
            Acquire::Held(_) => Err(Outcome::new(
                key,
                OutcomeKind::BeingPosted,
                "another run holds the claim and is posting this draft now; nothing was done",
            )
            .retryable(true)),
        }
    }

    /// Under the claim: [`Self::claimed`], caught if it panics, then the claim released, or
    /// kept where the network accepted the post and its record could not be written.
    async fn under_claim(&self, req: &PostRequest, dl: &Deadline, seen: Seen) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        let progress = Arc::new(Progress::default());
        let guard = ClaimGuard {
            claims: self.claims.clone(),
            key: key.clone(),
            token: req.run_id.clone(),
            progress: progress.clone(),
            posted_claim_ttl: self.settings.posted_claim_ttl,
            armed: true,
        };
        let (outcome, finish) = match AssertUnwindSafe(self.claimed(req, dl, &progress, seen))
            .catch_unwind()
            .await
        {
            Ok(done) => done,
            Err(panic) => {
                let why = panic_text(panic.as_ref());
                tracing::error!(panic = %why, "the run panicked while holding the claim");
                self.after_panic(key, dl, &why, progress.stage()).await
            }
        };
        if fault("before-release").await.is_some() {
            // Simulates a process that dies before releasing: the claim stays until its TTL.
            guard.abandon();
            return outcome;
        }
        match finish {
            Finish::Release => {
                guard.release(dl, t.claims).await;
                outcome
            }
            Finish::Released => {
                tracing::debug!("claim released with the record");
                guard.abandon();
                outcome
            }
            Finish::Keep(post_id) => {
                let ttl = self.settings.posted_claim_ttl;
                let kept = guard
                    .keep(dl, t.claims, post_id.as_deref().unwrap_or(""), ttl)
                    .await;
                self.after_keep(req, dl, outcome, kept, &progress).await
            }
        }
    }

    /// Takes the claim (set only if absent) until the claim store answers, within its budget: a
    /// dropped connection is reconnected and the command sent again. Repeating is safe: if a
    /// lost answer had set the claim, the next try finds this run's own token, which counts as
    /// acquired.
    async fn acquire(&self, req: &PostRequest, dl: &Deadline) -> Result<Acquire, String> {
        let t = self.settings.timeouts;
        let mut last = None;
        let tries = retry_within(
            || {
                self.claims
                    .acquire(&req.key, &req.run_id, self.settings.claim_ttl)
            },
            &mut last,
        );
        match dl.work(t.claims, tries).await {
            Ok(a) => Ok(a),
            Err(b) => Err(match last {
                Some(e) => format!("{e} (and {b})"),
                None => format!("claim store unavailable: {b}"),
            }),
        }
    }

    /// The claim and, where the claims live beside the records, the attempt's start, in one
    /// request of the record store ([`RecordStore::claim_and_start`]); `None` where they do not.
    async fn claim_and_start(
        &self,
        req: &PostRequest,
        dl: &Deadline,
    ) -> Option<Result<(Acquire, Option<Draft>), String>> {
        let t = self.settings.timeouts;
        let joined = self
            .records
            .claim_and_start(&req.key, self.ask(req), &STARTS_FROM, now_s());
        match dl.work(t.claims, joined).await {
            Ok(None) => None,
            Ok(Some(r)) => Some(r.map_err(|e| e.to_string())),
            Err(b) => Some(Err(format!("claim store unavailable: {b}"))),
        }
    }

    /// What a panic under the claim means, by how far the run got.
    async fn after_panic(
        &self,
        key: &PostKey,
        dl: &Deadline,
        why: &str,
        stage: Stage,
    ) -> (Outcome, Finish) {
        match stage {
            Stage::Recorded(post_id, kind) => (
                Outcome::new(
                    key,
                    kind,
                    format!("posted and recorded; then the run failed ({why}), and the claim was released"),
                )
                .with_post_id(post_id),
                Finish::Release,
            ),
            Stage::Created(post_id) => (
                Outcome::new(
                    key,
                    OutcomeKind::PostedNotRecorded,
                    format!(
                        "{} accepted the post, then the run failed ({why})",
                        self.network.label()
                    ),
                )
                .with_post_id(post_id.clone()),
                Finish::Keep(post_id),
            ),
            // The intent says `unknown` on the draft: whether create-post left is not known
            // for certain, so the owner and later runs treat it as ambiguous (rule 7).
            Stage::Intent | Stage::Sent => (
                self.ambiguous(key, dl, format!("the run failed ({why}) after its attempt was recorded")).await,
                Finish::Release,
            ),
            Stage::Claimed => (
                failed(key, true, format!("internal error ({why}); nothing was posted")),
                Finish::Release,
            ),
        }
    }
}

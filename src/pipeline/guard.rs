//! The claim around a run (DESIGN.md rules 1, 5 and 6): take it before anything is uploaded,
//! release it (compare-and-delete, awaited) on every path, keep it holding the URN when the
//! network accepted the post but the record could not be written, and a drop guard as the net.

use super::*;

/// What happens to the claim when a claimed run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Finish {
    Release,
    /// Posted but not recorded: keep the claim, rewritten to hold this URN.
    Keep(Option<String>),
}

/// Holds a claim until it is released or kept; if the run is dropped early (cancelled), the
/// drop spawns the release as a safety net. Normal paths await the release instead.
pub(super) struct ClaimGuard {
    claims: Arc<dyn ClaimStore>,
    key: PostKey,
    token: String,
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

    pub(super) async fn keep(mut self, dl: &Deadline, budget: Duration, urn: &str, ttl: Duration) {
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
pub(super) struct Progress(Mutex<Option<Option<String>>>);

impl Progress {
    pub(super) fn created(&self, urn: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(urn);
    }

    pub(super) fn take(&self) -> Option<Option<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Pipeline {
    /// Everything up to and including the claim; then [`Self::claimed`] under the claim.
    pub(super) async fn decide(&self, req: &PostRequest, dl: &Deadline) -> Outcome {
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
}

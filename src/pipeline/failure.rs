//! Failures after which nothing was posted: noted on the draft with the time the sweeper may
//! retry it (capped exponential backoff with jitter), never over another attempt's `unknown`.

use super::*;

impl Lane {
    /// Nothing was posted after this run's intent was written: back from `unknown` to
    /// `failed` — only if the kept attempt is still this run's.
    pub(super) async fn fail_after_intent(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        why: String,
        retryable: bool,
    ) -> Outcome {
        self.fail_after_intent_until(req, dl, why, retryable, None)
            .await
    }

    /// [`Self::fail_after_intent`] for a refusal that named when to come back (a 429's
    /// `X-RateLimit-Reset`, `Retry-After`, `retry_after`): the next try is not before it.
    pub(super) async fn fail_after_intent_until(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        why: String,
        retryable: bool,
        retry_after: Option<Duration>,
    ) -> Outcome {
        let key = &req.key;
        let detail = format!("{why}; nothing was posted");
        let update = DraftUpdate::IfAttempt {
            run: req.run_id.clone(),
            update: Box::new(self.failed_update(&detail, retryable, 0, retry_after)),
        };
        if self
            .note(key, dl, &update, &[DraftStatus::Unknown], "the failure")
            .await
        {
            return failed(key, retryable, detail);
        }
        self.as_stored(req, dl, detail).await
    }

    /// A reconcile learnt that the kept attempt can no longer post, and did not
    /// ([`PostError::Gone`]: Threads' container expired or failed): nothing was posted, so the
    /// draft goes back from `unknown` to `failed`, retryable (the next try makes a new request)
    /// — only while that attempt (`run`) is still the kept one.
    pub(super) async fn not_posted(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        run: &str,
        why: String,
    ) -> (Outcome, Finish) {
        let detail = format!("{why}; nothing was posted");
        let update = DraftUpdate::IfAttempt {
            run: run.to_owned(),
            update: Box::new(self.failed_update(&detail, true, draft.attempts, None)),
        };
        if self
            .note(
                &req.key,
                dl,
                &update,
                &[DraftStatus::Unknown],
                "that the attempt did not post",
            )
            .await
        {
            return (failed(&req.key, true, detail), Finish::Release);
        }
        (self.as_stored(req, dl, detail).await, Finish::Release)
    }

    /// The outcome of a run whose failure could not be noted: what the stores say now, so
    /// that the owner, the sweeper and the next run agree.
    pub(super) async fn as_stored(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        detail: String,
    ) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        let loaded = flatten_value(dl.finish(t.records, self.records.load(key, None)).await);
        match loaded {
            Ok(Snapshot {
                record: Some(record),
                ..
            }) if self.adapter.is_dry_run()
                || !record.post_id.as_deref().is_some_and(is_dry_run_urn) =>
            {
                Outcome::new(key, OutcomeKind::AlreadyPosted, "recorded meanwhile")
                    .with_post_id(record.post_id)
            }
            Ok(Snapshot {
                draft: Some(draft),
                ..
            }) if draft.status == DraftStatus::Failed => {
                failed(key, draft.retryable, detail)
            }
            Ok(Snapshot {
                draft: Some(draft),
                ..
            }) if draft.status == DraftStatus::Unknown
                && draft.pending.as_ref().is_some_and(|p| p.run != req.run_id) =>
            {
                Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    format!("{detail}; another run's attempt is on the draft now"),
                )
                .retryable(true)
            }
            // Still this run's `unknown` (or unreadable, where that is what was last written):
            // nothing was sent, so the check after the quiet period posts it.
            _ => Outcome::new(
                key,
                OutcomeKind::Unknown,
                format!("{detail}, but the draft could not be set back and still says unknown: it is posted after the quiet period (the sweeper, or Retry then)"),
            )
            .retryable(true),
        }
    }

    pub(super) async fn fail_publish(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        step: &str,
        gave: Gave<PostError>,
        attempts: u32,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        match gave {
            // The credential itself was refused: the draft waits for a new one.
            Gave::Error(e @ PostError::CredentialRefused { .. }) => {
                self.credential_refused(req, dl, &e, false).await
            }
            Gave::Error(e) => {
                let retry_after = match &e {
                    PostError::RateLimited { retry_after, .. } => *retry_after,
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
    pub(super) async fn fail(
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
        // A scheduled draft gets this far only once it is due (or Post now was pressed).
        let before_intent = [
            DraftStatus::New,
            DraftStatus::Failed,
            DraftStatus::NeedsReview,
            DraftStatus::Scheduled,
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
    pub(super) async fn fail_from(
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

    /// Notes a failure on the draft (if it exists and its status is in `from`; `true` when it
    /// was applied), with the time
    /// the sweeper may retry it: capped exponential backoff with jitter, at least `retry_after`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn mark_failed(
        &self,
        key: &PostKey,
        dl: &Deadline,
        detail: &str,
        retryable: bool,
        attempts: u32,
        retry_after: Option<Duration>,
        from: &[DraftStatus],
    ) -> bool {
        let update = self.failed_update(detail, retryable, attempts, retry_after);
        self.note(key, dl, &update, from, "the failure").await
    }

    /// Applies a draft update as a finishing call; a failure is logged, not fatal. Returns
    /// whether the update was applied.
    pub(super) async fn note(
        &self,
        key: &PostKey,
        dl: &Deadline,
        update: &DraftUpdate,
        from: &[DraftStatus],
        what: &str,
    ) -> bool {
        let applied = dl
            .finish(
                self.settings.timeouts.records,
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

    /// A failure to note, with the time the sweeper may retry it: capped exponential backoff
    /// with jitter, at least `retry_after`.
    fn failed_update(
        &self,
        detail: &str,
        retryable: bool,
        attempts: u32,
        retry_after: Option<Duration>,
    ) -> DraftUpdate {
        let delay = backoff(
            self.settings.retry_base,
            attempts,
            Duration::from_secs(6 * 3600),
        )
        .max(self.settings.retry_base / 2)
        .max(retry_after.unwrap_or_default());
        DraftUpdate::Failed {
            error: detail.to_owned(),
            retryable,
            next_retry_at: retryable.then(|| now_s() + i64::try_from(delay.as_secs()).unwrap_or(0)),
        }
    }
}

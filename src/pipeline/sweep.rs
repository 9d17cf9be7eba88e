//! The sweeper: re-drives failed and stuck drafts through the same run, and tells the owner
//! about the ones that need a person.

use super::*;

impl Pipeline {
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

    pub(super) async fn give_up(&self, key: &PostKey, dl: &Deadline, draft: &Draft) {
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

    pub(super) async fn remind(&self, key: &PostKey, dl: &Deadline, draft: &Draft) {
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

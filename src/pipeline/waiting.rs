//! The drafts that wait for a person, and why: what `status --all`, the sweep's answer and
//! every listing show, from a sweep's own listing or read again.

use super::parked::Parked;
use super::*;

/// The statuses a draft can wait for a person in.
const OPEN: [DraftStatus; 4] = [
    DraftStatus::New,
    DraftStatus::Failed,
    DraftStatus::Unknown,
    DraftStatus::NeedsReview,
];

impl Pipeline {
    /// Why `draft` (of `lane`'s target) waits for a person at `now`, if it does.
    pub(super) fn waits_for_person(&self, lane: &Lane, draft: &Draft, now: i64) -> Option<String> {
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        let on = lane.network.label();
        // No run of it can be live once a claim's time has passed since its last attempt.
        let last = draft.pending.as_ref().map_or(draft.updated_at, |p| {
            p.last_sent_at.unwrap_or(p.at).max(p.at)
        });
        let no_live_run = now - last > secs(self.settings.claim_ttl);
        match draft.status {
            // A channel's attempt whose run ended without a word (killed after its intent):
            // nothing can tell, and nothing is ever re-sent.
            DraftStatus::Unknown if lane.settle() == Settle::AskOwner && no_live_run => {
                Some(format!(
                    "may or may not be on {on}, and only you can tell: press {} or Post anyway",
                    lane.network.confirm_label()
                ))
            }
            DraftStatus::Unknown if !draft.retryable => Some(format!(
                "may or may not be on {on}, and only you can tell: press {} or Post anyway",
                lane.network.confirm_label()
            )),
            DraftStatus::NeedsReview => Some(format!(
                "gave up after {} attempts: fix the cause, then press Retry",
                draft.attempts
            )),
            DraftStatus::Failed if !draft.retryable => {
                Some("refused for good: fix the draft or the setting, then press Retry".into())
            }
            DraftStatus::Unknown if lane.settle() == Settle::Resend => {
                let at = draft.pending.as_ref().map_or(draft.updated_at, |p| p.at);
                (now - at > secs(self.settings.reconcile_window)).then(|| {
                    format!(
                        "may or may not be on {on}, too late to find out automatically: press {} or Post anyway",
                        lane.network.confirm_label()
                    )
                })
            }
            _ => None,
        }
    }

    pub(super) fn waiting_entry(&self, lane: &Lane, draft: &Draft, now: i64) -> Option<Waiting> {
        // A draft whose network refused the credential still in use: told once for all of
        // that credential's drafts (the `refused` phase), never one by one.
        if let Some(reason) = lane.waits_for_credential(draft) {
            return Some(Waiting {
                key: draft.key.clone(),
                status: draft.status.as_str(),
                reason,
                last_error: draft.last_error.clone(),
                owner_told: true,
                since: draft.updated_at,
            });
        }
        self.waits_for_person(lane, draft, now)
            .map(|reason| Waiting {
                key: draft.key.clone(),
                status: draft.status.as_str(),
                reason,
                last_error: draft.last_error.clone(),
                owner_told: draft.reminded,
                since: draft.updated_at,
            })
    }

    /// Every draft that waits for a person (`postonce status --all`), oldest first.
    ///
    /// # Errors
    /// When the drafts cannot be listed.
    pub async fn waiting(&self, dl: &Deadline) -> Result<Vec<Waiting>, String> {
        // A scheduled draft whose time has come waits for its network's credentials too.
        let mut parked = Vec::new();
        if self.any_unconfigured() {
            let scheduled = [DraftStatus::Scheduled];
            self.due_drafts(dl, &scheduled, now_s(), Some(&mut parked))
                .await?;
        }
        self.waiting_with(dl, parked).await
    }

    /// The open drafts that wait for a person, and `parked` (scheduled ones already listed).
    pub(super) async fn waiting_with(
        &self,
        dl: &Deadline,
        mut parked: Vec<Parked>,
    ) -> Result<Vec<Waiting>, String> {
        let drafts = self
            .due_drafts(dl, &OPEN, i64::MAX, Some(&mut parked))
            .await?;
        Ok(self.with_parked(self.waiting_in(&drafts, now_s()), &parked))
    }

    /// `waiting` and the parked drafts, oldest first.
    pub(super) fn with_parked(&self, mut waiting: Vec<Waiting>, parked: &[Parked]) -> Vec<Waiting> {
        waiting.extend(Self::parked_waiting(parked));
        waiting.sort_by_key(|w| (w.since, w.key.clone()));
        waiting
    }

    /// The drafts among `drafts` that wait for a person at `now`, oldest first.
    pub(super) fn waiting_in(&self, drafts: &[(Arc<Lane>, Draft)], now: i64) -> Vec<Waiting> {
        let mut waiting: Vec<Waiting> = drafts
            .iter()
            .filter_map(|(lane, d)| self.waiting_entry(lane, d, now))
            .collect();
        waiting.sort_by_key(|w| (w.since, w.key.clone()));
        waiting
    }

    /// What still waits for a person after this sweep. A sweep that changed nothing (the
    /// usual one) answers from its own listing; one that ran or marked drafts lists again,
    /// with the parked scheduled drafts it listed (never run).
    pub(super) async fn still_waiting(
        &self,
        dl: &Deadline,
        drafts: Vec<(Arc<Lane>, Draft)>,
        mut parked: Vec<Parked>,
        changed: bool,
        now: i64,
    ) -> Vec<Waiting> {
        let drafts: Vec<(Arc<Lane>, Draft)> = drafts
            .into_iter()
            .filter(|(_, d)| d.status != DraftStatus::Scheduled)
            .collect();
        if !changed {
            return self.with_parked(self.waiting_in(&drafts, now), &parked);
        }
        parked.retain(|p| p.draft.status == DraftStatus::Scheduled);
        match self.waiting_with(dl, parked).await {
            Ok(waiting) => waiting,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the drafts that wait for a person");
                Vec::new()
            }
        }
    }
}

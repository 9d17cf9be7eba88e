//! Spreading (capability `spreads`): a recorded post that may still lack some of the places it
//! goes to keeps its request on the `posted` draft, and later sweeps send that same request
//! again until every place holds it, or for a day after the post. It cannot make a second
//! post: what goes out is the recorded attempt's own request, unchanged (for a signed event,
//! the same id), which a place that holds it answers as a duplicate. So it takes no claim;
//! each step is a conditional write on the `posted` draft, and two sweeps that meet the same
//! draft send the same request twice at worst.

use super::publish::kept_request;
use super::sweep_report::Spreading;
use super::*;

/// How long after the post sweeps still send it to the places that lack it.
const SPREAD_FOR_S: i64 = 24 * 3600;
/// The longest wait between two sends.
const SPREAD_GAP_MAX_S: i64 = 4 * 3600;

impl Lane {
    /// After the record: where the network spreads, keeps the attempt's request on the
    /// `posted` draft, due at the first spread (a quiet period later).
    pub(super) async fn keep_spreading(&self, key: &PostKey, dl: &Deadline, progress: &Progress) {
        if !self.adapter.capabilities().spreads || self.adapter.is_dry_run() {
            return;
        }
        let Some(pending) = progress.attempted() else {
            return;
        };
        let update = DraftUpdate::Spread {
            pending: Some(Box::new(pending)),
            next: Some(now_s() + self.spread_gap(0)),
        };
        let what = "the request kept for the places that still lack the post";
        self.note(key, dl, &update, &[DraftStatus::Posted], what)
            .await;
    }

    /// The wait before the next send, `age` seconds after the post: as long as the post is
    /// old (so the sends thin out), at least a quiet period, at most four hours.
    fn spread_gap(&self, age: i64) -> i64 {
        let quiet = i64::try_from(self.settings.reconcile_after.as_secs()).unwrap_or(i64::MAX);
        age.clamp(quiet.max(1), SPREAD_GAP_MAX_S.max(quiet))
    }

    /// Sends a due `posted` draft's kept request again, and notes when the next send is due
    /// (`None`: done, the request dropped).
    async fn spread(&self, key: &PostKey, dl: &Deadline, draft: &Draft, now: i64) -> Spreading {
        // Never `updated_at`, which each of these writes moves on.
        let posted_at = draft.record.as_ref().map(|r| r.posted_at);
        let posted_at = posted_at
            .or(draft.pending.as_ref().map(|p| p.at))
            .unwrap_or(0);
        let age = now.saturating_sub(posted_at);
        let again = (age < SPREAD_FOR_S).then(|| now + self.spread_gap(age));
        let (complete, detail, next) = match &draft.pending {
            None => (false, "no request was kept to send again".to_owned(), None),
            Some(_) if !self.adapter.capabilities().spreads => (true, String::new(), None),
            Some(pending) => {
                let post = kept_request(pending);
                let sent = dl.work(self.budget, self.adapter.spread(&post)).await;
                match flatten_value(sent) {
                    Ok(s) if s.complete => (true, s.detail, None),
                    Ok(s) => (false, s.detail, again),
                    Err(e) => (false, e, again),
                }
            }
        };
        if !complete && next.is_none() {
            tracing::warn!(key = %key, detail = %detail, "no longer sent to the places that still lack it");
        }
        let update = DraftUpdate::Spread {
            pending: None,
            next,
        };
        self.note(key, dl, &update, &[DraftStatus::Posted], "the next spread")
            .await;
        Spreading {
            key: key.to_string(),
            complete,
            detail,
            next: next.map(crate::record::rfc3339),
        }
    }
}

impl Pipeline {
    /// Sends every due recorded post's kept request again (see the module's comment), while
    /// one network budget is left before the deadline.
    /// Nothing is listed where no network spreads.
    pub(super) async fn spread_recorded(&self, dl: &Deadline, report: &mut SweepReport) {
        let spreads = |l: &Arc<Lane>| l.adapter.capabilities().spreads && !l.adapter.is_dry_run();
        if !self.lanes.values().any(spreads) {
            return;
        }
        let now = now_s();
        let drafts = match self.due_drafts(dl, &[DraftStatus::Posted], now, None).await {
            Ok(drafts) => drafts,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the recorded posts still spreading");
                return;
            }
        };
        for (lane, draft) in drafts {
            let Ok(key) = PostKey::parse(&draft.key) else {
                continue;
            };
            if dl.for_work(lane.budget) != Some(lane.budget) {
                report.left_for_later += 1;
                continue;
            }
            report.spread.push(lane.spread(&key, dl, &draft, now).await);
        }
    }
}

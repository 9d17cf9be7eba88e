//! Scheduling (README "Scheduling"): a draft sent with a time still to come is stored
//! `scheduled` on each target, without a claim, and answered `scheduled`; the sweeper posts it
//! through the same run once it is due. Cancel and the time itself are decided under each
//! target's claim, on the state read there, so a sweep that listed a draft before it was
//! cancelled never posts it. Pacing keeps consecutive posts to one network apart with a slot
//! in the shared store, taken in one conditional write just before the intent.

use futures_util::future::join_all;

use super::*;

/// Added to a network's gap between two slots: the create leaves a few milliseconds after its
/// slot is taken (the intent write comes between), and those few milliseconds differ from one
/// run to the next. With this margin the creates themselves, as the network sees them, stay at
/// least the gap apart.
pub const PACING_MARGIN: Duration = Duration::from_millis(100);

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Pipeline {
    /// A draft sent with a time still to come: each target is stored `scheduled` at `at`
    /// (rescheduled if it was already), or answered as it stands when it is posted or being
    /// posted. No claim is taken and nothing is sent.
    pub(super) async fn schedule(&self, req: &PostRequest, at: i64, dl: &Deadline) -> Outcome {
        let targets = self.targets_for(&req.targets);
        let runs = targets.iter().map(|n| {
            let one = req.for_target(*n);
            async move {
                match self.lane(*n) {
                    Some(lane) => lane.schedule(&one, at, dl).await,
                    None => failed(
                        &one.key,
                        false,
                        format!("{} is not supported by this version", n.as_str()),
                    ),
                }
            }
        });
        let parts = join_all(runs).await;
        let outcome = Outcome::combine(&req.key, parts);
        tracing::info!(outcome = outcome.outcome.as_str(), publish_at = ?outcome.publish_at, "scheduled");
        self.report(req, &outcome, dl).await;
        outcome
    }
}

impl Lane {
    /// This network's pacing: its gap, and the least time between two slots in milliseconds
    /// (the gap plus [`PACING_MARGIN`]); `None` when it is not paced.
    pub(super) fn pacing(&self) -> Option<(Duration, i64)> {
        let gap = self
            .settings
            .min_gap
            .get(&self.network)
            .copied()
            .filter(|g| !g.is_zero())?;
        Some((gap, millis(gap + PACING_MARGIN)))
    }

    /// One target of a draft sent with a time to come.
    async fn schedule(&self, req: &PostRequest, at: i64, dl: &Deadline) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        let Some(content) = &req.content else {
            return failed(
                key,
                false,
                "nothing to schedule: the draft carried no content",
            );
        };
        // A recorded target stays recorded: sending it again changes nothing. Read first: a
        // draft item can be gone (expired) while its record stays, and a time must never be
        // set on a posted key.
        match flatten_value(dl.work(t.records, self.records.load(key, None)).await) {
            Ok(Snapshot {
                record: Some(r),
                draft,
                ..
            }) if self.counts(&r) => {
                let mark = draft.is_some_and(|d| d.status != DraftStatus::Posted);
                return self.already(key, dl, &r, mark).await;
            }
            Ok(_) => {}
            Err(e) => {
                return failed(key, true, format!("{e}; nothing was stored or scheduled"));
            }
        }
        // Stored and scheduled in one write: a draft sent with a time is never stored due
        // before it, whatever fails or dies after (issue 30, finding 2).
        if let Some(why) = fault_for("before-schedule", key).await {
            return failed(
                key,
                true,
                format!("could not store the draft ({why}); nothing was stored or scheduled"),
            );
        }
        let scheduled = dl
            .work(
                t.records,
                self.records
                    .save_scheduled(key, content, req.source.as_str(), at, now_s()),
            )
            .await;
        match flatten_value(scheduled) {
            Ok(Some(_)) => scheduled_outcome(key, at, format!("waits until {}", rfc(at))),
            // In flight (an attempt is out) or done: the time no longer applies.
            Ok(None) => self.not_rescheduled(req, dl).await,
            Err(e) => failed(
                key,
                true,
                format!("could not store and schedule the draft ({e}); send it again"),
            ),
        }
    }

    /// A draft sent with a time while an attempt is out or after it was posted: its content
    /// is stored as any sending stores it, and it is answered as it stands.
    async fn not_rescheduled(&self, req: &PostRequest, dl: &Deadline) -> Outcome {
        let key = &req.key;
        let Some(content) = &req.content else {
            return self.as_it_stands(key, dl).await;
        };
        let t = self.settings.timeouts;
        let saved = dl
            .work(
                t.records,
                self.records
                    .save_draft(key, content, req.source.as_str(), now_s()),
            )
            .await;
        if let Ok(draft) = flatten_value(saved) {
            // Recorded meanwhile: the draft's write found the record's copy.
            if let Some(r) = draft.record.as_ref().filter(|r| self.counts(r)) {
                if draft.status == DraftStatus::Posted {
                    return self.already(key, dl, r, false).await;
                }
            }
        }
        let mut outcome = self.as_it_stands(key, dl).await;
        outcome.detail = format!(
            "not rescheduled: an attempt is in flight or done; {}",
            outcome.detail
        );
        outcome
    }

    /// Under the claim: what the draft's schedule says about this run, if it holds it back. A
    /// cancelled draft is never posted unless sent again; a scheduled one waits for its time
    /// unless the owner pressed Post now (or sent it again without a time).
    pub(super) fn held_back(&self, req: &PostRequest, draft: Option<&Draft>) -> Option<Outcome> {
        let key = &req.key;
        let d = draft?;
        if req.content.is_some() {
            return None;
        }
        match d.status {
            DraftStatus::Cancelled => {
                let mut o = cancelled_outcome(key);
                o.settled = true;
                Some(o)
            }
            // Stored with a time still to come but not (yet) scheduled: only a write that
            // failed half-way could leave one (the store writes both at once); it never goes
            // before its time either.
            DraftStatus::New
                if req.action == Action::Post && d.publish_at.is_some_and(|p| p > now_s()) =>
            {
                let at = d.publish_at.unwrap_or(0);
                let mut o = scheduled_outcome(key, at, format!("waits until {}", rfc(at)));
                o.settled = true;
                Some(o)
            }
            DraftStatus::Scheduled if req.action == Action::Post => {
                let at = d.goes_at().unwrap_or(0);
                (at > now_s()).then(|| {
                    let why = d
                        .last_error
                        .clone()
                        .filter(|_| d.publish_at.is_none_or(|p| p < at))
                        .unwrap_or_else(|| format!("waits until {}", rfc(at)));
                    let mut o = scheduled_outcome(key, at, why);
                    o.settled = true;
                    o
                })
            }
            _ => None,
        }
    }

    /// Under the claim: cancels the draft if nothing is in flight. The claim is this run's, so
    /// no other run is posting; the conditional write keeps an attempt that is already out.
    pub(super) async fn cancel(
        &self,
        key: &PostKey,
        dl: &Deadline,
        draft: Option<&Draft>,
    ) -> (Outcome, Finish) {
        let t = self.settings.timeouts;
        if draft.is_none() {
            return (
                failed(key, false, "nothing to cancel: no draft is stored for it"),
                Finish::Release,
            );
        }
        let from = [
            DraftStatus::New,
            DraftStatus::Failed,
            DraftStatus::NeedsReview,
            DraftStatus::Scheduled,
        ];
        let cancelled = dl
            .work(
                t.records,
                self.records
                    .update_draft(key, &DraftUpdate::Cancel, &from, now_s()),
            )
            .await;
        let outcome = match flatten_value(cancelled) {
            Ok(true) => Outcome::new(
                key,
                OutcomeKind::Cancelled,
                "cancelled: it will not be posted unless it is sent again",
            ),
            Ok(false) => {
                let mut o = self.as_it_stands(key, dl).await;
                o.detail = format!("not cancelled: {}", o.detail);
                if draft.is_some_and(|d| d.status == DraftStatus::Cancelled) {
                    o = Outcome::new(key, OutcomeKind::Cancelled, "already cancelled");
                }
                o
            }
            Err(e) => failed(
                key,
                true,
                format!("could not cancel ({e}); nothing changed"),
            ),
        };
        (outcome, Finish::Release)
    }

    /// This network's posting slot, taken now if it is free (one conditional write shared by
    /// every process). No draft is touched.
    pub(super) async fn take_slot(&self, dl: &Deadline) -> Paced {
        let Some((gap, interval)) = self.pacing() else {
            return Paced::Go;
        };
        let t = self.settings.timeouts;
        let slot = match fault("before-slot").await {
            Some(why) => Err(why),
            None => flatten_value(
                dl.work(
                    t.records,
                    self.records
                        .take_slot(self.network.as_str(), interval, now_ms()),
                )
                .await,
            ),
        };
        let last_ms = match slot {
            Ok(Slot::Taken) => return Paced::Go,
            Ok(Slot::Busy { last_ms }) => last_ms,
            Err(e) => {
                return Paced::Error(format!(
                    "could not take {}'s posting slot ({e})",
                    self.network.label()
                ))
            }
        };
        let until = (last_ms + interval + 999) / 1000;
        let reason = format!(
            "delayed: {} keeps posts to {} {}s apart, and the last one went {}; it goes at {} or the first sweep after",
            self.network.min_gap_var(),
            self.network.label(),
            gap.as_secs_f64(),
            rfc(last_ms / 1000),
            rfc(until)
        );
        Paced::Busy { until, reason }
    }

    /// Pacing, after the intent and just before the create: takes this network's posting
    /// slot, or puts this run's attempt (never sent) back as a draft delayed to the slot's end
    /// (`scheduled`, due then) and answers so. `Ok(())`: send the create now.
    pub(super) async fn pace(&self, req: &PostRequest, dl: &Deadline) -> Result<(), Outcome> {
        let key = &req.key;
        let (until, reason) = match self.take_slot(dl).await {
            Paced::Go => return Ok(()),
            Paced::Busy { until, reason } => (until, reason),
            // After the intent: the draft goes back from this run's `unknown` to `failed`.
            Paced::Error(why) => return Err(self.fail_after_intent(req, dl, why, true).await),
        };
        // Only this run's own attempt, which was never sent, is put back. A sweep's run stays
        // quiet about it (the sweeper tells the owner once); any other run reports it.
        let quiet = req.source == Source::Sweep;
        let update = DraftUpdate::IfAttempt {
            run: req.run_id.clone(),
            update: Box::new(DraftUpdate::Defer {
                until,
                reason: reason.clone(),
                told: !quiet,
            }),
        };
        if self
            .note(
                key,
                dl,
                &update,
                &[DraftStatus::Unknown],
                "the pacing delay",
            )
            .await
        {
            let mut delayed = scheduled_outcome(key, until, reason);
            delayed.settled = quiet;
            return Err(delayed);
        }
        Err(self.fail_after_intent(req, dl, reason, true).await)
    }
}

/// What taking a network's posting slot answered.
pub(super) enum Paced {
    /// The slot is this run's (or the network is not paced): send now.
    Go,
    /// Another post took it too recently: the next one opens at `until` (Unix seconds).
    Busy { until: i64, reason: String },
    /// The pacing store failed: nothing may be sent.
    Error(String),
}

/// The answer for a cancelled draft.
/// How long past its time a draft may go out before its report says it went out late: a
/// sweep every minute, a few runs ahead of it, and pacing's usual gaps stay under it; a draft
/// held for minutes (its credential refused and renewed, the sweeper stopped) does not.
pub(super) const LATE_AFTER_S: i64 = 300;

/// What a report adds for a draft posted at `now` that was due at `publish_at`, when that is
/// more than [`LATE_AFTER_S`] ago: "posted late: it was due at … (… minutes ago)".
pub(super) fn late_note(publish_at: Option<i64>, now: i64) -> Option<String> {
    let at = publish_at?;
    let late = now - at;
    (late > LATE_AFTER_S).then(|| {
        format!(
            "posted late: it was due at {} ({} minutes ago)",
            crate::record::rfc3339(at),
            late / 60
        )
    })
}

pub(super) fn cancelled_outcome(key: &PostKey) -> Outcome {
    Outcome::new(
        key,
        OutcomeKind::Cancelled,
        "cancelled; it is posted only if it is sent again",
    )
}

/// A `scheduled` answer for `at` (Unix seconds).
pub(super) fn scheduled_outcome(key: &PostKey, at: i64, detail: String) -> Outcome {
    let mut o = Outcome::new(key, OutcomeKind::Scheduled, detail);
    o.publish_at = Some(rfc(at));
    o
}

fn rfc(unix: i64) -> String {
    crate::record::rfc3339(unix)
}

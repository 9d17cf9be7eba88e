//! The sweeper: re-drives failed and stuck drafts through the same run, and makes sure the
//! owner is told about every draft that needs a person. A draft counts as told only once the
//! message was delivered; until then every sweep tries again.

use super::parked::Parked;
use super::*;

/// The statuses a sweep looks at: the open ones and the scheduled ones.
const SWEPT: [DraftStatus; 5] = [
    DraftStatus::New,
    DraftStatus::Failed,
    DraftStatus::Unknown,
    DraftStatus::NeedsReview,
    DraftStatus::Scheduled,
];

impl Pipeline {
    /// A message that is not a run's outcome (sweeper reminders). `true` once delivered.
    pub async fn tell(&self, text: &str, outcome: &Outcome, dl: &Deadline) -> bool {
        match flatten(
            dl.finish(
                self.settings.timeouts.telegram,
                self.notifier.tell(text, outcome),
            )
            .await,
        ) {
            None => true,
            Some(e) => {
                tracing::warn!(error = %e, "could not tell the owner; the next sweep tries again");
                false
            }
        }
    }

    /// How long a sweep needs to have left to start one more run of `lane`: the image budget
    /// and two of the network's budgets (the upload, then the create, which is sent only with
    /// its full budget). The claim and record calls take milliseconds; the deadline's reserve
    /// covers recording, release and the report.
    fn run_need(&self, lane: &Lane) -> Duration {
        let t = self.settings.timeouts;
        t.image + lane.budget * 2
    }

    /// Every target's state in one of `statuses` that is due by `before`, with its lane, oldest
    /// due first, through the due index. Each store is listed once (the real targets share
    /// one, the dry-run ones another); a target's state counts only in its own lane's store.
    /// The real drafts of a network whose lane is a dry run (its credentials were removed) go
    /// to `parked`, when given: listed, never run.
    pub(super) async fn due_drafts(
        &self,
        dl: &Deadline,
        statuses: &[DraftStatus],
        before: i64,
        mut parked: Option<&mut Vec<Parked>>,
    ) -> Result<Vec<(Arc<Lane>, Draft)>, String> {
        let t = self.settings.timeouts;
        let mut stores: Vec<Arc<dyn RecordStore>> = Vec::new();
        for lane in self.lanes.values() {
            if !stores.iter().any(|s| Arc::ptr_eq(s, &lane.records)) {
                stores.push(lane.records.clone());
            }
        }
        let mut open = Vec::new();
        for store in stores {
            // One query (and budget) per status: a long listing is not one call.
            let mut drafts = Vec::new();
            for status in statuses {
                let one = [*status];
                let listed = dl.work(t.records, store.due_drafts(&one, before)).await;
                drafts.extend(flatten_value(listed)?);
            }
            for draft in drafts {
                let Ok(key) = PostKey::parse(&draft.key) else {
                    tracing::warn!(key = %draft.key, "skipping a draft with an invalid key");
                    continue;
                };
                match self.lane(key.network()) {
                    Some(lane) if Arc::ptr_eq(&lane.records, &store) => {
                        open.push((lane.clone(), draft));
                    }
                    Some(lane) if lane.unconfigured().is_some() => {
                        if let Some(parked) = parked.as_deref_mut() {
                            let (lane, store) = (lane.clone(), store.clone());
                            parked.push(Parked { lane, draft, store });
                        }
                    }
                    _ => {}
                }
            }
        }
        open.sort_by(|(_, a), (_, b)| (a.due_at, &a.key).cmp(&(b.due_at, &b.key)));
        Ok(open)
    }

    /// Every scheduled target (`postonce schedule list`), soonest first. A target whose
    /// network has no credentials now says so in its `last_error` (the list's note).
    ///
    /// # Errors
    /// When the drafts cannot be listed.
    pub async fn scheduled(&self, dl: &Deadline) -> Result<Vec<Draft>, String> {
        let mut parked = Vec::new();
        let scheduled = [DraftStatus::Scheduled];
        let drafts = self
            .due_drafts(dl, &scheduled, i64::MAX, Some(&mut parked))
            .await?;
        let waits = parked.into_iter().map(|p| Draft {
            last_error: p.lane.unconfigured(),
            ..p.draft
        });
        // The drafts that wait for a new credential (their network refused the one in use):
        // listed with the reason as their note, due as soon as it changes.
        let failed = [DraftStatus::Failed];
        let refused = self.due_drafts(dl, &failed, i64::MAX, None).await?;
        let refused = refused.into_iter().filter_map(|(lane, d)| {
            let why = lane.waits_for_credential(&d)?;
            Some(Draft {
                last_error: Some(why),
                ..d
            })
        });
        let mut all: Vec<Draft> = drafts
            .into_iter()
            .map(|(_, d)| d)
            .chain(waits)
            .chain(refused)
            .collect();
        all.sort_by(|a, b| (a.due_at, &a.key).cmp(&(b.due_at, &b.key)));
        Ok(all)
    }

    /// The sweeper: re-runs retryable failed drafts whose time has come, drafts whose run never
    /// finished, and `unknown` drafts past the quiet period and within the window (reconcile);
    /// marks drafts out of attempts `needs_review`; tells the owner of every draft that waits
    /// for a person until the message is delivered. It posts only through [`Self::run`], so a
    /// draft with a record is never posted again.
    ///
    /// # Errors
    /// When the drafts cannot be listed.
    pub async fn sweep(&self, dl: &Deadline) -> Result<SweepReport, String> {
        let now = now_s();
        let mut parked = Vec::new();
        let drafts = self.due_drafts(dl, &SWEPT, now, Some(&mut parked)).await?;
        // Pacing: when each network's next slot opens, as far as this sweep knows (read when
        // needed, forgotten after each run of that network).
        let mut slot_opens: BTreeMap<Network, i64> = BTreeMap::new();
        let mut newly_delayed: Vec<(Arc<Lane>, PostKey, Draft, Delayed)> = Vec::new();
        // A `new` draft untouched for a claim TTL has no live run: its trigger died.
        let stale = i64::try_from(self.settings.claim_ttl.as_secs()).unwrap_or(i64::MAX);
        let mut report = SweepReport::default();
        // Due drafts noted as waiting for a new credential by this sweep.
        let mut held = 0_usize;
        // A run that started and never ended (its `started` mark outlived any claim) died
        // without a word, perhaps of this very draft (a cover too large for the memory): the
        // drafts whose last run died go after the others, so one bad draft never takes the
        // rest of the sweep down with it (issue 30, finding 3).
        let died = |d: &Draft| d.started && now - d.updated_at > stale;
        let mut drafts = drafts;
        drafts.sort_by_key(|(_, d)| died(d));
        for (lane, draft) in &drafts {
            let Ok(key) = PostKey::parse(&draft.key) else {
                continue;
            };
            let need = self.run_need(lane);
            report.examined += 1;
            // Its network refused the credential still in use: it waits, listed, never run.
            if lane.waits_for_credential(draft).is_some() {
                continue;
            }
            let due = self.due(lane, draft, now);
            // This process saw the network refuse the credential in use: no request goes out
            // with it. A due draft is noted as waiting for a new one (so that no other process
            // sends it either); an `unknown` one's check waits too, and it stays `unknown`.
            if due && lane.credential_dead() {
                if draft.status != DraftStatus::Unknown
                    && lane.hold_for_credential(&key, dl, draft).await
                {
                    held += 1;
                }
                continue;
            }
            // Out of attempts, a run that died counted among them: in front of its owner.
            let killed = died(draft)
                && matches!(
                    draft.status,
                    DraftStatus::New | DraftStatus::Failed | DraftStatus::Scheduled
                );
            let attempts = draft.attempts_counted(killed);
            if due
                && (draft.status == DraftStatus::Failed || killed)
                && attempts >= self.settings.max_attempts
            {
                self.mark_out_of_attempts(lane, &key, dl, draft, killed, now, &mut report)
                    .await;
                continue;
            }
            if !due {
                self.tell_if_waiting(lane, &key, dl, draft, now, &mut report)
                    .await;
                continue;
            }
            // Leave the rest for the next sweep rather than start a run that cannot finish.
            if dl.for_work(need) != Some(need) {
                report.left_for_later += 1;
                continue;
            }
            if let Some(delayed) = self.paced(lane, &key, dl, &mut slot_opens).await {
                if !draft.delay_told {
                    newly_delayed.push((lane.clone(), key.clone(), draft.clone(), delayed.clone()));
                }
                report.delayed.push(delayed);
                continue;
            }
            if draft.status == DraftStatus::Scheduled {
                report.due += 1;
            }
            let request = PostRequest {
                key: key.base(),
                content: None,
                action: Action::Post,
                source: Source::Sweep,
                run_id: new_run_id(),
                reply_to: None,
                targets: vec![key.network()],
                publish_at: None,
            };
            report.runs.push(self.run(request, *dl).await);
            slot_opens.remove(&lane.network);
        }
        for (lane, key, draft, delayed) in newly_delayed {
            self.tell_delayed(&lane, &key, &draft, &delayed, dl, &mut report)
                .await;
        }
        // Drafts that wait for their network's credentials are never run; told once.
        self.tell_parked(dl, &mut parked, &mut report).await;
        self.spread_recorded(dl, &mut report).await;
        let changed = !report.runs.is_empty()
            || held > 0
            || !report.needs_review.is_empty()
            || !report.reminded.is_empty();
        report.waiting = self.still_waiting(dl, drafts, parked, changed, now).await;
        self.tell_lapsing_credentials(now).await;
        Ok(report)
    }

    /// Whether a listed draft is due for a run now: a retryable failure whose retry time has
    /// come, a `new` one whose trigger died, a scheduled one (listed because its time came),
    /// an `unknown` one its network can settle now.
    fn due(&self, lane: &Lane, draft: &Draft, now: i64) -> bool {
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        // A `new` draft untouched for a claim TTL has no live run: its trigger died.
        let stale = secs(self.settings.claim_ttl);
        let window = secs(self.settings.reconcile_window);
        let quiet = secs(self.settings.reconcile_after);
        match draft.status {
            DraftStatus::Failed if draft.retryable => {
                draft.next_retry_at.is_none_or(|at| at <= now)
            }
            DraftStatus::New => now - draft.updated_at > stale,
            // Listed because its time (or its pacing delay) has come.
            DraftStatus::Scheduled => true,
            // Only the owner can settle it (the network offers no way to check).
            DraftStatus::Unknown if !draft.retryable => false,
            DraftStatus::Unknown => {
                let at = draft.pending.as_ref().map_or(draft.updated_at, |p| p.at);
                let last = draft
                    .pending
                    .as_ref()
                    .and_then(|p| p.last_sent_at)
                    .unwrap_or(at)
                    .max(at);
                // Before the quiet period the attempt may still be in flight; past the
                // window only the owner can tell. In between: reconcile now (or repair
                // from a kept claim). A run still in flight holds the claim.
                match lane.settle() {
                    Settle::Resend => now - last > quiet && now - at <= window,
                    Settle::ReadBack | Settle::Replay { .. } => now - last > quiet,
                    // Nothing is re-sent: once no run can be live, a run repairs a kept
                    // claim, or leaves the draft to the owner (who is then told, once).
                    Settle::AskOwner => now - last > stale,
                }
            }
            _ => false,
        }
    }

    /// A due draft out of attempts (a run that died counted among them) is marked
    /// `needs_review`, in front of its owner, and the owner told.
    #[allow(clippy::too_many_arguments)]
    async fn mark_out_of_attempts(
        &self,
        lane: &Arc<Lane>,
        key: &PostKey,
        dl: &Deadline,
        draft: &Draft,
        killed: bool,
        now: i64,
        report: &mut SweepReport,
    ) {
        let attempts = draft.attempts_counted(killed);
        let error = if killed {
            format!(
                "its last run ended without a word: the process died (out of memory or killed) before it could say why{}",
                draft.last_error.as_deref().map(|e| format!("; before that: {e}")).unwrap_or_default()
            )
        } else {
            draft.last_error.clone().unwrap_or_default()
        };
        let update = DraftUpdate::NeedsReview {
            error: error.clone(),
        };
        if lane
            .note(key, dl, &update, &[draft.status], "needs_review")
            .await
        {
            report.needs_review.push(key.to_string());
            let mut marked = draft.clone();
            marked.attempts = attempts;
            marked.started = false;
            marked.last_error = Some(error);
            marked.status = DraftStatus::NeedsReview;
            marked.reminded = false;
            marked.updated_at = now;
            self.tell_if_waiting(lane, key, dl, &marked, now, report)
                .await;
        }
    }

    /// Tells the owner, once per step, of a stored credential about to lapse
    /// ([`crate::credentials::tell`]). Stored credentials live in the real store: the one of any
    /// lane that posts for real (none does: no stored credential is in use).
    async fn tell_lapsing_credentials(&self, now: i64) {
        if !crate::credentials::in_use() {
            return;
        }
        let Some(lane) = self.lanes.values().find(|l| !l.adapter.is_dry_run()) else {
            return;
        };
        if let Err(e) =
            crate::credentials::tell::tell_ahead(&*lane.records, &*self.notifier, now).await
        {
            tracing::warn!(error = %e, "could not check the stored credentials' expiry");
        }
    }

    /// Whether pacing holds `key` back now: its network's next slot opens later. The slot's
    /// time is read once and remembered until this sweep runs that network again; the run
    /// itself takes the slot in one conditional write, so two sweeps cannot both post "the
    /// next one".
    async fn paced(
        &self,
        lane: &Lane,
        key: &PostKey,
        dl: &Deadline,
        slot_opens: &mut BTreeMap<Network, i64>,
    ) -> Option<Delayed> {
        let (gap, interval) = lane.pacing()?;
        let opens = match slot_opens.get(&lane.network) {
            Some(at) => *at,
            None => {
                let t = self.settings.timeouts;
                let last = dl
                    .work(t.records, lane.records.last_slot(lane.network.as_str()))
                    .await;
                // Unknown: let the run decide (it takes the slot or delays the draft).
                let at = flatten_value(last)
                    .ok()
                    .flatten()
                    .map_or(0, |l| l + interval);
                slot_opens.insert(lane.network, at);
                at
            }
        };
        (opens > now_ms()).then(|| {
            let until = (opens + 999) / 1000;
            Delayed {
                key: key.to_string(),
                until: crate::record::rfc3339(until),
                reason: format!(
                    "{} keeps posts to {} {}s apart; a later sweep posts it",
                    lane.network.min_gap_var(),
                    lane.network.label(),
                    gap.as_secs_f64()
                ),
            }
        })
    }

    /// Tells the owner, once, that a due draft waits for its network's next slot: the draft is
    /// marked told first, in a write that only one sweep can make, and then told (a notice
    /// that is not delivered is not repeated: the delay shows in every sweep's `delayed`).
    async fn tell_delayed(
        &self,
        lane: &Lane,
        key: &PostKey,
        draft: &Draft,
        delayed: &Delayed,
        dl: &Deadline,
        report: &mut SweepReport,
    ) {
        if !lane
            .note(
                key,
                dl,
                &DraftUpdate::DelayTold,
                &[draft.status],
                "that the owner is told of the delay",
            )
            .await
        {
            return;
        }
        let mut outcome = Outcome::new(key, OutcomeKind::Scheduled, delayed.reason.clone());
        outcome.publish_at = Some(delayed.until.clone());
        let text = format!(
            "{key} is due but delayed until {}: {}.",
            delayed.until, delayed.reason
        );
        if self.tell(&text, &outcome, dl).await {
            report.reminded.push(key.to_string());
        } else {
            report.undelivered.push(key.to_string());
        }
    }

    /// Tells the owner about a draft that waits for a person and has not been told yet; marks
    /// it told only once the message was delivered.
    async fn tell_if_waiting(
        &self,
        lane: &Lane,
        key: &PostKey,
        dl: &Deadline,
        draft: &Draft,
        now: i64,
        report: &mut SweepReport,
    ) {
        if draft.reminded {
            return;
        }
        let Some(reason) = self.waits_for_person(lane, draft, now) else {
            return;
        };
        let (outcome, text) = match draft.status {
            DraftStatus::Unknown => (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    draft.last_error.clone().unwrap_or_default(),
                ),
                format!("Reminder: {key} {reason}."),
            ),
            _ => (
                failed(key, false, draft.last_error.clone().unwrap_or_default()),
                format!("{key} needs you: it {reason}."),
            ),
        };
        if !self.tell(&text, &outcome, dl).await {
            report.undelivered.push(key.to_string());
            return;
        }
        report.reminded.push(key.to_string());
        lane.note(
            key,
            dl,
            &DraftUpdate::Reminded,
            &[draft.status],
            "that the owner was told (the owner may be told again)",
        )
        .await;
    }
}

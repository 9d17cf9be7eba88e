//! The decision under the claim (rule 2 in `mod.rs`): the record is checked while the claim is
//! held, and only a key with no record goes on to be published, reconciled or confirmed. A
//! record found before the claim (the draft's write returns its copy, or a run's plan reads it)
//! is final, since a record never expires: that run needs no claim at all.

use super::*;

impl Lane {
    /// Whether `record` decides this lane's target: a dry run's record in the real namespace
    /// (only an older version could leave one) is not a post.
    pub(super) fn counts(&self, record: &PostedRecord) -> bool {
        self.adapter.is_dry_run() || !record.post_id.as_deref().is_some_and(is_dry_run_urn)
    }

    /// A recorded target: answered from its record, which never expires, so finding it is
    /// final and needs no claim. A draft stored again after its record (a redelivery after the
    /// draft expired) is marked done, with the record's copy, so the sweeper leaves it alone
    /// and the next delivery is answered from its one write. `mark`: the draft may not say so
    /// yet.
    pub(super) async fn already(
        &self,
        key: &PostKey,
        dl: &Deadline,
        record: &PostedRecord,
        mark: bool,
    ) -> Outcome {
        if mark {
            let expires_at =
                now_s() + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
            let open = [
                DraftStatus::New,
                DraftStatus::Failed,
                DraftStatus::Unknown,
                DraftStatus::NeedsReview,
                DraftStatus::Scheduled,
                DraftStatus::Cancelled,
            ];
            let update = DraftUpdate::Recorded {
                expires_at,
                record: Box::new(record.clone()),
            };
            self.note(key, dl, &update, &open, "the record").await;
        }
        let how = match record.source.as_str() {
            "owner" => "confirmed by the owner",
            _ => "recorded",
        };
        let mut outcome = Outcome::new(
            key,
            OutcomeKind::AlreadyPosted,
            format!(
                "{how} at {} by {}",
                crate::record::rfc3339(record.posted_at),
                record.source
            ),
        )
        .with_post_id(record.post_id.clone());
        outcome.url = record.url.clone();
        outcome.cid = record.cid.clone();
        outcome.dry_run =
            self.adapter.is_dry_run() && outcome.post_id.as_deref().is_some_and(is_dry_run_urn);
        outcome.settled = true;
        outcome
    }

    /// The run while it holds the claim. `seen`: the draft as read before the claim (stored
    /// by this run's trigger, or read when its run was planned).
    ///
    /// A plain post of a draft no attempt is out for goes straight on to its intent: the
    /// checks that decide it (no record, the caption not another key's, the draft still in
    /// the state read) are the intent write's own conditions, made in one request while the
    /// claim is held (rule 2). Everything else reads the record and the draft again here.
    pub(super) async fn claimed(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        progress: &Progress,
        seen: Seen,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        if let Some(why) = fault("after-claim").await {
            return (failed(key, true, why), Finish::Release);
        }

        let (snapshot, checked) = match self.read_under_claim(req, dl, seen).await {
            Ok(read) => read,
            Err(done) => return done,
        };
        let dry_record = snapshot
            .record
            .as_ref()
            .is_some_and(|r| r.post_id.as_deref().is_some_and(is_dry_run_urn));
        if dry_record && !self.adapter.is_dry_run() {
            // A dry run's record in the real namespace (an older version's): not a post.
            tracing::warn!("ignoring a dry run's record; this real run decides without it");
        } else if let Some(record) = &snapshot.record {
            let mark = snapshot
                .draft
                .as_ref()
                .is_some_and(|d| d.status != DraftStatus::Posted);
            return (self.already(key, dl, record, mark).await, Finish::Release);
        }
        if let Some(why) = fault("after-check").await {
            return (failed(key, true, why), Finish::Release);
        }

        if req.action == Action::Cancel {
            return self.cancel(key, dl, snapshot.draft.as_ref()).await;
        }
        if req.action == Action::Done {
            return self
                .confirm_by_owner(req, dl, snapshot.draft.as_ref(), progress)
                .await;
        }
        if let Some(waits) = self.held_back(req, snapshot.draft.as_ref()) {
            return (waits, Finish::Release);
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
        let (intent_from, replaces) = match self
            .intent_takes(req, dl, draft, dry_record, progress)
            .await
        {
            Ok(takes) => takes,
            Err(done) => return done,
        };
        let attempts = draft.map_or(0, |d| d.attempts);
        let (mut outcome, finish) = self
            .publish(
                req,
                dl,
                &content,
                attempts,
                progress,
                publish::Takes {
                    from: &intent_from,
                    replaces: replaces.as_deref(),
                },
            )
            .await;
        // A scheduled draft that goes out well past its time (held for a new credential, say)
        // says so in its report.
        if outcome.outcome == OutcomeKind::Posted {
            let due = draft.and_then(|d| d.publish_at);
            if let Some(late) = schedule::late_note(due, now_s()) {
                outcome.detail = format!("{}; {late}", outcome.detail);
            }
        }
        if !checked && outcome.outcome == OutcomeKind::Failed && progress.stage() == Stage::Claimed
        {
            if let Some(posted) = self.posted_after_all(key, dl).await {
                return (posted, Finish::Release);
            }
        }
        (outcome, finish)
    }

    /// What the run decides on, read while it holds the claim: the draft as the trigger or the
    /// plan read it when that decides a plain post (`checked` false: the record unread, its
    /// absence a condition of the intent write), or the record and the draft read again. A
    /// sweep's run starts its attempt in that read (issue 30, finding 3), so a run that dies in
    /// the risky phases is counted; where the claims live beside the records, the claim's own
    /// request started it ([`Seen::Started`]).
    async fn read_under_claim(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        seen: Seen,
    ) -> Result<(Snapshot, bool), (Outcome, Finish)> {
        let key = &req.key;
        let t = self.settings.timeouts;
        // A trigger's draft write started the attempt already.
        let (starts, mut direct) = match seen {
            Seen::Started(started) => (false, started),
            Seen::Before(seen) => (
                guard::starts(req, seen.as_ref()),
                seen.filter(|d| {
                    req.action == Action::Post
                        && matches!(
                            d.status,
                            DraftStatus::New | DraftStatus::Failed | DraftStatus::NeedsReview
                        )
                }),
            ),
        };
        if starts {
            let started = dl
                .work(
                    t.records,
                    self.records
                        .start_attempt(key, &guard::STARTS_FROM, now_s()),
                )
                .await;
            match flatten_value(started) {
                Ok(started) => direct = started,
                Err(e) => {
                    return Err((
                        failed(key, true, format!("{e}; nothing was posted")),
                        Finish::Release,
                    ))
                }
            }
        }
        let checked = direct.is_none();
        let snapshot = match direct {
            Some(draft) => Snapshot {
                draft: Some(draft),
                ..Snapshot::default()
            },
            None => match flatten_value(dl.work(t.records, self.records.load(key, None)).await) {
                Ok(s) => s,
                Err(e) => {
                    return Err((
                        failed(key, true, format!("{e}; nothing was posted")),
                        Finish::Release,
                    ))
                }
            },
        };
        Ok((snapshot, checked))
    }

    /// The states the intent may be taken from, and the attempt it replaces. Only a draft that
    /// no other attempt is in flight for may take it (the write is conditional, so two runs
    /// that both got past a lost claim cannot both post); the owner's Post anyway, and a dry
    /// run's traces in the real draft, may be replaced. `Err`: an unknown attempt settled
    /// instead ([`Self::reconcile`]), or still quiet.
    async fn intent_takes(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: Option<&Draft>,
        dry_record: bool,
        progress: &Progress,
    ) -> Result<(Vec<DraftStatus>, Option<String>), (Outcome, Finish)> {
        let key = &req.key;
        let mut intent_from = vec![
            DraftStatus::New,
            DraftStatus::Failed,
            DraftStatus::NeedsReview,
        ];
        // A scheduled draft whose time has come (or Post now): taken from exactly that state,
        // so a cancel that got in first wins.
        if let Some(d) = draft.filter(|d| d.status == DraftStatus::Scheduled) {
            intent_from.push(d.status);
        }
        if dry_record && !self.adapter.is_dry_run() {
            intent_from.push(DraftStatus::Posted);
        }
        let mut replaces = None;
        if let Some(d) = draft.filter(|d| d.status == DraftStatus::Unknown) {
            let dry_attempt = d
                .pending
                .as_ref()
                .is_some_and(|p| is_dry_run_urn(&p.media_id));
            if dry_attempt && !self.adapter.is_dry_run() {
                // A dry run's attempt in the real draft (only an older version could leave
                // one): nothing was sent to the network, so there is nothing to reconcile.
                tracing::warn!("ignoring a dry run's unknown attempt on the draft");
            } else if req.action != Action::Force {
                return Err(self.reconcile(req, dl, d, progress).await);
            } else if let Some(wait) = self.still_quiet(key, d) {
                // Post anyway is the owner's word that the earlier attempt is not there; while
                // it may still be in flight, nobody can know that yet.
                return Err((wait, Finish::Release));
            } else {
                tracing::warn!("the owner chose Post anyway after an unknown outcome");
            }
            match &d.pending {
                // Only that attempt may be replaced (see `publish`).
                Some(p) => {
                    intent_from = vec![DraftStatus::Unknown];
                    replaces = Some(p.run.clone());
                }
                None => intent_from.push(DraftStatus::Unknown),
            }
        }
        Ok((intent_from, replaces))
    }

    /// A run that went straight on (the record unread) and failed before its intent (the
    /// image, the upload): the record is read now, so a key that is posted (its draft item had
    /// expired and was sent again) is answered as posted, never as a failure.
    async fn posted_after_all(&self, key: &PostKey, dl: &Deadline) -> Option<Outcome> {
        let t = self.settings.timeouts;
        if let Ok(Ok(Snapshot {
            record: Some(record),
            ..
        })) = dl.work(t.records, self.records.load(key, None)).await
        {
            if self.counts(&record) {
                return Some(self.already(key, dl, &record, true).await);
            }
        }
        None
    }
}

//! The durable record (rule 3 in `mod.rs`): written only if absent; what happens to the claim
//! depends on whether the write succeeded.

use super::*;

impl Lane {
    /// The record this run writes, the time, and when the done draft may expire.
    pub(super) fn new_record(
        &self,
        req: &PostRequest,
        post: Created,
        source: &str,
        caption_hash: Option<String>,
    ) -> (PostedRecord, i64, i64) {
        let now = now_s();
        let record = PostedRecord {
            key: req.key.to_string(),
            post_id: post.id,
            posted_at: now,
            run: req.run_id.clone(),
            source: source.to_owned(),
            caption_hash,
            url: post.url,
            cid: post.cid,
        };
        let expires = now + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
        (record, now, expires)
    }

    /// Writes the durable record (conditional) and decides what happens to the claim. Once
    /// the record is there, `progress` says so: a panic or a drop from then on releases the
    /// claim instead of keeping it with the id.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        post: Created,
        caption_hash: Option<String>,
        kind: OutcomeKind,
        source: &str,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let on = self.network.label();
        let (urn, url, cid) = (post.id.clone(), post.url.clone(), post.cid.clone());
        let (record, now, expires) = self.new_record(req, post, source, caption_hash);
        let with = |o: Outcome| {
            let mut o = o.with_post_id(urn.clone());
            o.url = url.clone();
            o.cid = cid.clone();
            o
        };
        let unrecorded = Unrecorded {
            post: Created {
                id: urn.clone(),
                url: url.clone(),
                cid: cid.clone(),
            },
            caption_hash: record.caption_hash.clone(),
            kind,
            source: source.to_owned(),
            error: String::new(),
        };
        // Where the claims live beside the records, the claim is released by the record's own
        // write, only if it wrote the record (a failed write leaves the claim as it was).
        let written = match fault("record-write").await {
            Some(why) => Err(why),
            None => flatten_value(
                dl.finish(
                    self.settings.timeouts.records,
                    self.records
                        .put_posted_releasing(key, &record, now, expires, self.ask(req)),
                )
                .await,
            ),
        };
        let (written, finish) = match written {
            Ok((w, true)) => (Ok(w), Finish::Released),
            Ok((w, false)) => (Ok(w), Finish::Release),
            Err(e) => (Err(e), Finish::Release),
        };
        match written {
            Ok(PutPosted::Created) => {
                progress.set(Stage::Recorded(urn.clone(), kind));
                if let Some(why) = fault("after-record").await {
                    return (with(Outcome::new(key, kind, why)), finish);
                }
                self.keep_spreading(key, dl, progress).await;
                let detail = match (kind, source, &urn) {
                    (OutcomeKind::AlreadyPosted, "reconcile", None) => format!("{on} refused the identical re-send as a duplicate, so the earlier attempt is there; {on} does not say which post it is, so it is recorded without a link"),
                    (OutcomeKind::AlreadyPosted, "lookup", _) => format!("found the earlier attempt among the account's recent posts on {on}; recorded it, nothing was sent"),
                    (OutcomeKind::AlreadyPosted, "reconcile", Some(_)) => format!("{on}'s duplicate answer showed the earlier attempt is on {on}; recorded it"),
                    (OutcomeKind::AlreadyPosted, _, None) => format!("{on} says it already has this post and does not name it; recorded without a link"),
                    (OutcomeKind::AlreadyPosted, _, Some(_)) => format!("{on} already has this post; recorded it"),
                    _ => "posted and recorded".to_owned(),
                };
                (with(Outcome::new(key, kind, detail)), finish)
            }
            Ok(PutPosted::Exists(other))
                if other.run == req.run_id || (urn.is_some() && other.post_id == urn) =>
            {
                progress.set(Stage::Recorded(urn.clone(), kind));
                self.keep_spreading(key, dl, progress).await;
                (
                    with(Outcome::new(key, kind, "posted and recorded")),
                    Finish::Release,
                )
            }
            Ok(PutPosted::Exists(other)) => {
                tracing::error!(
                    this_urn = urn.as_deref(),
                    recorded_urn = other.post_id.as_deref(),
                    recorded_by = %other.run,
                    "DUPLICATE POST: a record appeared for this key while this run held the claim"
                );
                let detail = format!(
                    "duplicate: {key} was already recorded as {} by {}; this run also created {}. Delete one of them on {on}",
                    other.post_id.as_deref().unwrap_or("(no URN)"),
                    other.run,
                    urn.as_deref().unwrap_or("(no URN)")
                );
                (
                    with(Outcome::new(key, OutcomeKind::Posted, detail)),
                    Finish::Release,
                )
            }
            Err(e) => {
                tracing::error!(urn = urn.as_deref(), error = %e, "the network accepted the post but the record write failed; keeping the claim");
                // What happens to the claim is said once it is known ([`Self::after_keep`]).
                let detail =
                    format!("{on} accepted the post but the record could not be written ({e})");
                progress.unrecorded(Unrecorded {
                    error: e.clone(),
                    ..unrecorded
                });
                (
                    with(Outcome::new(key, OutcomeKind::PostedNotRecorded, detail)),
                    Finish::Keep(urn),
                )
            }
        }
    }

    /// What became of the claim of a post whose record write failed (rule 6), said in the
    /// outcome. Kept: no run posts it again, and the first run to meet the claim repairs the
    /// record. Not kept (the claim store failed too, as when one database holds both): the record
    /// is written once more, since it is the one place that stops every run. If that fails as
    /// well, nothing stored names the post and the report is what does; the attempt's intent,
    /// written before the create, makes every later run settle it the network's way rather
    /// than post it again.
    pub(super) async fn after_keep(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        mut outcome: Outcome,
        kept: Result<(), String>,
        progress: &Progress,
    ) -> Outcome {
        let unkept = match kept {
            Ok(()) => {
                outcome.detail = format!(
                    "{}. The claim is kept with its id so no run posts it again; Retry repairs the record",
                    outcome.detail
                );
                return outcome;
            }
            Err(why) => why,
        };
        let mut tried = format!("{}; nor could the claim be kept ({unkept})", outcome.detail);
        if let Some(u) = progress.take_unrecorded() {
            let first = u.error.clone();
            let (second, finish) = self
                .record(req, dl, u.post, u.caption_hash, u.kind, &u.source, progress)
                .await;
            if second.outcome != OutcomeKind::PostedNotRecorded {
                // Recorded after all: the claim this run may still hold stops nothing now.
                let t = self.settings.timeouts;
                if finish != Finish::Released {
                    let _ = dl
                        .finish(t.claims, self.claims.release(&req.key, &req.run_id))
                        .await;
                }
                let mut second = second;
                second.image = outcome.image.take();
                second.detail = format!(
                    "{} (the first record write failed ({first}) and the claim could not be kept ({unkept}), so the record was written again)",
                    second.detail
                );
                return second;
            }
            if let Some(again) = progress.take_unrecorded() {
                tried = format!(
                    "{tried}, nor the record written on a second try ({})",
                    again.error
                );
            }
        }
        let named = match &outcome.post_id {
            Some(id) => format!("this report does: {id}"),
            None => format!("{} did not name it either", self.network.label()),
        };
        outcome.detail = format!(
            "{tried}. Nothing stored names the post; {named}. Its attempt is on the draft (written before the post was sent), so no run posts it again blindly: {}",
            self.settles_later()
        );
        outcome
    }

    /// How a later run settles an attempt of this network that did post, when nothing stored
    /// names the post (the owner's words for [`Self::reconcile`]).
    fn settles_later(&self) -> String {
        let on = self.network.label();
        let later = format!(
            "once this run's claim ({}s) has expired and the quiet period ({}s) is over, a Retry or the sweeper",
            self.settings.claim_ttl.as_secs(),
            self.settings.reconcile_after.as_secs()
        );
        match self.settle() {
            Settle::Resend => format!(
                "{later} re-sends the identical request within {}s of the attempt, which {on}'s duplicate check answers with this post, and records it; past that, you are asked",
                self.settings.reconcile_window.as_secs()
            ),
            Settle::ReadBack
                if self.adapter.capabilities().idempotency == Idempotency::Container =>
            {
                format!("{later} reads the kept container's status on {on}, finds it published and records it; nothing is sent again")
            }
            Settle::ReadBack => format!(
                "{later} finds it among the account's recent posts on {on} and records it (were it missed, {on} refuses the identical re-send as a duplicate)"
            ),
            Settle::Replay { window: Some(w) } => format!(
                "{later} replays the request with its idempotency key, which {on} answers with this post, and records it (after {}s it is looked up among the account's recent posts instead)",
                w.as_secs()
            ),
            Settle::Replay { window: None } => format!(
                "{later} reads the post's record key on {on}, finds it and records it; nothing is sent again"
            ),
            Settle::AskOwner => format!(
                "{on} offers no way to check, so nothing is ever sent again: a Retry asks you to press {}",
                self.network.confirm_label()
            ),
        }
    }

    /// `done:<key>`: the owner says it is on the network.
    pub(super) async fn confirm_by_owner(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: Option<&Draft>,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let hash = draft
            .and_then(|d| d.content.as_ref())
            .map(|c| self.text_hash(c));
        let (outcome, finish) = self
            .record(
                req,
                dl,
                Created {
                    id: None,
                    url: None,
                    cid: None,
                },
                hash,
                OutcomeKind::AlreadyPosted,
                "owner",
                progress,
            )
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
                    .with_post_id(outcome.post_id),
                // Released by the record's write where the claims live beside the records.
                if finish == Finish::Released {
                    finish
                } else {
                    Finish::Release
                },
            ),
        }
    }
}

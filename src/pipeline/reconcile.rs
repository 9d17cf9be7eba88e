//! Ambiguous outcomes (rule 7 in `mod.rs`, README "Targets"): an attempt whose result is unknown is
//! never re-sent while it may still be in flight (the quiet period). Afterwards each network
//! settles it its own way ([`Settle`]): LinkedIn by the identical re-send within the window (its
//! duplicate answer names the post), X by reading the account's recent posts first, and a
//! channel, where nothing can tell, by asking the owner at once and never re-sending.

use super::publish::kept_request;
use super::schedule::Paced;
use super::*;

impl Lane {
    /// `Some(unknown)` while the latest send of the draft's kept attempt may still be in
    /// flight (the quiet period, from the latest send): nothing may be sent for it yet.
    pub(super) fn still_quiet(&self, key: &PostKey, draft: &Draft) -> Option<Outcome> {
        let pending = draft.pending.as_ref()?;
        let last = pending.last_sent_at.unwrap_or(pending.at).max(pending.at);
        let age = now_s().saturating_sub(last);
        let quiet = i64::try_from(self.settings.reconcile_after.as_secs()).unwrap_or(i64::MAX);
        // Whole seconds: `age` may overstate the time passed by up to a second, so the quiet
        // period is over only once `age` exceeds it.
        if age > quiet {
            return None;
        }
        // The request may still be in flight at the network, whose duplicate check sees only
        // posts that already exist: sending now could make a second post.
        let at = last.saturating_add(quiet + 1);
        Some(
            Outcome::new(
                key,
                OutcomeKind::Unknown,
                format!(
                    "an attempt {age}s ago may still be in flight at {}; nothing was sent. It is checked from {} (more than {}s after that attempt) on: the sweeper does it, or Retry (or Post anyway) then",
                    self.network.label(),
                    crate::record::rfc3339(at),
                    quiet
                ),
            )
            .retryable(true),
        )
    }

    /// What the owner is asked when only they can tell.
    fn ask_owner(&self, key: &PostKey, why: &str) -> (Outcome, Finish) {
        let on = self.network.label();
        (
            Outcome::new(
                key,
                OutcomeKind::Unknown,
                format!(
                    "{why}; nothing was sent. Check {on}, then press {} or Post anyway",
                    self.network.confirm_label()
                ),
            ),
            Finish::Release,
        )
    }

    /// A draft left `unknown`: settle it the network's way, after the quiet period.
    pub(super) async fn reconcile(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let on = self.network.label();
        let Some(pending) = &draft.pending else {
            return self.ask_owner(
                key,
                "an earlier attempt's result is unknown and its request was not kept",
            );
        };
        if self.settle() == Settle::AskOwner {
            let why = format!("an earlier attempt may be on {on}, and {on} offers no way to check it, so it is never sent again automatically");
            return self.settle_by_owner(req, dl, draft, why).await;
        }
        if let Some(wait) = self.still_quiet(key, draft) {
            return (wait, Finish::Release);
        }
        let age = now_s().saturating_sub(pending.at);
        if self.settle() == Settle::Resend
            && age > i64::try_from(self.settings.reconcile_window.as_secs()).unwrap_or(i64::MAX)
        {
            return self.ask_owner(
                key,
                &format!("an earlier attempt {age}s ago may have posted it, and that is too long ago for {on}'s duplicate check to tell"),
            );
        }
        // Every check that settles nothing counts as an attempt (POSTONCE_MAX_ATTEMPTS): past
        // the cap the sweeper stops trying and the owner decides.
        if draft.attempts >= self.settings.max_attempts {
            let why = format!(
                "{} attempts to post or check it ended without an answer, so it is no longer checked automatically; an earlier attempt may be on {on}",
                draft.attempts
            );
            return self.settle_by_owner(req, dl, draft, why).await;
        }
        progress.attempt(pending);
        let post = kept_request(pending);
        // The hash of the text that was sent, not of the draft as it may have been edited since.
        let hash = pending
            .caption_hash
            .clone()
            .or_else(|| draft.content.as_ref().map(|c| self.text_hash(c)));
        if let Some(settled) = self
            .look_up_first(req, dl, draft, &post, hash.clone(), progress)
            .await
        {
            return settled;
        }
        self.resend(req, dl, draft, &post, hash, progress).await
    }

    /// Where the network settles an unknown attempt by reading (X), where its key's window has
    /// passed, or where the record key was chosen by the client: reads the account's posts (or
    /// the key) first. `Some` when that settled it (recorded, refused, or the owner asked);
    /// `None` when the identical re-send is the next step.
    async fn look_up_first(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        post: &PreparedPost,
        hash: Option<String>,
        progress: &Progress,
    ) -> Option<(Outcome, Finish)> {
        let on = self.network.label();
        let pending = draft.pending.as_ref()?;
        let age = now_s().saturating_sub(pending.at);
        // Replay past the key's window: the post can only be looked up now.
        // With a margin: the replay reaches the network only after the re-send is recorded and
        // its request travels, and the network counts its window from the create, which came
        // after the stored attempt time. Looking up early is always safe.
        let margin = self.settings.timeouts.records + self.budget;
        let settle = self.settle();
        let expired = matches!(settle, Settle::Replay { window: Some(w) } if age.saturating_add(i64::try_from(margin.as_secs()).unwrap_or(i64::MAX)).saturating_add(1) > i64::try_from(w.as_secs()).unwrap_or(i64::MAX));
        // A record key chosen by the client is read at that key first: the post is
        // recorded on a hit, and replayed only when the key holds nothing.
        let keyed = settle == Settle::Replay { window: None };
        if settle == Settle::ReadBack || expired || keyed {
            let settled = match self.read_back(dl, post, pending.at).await {
                Ok(Some(found)) => {
                    tracing::warn!(
                        id = found.id.as_deref(),
                        "the earlier attempt is on the network; recording it"
                    );
                    progress.created(found.id.clone());
                    self.record(
                        req,
                        dl,
                        found,
                        hash,
                        OutcomeKind::AlreadyPosted,
                        "lookup",
                        progress,
                    )
                    .await
                }
                Ok(None) if expired => {
                    let why = format!("an earlier attempt {age}s ago may have posted it; that is past the time {on} remembers its idempotency key, and it is not among the account's recent posts");
                    self.settle_by_owner(req, dl, draft, why).await
                }
                Ok(None) => return None,
                Err(PostError::Gone { message, .. }) => {
                    let why = format!(
                        "the earlier attempt did not post on {on} and no longer can ({message})"
                    );
                    self.not_posted(req, dl, draft, &pending.run, why).await
                }
                Err(PostError::ReadRefused { message, .. }) => {
                    let why = format!("an earlier attempt may be on {on}, and {on} refused to let this account read its posts back ({message})");
                    self.settle_by_owner(req, dl, draft, why).await
                }
                Err(e) => {
                    let again = self.check_again(&e);
                    let why = format!("could not read the account's posts on {on} to check the earlier attempt ({e})");
                    self.unsettled(req, dl, draft, &pending.run, why, again)
                        .await
                }
            };
            return Some(settled);
        }
        None
    }

    /// The identical re-send of the kept request (its key or its duplicate check settles it):
    /// with its whole budget, its cover, its pacing slot, and the re-send stamped first so that
    /// only one of two reconciling runs sends.
    async fn resend(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        post: &PreparedPost,
        hash: Option<String>,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let on = self.network.label();
        let Some(pending) = &draft.pending else {
            return self.ask_owner(key, "an earlier attempt's request was not kept");
        };
        tracing::warn!(
            first_attempt = pending.at,
            "re-sending the identical create to reconcile an unknown outcome"
        );
        if dl.for_work(self.budget) != Some(self.budget) {
            // A re-send cut short would only leave the question open longer.
            return (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!(
                        "not enough time left in this run to give the check with {on} its full {:?}; nothing was sent. Retry",
                        self.budget
                    ),
                )
                .retryable(true),
                Finish::Release,
            );
        }
        // The image a replay carries, before anything is recorded: without it nothing is sent.
        let (media, sent) = match self.replay_media(dl, draft, pending).await {
            Ok(replayed) => replayed,
            Err(why) => {
                return self
                    .unsettled(req, dl, draft, &pending.run, why, true)
                    .await
            }
        };
        // A re-send is a post as far as the network's pacing goes: it takes the slot first (and
        // waits for it, the draft left as it is: its kept request must not be dropped).
        match self.take_slot(dl).await {
            Paced::Go => {}
            Paced::Busy { reason, .. } => {
                let mut o = Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!("the check with {on} is {reason}; nothing was sent"),
                )
                .retryable(true);
                o.settled = req.source == Source::Sweep;
                return (o, Finish::Release);
            }
            Paced::Error(why) => {
                return self
                    .unsettled(req, dl, draft, &pending.run, why, true)
                    .await;
            }
        }
        let stamped_at = match self.stamp_resend(req, dl, draft, progress).await {
            Ok(at) => at,
            Err(settled) => return settled,
        };
        let sending = super::create::Sending {
            reconciling: Some(draft),
            stamped_at,
        };
        let (mut outcome, finish) = self
            .create(req, dl, post, &media, hash, sending, progress)
            .await;
        // The cover a replay uploaded again is shown, as a first try's is.
        if sent.is_some() {
            outcome.image = sent;
        }
        (outcome, finish)
    }

    /// Records the re-send as a new attempt before it goes out: its time restarts the quiet
    /// period for every later run, and the conditional write lets only one of two reconciling
    /// runs send. `Ok`: the time it was stamped at; `Err`: what this run answers instead.
    async fn stamp_resend(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        progress: &Progress,
    ) -> Result<i64, (Outcome, Finish)> {
        let key = &req.key;
        let on = self.network.label();
        let Some(pending) = &draft.pending else {
            return Err(self.ask_owner(key, "an earlier attempt's request was not kept"));
        };
        let t = self.settings.timeouts;
        let stamped_at = now_s();
        let taken = dl
            .work(
                t.records,
                self.records.update_draft(
                    key,
                    &DraftUpdate::Resend {
                        prev_run: pending.run.clone(),
                        at: stamped_at,
                        run: req.run_id.clone(),
                    },
                    &[DraftStatus::Unknown],
                    now_s(),
                ),
            )
            .await;
        match flatten_value(taken) {
            Ok(true) => {
                progress.set(Stage::Intent);
                // The write took time too: the re-send goes out with its whole budget or not.
                if dl.for_work(self.budget) != Some(self.budget) {
                    return Err((
                        Outcome::new(
                            key,
                            OutcomeKind::Unknown,
                            "not enough time left after recording the check to give the re-send its full budget; nothing was sent. Retry after the quiet period",
                        )
                        .retryable(true),
                        Finish::Release,
                    ));
                }
            }
            Ok(false) => {
                return Err((
                    Outcome::new(
                        key,
                        OutcomeKind::BeingPosted,
                        format!(
                            "another run is checking this draft with {on} now; nothing was sent"
                        ),
                    )
                    .retryable(true),
                    Finish::Release,
                ))
            }
            Err(e) => {
                let why = format!("could not record the check before re-sending ({e})");
                return Err(self
                    .unsettled(req, dl, draft, &pending.run, why, true)
                    .await);
            }
        }
        Ok(stamped_at)
    }

    /// A check that settled nothing and sent nothing: counted on the draft as an attempt. While
    /// attempts are left and `again` (trying again may help), the sweeper checks again after
    /// the quiet period, quietly; otherwise only the owner can settle it, and is asked once.
    /// `run`: the kept attempt's run (the note lands only on that attempt).
    pub(super) async fn unsettled(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        run: &str,
        why: String,
        again: bool,
    ) -> (Outcome, Finish) {
        let tries = draft.attempts.saturating_add(1);
        let max = self.settings.max_attempts;
        if !again || tries >= max {
            let why = if again {
                format!("{why}; gave up checking automatically after {tries} attempts")
            } else {
                why
            };
            return self.leave_to_owner(req, dl, Some(run), why).await;
        }
        let detail = format!(
            "{why}; nothing was sent. It is checked again after the quiet period (attempt {tries} of {max})"
        );
        let update = DraftUpdate::IfAttempt {
            run: run.to_owned(),
            update: Box::new(DraftUpdate::Ambiguous {
                error: detail.clone(),
                ask_owner: false,
            }),
        };
        self.note(
            &req.key,
            dl,
            &update,
            &[DraftStatus::Unknown],
            "the check that settled nothing",
        )
        .await;
        let mut o = Outcome::new(&req.key, OutcomeKind::Unknown, detail).retryable(true);
        // Nothing changed for the owner: a sweep's check stays quiet.
        o.settled = req.source == Source::Sweep;
        (o, Finish::Release)
    }

    /// The image a replay carries. A replayed record at a client-chosen key refers to its blob, which the
    /// network collects when nothing references it: the adapter uploads it again (same bytes,
    /// same content address) before the replay, so the image is fetched again; so is the image
    /// of a create that carries the bytes and is replayed (Discord's attachment), which the
    /// adapter checks against the hash its kept request names. The other networks' kept
    /// requests refer to media they still hold, so none is needed; the Telegram channel, whose
    /// create carries the bytes too, is never re-sent ([`Settle::AskOwner`]).
    async fn replay_media(
        &self,
        dl: &Deadline,
        draft: &Draft,
        pending: &PendingPost,
    ) -> Result<(Media, Option<crate::image::Sent>), String> {
        let none = Media {
            bytes: bytes::Bytes::new(),
            content_type: "",
            alt: pending.alt.clone(),
        };
        let caps = self.adapter.capabilities();
        if !caps.client_chosen_id() && !caps.create_carries_image {
            return Ok((none, None));
        }
        let Some(content) = &draft.content else {
            return Err(
                "the draft's image is not stored, so the replay cannot upload it again".into(),
            );
        };
        // The same cover as the first try (the same rendition, byte for byte): the same blob.
        match self.cover(dl, &content.image).await {
            Ok(cover) => Ok((
                Media {
                    bytes: cover.bytes.clone(),
                    content_type: cover.format.mime(),
                    alt: pending.alt.clone(),
                },
                Some(cover.sent()),
            )),
            Err(Gave::Error(e)) => Err(format!(
                "could not fetch the image again for the replay: {e}"
            )),
            Err(Gave::Budget(b)) => Err(format!(
                "could not fetch the image again for the replay: {b}"
            )),
        }
    }

    /// Only the owner can settle this attempt: say so on the draft (the sweeper stops trying
    /// and tells the owner, once) and ask. A draft already left to the owner is not noted
    /// again (that would tell them again). A sweep's run stays quiet: the sweeper's own
    /// message is the one that tells.
    async fn settle_by_owner(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        why: String,
    ) -> (Outcome, Finish) {
        let run = draft
            .pending
            .as_ref()
            .filter(|_| draft.retryable)
            .map(|p| p.run.as_str());
        self.leave_to_owner(req, dl, run, why).await
    }

    /// Notes on the kept attempt of `run` (if any) that only the owner can settle it, then
    /// asks them. A sweep's run stays quiet: the sweeper's own message is the one that tells.
    async fn leave_to_owner(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        run: Option<&str>,
        why: String,
    ) -> (Outcome, Finish) {
        if let Some(run) = run {
            let update = DraftUpdate::IfAttempt {
                run: run.to_owned(),
                update: Box::new(DraftUpdate::Ambiguous {
                    error: why.clone(),
                    ask_owner: true,
                }),
            };
            self.note(
                &req.key,
                dl,
                &update,
                &[DraftStatus::Unknown],
                "that the owner must decide",
            )
            .await;
        }
        let (mut outcome, finish) = self.ask_owner(&req.key, &why);
        outcome.settled = req.source == Source::Sweep;
        (outcome, finish)
    }

    /// Looks for the kept request among the account's recent posts (safe to repeat).
    async fn read_back(
        &self,
        dl: &Deadline,
        post: &PreparedPost,
        since: i64,
    ) -> Result<Option<Created>, PostError> {
        match self
            .with_retries(
                dl,
                self.budget,
                || self.adapter.find(post, since),
                |e: &PostError| e.is_transient(),
                rate_limit_wait,
            )
            .await
        {
            Ok(found) => Ok(found),
            Err(Gave::Error(e)) => Err(e),
            Err(Gave::Budget(b)) => Err(PostError::NotSent {
                network: self.network.label(),
                message: b.to_string(),
            }),
        }
    }

    /// A create that may have worked: the draft stays `unknown` (the intent said so).
    pub(super) async fn ambiguous(&self, key: &PostKey, dl: &Deadline, why: String) -> Outcome {
        let settle = self.settle();
        let update = DraftUpdate::Ambiguous {
            error: why.clone(),
            ask_owner: settle == Settle::AskOwner,
        };
        self.note(
            key,
            dl,
            &update,
            &[DraftStatus::Unknown],
            "the ambiguous attempt (the draft already says unknown)",
        )
        .await;
        let on = self.network.label();
        let quiet = self.settings.reconcile_after.as_secs();
        let next = match settle {
            Settle::Resend => format!(
                "Nothing is re-sent for {quiet}s (the request may still be in flight); then, within {}s of the attempt, the identical request is re-sent so {on}'s duplicate check can tell. Otherwise check {on} and tell me",
                self.settings.reconcile_window.as_secs()
            ),
            Settle::ReadBack if self.adapter.capabilities().idempotency == Idempotency::Container => format!(
                "Nothing is re-sent for {quiet}s (the request may still be in flight); then the kept container's status on {on} says: published, it is recorded; ready, the same container is published again; expired or failed, nothing was posted"
            ),
            Settle::ReadBack => format!(
                "Nothing is re-sent for {quiet}s (the request may still be in flight); then the account's recent posts on {on} are read for this exact text: found, it is recorded; not found, it is sent again"
            ),
            Settle::AskOwner => format!(
                "{on} offers no way to check, so it is never sent again automatically: check {on}, then press {} or Post anyway",
                self.network.confirm_label()
            ),
            Settle::Replay { .. } => format!(
                "Nothing is re-sent for {quiet}s (the request may still be in flight); then the identical request is replayed with its key, which {on} answers with the post it already made, if any"
            ),
        };
        Outcome::new(
            key,
            OutcomeKind::Unknown,
            format!("{why}; the post may exist. {next}"),
        )
    }
}

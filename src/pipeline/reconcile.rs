//! Ambiguous outcomes (DESIGN.md rule 7): an attempt whose result is unknown is never re-sent
//! while it may still be in flight (the quiet period); afterwards, within the window, the
//! identical request is re-sent so LinkedIn's duplicate answer can tell; past it, the owner decides.

use super::*;

impl Pipeline {
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
        // The request may still be in flight at LinkedIn, whose duplicate check sees only
        // posts that already exist: sending now could make a second post.
        let at = last.saturating_add(quiet + 1);
        Some(
            Outcome::new(
                key,
                OutcomeKind::Unknown,
                format!(
                    "an attempt {age}s ago may still be in flight at LinkedIn; nothing was sent. It is checked from {} (more than {}s after that attempt) on: the sweeper does it, or Retry (or Post anyway) then",
                    crate::record::rfc3339(at),
                    quiet
                ),
            )
            .retryable(true),
        )
    }

    /// A draft left `unknown`: within the window, re-send the identical request so LinkedIn's
    /// duplicate answer reveals an existing post; past it, ask the owner.
    pub(super) async fn reconcile(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: &Draft,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let ask = |why: String| {
            (
                Outcome::new(key, OutcomeKind::Unknown, why).with_urn(None),
                Finish::Release,
            )
        };
        let Some(pending) = &draft.pending else {
            return ask("an earlier attempt's result is unknown and its request was not kept; check LinkedIn, then press It's on LinkedIn or Post anyway".into());
        };
        if let Some(wait) = self.still_quiet(key, draft) {
            return (wait, Finish::Release);
        }
        let age = now_s().saturating_sub(pending.at);
        if age > i64::try_from(self.settings.reconcile_window.as_secs()).unwrap_or(i64::MAX) {
            return ask(format!(
                "an earlier attempt {age}s ago may have posted it, and that is too long ago for LinkedIn's duplicate check to tell; nothing was sent"
            ));
        }
        tracing::warn!(
            first_attempt = pending.at,
            "re-sending the identical create-post to reconcile an unknown outcome"
        );
        let post = NewPost {
            commentary: pending.commentary.clone(),
            image_urn: pending.image_urn.clone(),
            alt: pending.alt.clone(),
        };
        let t = self.settings.timeouts;
        if dl.for_work(t.linkedin) != Some(t.linkedin) {
            // A re-send cut short would only leave the question open longer.
            return (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!(
                        "not enough time left in this run to give the check with LinkedIn its full {:?}; nothing was sent. Retry",
                        t.linkedin
                    ),
                )
                .retryable(true),
                Finish::Release,
            );
        }
        // The re-send is a new attempt: its time restarts the quiet period for every later run,
        // and the conditional write lets only one of two reconciling runs send.
        let taken = dl
            .work(
                t.dynamodb,
                self.records.update_draft(
                    key,
                    &DraftUpdate::Resend {
                        prev_run: pending.run.clone(),
                        at: now_s(),
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
                if dl.for_work(t.linkedin) != Some(t.linkedin) {
                    return (
                        Outcome::new(
                            key,
                            OutcomeKind::Unknown,
                            "not enough time left after recording the check to give the re-send its full budget; nothing was sent. Retry after the quiet period",
                        )
                        .retryable(true),
                        Finish::Release,
                    );
                }
            }
            Ok(false) => {
                return (
                    Outcome::new(
                        key,
                        OutcomeKind::BeingPosted,
                        "another run is checking this draft with LinkedIn now; nothing was sent",
                    )
                    .retryable(true),
                    Finish::Release,
                )
            }
            Err(e) => {
                return (
                    Outcome::new(
                        key,
                        OutcomeKind::Unknown,
                        format!("could not record the check before re-sending ({e}); nothing was sent. Retry later"),
                    )
                    .retryable(true),
                    Finish::Release,
                )
            }
        }
        // The hash of the text that was sent, not of the draft as it may have been edited since.
        let hash = pending
            .caption_hash
            .clone()
            .or_else(|| draft.content.as_ref().map(|c| caption_hash(&full_text(c))));
        self.create(req, dl, &post, hash, true, progress).await
    }

    /// A create-post that may have worked: the draft stays `unknown` (the intent said so).
    pub(super) async fn ambiguous(&self, key: &PostKey, dl: &Deadline, why: String) -> Outcome {
        let update = DraftUpdate::Ambiguous { error: why.clone() };
        self.note(
            key,
            dl,
            &update,
            &[DraftStatus::Unknown],
            "the ambiguous attempt (the draft already says unknown)",
        )
        .await;
        Outcome::new(
            key,
            OutcomeKind::Unknown,
            format!(
                "{why}; the post may exist. Nothing is re-sent for {}s (the request may still be in flight); then, within {}s of the attempt, the identical request is re-sent so LinkedIn's duplicate check can tell. Otherwise check LinkedIn and tell me",
                self.settings.reconcile_after.as_secs(),
                self.settings.reconcile_window.as_secs()
            ),
        )
    }
}

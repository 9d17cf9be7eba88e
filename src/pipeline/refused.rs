//! A refused credential (issue 32, step 5): a network that refuses the credential itself (it
//! expired or was revoked; the network's folder says so, [`PostError::CredentialRefused`]) has a
//! credential problem, not a draft problem. Trying again with the same credential cannot help,
//! and every try is one more request with a dead token. So:
//! - the target ends `failed` with the network's words, which name `postonce auth <network>`.
//!   The draft is kept `failed`, due, and tagged with the refused credential's fingerprint
//!   ([`crate::networks::auth::fingerprint`]: a hash, never the credential);
//! - the owner is told once per network and credential, however many drafts it holds and
//!   however many processes meet the refusal: the fingerprint is marked in the stored
//!   credentials' bookkeeping ([`crate::credentials::CredentialState::refused`]) with one
//!   conditional write before the message goes out, and only the run that made that write
//!   tells (a sweep's other runs are quiet). The mark lives there, not on a draft, because it
//!   is one per credential: one item every process can swap conditionally on every store, the
//!   one a new `auth` or a refresh rewrites, and the drafts need only say which credential
//!   refused them;
//! - while that credential is in place, the sweeper runs none of them, nor (once this process
//!   saw the refusal) any other due draft of that network: those are tagged too, without a
//!   request to the network. All are listed with the reason (`status --all`, the sweep's
//!   `waiting`, `schedule list`);
//! - once the credential in use differs (a new `auth`, a refresh, a changed variable), the
//!   drafts are due as they stand and the sweeper runs each through the whole pipeline, whose
//!   claim, record check and conditional intent make each go out once.
//!
//! Only a refusal before anything could have been posted takes this way: an upload, a staged
//! container, or the create of a new attempt (its intent was written and the create refused:
//! nothing was posted). A refused re-send or read of an earlier attempt (a reconcile) leaves
//! its draft `unknown`, since that attempt may be on the network; it is never re-created.

use std::sync::atomic::Ordering;

use super::*;

/// How a draft's last error names the refused credential it waits for a new one of.
const TAG: &str = "(refused credential: fingerprint ";

/// The fingerprint of the refused credential `draft` waits on, if it waits for one.
fn refused_under(draft: &Draft) -> Option<&str> {
    let error = draft.last_error.as_deref()?;
    let start = error.rfind(TAG)? + TAG.len();
    error[start..].split(')').next()
}

impl Lane {
    /// Why `draft` waits: its network refused the credential still in use. `None` once the
    /// credential differs (the draft is due, and runs), or for any other draft.
    pub(super) fn waits_for_credential(&self, draft: &Draft) -> Option<String> {
        if self.adapter.is_dry_run() || draft.status != DraftStatus::Failed {
            return None;
        }
        (refused_under(draft)? == self.fingerprint).then(|| self.credential_wait_reason())
    }

    fn credential_wait_reason(&self) -> String {
        let n = self.network;
        format!(
            "waits: {} refused its credential (expired or revoked); nothing is sent to {} until it changes: run `postonce auth {}` (or set a new one), then the sweeper posts it",
            n.label(),
            n.label(),
            n.as_str()
        )
    }

    /// Whether a check of an earlier attempt (a read-back, a re-send) that failed with `e` may
    /// be tried again: a transient failure, or a refused credential (the check waits for a new
    /// one, and this process sends nothing more with the refused one). The draft stays
    /// `unknown` either way: its attempt may be on the network.
    pub(super) fn check_again(&self, e: &PostError) -> bool {
        if matches!(e, PostError::CredentialRefused { .. }) {
            self.refused.store(true, Ordering::Relaxed);
            return true;
        }
        e.is_transient()
    }

    /// Whether this process saw its network refuse the credential in use.
    pub(super) fn credential_dead(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// A due draft of a lane whose credential this process saw refused: not run, but noted as
    /// waiting for a new credential, so that no process sends it while that one is in place.
    /// Whether the note was written.
    pub(super) async fn hold_for_credential(
        &self,
        key: &PostKey,
        dl: &Deadline,
        draft: &Draft,
    ) -> bool {
        let detail = format!(
            "{}; nothing was sent {TAG}{})",
            self.credential_wait_reason(),
            self.fingerprint
        );
        self.note(
            key,
            dl,
            &self.waits_update(detail),
            &[draft.status],
            "that the draft waits for a new credential",
        )
        .await
    }

    /// Failed, due at once: it runs as soon as a sweep finds another credential in use.
    fn waits_update(&self, detail: String) -> DraftUpdate {
        DraftUpdate::Failed {
            error: detail,
            retryable: true,
            next_retry_at: Some(now_s()),
        }
    }

    /// The network refused the credential (`e`) at an upload, a staged container
    /// (`after_intent` false) or this attempt's create (`after_intent` true: the intent is
    /// this run's, and nothing was posted). The target fails (not retryable for the caller:
    /// trying again now cannot help); the draft waits for a new credential; the owner is told
    /// once per credential.
    pub(super) async fn credential_refused(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        e: &PostError,
        after_intent: bool,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        self.refused.store(true, Ordering::Relaxed);
        let detail = format!(
            "{e}; nothing was posted. It and every other draft for {} wait, and go out by themselves once the credential changes {TAG}{})",
            self.network.label(),
            self.fingerprint
        );
        let update = self.waits_update(detail.clone());
        if after_intent {
            let update = DraftUpdate::IfAttempt {
                run: req.run_id.clone(),
                update: Box::new(update),
            };
            let noted = self
                .note(key, dl, &update, &[DraftStatus::Unknown], "the refusal")
                .await;
            if !noted {
                return (self.as_stored(req, dl, detail).await, Finish::Release);
            }
        } else {
            let before_intent = [
                DraftStatus::New,
                DraftStatus::Failed,
                DraftStatus::NeedsReview,
                DraftStatus::Scheduled,
            ];
            self.note(key, dl, &update, &before_intent, "the refusal")
                .await;
        }
        let first = self.mark_refused(dl).await;
        let mut outcome = failed(key, false, detail);
        // Told once per credential: a sweep's run reports the refusal only if it marked it.
        // A trigger's run always answers its caller (its report is that answer).
        outcome.settled = !first && req.source == Source::Sweep;
        (outcome, Finish::Release)
    }

    /// Marks this lane's credential refused in the stored credentials' bookkeeping, in one
    /// conditional write: `true` for the one run that marked it (and so tells), `false` when
    /// it was marked already. A store that cannot be written tells (twice is better than
    /// never).
    async fn mark_refused(&self, dl: &Deadline) -> bool {
        let marked = dl
            .finish(
                self.settings.timeouts.records,
                crate::credentials::mark_refused(&*self.records, self.network, &self.fingerprint),
            )
            .await;
        match flatten_value(marked) {
            Ok(won) => won,
            Err(e) => {
                tracing::warn!(error = %e, "could not mark the refused credential; the owner is told by this run");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_draft_names_the_fingerprint_it_waits_on() {
        let mut d = Draft::empty("blog-a", DraftStatus::Failed, None, 0);
        assert_eq!(refused_under(&d), None);
        d.last_error = Some(format!(
            "the LinkedIn token has expired (x (y)); nothing was posted {TAG}0123456789abcdef)"
        ));
        assert_eq!(refused_under(&d), Some("0123456789abcdef"));
    }
}

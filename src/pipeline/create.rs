//! The create, sent once (rule 7 in `mod.rs`): the quiet period it must fit in, the one request,
//! and what each answer means for the draft (recorded, already there, ambiguous, failed).

use super::*;

/// How a create goes out: `reconciling`, the draft whose unknown outcome this identical
/// re-send checks;
/// `stamped_at`, the Unix seconds its attempt was stamped with (the intent's `at`, or the
/// re-send's `last_sent_at`), from which the quiet period runs.
pub(super) struct Sending<'a> {
    pub reconciling: Option<&'a Draft>,
    pub stamped_at: i64,
}

impl Sending<'_> {
    /// Whether a create sent now, with its whole `budget`, is over before another run may
    /// re-send it: [`Lane::still_quiet`] lets one re-send only once `now_s()` exceeds the stamp
    /// by more than the quiet period, that is from `stamped_at + quiet + 1` (Unix seconds) on.
    fn over_in_time(&self, budget: Duration, quiet: Duration) -> bool {
        let quiet_ms = i64::try_from(quiet.as_millis()).unwrap_or(i64::MAX);
        let budget_ms = i64::try_from(budget.as_millis()).unwrap_or(i64::MAX);
        let resend_from_ms = self
            .stamped_at
            .saturating_add(1)
            .saturating_mul(1000)
            .saturating_add(quiet_ms);
        now_ms().saturating_add(budget_ms) < resend_from_ms
    }
}

/// The create's answer within its budget.
type Answer = Result<Result<Created, PostError>, BudgetError>;

impl Lane {
    /// Sends the create once and classifies the answer. `sending.reconciling`: this is the
    /// identical re-send after an unknown outcome of this draft.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn create(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        post: &PreparedPost,
        media: &Media,
        caption_hash: Option<String>,
        sending: Sending<'_>,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let reconciling = sending.reconciling;
        // The quiet period runs from the attempt's stamp, not from the send: once it has
        // passed, another run (one that got past a lost claim) may re-send this request. So
        // the create leaves only if it is over, its whole budget included, before then
        // (issue 25: found by the protocol model).
        if !sending.over_in_time(self.budget, self.settings.reconcile_after) {
            let why = format!(
                "the attempt was stamped {}s ago: a create now could still be in flight when its quiet period ({}s) ends, so it was not sent",
                now_s().saturating_sub(sending.stamped_at),
                self.settings.reconcile_after.as_secs()
            );
            tracing::warn!("{why}");
            if reconciling.is_some() {
                let outcome = Outcome::new(key, OutcomeKind::Unknown, format!("{why}; retry"))
                    .retryable(true);
                return (outcome, Finish::Release);
            }
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        if let Some(why) = fault("before-create-post").await {
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        progress.set(Stage::Sent);
        let answer = dl.work(self.budget, self.adapter.create(post, media)).await;
        if let Some(settled) = self.resend_settled(req, dl, reconciling, &answer).await {
            return settled;
        }
        self.answered(req, dl, answer, caption_hash, reconciling, progress)
            .await
    }

    /// What a re-send's answer settles before it is read as a create's (`Some`): a replay
    /// refused at a record key the client chose, a kept request that can no longer post, or a
    /// re-send refused or never sent (counted as an attempt; the earlier attempt may still be
    /// there).
    async fn resend_settled(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        reconciling: Option<&Draft>,
        answer: &Answer,
    ) -> Option<(Outcome, Finish)> {
        let on = self.network.label();
        // A replay at a record key the client chose: the check just read that key
        // and found no post of this draft there, so a refusal (a different record at the key:
        // `InvalidSwap`, the credentials, the record itself) is final. Nothing is there and
        // nothing will be: the target fails, not retryable, and is never replayed again. The
        // owner is told: by this run's report, or, for a sweep's run, by the sweeper, once.
        if reconciling.is_some() && self.settle() == (Settle::Replay { window: None }) {
            if let Ok(Err(e @ PostError::Rejected { .. })) = answer {
                let why = format!(
                    "{on} refused the replay of the post at its record key ({e}); it is not sent again"
                );
                let mut outcome = self.fail_after_intent(req, dl, why, false).await;
                outcome.settled = req.source == Source::Sweep;
                return Some((outcome, Finish::Release));
            }
        }
        // A re-send that was refused or never left: nothing new was posted, and the earlier
        // attempt may still be there. Counted as an attempt; a refusal is not tried again.
        if let Some(draft) = reconciling {
            // The kept request can no longer post, and did not: a new attempt is needed.
            if let Ok(Err(PostError::Gone { message, .. })) = answer {
                let why = format!(
                    "the earlier attempt did not post on {on} and no longer can ({message})"
                );
                return Some(self.not_posted(req, dl, draft, &req.run_id, why).await);
            }
            let failed = match answer {
                Ok(Err(e))
                    if !e.may_exist()
                        && !matches!(
                            e,
                            PostError::AlreadyExists { .. } | PostError::StagedPublished { .. }
                        ) =>
                {
                    Some((
                        format!("the re-send to check the earlier attempt on {on} failed ({e})"),
                        self.check_again(e),
                    ))
                }
                Err(BudgetError::NoTimeLeft) => {
                    Some((format!("no time left to check with {on}"), true))
                }
                _ => None,
            };
            if let Some((why, again)) = failed {
                return Some(
                    self.unsettled(req, dl, draft, &req.run_id, why, again)
                        .await,
                );
            }
        }
        None
    }

    /// What the create's answer means for the draft: recorded (posted, or already there),
    /// ambiguous, or failed.
    async fn answered(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        answer: Answer,
        caption_hash: Option<String>,
        reconciling: Option<&Draft>,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let on = self.network.label();
        match answer {
            Ok(Ok(created)) => {
                progress.created(created.id.clone());
                if let Some(why) = fault("after-create-post").await {
                    return (
                        Outcome::new(key, OutcomeKind::PostedNotRecorded, why)
                            .with_post_id(created.id.clone()),
                        Finish::Keep(created.id.clone()),
                    );
                }
                self.record(
                    req,
                    dl,
                    created,
                    caption_hash.clone(),
                    OutcomeKind::Posted,
                    req.source.as_str(),
                    progress,
                )
                .await
            }
            // What the kept request staged was published, and it publishes only through that
            // request: the post is this draft's own attempt's (this run's, or the earlier one
            // a reconcile re-sends), never someone else's. Recorded like any create; read as
            // "already there" it would be failed unrecorded, and the next run would stage and
            // post again (issue 30).
            Ok(Err(PostError::StagedPublished { post, .. })) => {
                progress.created(post.id.clone());
                let (kind, source) = if reconciling.is_some() {
                    (OutcomeKind::AlreadyPosted, "reconcile")
                } else {
                    (OutcomeKind::Posted, req.source.as_str())
                };
                self.record(req, dl, post, caption_hash.clone(), kind, source, progress)
                    .await
            }
            // The earlier attempt (reconciling), or the post the owner suspected was missing
            // (Post anyway), is on the network: record it, so no later Retry posts it again.
            Ok(Err(PostError::AlreadyExists { existing, .. }))
                if reconciling.is_some() || req.action == Action::Force =>
            {
                progress.created(existing.id.clone());
                let source = if reconciling.is_some() {
                    "reconcile"
                } else {
                    "force"
                };
                self.record(
                    req,
                    dl,
                    existing,
                    caption_hash.clone(),
                    OutcomeKind::AlreadyPosted,
                    source,
                    progress,
                )
                .await
            }
            Ok(Err(PostError::AlreadyExists { existing, .. })) => {
                let what = existing
                    .id
                    .as_deref()
                    .map_or_else(|| "a post".to_owned(), |id| id.to_owned());
                let why = format!(
                    "{on} already has this exact text as {what} (posted by hand, or under another key); nothing new was posted. Change the caption to post it again"
                );
                let outcome = self
                    .fail_after_intent(req, dl, why, false)
                    .await
                    .with_post_id(existing.id);
                (outcome, Finish::Release)
            }
            // The credential itself was refused: nothing was posted, and the draft waits for a
            // new credential (the `refused` phase).
            Ok(Err(e @ PostError::CredentialRefused { .. })) => {
                self.credential_refused(req, dl, &e, true).await
            }
            Ok(Err(e)) if e.may_exist() => (
                self.ambiguous(key, dl, e.to_string()).await,
                Finish::Release,
            ),
            Err(BudgetError::TimedOut(b)) => {
                let why = format!("{on} did not answer the create within {b:?}");
                (self.ambiguous(key, dl, why).await, Finish::Release)
            }
            Ok(Err(e)) => {
                let retryable = e.is_transient();
                // A rate limit's reset, as the network named it, holds for the next try too.
                let wait = rate_limit_wait(&e);
                (
                    self.fail_after_intent_until(req, dl, e.to_string(), retryable, wait)
                        .await,
                    Finish::Release,
                )
            }
            Err(BudgetError::NoTimeLeft) => (
                self.fail_after_intent(req, dl, "no time left to send the create".into(), true)
                    .await,
                Finish::Release,
            ),
        }
    }
}

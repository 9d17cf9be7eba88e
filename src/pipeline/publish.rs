//! Publishing one draft: cover image, upload, the durable intent, then create-post once
//! (DESIGN.md rules 4, 7 and 8). Safe calls are retried; create-post never is.

use super::*;

/// Which drafts this run's intent may take: those in one of `from`, and, when `replaces` names
/// a run, only while that run's attempt is the kept one.
pub(super) struct Takes<'a> {
    pub from: &'a [DraftStatus],
    pub replaces: Option<&'a str>,
}

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

/// What the intent keeps as the image's name: LinkedIn's image URN (as before targets), or
/// the adapter's media reference as compact JSON.
fn media_name(media: &MediaRef) -> String {
    match media.0.get("image").and_then(|v| v.as_str()) {
        Some(urn) => urn.to_owned(),
        None => media.0.to_string(),
    }
}

/// The create request an intent keeps. Intents written before targets existed are LinkedIn's
/// and keep its fields instead.
pub(crate) fn kept_request(pending: &PendingPost) -> PreparedPost {
    pending.request.clone().unwrap_or_else(|| PreparedPost {
        body: serde_json::json!({
            "commentary": pending.commentary,
            "image": pending.image_urn,
            "alt": pending.alt,
        }),
        text: pending.commentary.clone(),
        key: None,
    })
}

impl Lane {
    /// Image → upload → intent → create → record.
    pub(super) async fn publish(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        content: &DraftContent,
        attempts: u32,
        progress: &Progress,
        takes: Takes<'_>,
    ) -> (Outcome, Finish) {
        let (intent_from, replaces) = (takes.from, takes.replaces);
        let key = &req.key;
        let text = full_text(content);
        let (len, max) = (self.adapter.text_len(&text), self.adapter.max_text());
        if text.trim().is_empty() || len > max {
            let why = format!(
                "the text is {len} long counted {}'s way; {} takes 1 to {max}",
                self.network.label(),
                self.network.label()
            );
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        // A network that fetches the image itself from its public URL cannot take a local file
        // (the CLI's drafts: an absolute path, as the image module reads them): refused before
        // any request, for this target only.
        if self.adapter.capabilities().fetches_image && content.image.starts_with('/') {
            let on = self.network.label();
            let why = format!(
                "{on} fetches the image itself from its public URL, and this draft's cover is a local file, so it cannot go to {on}: give the draft an https image URL"
            );
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        let t = self.settings.timeouts;
        // A URL the policy refuses costs no call to anyone.
        if let Err(e) = self.images.vet_source(&content.image) {
            return self
                .fail(key, dl, e.to_string(), false, attempts, None)
                .await;
        }
        // The image and the part of the upload that needs no image (LinkedIn's
        // initializeUpload) do not depend on each other: both go out at once.
        let fetch = self.with_retries(
            dl,
            t.image,
            || self.images.fetch(&content.image),
            ImageError::is_transient,
            |_| None,
        );
        let begin = self.with_retries(
            dl,
            self.budget,
            || self.adapter.begin_upload(),
            PostError::is_transient,
            rate_limit_wait,
        );
        let (fetched, begun) = tokio::join!(fetch, begin);
        let image = match fetched {
            Ok(image) => image,
            Err(Gave::Error(e)) => {
                let retryable = e.is_transient();
                return self
                    .fail(key, dl, e.to_string(), retryable, attempts, None)
                    .await;
            }
            Err(Gave::Budget(b)) => {
                return self
                    .fail(key, dl, format!("cover image: {b}"), true, attempts, None)
                    .await
            }
        };
        let begun = Mutex::new(match begun {
            Ok(begun) => begun,
            Err(gave) => {
                return self
                    .fail_publish(key, dl, "image upload", gave, attempts)
                    .await
            }
        });
        if let Some(why) = fault("after-image").await {
            return (failed(key, true, why), Finish::Release);
        }
        let media = Media {
            bytes: image.bytes.clone(),
            content_type: image.content_type,
            alt: content.alt.clone(),
        };

        let uploaded = match self
            .with_retries(
                dl,
                self.budget,
                // The first try uses the upload begun above; a retry starts afresh.
                || async {
                    let first = begun.lock().unwrap_or_else(|p| p.into_inner()).take();
                    match first {
                        Some(begun) => self.adapter.upload_begun(&media, &begun).await,
                        None => self.adapter.upload(&media).await,
                    }
                },
                PostError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(uploaded) => uploaded,
            Err(gave) => {
                return self
                    .fail_publish(key, dl, "image upload", gave, attempts)
                    .await
            }
        };
        if let Some(why) = fault("after-upload").await {
            return (failed(key, true, why), Finish::Release);
        }

        let post = self.adapter.prepare(&text, &uploaded, &key.to_string());
        // What the network makes before the create names it (Threads' container): made before
        // the intent, so that the intent keeps it; safe to repeat, since only the request it
        // answers (the one kept) ever uses it.
        let post = match self
            .with_retries(
                dl,
                self.budget,
                || self.adapter.stage(&post, &content.image),
                PostError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(post) => post,
            Err(gave) => {
                return self
                    .fail_publish(key, dl, "preparing the post", gave, attempts)
                    .await
            }
        };
        // The intent goes to durable storage before the request leaves: if this process dies
        // after sending, the draft says `unknown` and no later run re-posts blindly (rule 7).
        let pending = PendingPost {
            commentary: post.text.clone(),
            image_urn: media_name(&uploaded),
            alt: content.alt.clone(),
            at: now_s(),
            run: req.run_id.clone(),
            caption_hash: Some(self.text_hash(content)),
            last_sent_at: None,
            request: Some(post.clone()),
        };
        // Replacing another attempt (Post anyway, a dry run's trace) holds only while that
        // attempt is still the kept one: a reconcile that re-sent it meanwhile wins.
        let intent = match replaces {
            Some(run) => DraftUpdate::IfAttempt {
                run: run.to_owned(),
                update: Box::new(DraftUpdate::Intent(pending.clone())),
            },
            None => DraftUpdate::Intent(pending.clone()),
        };
        // The deciding checks ride on the intent (rule 2, under the claim): no record, and,
        // unless the owner said Post anyway, the caption not posted under another key.
        let caption = (req.action != Action::Force).then_some(pending.caption_hash.as_deref());
        let intent = dl
            .work(
                t.dynamodb,
                self.records
                    .take_intent(key, &intent, intent_from, caption.flatten(), now_s()),
            )
            .await;
        match flatten_value(intent) {
            Ok(Intent::Taken) => {}
            Ok(Intent::Recorded(record)) => {
                return (self.already(key, dl, &record, true).await, Finish::Release)
            }
            Ok(Intent::CaptionOwner(other)) => {
                return self.caption_taken(key, dl, &other, attempts).await
            }
            Ok(Intent::Refused) => {
                // Another run's attempt, a schedule or a cancel got to the draft first (for
                // an attempt: possible only if this run's claim was lost, e.g. Redis restarted
                // empty): the conditional intent is the second lock.
                tracing::error!("the draft is no longer in a state this run may take; not posting");
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    "another run is posting this draft or changed it first (its state is stored); nothing was posted",
                )
                .retryable(true);
                return (outcome, Finish::Release);
            }
            Err(e) => {
                let why = format!(
                    "could not record the attempt before posting ({e}); nothing was posted"
                );
                return (failed(key, true, why), Finish::Release);
            }
        }
        progress.set(Stage::Intent);
        if let Some(why) = fault("after-intent").await {
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        // Pacing: the slot is taken last, so the create follows it within moments.
        if let Err(delayed) = self.pace(req, dl).await {
            return (delayed, Finish::Release);
        }
        // The create gets its whole budget or is not sent: a sliver would only turn a clean
        // failure into an `unknown`. Checked after the intent and pacing writes, which took
        // time too (a slot taken for nothing only delays the network's next post).
        if dl.for_work(self.budget) != Some(self.budget) {
            let why = format!(
                "not enough time left in this run to give the create its full {:?}; retry",
                self.budget
            );
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        self.create(
            req,
            dl,
            &post,
            &media,
            pending.caption_hash,
            Sending {
                reconciling: None,
                stamped_at: pending.at,
            },
            progress,
        )
        .await
    }

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
        let on = self.network.label();
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
        // A re-send that was refused or never left: nothing new was posted, and the earlier
        // attempt may still be there. Counted as an attempt; a refusal is not tried again.
        if let Some(draft) = reconciling {
            // The kept request can no longer post, and did not: a new attempt is needed.
            if let Ok(Err(PostError::Gone { message, .. })) = &answer {
                let why = format!(
                    "the earlier attempt did not post on {on} and no longer can ({message})"
                );
                return self.not_posted(req, dl, draft, &req.run_id, why).await;
            }
            let failed = match &answer {
                Ok(Err(e)) if !e.may_exist() && !matches!(e, PostError::AlreadyExists { .. }) => {
                    Some((
                        format!("the re-send to check the earlier attempt on {on} failed ({e})"),
                        e.is_transient(),
                    ))
                }
                Err(BudgetError::NoTimeLeft) => {
                    Some((format!("no time left to check with {on}"), true))
                }
                _ => None,
            };
            if let Some((why, again)) = failed {
                return self
                    .unsettled(req, dl, draft, &req.run_id, why, again)
                    .await;
            }
        }
        match answer {
            Ok(Ok(created)) => {
                progress.created(created.id.clone());
                if let Some(why) = fault("after-create-post").await {
                    return (
                        Outcome::new(key, OutcomeKind::PostedNotRecorded, why)
                            .with_urn(created.id.clone()),
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
                    .with_urn(existing.id);
                (outcome, Finish::Release)
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

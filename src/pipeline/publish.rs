//! Publishing one draft: cover image, upload, the durable intent, then create-post once
//! (DESIGN.md rules 4, 7 and 8). Safe calls are retried; create-post never is.

use super::*;

/// Which drafts this run's intent may take: those in one of `from`, and, when `replaces` names
/// a run, only while that run's attempt is the kept one.
pub(super) struct Takes<'a> {
    pub from: &'a [DraftStatus],
    pub replaces: Option<&'a str>,
}

impl Pipeline {
    /// Image → initializeUpload → upload → intent → create-post → record.
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
        let t = self.settings.timeouts;
        let chars = little_text::char_count(&full_text(content));
        if chars == 0 || chars > MAX_CHARS {
            let why =
                format!("the caption has {chars} characters; LinkedIn takes 1 to {MAX_CHARS}");
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        let image = match self
            .with_retries(
                dl,
                t.image,
                || self.images.fetch(&content.image),
                ImageError::is_transient,
                |_| None,
            )
            .await
        {
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
        if let Some(why) = fault("after-image").await {
            return (failed(key, true, why), Finish::Release);
        }

        let target = match self
            .with_retries(
                dl,
                t.linkedin,
                || self.publisher.initialize_upload(),
                PublishError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(target) => target,
            Err(gave) => {
                return self
                    .fail_publish(key, dl, "initializeUpload", gave, attempts)
                    .await
            }
        };
        if let Some(why) = fault("after-initialize-upload").await {
            return (failed(key, true, why), Finish::Release);
        }

        let uploaded = self
            .with_retries(
                dl,
                t.linkedin,
                || {
                    self.publisher
                        .upload_image(&target, image.bytes.clone(), image.content_type)
                },
                PublishError::is_transient,
                rate_limit_wait,
            )
            .await;
        if let Err(gave) = uploaded {
            return self
                .fail_publish(key, dl, "image upload", gave, attempts)
                .await;
        }
        if let Some(why) = fault("after-upload").await {
            return (failed(key, true, why), Finish::Release);
        }

        let post = NewPost {
            commentary: little_text::escape(&full_text(content)),
            image_urn: target.image_urn,
            alt: content.alt.clone(),
        };
        // The intent goes to durable storage before the request leaves: if this process dies
        // after sending, the draft says `unknown` and no later run re-posts blindly (rule 7).
        let pending = PendingPost {
            commentary: post.commentary.clone(),
            image_urn: post.image_urn.clone(),
            alt: post.alt.clone(),
            at: now_s(),
            run: req.run_id.clone(),
            caption_hash: Some(caption_hash(&full_text(content))),
            last_sent_at: None,
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
        let intent = dl
            .work(
                t.dynamodb,
                self.records
                    .update_draft(key, &intent, intent_from, now_s()),
            )
            .await;
        match flatten_value(intent) {
            Ok(true) => {}
            Ok(false) => {
                // Another run wrote its intent first (possible only if this run's claim was
                // lost, e.g. Redis restarted empty): the conditional intent is the second lock.
                tracing::error!("another run's intent is on the draft; not posting");
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    "another run is posting this draft (its attempt is recorded); nothing was posted",
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
        // create-post gets its whole budget or is not sent: a sliver would only turn a clean
        // failure into an `unknown`. Checked after the intent write, which took time too.
        if dl.for_work(t.linkedin) != Some(t.linkedin) {
            let why = format!(
                "not enough time left in this run to give create-post its full {:?}; retry",
                t.linkedin
            );
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        self.create(req, dl, &post, pending.caption_hash, false, progress)
            .await
    }

    /// Sends create-post once and classifies the answer. `reconciling`: this is the identical
    /// re-send after an unknown outcome.
    pub(super) async fn create(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        post: &NewPost,
        caption_hash: Option<String>,
        reconciling: bool,
        progress: &Progress,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let t = self.settings.timeouts;
        if let Some(why) = fault("before-create-post").await {
            return (
                self.fail_after_intent(req, dl, why, true).await,
                Finish::Release,
            );
        }
        progress.set(Stage::Sent);
        let answer = dl.work(t.linkedin, self.publisher.create_post(post)).await;
        match answer {
            Ok(Ok(urn)) => {
                progress.created(urn.clone());
                if let Some(why) = fault("after-create-post").await {
                    return (
                        Outcome::new(key, OutcomeKind::PostedNotRecorded, why)
                            .with_urn(urn.clone()),
                        Finish::Keep(urn.clone()),
                    );
                }
                self.record(
                    req,
                    dl,
                    urn,
                    caption_hash.clone(),
                    OutcomeKind::Posted,
                    req.source.as_str(),
                )
                .await
            }
            // The earlier attempt (reconciling), or the post the owner suspected was missing
            // (Post anyway), is on LinkedIn: record it, so no later Retry posts it again.
            Ok(Err(PublishError::Duplicate { urn }))
                if reconciling || req.action == Action::Force =>
            {
                progress.created(Some(urn.clone()));
                let source = if reconciling { "reconcile" } else { "force" };
                self.record(
                    req,
                    dl,
                    Some(urn),
                    caption_hash.clone(),
                    OutcomeKind::AlreadyPosted,
                    source,
                )
                .await
            }
            Ok(Err(PublishError::Duplicate { urn })) => {
                let why = format!(
                    "LinkedIn already has this exact text as {urn} (posted by hand, or under another key); nothing new was posted. Change the caption to post it again"
                );
                let outcome = self
                    .fail_after_intent(req, dl, why, false)
                    .await
                    .with_urn(Some(urn));
                (outcome, Finish::Release)
            }
            Ok(Err(e)) if e.is_ambiguous() => (
                self.ambiguous(key, dl, e.to_string()).await,
                Finish::Release,
            ),
            Err(BudgetError::TimedOut(b)) => {
                let why = format!("LinkedIn did not answer create-post within {b:?}");
                (self.ambiguous(key, dl, why).await, Finish::Release)
            }
            Ok(Err(e)) if reconciling => {
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    format!("could not check with LinkedIn ({e}); the earlier attempt may be on LinkedIn. Retry later, or check and tell me"),
                )
                .retryable(e.is_transient());
                (outcome, Finish::Release)
            }
            Err(BudgetError::NoTimeLeft) if reconciling => (
                Outcome::new(
                    key,
                    OutcomeKind::Unknown,
                    "no time left to check with LinkedIn; retry",
                )
                .retryable(true),
                Finish::Release,
            ),
            Ok(Err(e)) => {
                let retryable = e.is_transient();
                (
                    self.fail_after_intent(req, dl, e.to_string(), retryable)
                        .await,
                    Finish::Release,
                )
            }
            Err(BudgetError::NoTimeLeft) => (
                self.fail_after_intent(
                    req,
                    dl,
                    "no time left to send create-post; nothing was posted".into(),
                    true,
                )
                .await,
                Finish::Release,
            ),
        }
    }
}

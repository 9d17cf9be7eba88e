//! Publishing one draft: cover image, upload, the durable intent, then create-post once
//! (rules 4, 7 and 8 in `mod.rs`). Safe calls are retried; create-post never is.

use super::*;

/// Which drafts this run's intent may take: those in one of `from`, and, when `replaces` names
/// a run, only while that run's attempt is the kept one.
pub(super) struct Takes<'a> {
    pub from: &'a [DraftStatus],
    pub replaces: Option<&'a str>,
}

/// What the intent keeps as the image's name: the first network's image URN (as before
/// targets), or the adapter's media reference as compact JSON.
fn media_name(media: &MediaRef) -> String {
    match media.0.get("image").and_then(|v| v.as_str()) {
        Some(urn) => urn.to_owned(),
        None => media.0.to_string(),
    }
}

/// The create request an intent keeps. Intents written before targets existed are the first
/// network's and keep its fields instead.
pub(crate) fn kept_request(pending: &PendingPost) -> PreparedPost {
    pending.request.clone().unwrap_or_else(|| PreparedPost {
        body: serde_json::json!({
            "commentary": pending.text,
            "image": pending.media_id,
            "alt": pending.alt,
        }),
        text: pending.text.clone(),
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
        if let Some(why) = self
            .adapter
            .capabilities()
            .tags
            .refusal(&text, self.network.label())
        {
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        // A network that fetches the image itself from its public URL cannot take a local file
        // (the CLI's drafts: an absolute path, as the image module reads them) unless covers
        // are hosted: refused before any request, for this target only.
        if self.adapter.capabilities().fetches_image
            && self.covers.is_none()
            && content.image.starts_with('/')
        {
            let on = self.network.label();
            let why = format!(
                "{on} fetches the image itself from its public URL, and this draft's cover is a local file, so it cannot go to {on}: give the draft an https image URL"
            );
            return self.fail(key, dl, why, false, attempts, None).await;
        }

        // A URL the policy refuses costs no call to anyone.
        if let Err(e) = self.images.vet_source(&content.image) {
            return self
                .fail(key, dl, e.to_string(), false, attempts, None)
                .await;
        }
        if let Some(why) = fault_for("before-cover", key).await {
            return (failed(key, true, why), Finish::Release);
        }
        // The cover (fetched, checked, and rendered for this network where its limits need it;
        // hosted, for a network that fetches it itself, when covers are: before any intent, so
        // a host that fails posts nothing) and the part of the upload that needs no image (an
        // upload's initialization) do not depend on each other: both go out at once.
        let cover = async {
            let cover = self.cover(dl, &content.image).await?;
            let from = self.fetched_from(dl, &cover, &content.image).await?;
            Ok::<_, Gave<ImageError>>((cover, from))
        };
        let begin = self.with_retries(
            dl,
            self.budget,
            || self.adapter.begin_upload(),
            PostError::is_transient,
            rate_limit_wait,
        );
        let (cover, begun) = tokio::join!(cover, begin);
        let (cover, fetched_from) = match cover {
            Ok(cover) => cover,
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
                    .fail_publish(req, dl, "image upload", gave, attempts)
                    .await
            }
        });
        if let Some(why) = fault("after-image").await {
            return (failed(key, true, why), Finish::Release);
        }
        let media = Media {
            bytes: cover.bytes.clone(),
            content_type: cover.format.mime(),
            alt: content.alt.clone(),
        };
        tracing::info!(image = %cover.sent().describe(), "the cover this network gets");
        let (mut outcome, finish) = self
            .send(
                req,
                dl,
                content,
                attempts,
                progress,
                takes,
                (&media, &fetched_from),
                begun,
                &text,
            )
            .await;
        outcome.image = Some(cover.sent());
        (outcome, finish)
    }

    /// Upload → intent → create → record, with the cover this network gets.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        content: &DraftContent,
        attempts: u32,
        progress: &Progress,
        takes: Takes<'_>,
        (media, fetched_from): (&Media, &str),
        begun: Mutex<Option<MediaRef>>,
        text: &str,
    ) -> (Outcome, Finish) {
        let (uploaded, post) = match self
            .upload_and_stage(req, dl, fetched_from, attempts, media, begun, text)
            .await
        {
            Ok(staged) => staged,
            Err(done) => return done,
        };
        let pending = match self
            .take_the_intent(req, dl, content, attempts, takes, &uploaded, &post)
            .await
        {
            Ok(pending) => pending,
            Err(done) => return done,
        };
        progress.set(Stage::Intent);
        progress.attempt(&pending);
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
            media,
            pending.caption_hash,
            super::create::Sending {
                reconciling: None,
                stamped_at: pending.at,
            },
            progress,
        )
        .await
    }

    /// The cover uploaded (the first try uses the upload begun while the image was fetched)
    /// and the post prepared and staged (`fetched_from`: where a network that fetches the
    /// image itself gets it): everything the intent keeps.
    #[allow(clippy::too_many_arguments)]
    async fn upload_and_stage(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        fetched_from: &str,
        attempts: u32,
        media: &Media,
        begun: Mutex<Option<MediaRef>>,
        text: &str,
    ) -> Result<(MediaRef, PreparedPost), (Outcome, Finish)> {
        let key = &req.key;
        let uploaded = match self
            .with_retries(
                dl,
                self.budget,
                // The first try uses the upload begun above; a retry starts afresh.
                || async {
                    let first = begun.lock().unwrap_or_else(|p| p.into_inner()).take();
                    match first {
                        Some(begun) => self.adapter.upload_begun(media, &begun).await,
                        None => self.adapter.upload(media).await,
                    }
                },
                PostError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(uploaded) => uploaded,
            Err(gave) => {
                return Err(self
                    .fail_publish(req, dl, "image upload", gave, attempts)
                    .await)
            }
        };
        if let Some(why) = fault("after-upload").await {
            return Err((failed(key, true, why), Finish::Release));
        }

        let post = self.adapter.prepare(text, &uploaded, &key.to_string());
        // What the network makes before the create names it (a container, for a network that stages one): made before
        // the intent, so that the intent keeps it; safe to repeat, since only the request it
        // answers (the one kept) ever uses it.
        let post = match self
            .with_retries(
                dl,
                self.budget,
                || self.adapter.stage(&post, fetched_from),
                PostError::is_transient,
                rate_limit_wait,
            )
            .await
        {
            Ok(post) => post,
            Err(gave) => {
                return Err(self
                    .fail_publish(req, dl, "preparing the post", gave, attempts)
                    .await)
            }
        };
        Ok((uploaded, post))
    }

    /// The intent written, with the deciding checks riding on it (rule 2): `Ok` the attempt
    /// as kept; `Err` what this run answers instead (posted already, the caption another
    /// key's, another run first, the store failed).
    #[allow(clippy::too_many_arguments)]
    async fn take_the_intent(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        content: &DraftContent,
        attempts: u32,
        takes: Takes<'_>,
        uploaded: &MediaRef,
        post: &PreparedPost,
    ) -> Result<PendingPost, (Outcome, Finish)> {
        let (intent_from, replaces) = (takes.from, takes.replaces);
        let key = &req.key;
        let t = self.settings.timeouts;
        // The intent goes to durable storage before the request leaves: if this process dies
        // after sending, the draft says `unknown` and no later run re-posts blindly (rule 7).
        let pending = PendingPost {
            text: post.text.clone(),
            media_id: media_name(uploaded),
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
                t.records,
                self.records
                    .take_intent(key, &intent, intent_from, caption.flatten(), now_s()),
            )
            .await;
        match flatten_value(intent) {
            Ok(Intent::Taken) => {}
            Ok(Intent::Recorded(record)) => {
                return Err((self.already(key, dl, &record, true).await, Finish::Release))
            }
            Ok(Intent::CaptionOwner(other)) => {
                return Err(self.caption_taken(key, dl, &other, attempts).await)
            }
            Ok(Intent::Refused) => {
                // Another run's attempt, a schedule or a cancel got to the draft first (for
                // an attempt: possible only if this run's claim was lost, e.g. the claim store restarted
                // empty): the conditional intent is the second lock.
                tracing::error!("the draft is no longer in a state this run may take; not posting");
                let outcome = Outcome::new(
                    key,
                    OutcomeKind::BeingPosted,
                    "another run is posting this draft or changed it first (its state is stored); nothing was posted",
                )
                .retryable(true);
                return Err((outcome, Finish::Release));
            }
            Err(e) => {
                let why = format!(
                    "could not record the attempt before posting ({e}); nothing was posted"
                );
                return Err((failed(key, true, why), Finish::Release));
            }
        }
        Ok(pending)
    }
}

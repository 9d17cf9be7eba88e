//! Targets (README "Targets"): one run posts every target of the draft that has no record,
//! concurrently, each in its own [`Lane`] under its own claim and budget, and answers one
//! outcome that carries each target's. Text is checked per target, counted its network's way.

use futures_util::future::join_all;

use super::*;

/// A caption too long (or empty) for one target: a 400 naming the target and its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TextError {
    /// The input field to name: `caption`, or `captions.<network>` when the draft carried
    /// that network's own caption.
    pub field: String,
    pub network: Network,
    pub message: String,
}

/// What one run does, from [`Pipeline::plan`].
struct Plan {
    /// The targets to run.
    selected: Vec<Network>,
    /// Every target of the draft, for the report.
    all: Vec<Network>,
    /// Targets found recorded: already answered.
    recorded: Vec<Outcome>,
    /// Targets whose state could not be read: each a failed, retryable part (nothing run).
    unread: Vec<Outcome>,
    /// The drafts read on the way (a run without content), for their runs.
    seen: BTreeMap<Network, Draft>,
}

impl PostRequest {
    /// This request for one target: its per-target key, and the content that target posts.
    pub(super) fn for_target(&self, network: Network) -> PostRequest {
        PostRequest {
            key: self.key.on(network),
            content: self.content.as_ref().map(|c| c.for_target(network)),
            action: self.action,
            source: self.source,
            run_id: self.run_id.clone(),
            reply_to: self.reply_to,
            targets: vec![network],
            publish_at: self.publish_at,
        }
    }
}

impl Pipeline {
    /// The targets a draft sent with `requested` (empty: `POSTONCE_TARGETS`) goes to, in
    /// order, without repeats.
    pub fn targets_for(&self, requested: &[Network]) -> Vec<Network> {
        let wanted = if requested.is_empty() {
            &self.default_targets
        } else {
            requested
        };
        let mut out: Vec<Network> = Vec::new();
        for n in wanted {
            if !out.contains(n) {
                out.push(*n);
            }
        }
        out
    }

    /// Checks the draft's text for every target, counted each network's way (X weighted,
    /// the channel in UTF-16 units, LinkedIn in characters), before anything is stored.
    /// Nothing is ever truncated.
    ///
    /// # Errors
    /// The first target the text does not fit, or a target this version cannot post to.
    pub fn check_text(&self, content: &DraftContent, targets: &[Network]) -> Result<(), TextError> {
        for n in content.captions.keys() {
            if !targets.contains(n) {
                return Err(TextError {
                    field: format!("captions.{}", n.as_str()),
                    network: *n,
                    message: format!(
                        "is a caption for {}, which is not a target of this draft (targets: {})",
                        n.as_str(),
                        names(targets)
                    ),
                });
            }
        }
        for n in targets {
            let field = if content.captions.contains_key(n) {
                format!("captions.{}", n.as_str())
            } else {
                "caption".to_owned()
            };
            let Some(lane) = self.lane(*n) else {
                return Err(TextError {
                    field: "targets".into(),
                    network: *n,
                    message: format!(
                        "{} is not supported by this version; targets: {}",
                        n.as_str(),
                        names(&self.lanes.keys().copied().collect::<Vec<_>>())
                    ),
                });
            };
            let text = full_text(&content.for_target(*n));
            let len = lane.adapter.text_len(&text);
            let max = lane.adapter.max_text();
            if text.trim().is_empty() || len > max {
                return Err(TextError {
                    field,
                    network: *n,
                    message: format!(
                        "is too long for {}: {len} counted {}'s way (with the link, if appended); {} takes 1 to {max}. Shorten it, or give {} its own caption",
                        n.as_str(),
                        n.label(),
                        n.label(),
                        n.as_str()
                    ),
                });
            }
            if let Some(why) = lane.adapter.capabilities().tags.refusal(&text, n.label()) {
                return Err(TextError {
                    field,
                    network: *n,
                    message: format!("is refused by {}: {why}", n.as_str()),
                });
            }
        }
        Ok(())
    }

    /// The targets this run posts, every target of the draft (for the report), and the
    /// outcomes of targets found recorded on the way. A draft sent with the request goes to
    /// the targets it names; a run without one (a button, the sweeper, a retry) finds the
    /// targets the draft has state for. A record never expires, so a target found recorded is
    /// answered from it at once, without a claim.
    ///
    /// The sweeper's run names the one target it runs (each target of a draft has its own entry
    /// in the due index, and its own run): it reads nothing here. Its run reads that target's
    /// record and draft once, under the claim, and takes the intent on their strength, so a due
    /// draft costs the sweep what a new draft costs a trigger (in the table store: one
    /// BatchGetItem, then the intent and the record, one TransactWriteItems each). Reading every lane first
    /// would cost a request per lane and decide nothing the read under the claim does not; its
    /// report shows the target it ran.
    async fn plan(&self, req: &PostRequest, dl: &Deadline) -> Plan {
        let swept = req.source == Source::Sweep && !req.targets.is_empty();
        if req.content.is_some() || swept {
            let selected = self.targets_for(&req.targets);
            return Plan {
                all: selected.clone(),
                selected,
                recorded: Vec::new(),
                unread: Vec::new(),
                seen: BTreeMap::new(),
            };
        }
        let t = self.settings.timeouts;
        let probes = self.lanes.iter().map(|(n, lane)| {
            let key = req.key.on(*n);
            async move {
                let loaded = match fault("plan-load").await {
                    Some(why) => Err(why),
                    None => flatten_value(dl.work(t.records, lane.records.load(&key, None)).await),
                };
                let snapshot = match loaded {
                    Ok(s) => s,
                    Err(e) => {
                        // A claim kept for a post whose record could not be written says the
                        // target is the draft's: its run repairs the record (or says so).
                        let kept = dl.work(t.claims, lane.claims.inspect(&key)).await;
                        if matches!(kept, Ok(Ok(Some((ClaimValue::Posted(_), _))))) {
                            return (*n, true, None, None);
                        }
                        // A dry-run network nobody targets by default is not worth a line.
                        if lane.adapter.is_dry_run() && !self.default_targets.contains(n) {
                            return (*n, false, None, None);
                        }
                        let why = format!(
                            "could not read where it stands ({e}); nothing was done. Retry"
                        );
                        return (*n, false, Some(failed(&key, true, why)), None);
                    }
                };
                let has = snapshot.record.is_some() || snapshot.draft.is_some();
                // A record is final: answered from it, with no claim. (A claim kept on purpose
                // for this post, if its record write seemed to fail yet landed, is met by no
                // later run, since each finds the record first; its TTL ends it.)
                let done = match &snapshot.record {
                    Some(r) if lane.counts(r) => {
                        let mark = snapshot
                            .draft
                            .as_ref()
                            .is_some_and(|d| d.status != DraftStatus::Posted);
                        Some(lane.already(&key, dl, r, mark).await)
                    }
                    _ => None,
                };
                (*n, has, done, snapshot.draft)
            }
        });
        let mut known: Vec<Network> = Vec::new();
        let mut recorded: Vec<Outcome> = Vec::new();
        let mut unread: Vec<Outcome> = Vec::new();
        let mut seen = BTreeMap::new();
        for (n, has, done, draft) in join_all(probes).await {
            if has {
                known.push(n);
            }
            match done {
                Some(outcome) if outcome.outcome == OutcomeKind::Failed => unread.push(outcome),
                Some(outcome) => recorded.push(outcome),
                None => {
                    if let Some(d) = draft {
                        seen.insert(n, d);
                    }
                }
            }
        }
        // The defaults only for a draft that is nowhere: a target whose state could not be
        // read may be the draft's, so it is never replaced by them.
        let selected = if !req.targets.is_empty() {
            self.targets_for(&req.targets)
        } else if known.is_empty() && unread.is_empty() {
            self.targets_for(&[])
        } else {
            known.clone()
        };
        // A selected target that could not be read is run anyway (its run reads it again under
        // its claim); any other is answered as unread.
        unread.retain(|o| !selected.contains(&o.network));
        let mut all = selected.clone();
        all.extend(known.iter().filter(|n| !selected.contains(n)));
        all.extend(unread.iter().map(|o| o.network));
        all.sort();
        let selected = selected
            .into_iter()
            .filter(|n| !recorded.iter().any(|o| o.network == *n))
            .collect();
        Plan {
            selected,
            all,
            recorded,
            unread,
            seen,
        }
    }

    /// Runs the pipeline for `req` within `dl`: every selected target concurrently, each in
    /// its lane; reports the combined outcome once, and returns it.
    #[tracing::instrument(name = "run", skip_all, fields(key = %req.key, run = %req.run_id, source = req.source.as_str()))]
    pub async fn run(&self, req: PostRequest, dl: Deadline) -> Outcome {
        let base = req.key.base();
        let req = PostRequest { key: base, ..req };
        if let (Some(_), Some(at)) = (&req.content, req.publish_at) {
            if at > now_s() {
                return self.schedule(&req, at, &dl).await;
            }
        }
        let Plan {
            selected,
            all,
            recorded,
            unread,
            mut seen,
        } = self.plan(&req, &dl).await;
        // One target: its line would repeat the run's (`run ended` below).
        let announce = all.len() > 1;
        let runs = selected.iter().map(|n| {
            let one = req.for_target(*n);
            let seen = seen.remove(n);
            async move {
                match self.lane(*n) {
                    // A panic in one target's lane must not cancel the others mid-flight (a
                    // lane dropped after its create leaves its target unknown, or its claim
                    // kept): it ends that lane only, answered from its stored state.
                    Some(lane) => match AssertUnwindSafe(lane.run(&one, dl, seen, announce)).catch_unwind().await {
                        Ok(outcome) => outcome,
                        Err(panic) => {
                            let why = panic_text(panic.as_ref());
                            tracing::error!(target = %one.key, panic = %why, "this target's run panicked; the other targets go on");
                            let mut outcome = lane.as_it_stands(&one.key, &dl).await;
                            outcome.detail = format!("the run failed ({why}); {}", outcome.detail);
                            outcome
                        }
                    },
                    None => failed(
                        &one.key,
                        false,
                        format!(
                            "{} is not supported by this version; nothing was posted",
                            n.as_str()
                        ),
                    ),
                }
            }
        });
        let mut parts = join_all(runs).await;
        parts.extend(recorded);
        parts.extend(unread);
        let untouched: Vec<Network> = all
            .iter()
            .copied()
            .filter(|n| !selected.contains(n) && !parts.iter().any(|p| p.network == *n))
            .collect();
        for n in untouched {
            if let Some(lane) = self.lane(n) {
                parts.push(lane.as_it_stands(&req.key.on(n), &dl).await);
            }
        }
        parts.sort_by_key(|p| p.network);
        // The sweeper's own "another run is posting" is noise: the run holding the claim
        // reports. Every trigger's outcome is reported, as the outcomes table says.
        // Nor is a target the sweep found settled already (recorded by another run, cancelled,
        // its time not yet come): nothing changed.
        // (A sweep runs one target at a time: the one it names.)
        let quiet = req.source == Source::Sweep
            && parts.iter().any(|p| req.targets.contains(&p.network))
            && parts
                .iter()
                .filter(|p| req.targets.contains(&p.network))
                .all(|p| p.outcome == OutcomeKind::BeingPosted || p.settled);
        let outcome = Outcome::combine(&req.key, parts);
        tracing::info!(outcome = outcome.outcome.as_str(), id = outcome.post_id.as_deref(), retryable = outcome.retryable, detail = %outcome.detail, "run ended");
        if !quiet && self.report(&req, &outcome, &dl).await {
            self.told_of_refusals(&req, &outcome, &dl).await;
        }
        outcome
    }
}

impl Lane {
    /// Where a target this run did not touch stands, from its stored state (the report shows
    /// every target of the draft).
    pub(super) async fn as_it_stands(&self, key: &PostKey, dl: &Deadline) -> Outcome {
        let t = self.settings.timeouts;
        let mut outcome =
            match flatten_value(dl.finish(t.records, self.records.load(key, None)).await) {
                Err(e) => failed(key, true, format!("could not read where it stands: {e}")),
                Ok(Snapshot {
                    record: Some(r), ..
                }) => {
                    let mut o = Outcome::new(
                        key,
                        OutcomeKind::AlreadyPosted,
                        format!(
                            "recorded at {} by {}",
                            crate::record::rfc3339(r.posted_at),
                            r.source
                        ),
                    )
                    .with_post_id(r.post_id);
                    o.url = r.url;
                    o.cid = r.cid;
                    o
                }
                Ok(Snapshot { draft: None, .. }) => failed(key, true, "not posted yet"),
                Ok(Snapshot { draft: Some(d), .. }) => {
                    let why = d.last_error.clone().unwrap_or_default();
                    match d.status {
                        DraftStatus::Unknown => {
                            Outcome::new(key, OutcomeKind::Unknown, why).retryable(d.retryable)
                        }
                        DraftStatus::Failed => failed(key, d.retryable, why),
                        DraftStatus::NeedsReview => failed(
                            key,
                            true,
                            format!("gave up after {} attempts: {why}", d.attempts),
                        ),
                        DraftStatus::New => failed(key, true, "not posted yet"),
                        DraftStatus::Posted => {
                            Outcome::new(key, OutcomeKind::AlreadyPosted, "recorded")
                        }
                        DraftStatus::Scheduled => {
                            let at = d.goes_at().unwrap_or(0);
                            let why = d
                                .last_error
                                .clone()
                                .unwrap_or_else(|| "waits for its time".into());
                            schedule::scheduled_outcome(key, at, why)
                        }
                        DraftStatus::Cancelled => schedule::cancelled_outcome(key),
                    }
                }
            };
        outcome.dry_run =
            self.adapter.is_dry_run() && outcome.post_id.as_deref().is_some_and(is_dry_run_urn);
        outcome
    }
}

fn names(targets: &[Network]) -> String {
    targets
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

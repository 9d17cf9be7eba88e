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
            urn: post.id,
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
            let mut o = o.with_urn(urn.clone());
            o.url = url.clone();
            o.cid = cid.clone();
            o
        };
        let written = dl
            .finish(
                self.settings.timeouts.dynamodb,
                self.records.put_posted(&record, now, expires),
            )
            .await;
        match flatten_value(written) {
            Ok(PutPosted::Created) => {
                progress.set(Stage::Recorded(urn.clone(), kind));
                if let Some(why) = fault("after-record").await {
                    return (with(Outcome::new(key, kind, why)), Finish::Release);
                }
                let detail = match (kind, source, &urn) {
                    (OutcomeKind::AlreadyPosted, "reconcile", None) => format!("{on} refused the identical re-send as a duplicate, so the earlier attempt is there; {on} does not say which post it is, so it is recorded without a link"),
                    (OutcomeKind::AlreadyPosted, "lookup", _) => format!("found the earlier attempt among the account's recent posts on {on}; recorded it, nothing was sent"),
                    (OutcomeKind::AlreadyPosted, "reconcile", Some(_)) => format!("{on}'s duplicate answer showed the earlier attempt is on {on}; recorded it"),
                    (OutcomeKind::AlreadyPosted, _, None) => format!("{on} says it already has this post and does not name it; recorded without a link"),
                    (OutcomeKind::AlreadyPosted, _, Some(_)) => format!("{on} already has this post; recorded it"),
                    _ => "posted and recorded".to_owned(),
                };
                (with(Outcome::new(key, kind, detail)), Finish::Release)
            }
            Ok(PutPosted::Exists(other))
                if other.run == req.run_id || (urn.is_some() && other.urn == urn) =>
            {
                progress.set(Stage::Recorded(urn.clone(), kind));
                (
                    with(Outcome::new(key, kind, "posted and recorded")),
                    Finish::Release,
                )
            }
            Ok(PutPosted::Exists(other)) => {
                tracing::error!(
                    this_urn = ?urn,
                    recorded_urn = ?other.urn,
                    recorded_by = %other.run,
                    "DUPLICATE POST: a record appeared for this key while this run held the claim"
                );
                let detail = format!(
                    "duplicate: {key} was already recorded as {} by {}; this run also created {}. Delete one of them on {on}",
                    other.urn.as_deref().unwrap_or("(no URN)"),
                    other.run,
                    urn.as_deref().unwrap_or("(no URN)")
                );
                (
                    with(Outcome::new(key, OutcomeKind::Posted, detail)),
                    Finish::Release,
                )
            }
            Err(e) => {
                tracing::error!(urn = ?urn, error = %e, "the network accepted the post but the record write failed; keeping the claim");
                let detail = format!(
                    "{on} accepted the post but the record could not be written ({e}). The claim is kept with its id so no run posts it again; Retry repairs the record"
                );
                (
                    with(Outcome::new(key, OutcomeKind::PostedNotRecorded, detail)),
                    Finish::Keep(urn),
                )
            }
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
        let (outcome, _) = self
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
                    .with_urn(outcome.urn),
                Finish::Release,
            ),
        }
    }
}

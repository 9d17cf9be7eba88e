//! The durable record (DESIGN.md rule 3): written only if absent; what happens to the claim
//! depends on whether the write succeeded.

use super::*;

impl Pipeline {
    /// The record this run writes, the time, and when the done draft may expire.
    pub(super) fn new_record(
        &self,
        req: &PostRequest,
        urn: Option<String>,
        source: &str,
        caption_hash: Option<String>,
    ) -> (PostedRecord, i64, i64) {
        let now = now_s();
        let record = PostedRecord {
            key: req.key.to_string(),
            urn,
            posted_at: now,
            run: req.run_id.clone(),
            source: source.to_owned(),
            caption_hash,
        };
        let expires = now + i64::try_from(self.settings.draft_expiry.as_secs()).unwrap_or(0);
        (record, now, expires)
    }

    /// Writes the durable record (conditional) and decides what happens to the claim.
    pub(super) async fn record(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        urn: Option<String>,
        caption_hash: Option<String>,
        kind: OutcomeKind,
        source: &str,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let (record, now, expires) = self.new_record(req, urn.clone(), source, caption_hash);
        let written = dl
            .finish(
                self.settings.timeouts.dynamodb,
                self.records.put_posted(&record, now, expires),
            )
            .await;
        match flatten_value(written) {
            Ok(PutPosted::Created) => {
                if let Some(why) = fault("after-record").await {
                    return (
                        Outcome::new(key, kind, why).with_urn(urn.clone()),
                        Finish::Release,
                    );
                }
                let detail = match kind {
                    OutcomeKind::AlreadyPosted => "LinkedIn's duplicate answer showed the earlier attempt is on LinkedIn; recorded it",
                    _ => "posted and recorded",
                };
                (
                    Outcome::new(key, kind, detail).with_urn(urn),
                    Finish::Release,
                )
            }
            Ok(PutPosted::Exists(other))
                if other.run == req.run_id || (urn.is_some() && other.urn == urn) =>
            {
                (
                    Outcome::new(key, kind, "posted and recorded").with_urn(urn),
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
                    "duplicate: {key} was already recorded as {} by {}; this run also created {}. Delete one of them on LinkedIn",
                    other.urn.as_deref().unwrap_or("(no URN)"),
                    other.run,
                    urn.as_deref().unwrap_or("(no URN)")
                );
                (
                    Outcome::new(key, OutcomeKind::Posted, detail).with_urn(urn),
                    Finish::Release,
                )
            }
            Err(e) => {
                tracing::error!(urn = ?urn, error = %e, "LinkedIn accepted the post but the record write failed; keeping the claim");
                let detail = format!(
                    "LinkedIn accepted the post but the record could not be written ({e}). The claim is kept with the URN so no run posts it again; Retry repairs the record"
                );
                (
                    Outcome::new(key, OutcomeKind::PostedNotRecorded, detail).with_urn(urn.clone()),
                    Finish::Keep(urn),
                )
            }
        }
    }

    /// `done:<key>`: the owner says it is on LinkedIn.
    pub(super) async fn confirm_by_owner(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        draft: Option<&Draft>,
    ) -> (Outcome, Finish) {
        let key = &req.key;
        let hash = draft
            .and_then(|d| d.content.as_ref())
            .map(|c| caption_hash(&full_text(c)));
        let (outcome, _) = self
            .record(req, dl, None, hash, OutcomeKind::AlreadyPosted, "owner")
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

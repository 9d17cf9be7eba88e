//! Repair (rule 6 in `mod.rs`): a claim that holds a post id means the post exists but its record
//! may not; the record is written from it, then the claim is dropped.

use super::*;

impl Lane {
    /// A claim that holds a post id: write the record from it, then drop the claim.
    pub(super) async fn repair(
        &self,
        req: &PostRequest,
        dl: &Deadline,
        post_id: String,
    ) -> Outcome {
        let key = &req.key;
        let t = self.settings.timeouts;
        let post_id = (!post_id.is_empty()).then_some(post_id);
        let post = Created {
            id: post_id.clone(),
            url: None,
            cid: None,
        };
        let (record, now, expires) = self.new_record(req, post, "repair", None);
        match flatten_value(dl.work(t.records, self.records.put_posted(&record, now, expires)).await) {
            Ok(written) => {
                let value = ClaimValue::Posted(post_id.clone().unwrap_or_default()).raw();
                if let Err(e) = flatten_value(dl.finish(t.claims, self.claims.release(key, &value)).await) {
                    tracing::warn!(error = %e, "record repaired; the kept claim stays until its TTL");
                }
                let detail = match written {
                    PutPosted::Created => "the record was missing; repaired it from the kept claim",
                    PutPosted::Exists(other) if post_id.is_some() && other.post_id.is_some() && other.post_id != post_id => {
                        tracing::error!(
                            kept_post_id = post_id.as_deref(),
                            recorded_post_id = other.post_id.as_deref(),
                            "DUPLICATE POST: the kept claim and the record name different posts"
                        );
                        "recorded, but under a different post than the kept claim: one of them is a duplicate"
                    }
                    PutPosted::Exists(_) => "recorded",
                };
                tracing::warn!(post_id = post_id.as_deref(), "{detail}");
                Outcome::new(key, OutcomeKind::AlreadyPosted, detail).with_post_id(post_id)
            }
            Err(e) => Outcome::new(
                key,
                OutcomeKind::PostedNotRecorded,
                format!("on {}, and the record still cannot be written ({e}); the claim keeps its id. Retry later", self.network.label()),
            )
            .with_post_id(post_id),
        }
    }
}

//! Mastodon's image upload: `POST /api/v2/media` with the alt text as `description`, and the
//! wait while the server processes the image (a 202, then `GET /api/v1/media/:id` until 200).
//! The wait fits inside one call's budget; when it runs out the call answers
//! [`PostError::NotReady`], and the next try of the same image resumes polling the id it already
//! has instead of uploading again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::multipart::{Form, Part};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::wire::{answer, file_name, local_refusal, transport, Op};
use super::{MastodonAdapter, NETWORK, POLL_FIRST, POLL_MAX, POLL_ROUND_TRIP, RESUME_WITHIN};
use crate::networks::{Media, MediaRef, PostError};

/// Uploads the instance answered 202 for and that are still being processed, by the digest of
/// what was uploaded ([`upload_digest`]).
pub(super) type InProcessing = Arc<StdMutex<HashMap<String, Processing>>>;

/// An upload still being processed.
#[derive(Debug, Clone)]
pub(super) struct Processing {
    id: String,
    since: Instant,
    /// A call is polling it now (another call of the same image uploads its own).
    busy: bool,
}

/// Marks a resumable upload free again when its poll ends without an answer (an error, or the
/// call dropped at its budget), unless [`Claimed::done`] removed it.
struct Claimed {
    map: InProcessing,
    digest: String,
    done: bool,
}

impl Claimed {
    fn done(mut self) {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.digest);
        self.done = true;
    }

    fn forget(self) {
        self.done();
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.done {
            if let Some(p) = self
                .map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_mut(&self.digest)
            {
                p.busy = false;
            }
        }
    }
}

/// What identifies an upload: the bytes, their type and the alt text.
fn upload_digest(media: &Media) -> String {
    let mut h = Sha256::new();
    h.update(media.content_type.as_bytes());
    h.update(b"\n");
    h.update(media.alt.as_deref().unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(&media.bytes);
    hex::encode(h.finalize())
}

impl MastodonAdapter {
    /// Waits until `GET /api/v1/media/:id` answers 200 (206 while processing), pausing
    /// [`POLL_FIRST`] doubling up to [`POLL_MAX`], until the media wait (counted from
    /// `started`, the call's start) less a poll's round trip.
    async fn wait_processed(&self, id: &str, started: Instant) -> Result<(), PostError> {
        let mut pause = POLL_FIRST;
        let path = format!(
            "/api/v1/media/{}",
            utf8_percent_encode(id, NON_ALPHANUMERIC)
        );
        loop {
            let left = self
                .media_wait
                .saturating_sub(started.elapsed())
                .saturating_sub(POLL_ROUND_TRIP);
            if left.is_zero() {
                return Err(PostError::NotReady {
                    network: NETWORK,
                    message: format!(
                        "the image {id} is still being processed after {} ms of this try; the next try polls it again (it is not uploaded again)",
                        started.elapsed().as_millis()
                    ),
                });
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(POLL_MAX);
            let resp = self
                .transport
                .send(self.get(&path))
                .await
                .map_err(transport)?;
            let (a, _) = answer(resp, Op::Upload).await?;
            match a.status {
                206 => {}
                _ => return Ok(()),
            }
        }
    }

    /// Takes the upload of this image that is still being processed, if one is free to poll.
    fn claim_processing(&self, digest: &str) -> Option<(String, Claimed)> {
        let mut map = self
            .processing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, p| p.since.elapsed() < RESUME_WITHIN);
        let p = map.get_mut(digest).filter(|p| !p.busy)?;
        p.busy = true;
        let id = p.id.clone();
        Some((
            id,
            Claimed {
                map: self.processing.clone(),
                digest: digest.to_owned(),
                done: false,
            },
        ))
    }

    /// `POST /api/v2/media`, or the resumed wait for the same image uploaded before.
    pub(super) async fn upload_once(&self, media: &Media) -> Result<MediaRef, PostError> {
        let started = Instant::now();
        let digest = upload_digest(media);
        // A try after one whose wait ran out: poll the id the instance already gave.
        if let Some((id, claimed)) = self.claim_processing(&digest) {
            tracing::info!(network = NETWORK, media_id = %id, "resuming the wait for the image uploaded before");
            match self.wait_processed(&id, started).await {
                Ok(()) => {
                    claimed.done();
                    return Ok(MediaRef(Value::String(id)));
                }
                // Gone (removed by the instance): upload it afresh below.
                Err(PostError::Rejected { status: 404, .. }) => claimed.forget(),
                Err(e) => return Err(e),
            }
        }
        let limit = self.limits.image_size_limit();
        if media.bytes.is_empty() {
            return Err(local_refusal("the cover image is empty".into()));
        }
        if media.bytes.len() > limit {
            return Err(local_refusal(format!(
                "the cover image is {} bytes; this instance takes images of at most {limit} bytes: make it smaller",
                media.bytes.len()
            )));
        }
        let part = Part::stream_with_length(
            reqwest::Body::from(media.bytes.clone()),
            media.bytes.len() as u64,
        )
        .file_name(file_name(media.content_type))
        .mime_str(media.content_type)
        .map_err(|e| {
            local_refusal(format!(
                "the image type {} is not a MIME type ({e})",
                media.content_type
            ))
        })?;
        let mut form = Form::new().part("file", part);
        if let Some(alt) = media.alt.as_deref().filter(|a| !a.trim().is_empty()) {
            form = form.text("description", alt.to_owned());
        }
        let shown = || {
            let mut lines = vec![format!(
                "file=<{} bytes {}, filename {}>",
                media.bytes.len(),
                media.content_type,
                file_name(media.content_type)
            )];
            if let Some(alt) = media.alt.as_deref().filter(|a| !a.trim().is_empty()) {
                lines.push(format!("description={alt:?}"));
            }
            Some(lines)
        };
        let resp = self
            .transport
            .send_showing(self.post("/api/v2/media").multipart(form), shown)
            .await
            .map_err(transport)?;
        let (a, v) = answer(resp, Op::Upload).await?;
        let status = a.status;
        let Some(id) = v.get("id").and_then(Value::as_str).map(str::to_owned) else {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: format!("the media upload answered {status} without an id"),
            });
        };
        if status == 202 {
            self.processing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    digest.clone(),
                    Processing {
                        id: id.clone(),
                        since: Instant::now(),
                        busy: true,
                    },
                );
            let claimed = Claimed {
                map: self.processing.clone(),
                digest,
                done: false,
            };
            self.wait_processed(&id, started).await?;
            claimed.done();
        }
        Ok(MediaRef(Value::String(id)))
    }

}

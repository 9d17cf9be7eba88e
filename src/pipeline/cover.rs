//! The cover phase: the draft's image fetched within the image budget, checked strictly, and
//! what this network gets picked from its capabilities: the original byte for byte where it
//! fits the network's limits, else a rendition that does (the same bytes on every try, so a
//! replay at a client-chosen key finds the same blob). A network that fetches the image itself
//! gets the original or nothing. Once per (draft, target) per run.

use super::*;
use crate::image::Cover;

impl Lane {
    /// The cover this lane's network gets.
    ///
    /// # Errors
    /// [`ImageError::Unavailable`] (the host failed; retryable) or [`ImageError::Refused`]
    /// (the origin, the file, or the network's limits: never retried), or the budget.
    pub(super) async fn cover(
        &self,
        dl: &Deadline,
        source: &str,
    ) -> Result<Cover, Gave<ImageError>> {
        let caps = self.adapter.capabilities();
        let (limits, can_render) = (caps.images, !caps.fetches_image);
        let on = self.network.label();
        self.with_retries(
            dl,
            self.settings.timeouts.image,
            || async {
                let image = self.images.fetch(source).await?;
                crate::image::cover(image, limits, can_render)
                    .await
                    .map_err(|e| match e {
                        ImageError::Refused(why) => ImageError::Refused(format!("for {on}: {why}")),
                        other => other,
                    })
            },
            ImageError::is_transient,
            |_| None,
        )
        .await
    }
}

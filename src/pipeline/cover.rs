//! The cover phase: the draft's image fetched within the image budget, checked strictly, and
//! what this network gets picked from its capabilities: the original byte for byte where it
//! fits the network's limits, else a rendition that does (the same bytes on every try, so a
//! replay at a client-chosen key finds the same blob). A network that fetches the image itself
//! gets the original from the draft's own URL, or nothing; unless covers are hosted
//! ([`crate::covers`]): then it may get a rendition too, and it always fetches the exact bytes
//! checked here, from the host, under their SHA-256 (the same name on a replay). Once per
//! (draft, target) per run.

use super::*;
use crate::covers::CoverName;
use crate::image::Cover;

impl Lane {
    /// This lane with covers hosted by `covers` (for a network that fetches the image itself
    /// once, when it posts). A network whose post links the image for good keeps the draft's
    /// own URL: a hosted copy expires.
    #[must_use]
    pub fn hosting(mut self, covers: Option<Arc<dyn crate::covers::CoverHost>>) -> Self {
        self.covers = covers.filter(|_| !self.adapter.capabilities().links_image);
        self
    }

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
        let (limits, can_render) = (caps.images, !caps.fetches_image || self.covers.is_some());
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

    /// Where this lane's network fetches `cover` from, for a network that fetches the image
    /// itself: the host's URL of these very bytes when covers are hosted (put there first,
    /// within the image budget; a dry run only names it), else the draft's own `source`.
    ///
    /// # Errors
    /// The host failed ([`ImageError::Unavailable`], retryable: nothing was posted), or the
    /// budget.
    pub(super) async fn fetched_from(
        &self,
        dl: &Deadline,
        cover: &Cover,
        source: &str,
    ) -> Result<String, Gave<ImageError>> {
        let Some(host) = self
            .covers
            .as_ref()
            .filter(|_| self.adapter.capabilities().fetches_image)
        else {
            return Ok(source.to_owned());
        };
        let name = CoverName::of(&cover.bytes, cover.format);
        let dry = self.adapter.is_dry_run();
        let url = self
            .with_retries(
                dl,
                self.settings.timeouts.image,
                || async {
                    if dry {
                        host.locate(&name).await
                    } else {
                        host.put(&name, &cover.bytes).await
                    }
                },
                ImageError::is_transient,
                |_| None,
            )
            .await?;
        tracing::info!(cover = %name, host = %host.describe(), "the cover this network fetches is hosted");
        Ok(url)
    }
}

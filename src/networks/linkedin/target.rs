//! LinkedIn behind the per-network [`NetworkAdapter`] shape (README "Targets"): the two-step
//! image upload as one safe-to-repeat upload, the escaped commentary as the prepared request,
//! and LinkedIn's answers described as [`PostError`]s — its 422 DUPLICATE_POST becomes
//! [`PostError::AlreadyExists`] naming the post. Wraps any [`Publisher`] (the REST adapter or
//! the dry run), so the calls and their wire format stay in one place.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, Links, TextLimit};
use crate::image::{Format, Formats};
use super::little_text::{self, MAX_CHARS};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};
use super::{post_url, NewPost, PublishError, Publisher, UploadTarget};

const NAME: &str = "LinkedIn";

/// LinkedIn as a target.
pub struct LinkedInTarget {
    publisher: Arc<dyn Publisher>,
}

impl LinkedInTarget {
    pub fn new(publisher: Arc<dyn Publisher>) -> Self {
        Self { publisher }
    }

    /// The image's bytes to the upload URL `target` names.
    async fn put_image(&self, media: &Media, target: UploadTarget) -> Result<MediaRef, PostError> {
        self.publisher
            .upload_image(&target, media.bytes.clone(), media.content_type)
            .await
            .map_err(describe)?;
        Ok(MediaRef(
            json!({"image": target.image_urn, "alt": media.alt}),
        ))
    }
}

/// LinkedIn's failures, described for every network's pipeline.
fn describe(e: PublishError) -> PostError {
    match e {
        PublishError::NotSent(message) => PostError::NotSent {
            network: NAME,
            message,
        },
        PublishError::RateLimited {
            retry_after,
            message,
        } => PostError::RateLimited {
            network: NAME,
            retry_after,
            message,
        },
        // The token itself refused (missing, expired, revoked): the credential's problem, not
        // the draft's.
        PublishError::Rejected {
            status: 401,
            message,
        } => PostError::credential_refused(Network::Linkedin, "LinkedIn token", 401, &message),
        PublishError::Rejected { status, message } => PostError::Rejected {
            network: NAME,
            status,
            message,
        },
        PublishError::Duplicate { urn } => PostError::AlreadyExists {
            network: NAME,
            existing: Created {
                url: Some(post_url(&urn)),
                id: Some(urn),
                cid: None,
            },
        },
        e @ (PublishError::Server { .. } | PublishError::Broken(_)) => PostError::InDoubt {
            network: NAME,
            message: e.to_string(),
        },
    }
}

/// The create request kept in a [`PreparedPost`] body.
fn new_post(post: &PreparedPost) -> Result<NewPost, PostError> {
    let field = |name: &str| post.body.get(name).and_then(|v| v.as_str());
    match (field("commentary"), field("image")) {
        (Some(commentary), Some(image)) => Ok(NewPost {
            commentary: commentary.to_owned(),
            image_urn: image.to_owned(),
            alt: field("alt").map(str::to_owned),
        }),
        _ => Err(PostError::Rejected {
            network: NAME,
            status: 0,
            message: "the kept create-post request lacks its commentary or image; post it again with Post anyway".into(),
        }),
    }
}

#[async_trait]
impl NetworkAdapter for LinkedInTarget {
    fn network(&self) -> Network {
        Network::Linkedin
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            idempotency: Idempotency::DuplicateNamesPost,
            text: TextLimit {
                max: MAX_CHARS,
                counting: Counting::Chars,
            },
            images: ImageLimits {
                formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Gif]),
                // No documented byte limit: the download cap.
                max_bytes: crate::image::MAX_IMAGE_BYTES as u64,
                max_pixels: Some(36_152_320),
                ..ImageLimits::default()
            },
            links: Links::AsText,
            ..Capabilities::default()
        }
    }

    fn is_dry_run(&self) -> bool {
        self.publisher.is_dry_run()
    }

    fn text_len(&self, text: &str) -> usize {
        little_text::char_count(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        let target = self.publisher.initialize_upload().await.map_err(describe)?;
        self.put_image(media, target).await
    }

    /// initializeUpload: it needs no image, so it runs while the image is fetched.
    async fn begin_upload(&self) -> Result<Option<MediaRef>, PostError> {
        let target = self.publisher.initialize_upload().await.map_err(describe)?;
        Ok(Some(MediaRef(json!({
            "upload_url": target.upload_url,
            "image": target.image_urn,
        }))))
    }

    async fn upload_begun(&self, media: &Media, begun: &MediaRef) -> Result<MediaRef, PostError> {
        let field = |name: &str| begun.0.get(name).and_then(|v| v.as_str());
        match (field("upload_url"), field("image")) {
            (Some(upload_url), Some(image_urn)) => {
                let target = UploadTarget {
                    upload_url: upload_url.to_owned(),
                    image_urn: image_urn.to_owned(),
                };
                self.put_image(media, target).await
            }
            _ => self.upload(media).await,
        }
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        let commentary = little_text::escape(text);
        PreparedPost {
            body: json!({
                "commentary": commentary,
                "image": media.0.get("image"),
                "alt": media.0.get("alt"),
            }),
            text: commentary,
            key: None,
        }
    }

    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        let post = new_post(post)?;
        let urn = self.publisher.create_post(&post).await.map_err(describe)?;
        Ok(Created {
            url: urn.as_deref().map(post_url),
            id: urn,
            cid: None,
        })
    }

    async fn find(&self, _post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        Err(PostError::ReadRefused {
            network: NAME,
            message: "reading a member's posts needs r_member_social, which LinkedIn grants only to approved partners".into(),
        })
    }

    async fn check(&self) -> Result<String, PostError> {
        self.publisher.check().await.map_err(describe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linkedins_answers_are_described_by_what_they_mean_for_the_post() {
        let dup = describe(PublishError::Duplicate {
            urn: "urn:li:share:7".into(),
        });
        assert_eq!(
            dup,
            PostError::AlreadyExists {
                network: NAME,
                existing: Created {
                    id: Some("urn:li:share:7".into()),
                    url: Some("https://www.linkedin.com/feed/update/urn:li:share:7/".into()),
                    cid: None,
                },
            }
        );
        for e in [
            PublishError::Server {
                status: 503,
                message: "x".into(),
            },
            PublishError::Broken("reset".into()),
        ] {
            let d = describe(e);
            assert!(d.may_exist() && d.is_transient(), "{d:?}");
        }
        let refused = describe(PublishError::Rejected {
            status: 401,
            message: "re-authorize".into(),
        });
        assert!(!refused.may_exist() && !refused.is_transient());
        assert!(describe(PublishError::NotSent("refused".into())).is_transient());
    }

    #[test]
    fn the_prepared_request_round_trips_to_the_same_create_post() {
        let target = LinkedInTarget::new(Arc::new(super::super::dry_run::DryRun::new(
            "https://api.linkedin.com",
            None,
            "202610",
        )));
        let media = MediaRef(json!({"image": "urn:li:image:C4E1", "alt": "A cover"}));
        let prepared = target.prepare("Hello (world) #rust", &media, "unused");
        let post = new_post(&prepared).unwrap();
        assert_eq!(post.commentary, little_text::escape("Hello (world) #rust"));
        assert_eq!(post.image_urn, "urn:li:image:C4E1");
        assert_eq!(post.alt.as_deref(), Some("A cover"));
        // A body without its fields is refused, never sent half-built.
        let broken = PreparedPost {
            body: json!({}),
            text: String::new(),
            key: None,
        };
        assert!(matches!(new_post(&broken), Err(PostError::Rejected { .. })));
    }
}

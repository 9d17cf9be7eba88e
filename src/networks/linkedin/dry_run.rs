//! The publisher used when `LINKEDIN_ACCESS_TOKEN` is unset: it sends nothing, logs the exact
//! requests it would send, and answers with URNs marked `dryrun` so nobody mistakes them.

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::json;

use super::{NewPost, PublishError, Publisher, UploadTarget};
use crate::networks::show::{dry_id, show, ShownBody};

/// Shows, never sends.
pub struct DryRun {
    api: String,
    author: String,
    version: String,
}

impl DryRun {
    pub fn new(api: &str, author: Option<&str>, version: &str) -> Self {
        Self {
            api: api.trim_end_matches('/').to_owned(),
            author: author.unwrap_or("urn:li:person:DRY_RUN_AUTHOR").to_owned(),
            version: version.to_owned(),
        }
    }

    fn headers(&self) -> [(&'static str, &str); 4] {
        [
            ("Authorization", "Bearer <LINKEDIN_ACCESS_TOKEN>"),
            ("LinkedIn-Version", &self.version),
            ("X-Restli-Protocol-Version", "2.0.0"),
            ("Content-Type", "application/json"),
        ]
    }
}

#[async_trait]
impl Publisher for DryRun {
    async fn initialize_upload(&self) -> Result<UploadTarget, PublishError> {
        let body = json!({"initializeUploadRequest": {"owner": self.author}});
        show(
            "POST",
            &format!("{}/rest/images?action=initializeUpload", self.api),
            &self.headers(),
            ShownBody::Json(&body),
        );
        let id = dry_id();
        Ok(UploadTarget {
            upload_url: format!("{}/dry-run-upload/{id}", self.api),
            image_urn: format!("urn:li:image:{id}"),
        })
    }

    async fn upload_image(
        &self,
        target: &UploadTarget,
        bytes: Bytes,
        content_type: &str,
    ) -> Result<(), PublishError> {
        show(
            "PUT",
            &target.upload_url,
            &[
                ("Authorization", "Bearer <LINKEDIN_ACCESS_TOKEN>"),
                ("Content-Type", content_type),
            ],
            ShownBody::Lines(vec![format!("<{} bytes of {content_type}>", bytes.len())]),
        );
        Ok(())
    }

    async fn create_post(&self, post: &NewPost) -> Result<Option<String>, PublishError> {
        let body = super::create_post_body(&self.author, post);
        show(
            "POST",
            &format!("{}/rest/posts", self.api),
            &self.headers(),
            ShownBody::Json(&body),
        );
        Ok(Some(format!("urn:li:share:{}", dry_id())))
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    async fn check(&self) -> Result<String, PublishError> {
        Ok("dry run: LINKEDIN_ACCESS_TOKEN is not set, nothing is sent to LinkedIn".into())
    }
}

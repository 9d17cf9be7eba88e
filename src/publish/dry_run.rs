//! The publisher used when `LINKEDIN_ACCESS_TOKEN` is unset: it sends nothing, logs the exact
//! requests it would send, and answers with URNs marked `dryrun` so nobody mistakes them.

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::json;

use super::{NewPost, PublishError, Publisher, UploadTarget};

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

    fn headers(&self) -> String {
        format!(
            "Authorization: Bearer <LINKEDIN_ACCESS_TOKEN>, LinkedIn-Version: {}, X-Restli-Protocol-Version: 2.0.0, Content-Type: application/json",
            self.version
        )
    }
}

/// What marks an id the dry run made up (`urn:li:share:dryrun-…`).
pub const MARK: &str = ":dryrun-";

fn dry_id() -> String {
    format!("dryrun-{:016x}", rand::random::<u64>())
}

#[async_trait]
impl Publisher for DryRun {
    async fn initialize_upload(&self) -> Result<UploadTarget, PublishError> {
        let body = json!({"initializeUploadRequest": {"owner": self.author}});
        tracing::info!(
            dry_run = true,
            "would send POST {}/rest/images?action=initializeUpload [{}] {body}",
            self.api,
            self.headers()
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
        tracing::info!(
            dry_run = true,
            "would send PUT {} [Authorization: Bearer <LINKEDIN_ACCESS_TOKEN>, Content-Type: {content_type}] <{} bytes>",
            target.upload_url,
            bytes.len()
        );
        Ok(())
    }

    async fn create_post(&self, post: &NewPost) -> Result<Option<String>, PublishError> {
        let body = super::create_post_body(&self.author, post);
        tracing::info!(
            dry_run = true,
            "would send POST {}/rest/posts [{}] {body}",
            self.api,
            self.headers()
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

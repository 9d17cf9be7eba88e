//! The publisher used when `LINKEDIN_ACCESS_TOKEN` is unset: it sends nothing, logs the exact
//! requests it would send, and answers with URNs marked `dryrun` so nobody mistakes them.

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::json;

use super::{NewPost, PublishError, Publisher, UploadTarget};

/// The tracing target of every request a dry run shows. The CLI prints these events as
/// readable blocks ([`request_block`]); in Lambda and `serve` they are log lines like any other.
pub const SHOWN: &str = "postonce::dry_run";

/// The body of a shown request.
pub enum ShownBody<'a> {
    None,
    /// A JSON body, pretty-printed.
    Json(&'a serde_json::Value),
    /// Form fields or a description of raw bytes, one line each.
    Lines(Vec<String>),
}

/// A request as a person reads it: the method and URL, one header a line (secrets already
/// placeholders), then the body pretty-printed.
pub fn request_block(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &ShownBody<'_>,
) -> String {
    let mut out = format!("{method} {url}");
    for (name, value) in headers {
        out.push_str(&format!("\n  {name}: {value}"));
    }
    let lines: Vec<String> = match body {
        ShownBody::None => vec![],
        ShownBody::Json(v) => serde_json::to_string_pretty(v)
            .unwrap_or_else(|_| v.to_string())
            .lines()
            .map(str::to_owned)
            .collect(),
        ShownBody::Lines(lines) => lines.clone(),
    };
    if !lines.is_empty() {
        out.push('\n');
        for line in lines {
            out.push_str("\n  ");
            out.push_str(&line);
        }
    }
    out
}

/// Shows one request a dry run would send (at info, target [`SHOWN`]), sending nothing.
pub fn show(method: &str, url: &str, headers: &[(&str, &str)], body: ShownBody<'_>) {
    let block = request_block(method, url, headers, &body);
    tracing::info!(target: SHOWN, dry_run = true, "would send {block}");
}

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

/// What marks an id the dry run made up (`urn:li:share:dryrun-…`).
pub const MARK: &str = ":dryrun-";

fn dry_id() -> String {
    format!("dryrun-{:016x}", rand::random::<u64>())
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

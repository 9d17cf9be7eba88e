//! Threads without a token: sends nothing, logs at info the exact requests it would send (the
//! token as a placeholder), and answers ids marked `dryrun-`.

use async_trait::async_trait;
use serde_json::json;

use super::publish::{container_fields, with_image};
use super::wire::TOKEN_PLACEHOLDER;
use super::{
    capabilities, creation_id, enc, media_ref, prepared, text,
    API_VERSION, DEFAULT_USER, LIST_FIELDS, MEDIA_FIELDS,
};
use crate::networks::show::{dry_id, show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
};

/// The Threads adapter without a token.
#[derive(Debug)]
pub struct ThreadsDryRun {
    base: String,
    user: String,
}

impl ThreadsDryRun {
    pub fn new(api_url: &str, user: &str) -> Self {
        let user = user.trim();
        Self {
            base: api_url.trim().trim_end_matches('/').to_owned(),
            user: if user.is_empty() { DEFAULT_USER } else { user }.to_owned(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{API_VERSION}/{path}", self.base)
    }

    /// A GET as the real adapter sends it, the token a placeholder.
    fn show_get(&self, path: &str, query: &str, note: Option<String>) {
        show(
            "GET",
            &format!(
                "{}?{query}&access_token={TOKEN_PLACEHOLDER}",
                self.url(path)
            ),
            &[],
            note.map_or(ShownBody::None, |n| ShownBody::Lines(vec![n])),
        );
    }

}

#[async_trait]
impl NetworkAdapter for ThreadsDryRun {
    fn network(&self) -> Network {
        Network::Threads
    }

    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    fn is_dry_run(&self) -> bool {
        true
    }

    fn text_len(&self, text: &str) -> usize {
        text::threads_len(text)
    }

    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        // As the real adapter: nothing is sent, Threads fetches the image by its URL.
        Ok(media_ref(media.alt.as_deref()))
    }

    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        prepared(text, media)
    }

    /// Shows the container's form as the real adapter sends it.
    async fn stage(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        if creation_id(post).is_some() {
            return Ok(post.clone());
        }
        let post = with_image(post, image)?;
        let mut lines: Vec<String> = container_fields(&post)?
            .into_iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        lines.push(format!("access_token={TOKEN_PLACEHOLDER}"));
        show(
            "POST",
            &self.url(&format!("{}/threads", enc(&self.user))),
            &[("Content-Type", "application/x-www-form-urlencoded")],
            ShownBody::Lines(lines),
        );
        let mut staged = post;
        staged.body["creation_id"] = json!(dry_id());
        Ok(staged)
    }

    async fn create(&self, post: &PreparedPost, _media: &Media) -> Result<Created, PostError> {
        let container = creation_id(post).unwrap_or("<container id>").to_owned();
        self.show_get(
            &enc(&container),
            "fields=status,error_message",
            Some("(again, a moment later, while it answers IN_PROGRESS)".into()),
        );
        show(
            "POST",
            &self.url(&format!("{}/threads_publish", enc(&self.user))),
            &[("Content-Type", "application/x-www-form-urlencoded")],
            ShownBody::Lines(vec![
                format!("creation_id={container}"),
                format!("access_token={TOKEN_PLACEHOLDER}"),
            ]),
        );
        let id = dry_id();
        self.show_get(&id, &format!("fields={MEDIA_FIELDS}"), None);
        Ok(Created {
            url: Some(format!("https://www.threads.com/@{}/post/{id}", self.user)),
            id: Some(id),
            cid: None,
        })
    }

    async fn find(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        let container = creation_id(post).unwrap_or("<container id>");
        self.show_get(&enc(container), "fields=status,error_message", None);
        self.show_get(
            &format!("{}/threads", enc(&self.user)),
            &format!("fields={LIST_FIELDS}&limit=25"),
            Some(format!(
                "(only when the container is PUBLISHED: back to {}, looking for the text {:?})",
                crate::record::rfc3339(since),
                post.text
            )),
        );
        Ok(None)
    }

    async fn check(&self) -> Result<String, PostError> {
        Ok("dry run: THREADS_ACCESS_TOKEN is not set, nothing is sent to Threads".into())
    }
}

//! The two calls that post: the stage makes the container and waits for it (`POST
//! /{user}/threads`, then its status until `FINISHED`), and the create publishes the kept one
//! (`POST /{user}/threads_publish`) and reads the post's permalink; with what a container that
//! can no longer publish means.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::wire::{answer, id_of, local_refusal, ContainerStatus, Op, NETWORK};
use super::{
    creation_id, enc, published_since, ThreadsAdapter, MEDIA_FIELDS, POLL_FIRST, POLL_MAX,
    POLL_ROUND_TRIP,
};
use crate::networks::{Created, PostError, PreparedPost};

/// The container's form fields, in the order they are sent.
pub(super) fn container_fields(post: &PreparedPost) -> Result<Vec<(&'static str, String)>, PostError> {
    let c = post.body.get("container").ok_or_else(|| {
        local_refusal("the prepared request carries no container; prepare the post again".into())
    })?;
    let field = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    let Some(url) = field("image_url").filter(|u| !u.is_empty()) else {
        return Err(local_refusal(
            "Threads fetches the image itself from its public URL, and this post has none".into(),
        ));
    };
    let mut fields = vec![
        (
            "media_type",
            field("media_type").unwrap_or_else(|| "IMAGE".into()),
        ),
        ("image_url", url),
        ("text", field("text").unwrap_or_default()),
    ];
    if let Some(alt) = field("alt_text") {
        fields.push(("alt_text", alt));
    }
    Ok(fields)
}

/// `post` with the draft's image URL in its container, or why it cannot have it: Threads
/// fetches the image itself, so a local file (the CLI's drafts) cannot go to it.
pub(super) fn with_image(post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
    let image = image.trim();
    if !(image.starts_with("https://") || image.starts_with("http://")) {
        return Err(local_refusal(
            "Threads fetches the image itself from its public URL, and this draft's cover is a local file".into(),
        ));
    }
    let mut post = post.clone();
    post.body["container"]["image_url"] = json!(image);
    Ok(post)
}

/// Turns a failure to read the container before publishing into what it means for the
/// publish: it was not sent, so nothing was published by this call.
fn before_publish(container: &str, e: PostError) -> PostError {
    match e {
        PostError::InDoubt { message, .. } => PostError::NotSent {
            network: NETWORK,
            message: format!(
                "could not read the status of the container {container} before publishing ({message}); nothing was published"
            ),
        },
        e => e,
    }
}

/// What a container that can no longer publish means: nothing was, or will be, posted by it.
pub(super) fn cannot_publish(container: &str, status: &ContainerStatus) -> PostError {
    let why = match status {
        ContainerStatus::Error(m) => format!(
            "Threads could not make the post from it ({}); its image URL must be public and a JPEG or PNG of at most 8 MB",
            m.as_deref().unwrap_or("no error message")
        ),
        _ => "it was not published within 24 hours".to_owned(),
    };
    PostError::Gone {
        network: NETWORK,
        message: format!(
            "the container {container} is {} ({why}): nothing was posted from it, and nothing can be; a new attempt makes a new container",
            status.as_str()
        ),
    }
}

impl ThreadsAdapter {
    /// `GET /{container}?fields=status,error_message`.
    /// `timeout`: how long the read may take (a read that would outlast a wait is cut short
    /// and counts as failed).
    pub(super) async fn status(
        &self,
        container: &str,
        timeout: Option<Duration>,
    ) -> Result<ContainerStatus, PostError> {
        let mut req = self.get(&enc(container), &[("fields", "status,error_message")]);
        if let Some(t) = timeout {
            req = req.timeout(t.max(Duration::from_millis(100)));
        }
        let resp = self.send(req).await?;
        let v = answer(resp, Op::Status).await?;
        ContainerStatus::parse(&v).ok_or_else(|| PostError::InDoubt {
            network: NETWORK,
            message: format!("the container {container}'s status answer names no known status"),
        })
    }

    /// Reads the container's status until it is no longer `IN_PROGRESS` or `until` (counted
    /// from `started`, less a poll's round trip) has passed; answers the last status read.
    async fn wait_ready(
        &self,
        container: &str,
        started: Instant,
        until: Duration,
    ) -> Result<ContainerStatus, PostError> {
        let mut pause = POLL_FIRST;
        loop {
            let left = until.saturating_sub(started.elapsed());
            let status = self.status(container, Some(left)).await?;
            if status != ContainerStatus::InProgress {
                return Ok(status);
            }
            let left = until
                .saturating_sub(started.elapsed())
                .saturating_sub(POLL_ROUND_TRIP);
            if left.is_zero() {
                return Ok(status);
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// [`NetworkAdapter::stage`].
    pub(super) async fn stage_with(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        if creation_id(post).is_some() {
            return Ok(post.clone());
        }
        let post = with_image(post, image)?;
        self.stage_once(&post).await.map_err(|e| self.clean(e))
    }

    async fn stage_once(&self, post: &PreparedPost) -> Result<PreparedPost, PostError> {
        let started = Instant::now();
        let fields = container_fields(post)?;
        let resp = self.send_form(&self.user_path("threads"), &fields).await?;
        let v = answer(resp, Op::Container).await?;
        let Some(container) = id_of(&v) else {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: "the container was answered without an id".into(),
            });
        };
        tracing::info!(network = NETWORK, container = %container, "container made");
        let until = self.budget.saturating_sub(self.budget * 3 / 10);
        match self.wait_ready(&container, started, until).await {
            Ok(ContainerStatus::Finished | ContainerStatus::InProgress) => {}
            Ok(other) => return Err(cannot_publish(&container, &other)),
            // A read that failed for now: `create` reads the status again before publishing.
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    network = NETWORK,
                    "the container's status could not be read yet: {}",
                    self.clean(e)
                );
            }
            Err(e) => return Err(e),
        }
        let mut staged = post.clone();
        staged.body["creation_id"] = json!(container);
        Ok(staged)
    }

    pub(super) async fn create_once(&self, post: &PreparedPost) -> Result<Created, PostError> {
        let started = Instant::now();
        let Some(container) = creation_id(post) else {
            return Err(local_refusal(
                "the prepared request names no container (creation_id); prepare the post again"
                    .into(),
            ));
        };
        let status = self
            .wait_ready(container, started, self.budget / 2)
            .await
            .map_err(|e| before_publish(container, e))?;
        match status {
            ContainerStatus::Finished => {}
            ContainerStatus::InProgress => {
                return Err(PostError::NotReady {
                    network: NETWORK,
                    message: format!(
                        "the container {container} is still being processed after {} ms; nothing was published",
                        started.elapsed().as_millis()
                    ),
                })
            }
            ContainerStatus::Published => return Err(self.already_published(post, Some(published_since())).await),
            other => return Err(cannot_publish(container, &other)),
        }
        let resp = self
            .send_form(
                &self.user_path("threads_publish"),
                &[("creation_id", container.to_owned())],
            )
            .await?;
        let media_id = match answer(resp, Op::Publish).await {
            Ok(v) => id_of(&v),
            // A refusal whose code is not the token's or a rate limit's: a container already
            // published is refused too (with a code Meta does not document), so its status
            // says what the refusal means. `PUBLISHED` is this request's own post, whoever's
            // call published it: only the kept request names the container
            // ([`PostError::StagedPublished`]).
            // (A revoked token fails that read too, and the refusal is answered as it is.)
            Err(refusal @ PostError::Rejected { .. }) => {
                return Err(match self.status(container, None).await {
                    Ok(ContainerStatus::Published) => self.already_published(post, Some(published_since())).await,
                    Ok(ContainerStatus::InProgress) => PostError::NotReady {
                        network: NETWORK,
                        message: format!(
                            "Threads refused to publish the container {container}, which is still being processed ({refusal}); nothing was published"
                        ),
                    },
                    _ => refusal,
                });
            }
            // A 2xx without JSON still published.
            Err(PostError::InDoubt { message, .. }) if message.contains("not JSON") => None,
            Err(e) => return Err(e),
        };
        tracing::info!(
            network = NETWORK,
            media = media_id.as_deref().unwrap_or("?"),
            "published"
        );
        let Some(id) = media_id else {
            return Ok(self
                .locate(post, Some(published_since()))
                .await
                .ok()
                .flatten()
                .unwrap_or(Created {
                    id: None,
                    url: None,
                    cid: None,
                }));
        };
        // The post exists from here on: the permalink is read in what is left of the budget,
        // and its absence only leaves the link out.
        let left = self
            .budget
            .saturating_sub(started.elapsed())
            .saturating_sub(POLL_ROUND_TRIP);
        let url = self.permalink(&id, left).await;
        Ok(Created {
            id: Some(id),
            url,
            cid: None,
        })
    }

    /// `GET /{media}?fields=id,permalink`, within `left`.
    async fn permalink(&self, media: &str, left: Duration) -> Option<String> {
        if left < Duration::from_millis(100) {
            tracing::warn!(
                network = NETWORK,
                media,
                "no time left to read the permalink"
            );
            return None;
        }
        let read = async {
            let resp = self
                .send(self.get(&enc(media), &[("fields", MEDIA_FIELDS)]).timeout(left))
                .await?;
            answer(resp, Op::Media).await
        };
        match read.await {
            Ok(v) => v
                .get("permalink")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            Err(e) => {
                tracing::warn!(
                    network = NETWORK,
                    media,
                    "the permalink could not be read: {}",
                    self.clean(e)
                );
                None
            }
        }
    }
}

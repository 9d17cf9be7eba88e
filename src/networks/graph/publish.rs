//! The two calls that post: the stage makes the container and waits for it (`POST
//! /{user}/<container path>`, then its status until `FINISHED`), and the create publishes the
//! kept one (`POST /{user}/<publish path>`, after the publishing quota where the network reads
//! it first) and reads the post's permalink; with what a container that can no longer publish
//! means.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::wire::{answer, id_of, local_refusal, ContainerStatus, Op};
use super::{
    creation_id, enc, published_since, Dialect, GraphAdapter, Meta, MEDIA_FIELDS, POLL_FIRST,
    POLL_MAX, POLL_ROUND_TRIP,
};
use crate::networks::{Created, PostError, PreparedPost};

/// The container's form fields, in the order they are sent.
pub(super) fn container_fields(
    d: &Dialect,
    post: &PreparedPost,
) -> Result<Vec<(&'static str, String)>, PostError> {
    let c = post.body.get("container").ok_or_else(|| {
        local_refusal(
            d,
            "the prepared request carries no container; prepare the post again".into(),
        )
    })?;
    let field = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    let Some(url) = field("image_url").filter(|u| !u.is_empty()) else {
        return Err(local_refusal(
            d,
            format!(
                "{} fetches the image itself from its public URL, and this post has none",
                d.name
            ),
        ));
    };
    let mut fields: Vec<(&'static str, String)> = d
        .container_fixed
        .iter()
        .map(|(k, v)| (*k, field(k).unwrap_or_else(|| (*v).to_owned())))
        .collect();
    fields.push(("image_url", url));
    fields.push((d.text_field, field(d.text_field).unwrap_or_default()));
    if let Some(alt) = field("alt_text") {
        fields.push(("alt_text", alt));
    }
    Ok(fields)
}

/// `post` with the draft's image URL in its container, or why it cannot have it: the network
/// fetches the image itself, so a local file (the CLI's drafts) cannot go to it.
pub(super) fn with_image(
    d: &Dialect,
    post: &PreparedPost,
    image: &str,
) -> Result<PreparedPost, PostError> {
    let image = image.trim();
    if !(image.starts_with("https://") || image.starts_with("http://")) {
        return Err(local_refusal(
            d,
            format!(
                "{} fetches the image itself from its public URL, and this draft's cover is a local file",
                d.name
            ),
        ));
    }
    let mut post = post.clone();
    post.body["container"]["image_url"] = json!(image);
    Ok(post)
}

/// Turns a failure to read the container before publishing into what it means for the
/// publish: it was not sent, so nothing was published by this call.
fn before_publish(d: &Dialect, container: &str, e: PostError) -> PostError {
    match e {
        PostError::InDoubt { message, .. } => PostError::NotSent {
            network: d.name,
            message: format!(
                "could not read the status of the container {container} before publishing ({message}); nothing was published"
            ),
        },
        e => e,
    }
}

/// What a container that can no longer publish means: nothing was, or will be, posted by it.
pub(super) fn cannot_publish(d: &Dialect, container: &str, status: &ContainerStatus) -> PostError {
    let why = match status {
        ContainerStatus::Error(m) => format!(
            "{} could not make the post from it ({}); its image URL must be public and {}",
            d.name,
            m.as_deref().unwrap_or("no error message"),
            d.image_rule
        ),
        _ => "it was not published within 24 hours".to_owned(),
    };
    PostError::Gone {
        network: d.name,
        message: format!(
            "the container {container} is {} ({why}): nothing was posted from it, and nothing can be; a new attempt makes a new container",
            status.as_str()
        ),
    }
}

impl<M: Meta> GraphAdapter<M> {
    /// `GET /{container}?fields=<the dialect's status fields>`.
    /// `timeout`: how long the read may take (a read that would outlast a wait is cut short
    /// and counts as failed).
    pub(super) async fn status(
        &self,
        container: &str,
        timeout: Option<Duration>,
    ) -> Result<ContainerStatus, PostError> {
        let d = Self::D;
        let mut req = self.get(&enc(container), &[("fields", d.status_fields)]);
        if let Some(t) = timeout {
            req = req.timeout(t.max(Duration::from_millis(100)));
        }
        let resp = self.send(req).await?;
        let v = answer(d, resp, Op::Status).await?;
        ContainerStatus::parse(d, &v).ok_or_else(|| PostError::InDoubt {
            network: d.name,
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
    pub(super) async fn stage_with(
        &self,
        post: &PreparedPost,
        image: &str,
    ) -> Result<PreparedPost, PostError> {
        if creation_id(post).is_some() {
            return Ok(post.clone());
        }
        let post = with_image(Self::D, post, image)?;
        self.stage_once(&post).await.map_err(|e| self.clean(e))
    }

    async fn stage_once(&self, post: &PreparedPost) -> Result<PreparedPost, PostError> {
        let d = Self::D;
        let started = Instant::now();
        let fields = container_fields(d, post)?;
        let resp = self
            .send_form(&self.user_path(d.container_path), &fields)
            .await?;
        let v = answer(d, resp, Op::Container).await?;
        let Some(container) = id_of(&v) else {
            return Err(PostError::InDoubt {
                network: d.name,
                message: "the container was answered without an id".into(),
            });
        };
        tracing::info!(network = d.name, container = %container, "container made");
        let until = self.budget.saturating_sub(self.budget * 3 / 10);
        match self.wait_ready(&container, started, until).await {
            Ok(ContainerStatus::Finished | ContainerStatus::InProgress) => {}
            Ok(other) => return Err(cannot_publish(d, &container, &other)),
            // A read that failed for now: `create` reads the status again before publishing.
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    network = d.name,
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

    /// Waits for the kept container to be `FINISHED` (within half the budget) and, where the
    /// network's quota is read first, checks that a post is left in it: the container to
    /// publish, or why nothing was published.
    async fn ready_to_publish<'p>(
        &self,
        post: &'p PreparedPost,
        started: Instant,
    ) -> Result<&'p str, PostError> {
        let d = Self::D;
        let Some(container) = creation_id(post) else {
            return Err(local_refusal(
                d,
                "the prepared request names no container (creation_id); prepare the post again"
                    .into(),
            ));
        };
        let status = self
            .wait_ready(container, started, self.budget / 2)
            .await
            .map_err(|e| before_publish(d, container, e))?;
        match status {
            ContainerStatus::Finished => {}
            ContainerStatus::InProgress => {
                return Err(PostError::NotReady {
                    network: d.name,
                    message: format!(
                        "the container {container} is still being processed after {} ms; nothing was published",
                        started.elapsed().as_millis()
                    ),
                })
            }
            ContainerStatus::Published => {
                return Err(self.already_published(post, Some(published_since())).await)
            }
            other => return Err(cannot_publish(d, container, &other)),
        }
        if d.quota_before_publish {
            let (used, total, window) = self
                .publishing_limit()
                .await
                .map_err(|e| before_publish(d, container, e))?;
            if used >= total {
                return Err(PostError::RateLimited {
                    network: d.name,
                    retry_after: None,
                    message: format!(
                        "{}'s publishing limit is used up ({used} of {total} posts published through the API in the last {} h); nothing was published, and the container {container} waits for a later try",
                        d.name,
                        window / 3600
                    ),
                });
            }
        }
        Ok(container)
    }

    pub(super) async fn create_once(&self, post: &PreparedPost) -> Result<Created, PostError> {
        let d = Self::D;
        let started = Instant::now();
        let container = self.ready_to_publish(post, started).await?;
        let resp = self
            .send_form(
                &self.user_path(d.publish_path),
                &[("creation_id", container.to_owned())],
            )
            .await?;
        let media_id = match answer(d, resp, Op::Publish).await {
            Ok(v) => id_of(&v),
            // A refusal whose code is not the token's or a rate limit's: a container already
            // published is refused too (with a code Meta does not document), so its status
            // says what the refusal means. `PUBLISHED` is this request's own post, whoever's
            // call published it: only the kept request names the container
            // ([`PostError::StagedPublished`]).
            // (A revoked token fails that read too, and the refusal is answered as it is.)
            Err(refusal @ PostError::Rejected { .. }) => {
                return Err(match self.status(container, None).await {
                    Ok(ContainerStatus::Published) => {
                        self.already_published(post, Some(published_since())).await
                    }
                    Ok(ContainerStatus::InProgress) => PostError::NotReady {
                        network: d.name,
                        message: format!(
                            "{} refused to publish the container {container}, which is still being processed ({refusal}); nothing was published",
                            d.name
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
            network = d.name,
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
                network = Self::D.name,
                media,
                "no time left to read the permalink"
            );
            return None;
        }
        let read = async {
            let resp = self
                .send(
                    self.get(&enc(media), &[("fields", MEDIA_FIELDS)])
                        .timeout(left),
                )
                .await?;
            answer(Self::D, resp, Op::Media).await
        };
        match read.await {
            Ok(v) => v
                .get("permalink")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            Err(e) => {
                tracing::warn!(
                    network = Self::D.name,
                    media,
                    "the permalink could not be read: {}",
                    self.clean(e)
                );
                None
            }
        }
    }
}

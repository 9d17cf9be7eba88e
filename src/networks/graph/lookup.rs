//! Reading back: what a lost publish left, from the container's status, and the post found
//! among the account's posts for its id and permalink; the publishing quota (doctor).

use serde_json::Value;

use super::publish::cannot_publish;
use super::wire::{self, answer, local_refusal, ContainerStatus, ListPage, Op};
use super::{creation_id, GraphAdapter, Meta, CLOCK_SLACK_S};
use crate::networks::{Created, PostError, PreparedPost};

impl<M: Meta> GraphAdapter<M> {
    /// The post of a container found `PUBLISHED`: looked up for its id and permalink; when the
    /// lookup cannot name it, it exists all the same. It is the post of the kept request (the
    /// one that names the container), never someone else's:
    /// [`PostError::StagedPublished`].
    pub(super) async fn already_published(
        &self,
        post: &PreparedPost,
        since: Option<i64>,
    ) -> PostError {
        let existing = match self.locate(post, since).await {
            Ok(Some(found)) => found,
            other => {
                if let Err(e) = other {
                    tracing::warn!(
                        network = Self::D.name,
                        "the published post could not be looked up: {}",
                        self.clean(e)
                    );
                }
                Created {
                    id: None,
                    url: None,
                    cid: None,
                }
            }
        };
        PostError::StagedPublished {
            network: Self::D.name,
            post: existing,
        }
    }

    /// Looks for `post`'s exact text among the account's posts, back to `since` less a clock
    /// slack, at most [`Self::with_list_limits`] pages. Where the network lists newest first
    /// ([`super::Dialect::newest_first`]) the first older post ends the search; elsewhere the
    /// older posts are skipped and every page is read.
    pub(super) async fn locate(
        &self,
        post: &PreparedPost,
        since: Option<i64>,
    ) -> Result<Option<Created>, PostError> {
        let d = Self::D;
        let list_fields = format!("id,permalink,{},timestamp", d.text_field);
        let wanted = wire::comparable(&post.text);
        let cutoff = since.map(|s| s - CLOCK_SLACK_S);
        let limit = self.page_size.to_string();
        let mut after: Option<String> = None;
        for _ in 0..self.max_pages {
            let mut query = vec![("fields", list_fields.as_str()), ("limit", limit.as_str())];
            if let Some(a) = &after {
                query.push(("after", a.as_str()));
            }
            let resp = self
                .send(self.get(&self.user_path(d.container_path), &query))
                .await?;
            let page = ListPage::parse(d, &answer(d, resp, Op::List).await?);
            let mut reached_older = false;
            for p in &page.posts {
                let at = match p.timestamp.as_deref().map(wire::parse_timestamp) {
                    Some(Ok(at)) => Some(at),
                    Some(Err(e)) => {
                        tracing::warn!(network = d.name, post = %p.id, "{e}");
                        None
                    }
                    None => None,
                };
                if at.zip(cutoff).is_some_and(|(at, cut)| at < cut) {
                    reached_older = true;
                    continue;
                }
                if p.text.as_deref().map(wire::comparable).as_deref() == Some(wanted.as_str()) {
                    return Ok(Some(Created {
                        id: Some(p.id.clone()),
                        url: p.permalink.clone().filter(|u| !u.is_empty()),
                        cid: None,
                    }));
                }
            }
            if (reached_older && d.newest_first) || page.posts.is_empty() {
                return Ok(None);
            }
            match page.after {
                Some(a) => after = Some(a),
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    pub(super) async fn find_once(
        &self,
        post: &PreparedPost,
        since: i64,
    ) -> Result<Option<Created>, PostError> {
        let Some(container) = creation_id(post) else {
            return Err(local_refusal(
                Self::D,
                "the kept request names no container, so there is nothing to check".into(),
            ));
        };
        match self.status(container, None).await? {
            ContainerStatus::Published => match self.already_published(post, Some(since)).await {
                PostError::StagedPublished { post, .. } => Ok(Some(post)),
                e => Err(e),
            },
            ContainerStatus::Finished | ContainerStatus::InProgress => Ok(None),
            other => Err(cannot_publish(Self::D, container, &other)),
        }
    }

    /// `GET /{user}/<quota path>?fields=quota_usage,config`: `(used, total, duration_s)`.
    ///
    /// # Errors
    /// The read was refused or failed.
    pub async fn publishing_limit(&self) -> Result<(u64, u64, u64), PostError> {
        let d = Self::D;
        let read = async {
            let resp = self
                .send(self.get(
                    &self.user_path(d.quota_path),
                    &[("fields", "quota_usage,config")],
                ))
                .await?;
            let v = answer(d, resp, Op::Check).await?;
            let item = v.pointer("/data/0").cloned().unwrap_or(Value::Null);
            let n = |p: &str| item.pointer(p).and_then(Value::as_u64);
            Ok((
                n("/quota_usage").unwrap_or(0),
                n("/config/quota_total").unwrap_or(d.default_quota),
                n("/config/quota_duration").unwrap_or(86_400),
            ))
        };
        read.await.map_err(|e| self.clean(e))
    }
}

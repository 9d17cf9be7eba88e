//! Settling a create past the nonce's window: the channel's messages after the attempt, read
//! back 100 a page (oldest pages first, each page newest first, as Discord answers `after=`),
//! paced by the rate-limit headers, for the bot's own message with the text and attachment
//! that were sent. A message read back carries no nonce (Discord does not keep it), so the
//! author, the text and the cover's file name are what tell it.

use serde_json::Value;

use super::wire::{self, comparable, pace, Op};
use super::{DiscordAdapter, CLOCK_SLACK_MS, MAX_PACE, MAX_PAGES, NETWORK, PAGE_SIZE};
use crate::networks::{Created, PostError, PreparedPost};

impl DiscordAdapter {
    /// Reads the channel's messages after the attempt (less a clock slack), oldest pages
    /// first, for the bot's own message with the text and attachment of `post`.
    pub(super) async fn find_once(&self, post: &PreparedPost, since: i64) -> Result<Option<Created>, PostError> {
        let bot = self.bot_id().await?.clone();
        let wanted = comparable(&post.text);
        let file = post
            .body
            .pointer("/file/file_name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut after = wire::snowflake_at(since.saturating_mul(1000).saturating_sub(CLOCK_SLACK_MS));
        for page in 0..MAX_PAGES {
            let path = format!(
                "/channels/{}/messages?after={after}&limit={PAGE_SIZE}",
                self.channel
            );
            let note = || {
                Some(vec![format!(
                    "(back to {}, looking for the bot's message {:?})",
                    crate::record::rfc3339(since),
                    post.text
                )])
            };
            let req = self.request(reqwest::Method::GET, &path);
            let (a, v) = self.call(req, Op::Read, note).await?;
            let messages = v.as_array().map(Vec::as_slice).unwrap_or_default();
            let mut ours: Vec<&Value> = messages
                .iter()
                .filter(|m| {
                    m.pointer("/author/id").and_then(Value::as_str) == Some(bot.as_str())
                        && comparable(m.get("content").and_then(Value::as_str).unwrap_or("")) == wanted
                        && m.get("attachments").and_then(Value::as_array).is_some_and(|list| {
                            list.iter().any(|f| f.get("filename").and_then(Value::as_str) == Some(file.as_str()))
                        })
                })
                .collect();
            // The first of them, should there be more than one.
            ours.sort_by_key(|m| id_of(m));
            if let Some(found) = ours.first() {
                self.published(found).await?;
                return Ok(Some(self.created(found).await));
            }
            let Some(last) = messages.iter().map(id_of).max().filter(|_| messages.len() >= usize::from(PAGE_SIZE)) else {
                return Ok(None);
            };
            after = last;
            if let Some(wait) = pace(&a.headers).filter(|_| page + 1 < MAX_PAGES) {
                if wait > MAX_PACE {
                    return Err(PostError::RateLimited {
                        network: NETWORK,
                        retry_after: Some(wait),
                        message: "the channel's messages were being read back and its rate limit is used up".into(),
                    });
                }
                tokio::time::sleep(wait).await;
            }
        }
        tracing::info!(
            network = NETWORK,
            pages = MAX_PAGES,
            "the message was not among the pages read; later messages were not looked at"
        );
        Ok(None)
    }

}

/// A message's id as a number (ids sort by time).
fn id_of(message: &Value) -> u64 {
    message
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| id.parse().ok())
        .unwrap_or(0)
}


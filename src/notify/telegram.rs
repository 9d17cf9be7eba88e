//! The Telegram Bot API client and the Telegram notifier.
//!
//! The bot token is part of every method's URL, so no URL ever reaches an error message or a
//! log line from here. `429` answers are honoured (`retry_after`) while the caller's budget
//! allows, and "message is not modified" counts as success.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{MessageRef, Notifier, NotifyError};
use crate::outcome::Outcome;
use crate::vars::Secret;

/// A Bot API failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelegramError {
    #[error("Telegram could not be reached: {0}")]
    Transport(String),
    #[error("Telegram rate limit: retry after {0:?}")]
    RetryAfter(Duration),
    #[error("Telegram refused ({code}): {description}")]
    Api { code: u16, description: String },
}

/// Calls Bot API methods for one bot.
pub struct TelegramClient {
    http: reqwest::Client,
    api: String,
    token: Secret,
}

impl TelegramClient {
    pub fn new(http: reqwest::Client, api: &str, token: Secret) -> Self {
        Self {
            http,
            api: api.trim_end_matches('/').to_owned(),
            token,
        }
    }

    /// Calls `method` with a JSON body; returns `result`.
    ///
    /// # Errors
    /// [`TelegramError`]; never includes the token.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, TelegramError> {
        let url = format!("{}/bot{}/{method}", self.api, self.token.expose());
        let resp = self
            .http
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| TelegramError::Transport(e.without_url().to_string()))?;
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if v.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(v.get("result").cloned().unwrap_or(Value::Null));
        }
        let description = v
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("no description")
            .to_owned();
        if status == 429 {
            let secs = v
                .pointer("/parameters/retry_after")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            return Err(TelegramError::RetryAfter(Duration::from_secs(secs)));
        }
        if status == 400 && description.contains("message is not modified") {
            return Ok(Value::Null);
        }
        Err(TelegramError::Api {
            code: u16::try_from(
                v.get("error_code")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::from(status)),
            )
            .unwrap_or(status),
            description,
        })
    }

    /// Calls `method`, waiting out `429 retry_after` answers as long as `budget` allows.
    ///
    /// # Errors
    /// The last [`TelegramError`].
    pub async fn call_patiently(
        &self,
        method: &str,
        body: &Value,
        budget: Duration,
    ) -> Result<Value, TelegramError> {
        let started = tokio::time::Instant::now();
        loop {
            match self.call(method, body).await {
                Err(TelegramError::RetryAfter(wait)) if started.elapsed() + wait < budget => {
                    tracing::warn!(method, ?wait, "Telegram rate limit; waiting as asked");
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }
}

/// Reports runs to one chat.
pub struct TelegramNotifier {
    client: Arc<TelegramClient>,
    chat_id: i64,
    budget: Duration,
}

impl TelegramNotifier {
    pub fn new(client: Arc<TelegramClient>, chat_id: i64, budget: Duration) -> Self {
        Self {
            client,
            chat_id,
            budget,
        }
    }
}

/// The `reply_markup` of an outcome's buttons: one row per target, the draft-wide buttons on
/// their own row ([`Outcome::button_rows`]).
pub fn keyboard(outcome: &Outcome) -> Value {
    let rows: Vec<Vec<Value>> = outcome
        .button_rows()
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|b| json!({"text": b.text, "callback_data": b.data}))
                .collect()
        })
        .collect();
    json!({ "inline_keyboard": rows })
}

#[async_trait]
impl Notifier for TelegramNotifier {
    async fn report(&self, outcome: &Outcome, edit: Option<MessageRef>) -> Result<(), NotifyError> {
        let text = outcome.report_text();
        let markup = keyboard(outcome);
        if let Some(m) = edit {
            let body = json!({
                "chat_id": m.chat_id,
                "message_id": m.message_id,
                "text": text,
                "reply_markup": markup,
                "link_preview_options": {"is_disabled": true}
            });
            match self
                .client
                .call_patiently("editMessageText", &body, self.budget)
                .await
            {
                Ok(_) => return Ok(()),
                // The message may be gone or too old to edit: send a new one instead.
                Err(TelegramError::Api {
                    code: 400,
                    description,
                }) => {
                    tracing::warn!(%description, "could not edit the report; sending a new one");
                }
                Err(e) => return Err(NotifyError(e.to_string())),
            }
        }
        let body = json!({
            "chat_id": self.chat_id,
            "text": text,
            "reply_markup": markup,
            "link_preview_options": {"is_disabled": true}
        });
        self.client
            .call_patiently("sendMessage", &body, self.budget)
            .await
            .map(|_| ())
            .map_err(|e| NotifyError(e.to_string()))
    }

    async fn say(&self, text: &str) -> Result<(), NotifyError> {
        let body = json!({
            "chat_id": self.chat_id,
            "text": text,
            "link_preview_options": {"is_disabled": true}
        });
        self.client
            .call_patiently("sendMessage", &body, self.budget)
            .await
            .map(|_| ())
            .map_err(|e| NotifyError(e.to_string()))
    }

    async fn tell(&self, text: &str, outcome: &Outcome) -> Result<(), NotifyError> {
        let body = json!({
            "chat_id": self.chat_id,
            "text": format!("{text}\n\n{}", outcome.report_text()),
            "reply_markup": keyboard(outcome),
        });
        self.client
            .call_patiently("sendMessage", &body, self.budget)
            .await
            .map(|_| ())
            .map_err(|e| NotifyError(e.to_string()))
    }
}

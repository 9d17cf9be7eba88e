//! Reports to the owner. The text and buttons come from [`Outcome`]; a notifier only delivers.
//! A failed report never changes an outcome: the pipeline logs it and moves on.

pub mod log;
pub mod telegram;

use async_trait::async_trait;

use crate::outcome::Outcome;

/// A Telegram message to edit instead of sending a new one (a run started from its button).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRef {
    pub chat_id: i64,
    pub message_id: i64,
}

/// The report could not be delivered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("report not delivered: {0}")]
pub struct NotifyError(pub String);

/// Delivers reports.
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Reports `outcome`, editing `edit` when given.
    async fn report(&self, outcome: &Outcome, edit: Option<MessageRef>) -> Result<(), NotifyError>;

    /// Tells the owner something that is not a run's outcome (sweeper reminders).
    async fn tell(&self, text: &str, outcome: &Outcome) -> Result<(), NotifyError>;

    /// Tells the owner something about no draft at all (a credential about to expire).
    /// The default logs it.
    async fn say(&self, text: &str) -> Result<(), NotifyError> {
        tracing::warn!(message = text, "for the owner");
        Ok(())
    }
}

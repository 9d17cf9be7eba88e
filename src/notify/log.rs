//! The notifier used when Telegram is not configured: reports go to the log.

use async_trait::async_trait;

use super::{MessageRef, Notifier, NotifyError};
use crate::outcome::Outcome;

/// Writes reports to the log.
pub struct LogNotifier;

#[async_trait]
impl Notifier for LogNotifier {
    async fn report(
        &self,
        outcome: &Outcome,
        _edit: Option<MessageRef>,
    ) -> Result<(), NotifyError> {
        // One log line per report: the message's lines joined.
        let text = outcome.report_text().replace('\n', " / ");
        tracing::info!(key = %outcome.key, outcome = outcome.outcome.as_str(), urn = outcome.post_id.as_deref(), "report: {text}");
        Ok(())
    }

    async fn tell(&self, text: &str, outcome: &Outcome) -> Result<(), NotifyError> {
        let text = text.replace('\n', " / ");
        tracing::warn!(key = %outcome.key, "owner: {text}");
        Ok(())
    }
}

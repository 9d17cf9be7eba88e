//! What a run ended in, and how each transport shows it (DESIGN.md "Outcomes").
//!
//! One table, here: the HTTP status, the CLI exit code and the Telegram buttons of every
//! outcome. Entry points translate with these and decide nothing themselves.

use serde::Serialize;

use crate::key::PostKey;
use crate::publish::post_url;

/// The outcome of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Posted,
    AlreadyPosted,
    BeingPosted,
    Failed,
    Unknown,
    PostedNotRecorded,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Posted => "posted",
            Self::AlreadyPosted => "already_posted",
            Self::BeingPosted => "being_posted",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::PostedNotRecorded => "posted_not_recorded",
        }
    }
}

/// The outcome JSON: `{"key","outcome","urn","retryable","detail"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub key: String,
    pub outcome: OutcomeKind,
    pub urn: Option<String>,
    pub retryable: bool,
    pub detail: String,
    /// Present (true) only when the publisher was the dry run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The owner may override this refusal (content guard): offer *Post anyway*.
    #[serde(skip)]
    pub offer_force: bool,
    /// Refused because postonce itself is misconfigured (not the draft, not the network):
    /// HTTP 500, exit 2, no button (a retry cannot help until the setting is fixed).
    #[serde(skip)]
    pub misconfigured: bool,
}

/// A Telegram inline button: its label and its callback data (`<action>:<key>`, ≤ 64 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub text: &'static str,
    pub data: String,
}

impl Outcome {
    pub fn new(key: &PostKey, outcome: OutcomeKind, detail: impl Into<String>) -> Self {
        Self {
            key: key.to_string(),
            outcome,
            urn: None,
            retryable: false,
            detail: detail.into(),
            dry_run: false,
            offer_force: false,
            misconfigured: false,
        }
    }

    pub fn with_urn(mut self, urn: Option<String>) -> Self {
        self.urn = urn;
        self
    }

    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The status of the CI route for this outcome.
    pub fn http_status(&self) -> u16 {
        if self.misconfigured {
            return 500;
        }
        match self.outcome {
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted => 200,
            OutcomeKind::BeingPosted => 409,
            OutcomeKind::Failed if self.retryable => 503,
            OutcomeKind::Failed => 422,
            OutcomeKind::Unknown | OutcomeKind::PostedNotRecorded => 202,
        }
    }

    /// The exit code of `postonce post`.
    pub fn exit_code(&self) -> i32 {
        if self.misconfigured {
            return 2;
        }
        match self.outcome {
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted => 0,
            OutcomeKind::BeingPosted => 3,
            OutcomeKind::Failed if self.retryable => 4,
            OutcomeKind::Failed => 1,
            OutcomeKind::Unknown | OutcomeKind::PostedNotRecorded => 5,
        }
    }

    /// The post's public URL, when its URN is known and real.
    pub fn post_url(&self) -> Option<String> {
        self.urn.as_deref().filter(|_| !self.dry_run).map(post_url)
    }

    /// The buttons under the Telegram report.
    pub fn buttons(&self) -> Vec<Button> {
        let b = |text, action: &str| Button {
            text,
            data: format!("{action}:{}", self.key),
        };
        if self.misconfigured {
            return vec![];
        }
        match self.outcome {
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted => vec![],
            OutcomeKind::Failed if self.offer_force => vec![b("Post anyway", "force")],
            OutcomeKind::BeingPosted | OutcomeKind::Failed | OutcomeKind::PostedNotRecorded => {
                vec![b("Retry", "retry")]
            }
            OutcomeKind::Unknown => vec![b("It's on LinkedIn", "done"), b("Post anyway", "force")],
        }
    }

    /// The report text: key, outcome in words, link, and the reason.
    pub fn report_text(&self) -> String {
        let headline = match self.outcome {
            OutcomeKind::Posted => "✅ Posted to LinkedIn",
            OutcomeKind::AlreadyPosted => "☑️ Already on LinkedIn",
            OutcomeKind::BeingPosted => "⏳ Already being posted by another run",
            OutcomeKind::Failed if self.retryable => "⚠️ Not posted (temporary failure)",
            OutcomeKind::Failed => "❌ Not posted",
            OutcomeKind::Unknown => "❓ May or may not be on LinkedIn",
            OutcomeKind::PostedNotRecorded => "⚠️ Posted, but the record could not be written",
        };
        let mut text = format!("{headline}: {}", self.key);
        if self.dry_run {
            text.push_str(" (dry run)");
        }
        if let Some(url) = self.post_url() {
            text.push('\n');
            text.push_str(&url);
        } else if let Some(urn) = &self.urn {
            text.push_str(&format!("\n{urn}"));
        }
        if self.outcome == OutcomeKind::Unknown {
            text.push_str(
                "\nCheck your LinkedIn profile, then tell me: It's on LinkedIn, or Post anyway.",
            );
        }
        if !self.detail.is_empty() {
            text.push('\n');
            text.push_str(&self.detail);
        }
        // Telegram's limit is 4096 characters.
        if text.chars().count() > 4000 {
            text = text.chars().take(3990).collect::<String>() + "…";
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(kind: OutcomeKind, retryable: bool) -> Outcome {
        Outcome::new(&PostKey::new("blog", "x").unwrap(), kind, "").retryable(retryable)
    }

    #[test]
    fn the_outcomes_table() {
        use OutcomeKind::*;
        let table = [
            (Posted, false, 200, 0, vec![]),
            (AlreadyPosted, false, 200, 0, vec![]),
            (BeingPosted, true, 409, 3, vec!["retry:blog-x"]),
            (Failed, true, 503, 4, vec!["retry:blog-x"]),
            (Failed, false, 422, 1, vec!["retry:blog-x"]),
            (Unknown, false, 202, 5, vec!["done:blog-x", "force:blog-x"]),
            (PostedNotRecorded, false, 202, 5, vec!["retry:blog-x"]),
        ];
        for (kind, retryable, status, code, buttons) in table {
            let o = outcome(kind, retryable);
            assert_eq!(o.http_status(), status, "{kind:?}");
            assert_eq!(o.exit_code(), code, "{kind:?}");
            let data: Vec<String> = o.buttons().into_iter().map(|b| b.data).collect();
            assert_eq!(data, buttons, "{kind:?}");
        }
    }

    #[test]
    fn json_has_the_documented_fields() {
        let o = outcome(OutcomeKind::Posted, false).with_urn(Some("urn:li:share:1".into()));
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["key"], "blog-x");
        assert_eq!(v["outcome"], "posted");
        assert_eq!(v["urn"], "urn:li:share:1");
        assert_eq!(v["retryable"], false);
        assert!(v.get("detail").is_some());
        assert!(v.get("dry_run").is_none());
    }
}

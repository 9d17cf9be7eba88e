//! What a run ended in, and how each transport shows it (README "Outcomes").
//!
//! One table, here: the HTTP status, the CLI exit code and the Telegram buttons of every
//! outcome. Entry points translate with these and decide nothing themselves.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::image::Sent;
use crate::key::PostKey;
use crate::networks::Network;

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
    /// Several targets ended differently (README "Targets"): some are on their network,
    /// some are not.
    Partial,
    /// Waits for its time (README "Scheduling"): stored, nothing sent, no claim taken.
    Scheduled,
    /// Cancelled by the owner: never posted unless sent again.
    Cancelled,
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
            Self::Partial => "partial",
            Self::Scheduled => "scheduled",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One target's entry in the outcome JSON's `targets`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetOutcome {
    pub outcome: OutcomeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The network's content id of the post (an AT Protocol record's cid), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cid: Option<String>,
    pub retryable: bool,
    pub detail: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// When a scheduled target goes (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish_at: Option<String>,
    /// The image this target was given: format, bytes, pixels, the original or a rendition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<Sent>,
}

/// The outcome JSON: `{"key","outcome","urn","retryable","detail","targets"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub key: String,
    pub outcome: OutcomeKind,
    /// The post's id on its network (a URN, a status id, a message id, …); with several
    /// targets, absent (each target's is in `targets`). The JSON field is `urn`.
    #[serde(rename = "urn")]
    pub post_id: Option<String>,
    pub retryable: bool,
    pub detail: String,
    /// The post's public URL, when the network gave one or it can be built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The post's content id on its network (an AT Protocol record's cid), when it has one; shown
    /// in the target's entry of `targets`.
    #[serde(skip)]
    pub cid: Option<String>,
    /// Every target of the run, by network (README "Targets"); absent on a single target's
    /// own outcome before [`Outcome::combine`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<BTreeMap<Network, TargetOutcome>>,
    /// When the draft goes (`scheduled`, or a target delayed by pacing): RFC 3339, UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish_at: Option<String>,
    /// The image this target was given (shown in the target's entry of `targets`).
    #[serde(skip)]
    pub image: Option<Sent>,
    /// The network this outcome is about (one target's run).
    #[serde(skip)]
    pub network: Network,
    /// The targets' own outcomes, when this one combines several.
    #[serde(skip)]
    pub parts: Vec<Outcome>,
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
    /// Answered from state another run or trigger left (a record, a cancel, a time not yet
    /// come): nothing changed, so a sweep's run of it is not news for the owner.
    #[serde(skip)]
    pub settled: bool,
}

/// A Telegram inline button: its label and its callback data (`<action>:<key>`, ≤ 64 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub text: String,
    pub data: String,
}

impl Outcome {
    pub fn new(key: &PostKey, outcome: OutcomeKind, detail: impl Into<String>) -> Self {
        Self {
            key: key.draft(),
            outcome,
            post_id: None,
            retryable: false,
            detail: detail.into(),
            url: None,
            cid: None,
            targets: None,
            image: None,
            network: key.network(),
            parts: Vec::new(),
            dry_run: false,
            offer_force: false,
            misconfigured: false,
            publish_at: None,
            settled: false,
        }
    }

    /// One run's outcome from its targets' (README "Targets"): with one target, that
    /// target's, as it always was; with several, `posted` / `already_posted` when every one is
    /// on its network, the shared outcome when all ended the same, else `partial`. `targets`
    /// carries each one either way.
    pub fn combine(key: &PostKey, parts: Vec<Outcome>) -> Outcome {
        let entries: BTreeMap<Network, TargetOutcome> = parts
            .iter()
            .map(|p| {
                (
                    p.network,
                    TargetOutcome {
                        outcome: p.outcome,
                        id: p.post_id.clone(),
                        url: p.post_url(),
                        cid: p.cid.clone(),
                        retryable: p.retryable,
                        detail: p.detail.clone(),
                        dry_run: p.dry_run,
                        publish_at: p.publish_at.clone(),
                        image: p.image.clone(),
                    },
                )
            })
            .collect();
        if parts.len() == 1 {
            let mut only = parts
                .into_iter()
                .next()
                .unwrap_or_else(|| Outcome::new(key, OutcomeKind::Failed, "no target to post to"));
            only.url = only.post_url();
            only.targets = Some(entries);
            return only;
        }
        let on_network =
            |k: OutcomeKind| matches!(k, OutcomeKind::Posted | OutcomeKind::AlreadyPosted);
        let done = parts.iter().filter(|p| on_network(p.outcome)).count();
        let first = parts.first().map_or(OutcomeKind::Failed, |p| p.outcome);
        let kind = if done == parts.len() {
            if parts.iter().any(|p| p.outcome == OutcomeKind::Posted) {
                OutcomeKind::Posted
            } else {
                OutcomeKind::AlreadyPosted
            }
        } else if parts.iter().all(|p| p.outcome == first) {
            first
        } else {
            OutcomeKind::Partial
        };
        let detail = match kind {
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted => {
                format!("all {} targets are on their network", parts.len())
            }
            _ => format!("{done} of {} posted", parts.len()),
        };
        let mut combined = Outcome::new(key, kind, detail);
        combined.retryable = parts.iter().any(|p| p.retryable);
        combined.dry_run = parts.iter().all(|p| p.dry_run);
        combined.misconfigured = parts.iter().all(|p| p.misconfigured);
        combined.settled = parts.iter().all(|p| p.settled);
        combined.publish_at = parts.iter().find_map(|p| p.publish_at.clone());
        combined.targets = Some(entries);
        combined.parts = parts;
        combined
    }

    pub fn with_post_id(mut self, post_id: Option<String>) -> Self {
        self.post_id = post_id;
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
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted | OutcomeKind::Cancelled => 200,
            OutcomeKind::Scheduled => 202,
            OutcomeKind::BeingPosted => 409,
            OutcomeKind::Failed if self.retryable => 503,
            OutcomeKind::Failed => 422,
            OutcomeKind::Unknown | OutcomeKind::PostedNotRecorded | OutcomeKind::Partial => 202,
        }
    }

    /// The exit code of `postonce post`.
    pub fn exit_code(&self) -> i32 {
        if self.misconfigured {
            return 2;
        }
        match self.outcome {
            OutcomeKind::Posted
            | OutcomeKind::AlreadyPosted
            | OutcomeKind::Scheduled
            | OutcomeKind::Cancelled => 0,
            OutcomeKind::BeingPosted => 3,
            OutcomeKind::Failed if self.retryable => 4,
            OutcomeKind::Failed => 1,
            OutcomeKind::Unknown | OutcomeKind::PostedNotRecorded => 5,
            OutcomeKind::Partial => 6,
        }
    }

    /// The post's public URL, when it is known and real.
    pub fn post_url(&self) -> Option<String> {
        if self.dry_run {
            return None;
        }
        self.url
            .clone()
            .or_else(|| self.network.url_of(self.post_id.as_deref()?))
    }

    /// The buttons under the Telegram report: with several targets, each target's own, named.
    pub fn buttons(&self) -> Vec<Button> {
        self.button_rows().into_iter().flatten().collect()
    }

    /// The buttons as keyboard rows: one row per target that has buttons, and the draft-wide
    /// ones (Post now, Cancel) on a row of their own. The Bot API refuses a row wider than 8
    /// buttons (observed, not documented), and five `unknown` targets make 10 buttons: in one
    /// row the report would never arrive.
    pub fn button_rows(&self) -> Vec<Vec<Button>> {
        let mut rows: Vec<Vec<Button>> = if self.parts.is_empty() {
            vec![self.own_buttons(false)]
        } else {
            self.parts.iter().map(|p| p.own_buttons(true)).collect()
        };
        // A schedule is the draft's, whatever its targets: Post now and Cancel act on all.
        let scheduled = |o: &Outcome| o.outcome == OutcomeKind::Scheduled;
        if scheduled(self) || self.parts.iter().any(scheduled) {
            rows.push(vec![
                Button {
                    text: "Post now".into(),
                    data: format!("now:{}", self.key),
                },
                Button {
                    text: "Cancel".into(),
                    data: format!("cancel:{}", self.key),
                },
            ]);
        }
        rows.retain(|row| !row.is_empty());
        rows
    }

    /// This target's buttons. `named`: one of several targets, so every button names it.
    fn own_buttons(&self, named: bool) -> Vec<Button> {
        let n = self.network;
        let tag = |action: &str| {
            // `done:<key>` / `force:<key>` are the first network's; `retry:<key>` is every
            // pending target, which is this one when it is the only one.
            let bare = match action {
                "retry" => !named,
                _ => n.bare_names(),
            };
            if bare {
                format!("{action}:{}", self.key)
            } else {
                format!("{action}:{}@{}", self.key, n.as_str())
            }
        };
        let b = |text: String, action: &str| Button {
            text,
            data: tag(action),
        };
        let name = |plain: &str, with: String| if named { with } else { plain.to_owned() };
        if self.misconfigured {
            return vec![];
        }
        match self.outcome {
            OutcomeKind::Posted
            | OutcomeKind::AlreadyPosted
            | OutcomeKind::Partial
            | OutcomeKind::Scheduled
            | OutcomeKind::Cancelled => vec![],
            OutcomeKind::Failed if self.offer_force => vec![b(
                name("Post anyway", format!("Post anyway to {}", n.label())),
                "force",
            )],
            OutcomeKind::BeingPosted | OutcomeKind::Failed | OutcomeKind::PostedNotRecorded => {
                vec![b(name("Retry", format!("Retry {}", n.label())), "retry")]
            }
            OutcomeKind::Unknown => vec![
                b(n.confirm_label().to_owned(), "done"),
                b(
                    name("Post anyway", format!("Post anyway to {}", n.label())),
                    "force",
                ),
            ],
        }
    }

    /// The outcome in words, for one network.
    fn headline(&self) -> String {
        let on = self.network.label();
        match self.outcome {
            OutcomeKind::Posted => format!("✅ Posted to {on}"),
            OutcomeKind::AlreadyPosted => format!("☑️ Already on {on}"),
            OutcomeKind::BeingPosted => "⏳ Already being posted by another run".into(),
            OutcomeKind::Failed if self.retryable => "⚠️ Not posted (temporary failure)".into(),
            OutcomeKind::Failed => "❌ Not posted".into(),
            OutcomeKind::Unknown => format!("❓ May or may not be on {on}"),
            OutcomeKind::PostedNotRecorded => {
                "⚠️ Posted, but the record could not be written".into()
            }
            OutcomeKind::Partial => "◐ Partly posted".into(),
            OutcomeKind::Scheduled => match &self.publish_at {
                Some(at) => format!("🕘 Scheduled for {at}"),
                None => "🕘 Scheduled".into(),
            },
            OutcomeKind::Cancelled => "🚫 Cancelled".into(),
        }
    }

    /// Link (or id), the question for the owner, and the reason.
    fn body_lines(&self, text: &mut String, indent: &str) {
        if let Some(url) = self.post_url() {
            text.push_str(&format!("\n{indent}{url}"));
        } else if let Some(urn) = &self.post_id {
            text.push_str(&format!("\n{indent}{urn}"));
        }
        if self.outcome == OutcomeKind::Unknown {
            text.push_str(&format!(
                "\n{indent}Check {}, then tell me: {}, or Post anyway.",
                self.network.label(),
                self.network.confirm_label()
            ));
        }
        if !self.detail.is_empty() {
            text.push_str(&format!("\n{indent}{}", self.detail));
        }
    }

    /// The report text: key, outcome in words, link, and the reason; with several targets,
    /// one block per target.
    pub fn report_text(&self) -> String {
        self.report_cut().0
    }

    /// The networks whose whole block the report text carries: all of them, unless the text
    /// was cut at Telegram's limit, and then only those whose block ends before the cut. Only
    /// what the owner could read counts as told.
    pub fn reported_in_full(&self) -> Vec<Network> {
        let (_, whole) = self.report_cut();
        if self.parts.is_empty() {
            return if whole > 0 {
                vec![self.network]
            } else {
                vec![]
            };
        }
        self.parts.iter().take(whole).map(|p| p.network).collect()
    }

    /// The report text, and how many blocks (one per part, or the one outcome) it carries
    /// whole.
    fn report_cut(&self) -> (String, usize) {
        // Where each block ends, in characters.
        let mut ends = Vec::new();
        let mut text = if self.parts.is_empty() {
            let mut text = format!("{}: {}", self.headline(), self.key);
            if self.dry_run {
                text.push_str(" (dry run)");
            }
            self.body_lines(&mut text, "");
            ends.push(text.chars().count());
            text
        } else {
            let headline = match self.outcome {
                OutcomeKind::Posted => "✅ Posted everywhere".to_owned(),
                OutcomeKind::AlreadyPosted => "☑️ Already everywhere".to_owned(),
                _ if self.outcome == OutcomeKind::Partial => self.headline(),
                _ => self.headline(),
            };
            let mut text = format!("{headline}: {} ({})", self.key, self.detail);
            for p in &self.parts {
                text.push_str(&format!("\n\n{} — {}", p.network.label(), p.headline()));
                if p.dry_run {
                    text.push_str(" (dry run)");
                }
                p.body_lines(&mut text, "");
                ends.push(text.chars().count());
            }
            text
        };
        // Telegram's limit is 4096 characters.
        if text.chars().count() > REPORT_MAX {
            text = text.chars().take(REPORT_CUT).collect::<String>() + "…";
            let whole = ends.iter().take_while(|end| **end <= REPORT_CUT).count();
            return (text, whole);
        }
        (text, ends.len())
    }
}

/// The longest report text sent whole (Telegram takes 4096 characters).
const REPORT_MAX: usize = 4000;
/// Where a longer report is cut (an ellipsis follows).
const REPORT_CUT: usize = 3990;

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
            (
                Scheduled,
                false,
                202,
                0,
                vec!["now:blog-x", "cancel:blog-x"],
            ),
            (Cancelled, false, 200, 0, vec![]),
        ];
        for (kind, retryable, status, code, buttons) in table {
            let o = outcome(kind, retryable);
            assert_eq!(o.http_status(), status, "{kind:?}");
            assert_eq!(o.exit_code(), code, "{kind:?}");
            let data: Vec<String> = o.buttons().into_iter().map(|b| b.data).collect();
            assert_eq!(data, buttons, "{kind:?}");
        }
    }

    /// A report over Telegram's limit is cut at 3,990 characters; only the parts whose block
    /// ends before the cut count as shown in full.
    #[test]
    fn a_cut_report_names_only_the_parts_it_shows_whole() {
        let key = PostKey::new("blog", "x").unwrap();
        let part = |n: Network| {
            let mut p = Outcome::new(&key.on(n), OutcomeKind::Failed, "r".repeat(1_500));
            p.network = n;
            p
        };
        let mut o = outcome(OutcomeKind::Failed, false);
        o.parts = vec![
            part(Network::Linkedin),
            part(Network::X),
            part(Network::Telegram),
        ];
        let text = o.report_text();
        assert_eq!(text.chars().count(), 3_991);
        assert_eq!(o.reported_in_full(), vec![Network::Linkedin, Network::X]);
        o.parts.truncate(2);
        assert_eq!(o.reported_in_full(), vec![Network::Linkedin, Network::X]);
        let mut one = outcome(OutcomeKind::Failed, false);
        assert_eq!(one.reported_in_full(), vec![Network::Linkedin]);
        one.detail = "r".repeat(4_000);
        assert!(one.reported_in_full().is_empty());
    }

    #[test]
    fn json_has_the_documented_fields() {
        let o = outcome(OutcomeKind::Posted, false).with_post_id(Some("urn:li:share:1".into()));
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["key"], "blog-x");
        assert_eq!(v["outcome"], "posted");
        assert_eq!(v["urn"], "urn:li:share:1");
        assert_eq!(v["retryable"], false);
        assert!(v.get("detail").is_some());
        assert!(v.get("dry_run").is_none());
    }
}

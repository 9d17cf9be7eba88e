//! A draft change as one update expression: which attributes a [`DraftUpdate`] sets and
//! removes, and the condition under which it applies.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::items::{n, record_copy, s, Item};
use crate::record::{DraftStatus, DraftUpdate, PendingPost, PostedRecord};

/// An update expression under construction, with every attribute name behind a placeholder
/// (`status`, `key` and `source` are reserved words).
pub(super) struct Expr {
    pub(super) set: Vec<String>,
    pub(super) remove: Vec<String>,
    pub(super) names: HashMap<String, String>,
    pub(super) values: Item,
}

/// Sized for a draft's biggest change (about twenty names and values), so the maps are not
/// rehashed as they fill: a run builds some fifty placeholders (issue 34).
impl Default for Expr {
    fn default() -> Self {
        Self {
            set: Vec::with_capacity(16),
            remove: Vec::new(),
            names: HashMap::with_capacity(24),
            values: HashMap::with_capacity(24),
        }
    }
}

impl Expr {
    /// `#attr`, the attribute's placeholder, its name recorded once however often it is used.
    pub(super) fn name(&mut self, attr: &str) -> String {
        let mut placeholder = String::with_capacity(attr.len() + 1);
        placeholder.push('#');
        placeholder.push_str(attr);
        self.names
            .entry(placeholder.clone())
            .or_insert_with(|| attr.to_owned());
        placeholder
    }

    /// `:vN`, a new value's placeholder.
    pub(super) fn value(&mut self, v: AttributeValue) -> String {
        let mut placeholder = String::with_capacity(6);
        placeholder.push_str(":v");
        placeholder.push_str(itoa::Buffer::new().format(self.values.len()));
        self.values.insert(placeholder.clone(), v);
        placeholder
    }

    pub(super) fn set(&mut self, attr: &str, v: AttributeValue) -> &mut Self {
        let (a, v) = (self.name(attr), self.value(v));
        self.set.push([a.as_str(), " = ", v.as_str()].concat());
        self
    }

    pub(super) fn set_if_absent(&mut self, attr: &str, v: AttributeValue) -> &mut Self {
        let (a, v) = (self.name(attr), self.value(v));
        self.set.push(format!("{a} = if_not_exists({a}, {v})"));
        self
    }

    pub(super) fn set_opt(&mut self, attr: &str, v: Option<AttributeValue>) -> &mut Self {
        match v {
            Some(v) => self.set(attr, v),
            None => self.remove(attr),
        }
    }

    pub(super) fn increment(&mut self, attr: &str) -> &mut Self {
        let a = self.name(attr);
        let zero = self.value(n(0));
        let one = self.value(n(1));
        self.set
            .push(format!("{a} = if_not_exists({a}, {zero}) + {one}"));
        self
    }

    /// Adds a run that started and died (its `started` mark still set) to `attempts`, and
    /// clears the mark (see [`crate::record::Draft::started`]).
    pub(super) fn count_started(&mut self) -> &mut Self {
        let (a, st) = (self.name("attempts"), self.name("started"));
        let zero = self.value(n(0));
        self.set.push(format!(
            "{a} = if_not_exists({a}, {zero}) + if_not_exists({st}, {zero})"
        ));
        self
    }

    pub(super) fn remove(&mut self, attr: &str) -> &mut Self {
        let a = self.name(attr);
        self.remove.push(a);
        self
    }

    /// Sets the status and, with it, the due index's partition (`queue`).
    pub(super) fn status(&mut self, ns: &str, status: DraftStatus) -> &mut Self {
        self.set("status", s(status.as_str()))
            .set("queue", s(format!("{ns}{}", status.as_str())))
    }

    /// Takes the draft out of the due index (it is done).
    pub(super) fn unindex(&mut self) -> &mut Self {
        self.remove("queue").remove("due_at")
    }

    /// Keeps `p` as the draft's create-post request (sent, or about to be sent, as it is).
    pub(super) fn set_pending(&mut self, p: &PendingPost) -> &mut Self {
        self.set("pending_commentary", s(&p.text))
            .set("pending_image_urn", s(&p.media_id))
            .set_opt("pending_alt", p.alt.as_ref().map(s))
            .set("pending_at", n(p.at))
            .set("pending_run", s(&p.run))
            .set_opt("pending_caption_hash", p.caption_hash.as_ref().map(s))
            .set_opt(
                "pending_request",
                p.request
                    .as_ref()
                    .and_then(|r| serde_json::to_string(r).ok())
                    .map(|r| s(&r)),
            )
            .remove("pending_last_at")
    }

    /// Removes the kept create-post request (the attempt is settled).
    pub(super) fn clear_pending(&mut self) -> &mut Self {
        for attr in [
            "pending_commentary",
            "pending_image_urn",
            "pending_alt",
            "pending_at",
            "pending_run",
            "pending_caption_hash",
            "pending_last_at",
            "pending_request",
        ] {
            self.remove(attr);
        }
        self
    }

    pub(super) fn expression(&self) -> String {
        let mut e = String::new();
        if !self.set.is_empty() {
            e.push_str("SET ");
            e.push_str(&self.set.join(", "));
        }
        if !self.remove.is_empty() {
            e.push_str(" REMOVE ");
            e.push_str(&self.remove.join(", "));
        }
        e
    }

    /// When `update` applies to a draft (see [`crate::record::RecordStore::update_draft`]): it exists, its
    /// status is in `from` (any, if empty), a change bound to an attempt finds that attempt
    /// kept, and a delay is told only once.
    pub(super) fn applies(&mut self, update: &DraftUpdate, from: &[DraftStatus]) -> String {
        let mut condition = self.condition(from);
        if let DraftUpdate::Resend { prev_run: run, .. } | DraftUpdate::IfAttempt { run, .. } =
            update
        {
            let (a, v) = (self.name("pending_run"), self.value(s(run)));
            condition.push_str(&format!(" AND {a} = {v}"));
        }
        if matches!(update, DraftUpdate::DelayTold) {
            let (a, f) = (
                self.name("delay_told"),
                self.value(AttributeValue::Bool(false)),
            );
            condition.push_str(&format!(" AND (attribute_not_exists({a}) OR {a} = {f})"));
        }
        condition
    }

    /// `attribute_exists(pk)` and, when `from` is not empty, `status IN (…)`.
    pub(super) fn condition(&mut self, from: &[DraftStatus]) -> String {
        let mut c = "attribute_exists(pk)".to_owned();
        if !from.is_empty() {
            let st = self.name("status");
            let vals: Vec<String> = from.iter().map(|f| self.value(s(f.as_str()))).collect();
            c.push_str(&format!(" AND {st} IN ({})", vals.join(", ")));
        }
        c
    }
}

pub(super) fn posted_draft_update(record: &PostedRecord, now: i64, expires_at: i64) -> Expr {
    let mut e = Expr::default();
    e.set("key", s(&record.key))
        .set("status", s(DraftStatus::Posted.as_str()))
        .unindex()
        .set("updated_at", n(now))
        .set("expires_at", n(expires_at))
        .set_if_absent("created_at", n(now))
        .set_if_absent("attempts", n(0))
        .remove("next_retry_at")
        .set("record", record_copy(record))
        .clear_pending();
    e
}

pub(super) fn draft_update(ns: &str, update: &DraftUpdate, now: i64) -> Expr {
    if let DraftUpdate::IfAttempt { update, .. } = update {
        return draft_update(ns, update, now);
    }
    let mut e = Expr::default();
    e.set("updated_at", n(now));
    match update.due_at(now) {
        Some(Some(at)) => {
            e.set("due_at", n(at));
        }
        Some(None) => {
            e.unindex();
        }
        None => {}
    }
    match update {
        DraftUpdate::IfAttempt { .. } => {}
        DraftUpdate::Intent(p) => {
            e.status(ns, DraftStatus::Unknown)
                .set_pending(p)
                .set("started", n(0))
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true));
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            e.status(ns, DraftStatus::Failed)
                .set("reminded", AttributeValue::Bool(false))
                .increment("attempts")
                .set("started", n(0))
                .set("last_error", s(error))
                .set("retryable", AttributeValue::Bool(*retryable))
                .set_opt("next_retry_at", next_retry_at.map(n))
                .clear_pending();
        }
        DraftUpdate::Ambiguous { error, ask_owner } => {
            e.status(ns, DraftStatus::Unknown)
                .set("reminded", AttributeValue::Bool(false))
                .increment("attempts")
                .set("started", n(0))
                .set("last_error", s(error))
                .set("retryable", AttributeValue::Bool(!ask_owner));
        }
        DraftUpdate::Resend { at, run, .. } => {
            e.set("pending_last_at", n(*at)).set("pending_run", s(run));
        }
        DraftUpdate::NeedsReview { error } => {
            e.status(ns, DraftStatus::NeedsReview)
                .count_started()
                .set("started", n(0))
                .set("last_error", s(error))
                .set("reminded", AttributeValue::Bool(false))
                .remove("next_retry_at");
        }
        DraftUpdate::Reminded => {
            e.set("reminded", AttributeValue::Bool(true));
        }
        DraftUpdate::DelayTold => {
            e.set("delay_told", AttributeValue::Bool(true));
        }
        DraftUpdate::Recorded { expires_at, record } => {
            e.set("status", s(DraftStatus::Posted.as_str()))
                .set("record", record_copy(record))
                .set("expires_at", n(*expires_at))
                .remove("next_retry_at")
                .clear_pending();
        }
        DraftUpdate::Schedule { at } => {
            // A mark left by a run that ended without writing (being posted elsewhere, its
            // intent refused) is no death: the draft waits for its time again.
            e.status(ns, DraftStatus::Scheduled)
                .set("started", n(0))
                .set("publish_at", n(*at))
                .remove("delay_told")
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true))
                .remove("last_error")
                .remove("next_retry_at")
                .clear_pending();
        }
        DraftUpdate::Defer { reason, told, .. } => {
            if *told {
                e.set("delay_told", AttributeValue::Bool(true));
            }
            e.status(ns, DraftStatus::Scheduled)
                .set("last_error", s(reason))
                .set("retryable", AttributeValue::Bool(true))
                .clear_pending();
        }
        DraftUpdate::Revive => {
            e.status(ns, DraftStatus::New)
                .remove("publish_at")
                .set("reminded", AttributeValue::Bool(false))
                .set("retryable", AttributeValue::Bool(true));
        }
        DraftUpdate::Spread { pending, next } => {
            match (pending, next) {
                // Due again: indexed under `posted` (the status it keeps).
                (Some(p), Some(_)) => {
                    e.status(ns, DraftStatus::Posted).set_pending(p);
                }
                (None, Some(_)) => {
                    e.status(ns, DraftStatus::Posted);
                }
                (_, None) => {
                    e.clear_pending();
                }
            }
        }
        DraftUpdate::Cancel => {
            e.set("status", s(DraftStatus::Cancelled.as_str()))
                .remove("next_retry_at")
                .clear_pending();
        }
    }
    e
}

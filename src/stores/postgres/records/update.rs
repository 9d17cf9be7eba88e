//! A draft change as one conditioned `UPDATE` (the meaning of the DynamoDB store's update
//! expressions, column for column).

use tokio_postgres::types::{Json, ToSql};

use crate::record::{DraftStatus, DraftUpdate, PendingPost};

/// A parameter of a statement under construction.
pub type Param = Box<dyn ToSql + Sync + Send>;

/// A statement's parameters and the `SET` list of an update.
#[derive(Default)]
pub struct Sql {
    pub sets: Vec<String>,
    pub params: Vec<Param>,
}

impl Sql {
    /// Adds a parameter; returns its placeholder (`$n`).
    pub fn param(&mut self, v: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(v));
        format!("${}", self.params.len())
    }

    fn set(&mut self, col: &str, v: impl ToSql + Sync + Send + 'static) -> &mut Self {
        let p = self.param(v);
        self.sets.push(format!("{col} = {p}"));
        self
    }

    fn raw(&mut self, assignment: impl Into<String>) -> &mut Self {
        self.sets.push(assignment.into());
        self
    }

    fn status(&mut self, s: DraftStatus) -> &mut Self {
        self.set("status", s.as_str().to_owned())
    }

    /// Keeps `p` as the draft's create-post request (sent, or about to be sent, as it is).
    fn pending(&mut self, p: &PendingPost) -> &mut Self {
        let mut kept = p.clone();
        kept.last_sent_at = None;
        self.set("pending", Json(kept))
            .set("pending_run", p.run.clone())
    }

    fn clear_pending(&mut self) -> &mut Self {
        self.raw("pending = NULL").raw("pending_run = NULL")
    }

    /// References to the parameters, as `query` takes them.
    pub fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// [`crate::record::RecordStore::save_scheduled`]: the content and the schedule in one
/// statement, applied to a draft that is absent or whose status is one of `$10`.
pub const SAVE_SCHEDULED: &str =
    "INSERT INTO postonce_drafts AS d (ns, key, caption, image, link, alt, status,
        attempts, retryable, reminded, delay_told, source, created_at, updated_at,
        publish_at, due_at)
    VALUES ($1, $2, $3, $4, $5, $6, 'scheduled', 0, true, false, false, $7, $8, $8, $9, $9)
    ON CONFLICT (ns, key) DO UPDATE SET caption = EXCLUDED.caption,
        image = EXCLUDED.image, link = EXCLUDED.link, alt = EXCLUDED.alt,
        updated_at = EXCLUDED.updated_at, source = coalesce(d.source, EXCLUDED.source),
        status = 'scheduled', publish_at = EXCLUDED.publish_at, due_at = EXCLUDED.due_at,
        delay_told = false, reminded = false, retryable = true, last_error = NULL,
        next_retry_at = NULL, pending = NULL, pending_run = NULL, started = 0
    WHERE d.status = ANY($10)
    RETURNING to_jsonb(d)";

/// [`crate::record::RecordStore::start_attempt`]: `$1` the namespace, `$2` the key, `$3` the
/// statuses it starts from besides `scheduled`, `$4` now, `$5` whether a due `scheduled` one
/// starts too.
pub const START_ATTEMPT: &str = "UPDATE postonce_drafts AS d
    SET attempts = d.attempts + d.started, started = 1, updated_at = $4
    WHERE d.ns = $1 AND d.key = $2
        AND (d.status = ANY($3) OR ($5 AND d.status = 'scheduled' AND d.due_at <= $4))
    RETURNING to_jsonb(d)";

/// The `UPDATE … WHERE … RETURNING 1` of `update` on (`ns`, `key`), applied only if the draft
/// exists, its status is in `from` (any, if empty), a change bound to an attempt finds that
/// attempt kept, and a delay is told once. `extra` is appended to the condition.
pub fn statement(
    ns: &str,
    key: &str,
    update: &DraftUpdate,
    from: &[DraftStatus],
    now: i64,
    extra: impl FnOnce(&mut Sql) -> String,
) -> (String, Sql) {
    let mut q = Sql::default();
    let (ns_p, key_p) = (q.param(ns.to_owned()), q.param(key.to_owned()));
    let mut condition = format!("d.ns = {ns_p} AND d.key = {key_p}");
    if !from.is_empty() {
        let p = q.param(
            from.iter()
                .map(|s| s.as_str().to_owned())
                .collect::<Vec<_>>(),
        );
        condition.push_str(&format!(" AND d.status = ANY({p})"));
    }
    if let DraftUpdate::Resend { prev_run: run, .. } | DraftUpdate::IfAttempt { run, .. } = update {
        let p = q.param(run.clone());
        condition.push_str(&format!(" AND d.pending_run = {p}"));
    }
    if matches!(update, DraftUpdate::DelayTold) {
        condition.push_str(" AND NOT d.delay_told");
    }
    let more = extra(&mut q);
    if !more.is_empty() {
        condition.push_str(" AND ");
        condition.push_str(&more);
    }
    changes(&mut q, update, now);
    let sql = format!(
        "UPDATE postonce_drafts AS d SET {} WHERE {condition} RETURNING 1",
        q.sets.join(", ")
    );
    (sql, q)
}

fn changes(q: &mut Sql, update: &DraftUpdate, now: i64) {
    if let DraftUpdate::IfAttempt { update, .. } = update {
        return changes(q, update, now);
    }
    q.set("updated_at", now);
    match update.due_at(now) {
        Some(Some(at)) => {
            q.set("due_at", at);
        }
        Some(None) => {
            q.raw("due_at = NULL");
        }
        None => {}
    }
    match update {
        DraftUpdate::IfAttempt { .. } => {}
        DraftUpdate::Intent(p) => {
            q.status(DraftStatus::Unknown)
                .pending(p)
                .raw("started = 0")
                .raw("reminded = false")
                .raw("retryable = true");
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            q.status(DraftStatus::Failed)
                .raw("reminded = false")
                .raw("attempts = d.attempts + 1")
                .raw("started = 0")
                .set("last_error", error.clone())
                .set("retryable", *retryable)
                .set("next_retry_at", *next_retry_at)
                .clear_pending();
        }
        DraftUpdate::Ambiguous { error, ask_owner } => {
            q.status(DraftStatus::Unknown)
                .raw("reminded = false")
                .raw("attempts = d.attempts + 1")
                .raw("started = 0")
                .set("last_error", error.clone())
                .set("retryable", !ask_owner);
        }
        DraftUpdate::Resend { at, run, .. } => {
            let (at, run) = (q.param(*at), q.param(run.clone()));
            q.raw(format!(
                "pending = jsonb_set(jsonb_set(d.pending, '{{last_sent_at}}', to_jsonb({at}::bigint)), '{{run}}', to_jsonb({run}::text))"
            ))
            .raw(format!("pending_run = {run}"));
        }
        DraftUpdate::NeedsReview { error } => {
            q.status(DraftStatus::NeedsReview)
                .raw("attempts = d.attempts + d.started")
                .raw("started = 0")
                .set("last_error", error.clone())
                .raw("reminded = false")
                .raw("next_retry_at = NULL");
        }
        DraftUpdate::Reminded => {
            q.raw("reminded = true");
        }
        DraftUpdate::DelayTold => {
            q.raw("delay_told = true");
        }
        DraftUpdate::Spread { pending, next } => match (pending, next) {
            (Some(p), Some(_)) => {
                q.pending(p);
            }
            (None, Some(_)) => {}
            (_, None) => {
                q.clear_pending();
            }
        },
        DraftUpdate::Recorded { expires_at, record } => {
            q.status(DraftStatus::Posted)
                .set("record", Json(record.clone()))
                .set("expires_at", *expires_at)
                .raw("next_retry_at = NULL")
                .clear_pending();
        }
        DraftUpdate::Schedule { at } => {
            q.status(DraftStatus::Scheduled)
                .raw("started = 0")
                .set("publish_at", *at)
                .raw("delay_told = false")
                .raw("reminded = false")
                .raw("retryable = true")
                .raw("last_error = NULL")
                .raw("next_retry_at = NULL")
                .clear_pending();
        }
        DraftUpdate::Defer { reason, told, .. } => {
            if *told {
                q.raw("delay_told = true");
            }
            q.status(DraftStatus::Scheduled)
                .set("last_error", reason.clone())
                .raw("retryable = true")
                .clear_pending();
        }
        DraftUpdate::Revive => {
            q.status(DraftStatus::New)
                .raw("publish_at = NULL")
                .raw("reminded = false")
                .raw("retryable = true");
        }
        DraftUpdate::Cancel => {
            q.status(DraftStatus::Cancelled)
                .raw("next_retry_at = NULL")
                .clear_pending();
        }
    }
}

//! A draft change in memory: the local twin of the DynamoDB update expressions.

use crate::record::{Draft, DraftStatus, DraftUpdate, PendingPost, PostedRecord};

/// Applies a draft update in memory (the local twin of the DynamoDB update expressions).
pub(super) fn apply(draft: &mut Draft, update: &DraftUpdate, now: i64) {
    match update {
        DraftUpdate::IfAttempt { update, .. } => apply(draft, update, now),
        DraftUpdate::Intent(pending) => {
            draft.status = DraftStatus::Unknown;
            draft.started = false;
            draft.pending = Some(pending.clone());
            draft.reminded = false;
            draft.retryable = true;
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            draft.status = DraftStatus::Failed;
            draft.reminded = false;
            draft.attempts += 1;
            draft.started = false;
            draft.last_error = Some(error.clone());
            draft.retryable = *retryable;
            draft.next_retry_at = *next_retry_at;
            draft.pending = None;
        }
        DraftUpdate::Ambiguous { error, ask_owner } => {
            draft.status = DraftStatus::Unknown;
            draft.reminded = false;
            draft.attempts += 1;
            draft.started = false;
            draft.last_error = Some(error.clone());
            draft.retryable = !ask_owner;
        }
        DraftUpdate::Resend { at, run, .. } => {
            if let Some(p) = draft.pending.as_mut() {
                p.last_sent_at = Some(*at);
                p.run = run.clone();
            }
        }
        DraftUpdate::NeedsReview { error } => {
            draft.status = DraftStatus::NeedsReview;
            draft.attempts += u32::from(draft.started);
            draft.started = false;
            draft.last_error = Some(error.clone());
            draft.next_retry_at = None;
            draft.reminded = false;
        }
        DraftUpdate::Reminded => draft.reminded = true,
        DraftUpdate::DelayTold => draft.delay_told = true,
        DraftUpdate::Recorded { expires_at, record } => {
            draft.record = Some(PostedRecord::clone(record));
            draft.status = DraftStatus::Posted;
            draft.expires_at = Some(*expires_at);
            draft.pending = None;
            draft.next_retry_at = None;
        }
        DraftUpdate::Schedule { at } => {
            draft.status = DraftStatus::Scheduled;
            draft.started = false;
            draft.publish_at = Some(*at);
            draft.reminded = false;
            draft.delay_told = false;
            draft.retryable = true;
            draft.last_error = None;
            draft.next_retry_at = None;
            draft.pending = None;
        }
        DraftUpdate::Defer { reason, told, .. } => {
            draft.delay_told |= *told;
            draft.status = DraftStatus::Scheduled;
            draft.last_error = Some(reason.clone());
            draft.retryable = true;
            draft.pending = None;
        }
        DraftUpdate::Revive => {
            draft.status = DraftStatus::New;
            draft.publish_at = None;
            draft.reminded = false;
            draft.retryable = true;
        }
        DraftUpdate::Spread { pending, next } => match (pending, next) {
            (Some(p), Some(_)) => {
                // As the other stores keep it: the request, without its re-send time.
                let mut kept = PendingPost::clone(p);
                kept.last_sent_at = None;
                draft.pending = Some(kept);
            }
            (None, Some(_)) => {}
            (_, None) => draft.pending = None,
        },
        DraftUpdate::Cancel => {
            draft.status = DraftStatus::Cancelled;
            draft.next_retry_at = None;
            draft.pending = None;
        }
    }
    if let Some(due) = update.due_at(now) {
        draft.due_at = due;
    }
    draft.updated_at = now;
}

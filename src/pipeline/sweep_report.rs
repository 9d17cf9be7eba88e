//! What a sweep answers: the drafts it ran, held back or left, and every draft that waits for
//! a person after it ([`super::Pipeline::sweep`]).

use serde::Serialize;

use crate::outcome::Outcome;

/// A draft that waits for a person, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    pub key: String,
    pub status: &'static str,
    /// What the owner is asked to do.
    pub reason: String,
    pub last_error: Option<String>,
    /// Whether the owner has been told (a message was delivered).
    pub owner_told: bool,
    /// Unix seconds of the last change.
    pub since: i64,
}

/// A due draft that pacing holds back to a later sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delayed {
    pub key: String,
    /// When its network's next slot opens (RFC 3339, UTC).
    pub until: String,
    pub reason: String,
}

/// A recorded post sent again to the places that lacked it ([`super::spread`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spreading {
    pub key: String,
    /// Every place holds it now: it is not sent again.
    pub complete: bool,
    /// Each place's answer, or why nothing could be sent.
    pub detail: String,
    /// When a later sweep sends it again (RFC 3339, UTC); `None`: never again (complete, or a
    /// day after the post; the places still lacking it are in `detail`).
    pub next: Option<String>,
}

/// What a sweep did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    pub examined: usize,
    /// Scheduled drafts whose time had come, run by this sweep.
    pub due: usize,
    /// Due, but held back by pacing (`POSTONCE_MIN_GAP_S`): a later sweep posts them.
    pub delayed: Vec<Delayed>,
    pub runs: Vec<Outcome>,
    /// Marked `needs_review` by this sweep.
    pub needs_review: Vec<String>,
    /// Told about by this sweep (delivered).
    pub reminded: Vec<String>,
    /// Whose message could not be delivered; tried again next sweep.
    pub undelivered: Vec<String>,
    /// Due, but left for a later sweep: too little time left in this one.
    pub left_for_later: usize,
    /// Every draft that waits for a person after this sweep.
    pub waiting: Vec<Waiting>,
    /// Recorded posts sent again to the places that still lacked them (capability `spreads`).
    pub spread: Vec<Spreading>,
}

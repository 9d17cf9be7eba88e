//! The state of the protocol model: the runs, the claim store, the record store and one network
//! (the transitions are in `model.rs`).
//!
//! Abstractions (the bound is in [`Bound`]):
//! - time is a clock of whole quiet periods: a request is delivered (or lost) before the clock
//!   moves on, so "the quiet period has passed since the latest send" is `clock > last`. This is
//!   the assumption the code states: the quiet period exceeds every network's budget and the
//!   time a network takes to finish a create;
//! - one draft, one target; the draft item exists from the start; its content is edited once
//!   when the CLI run carries it while an attempt is `unknown` (content 1; 0 before), and a
//!   post, a request and a kept attempt carry the text they were made from;
//! - store calls are atomic; the record write may fail (posted but not recorded);
//! - a dry run's publisher answers at once with a dry id and posts nothing.

use std::hash::Hash;

/// The network instance: one per duplicate semantics (README "Targets").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Net {
    /// A duplicate check that sees only finished posts (within its window).
    Linkedin,
    /// No reliable duplicate check; the account's timeline can be read back.
    X,
    /// A channel: no duplicate check and nothing can be read back.
    TelegramChannel,
    /// An Idempotency-Key remembered for `Bound::key_memory` ticks after the post.
    Mastodon,
    /// A client-chosen record key: an identical putRecord at that key is a no-op, always.
    Bluesky,
    /// A media container, made (staged) before the intent by the run that takes it and named
    /// by the kept request: it publishes at most once, and its status (`PUBLISHED`) is read
    /// back; a publish of a published container is refused. Nothing else stops a duplicate:
    /// two containers both publish.
    Threads,
}

pub const NETWORKS: [Net; 6] = [
    Net::Linkedin,
    Net::X,
    Net::TelegramChannel,
    Net::Mastodon,
    Net::Bluesky,
    Net::Threads,
];

/// How an ambiguous create is settled: `postonce::pipeline::Settle`, chosen by `Lane::settle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    Resend,
    ReadBack,
    AskOwner,
    /// `window`: the key's memory, if it has one (Mastodon); Bluesky's record key has none.
    Replay {
        window: Option<u8>,
    },
}

/// A guard of the protocol, switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    QuietPeriod,
    /// The create sent only while it is over before its attempt's quiet period ends (the
    /// check the model found missing, issue 25).
    CreateWithinQuietPeriod,
    IntentBeforeCreate,
    TokenFencedRelease,
    ClaimKeptAfterPostedNotRecorded,
    DryRunNamespace,
    ConditionalRecord,
    PerNetworkStrategy,
    /// A refused publish whose container reads `PUBLISHED` (the post of the container this
    /// attempt staged) taken for a post made by someone else: failed, unrecorded (issue 30).
    StagedPublishedAsOthers,
    /// A reconcile re-sends (and looks for) the draft's current content instead of the kept
    /// request's, after the draft was edited while its attempt was `unknown`.
    KeptRequestReplayed,
}

pub const MUTATIONS: [Mutation; 10] = [
    Mutation::QuietPeriod,
    Mutation::CreateWithinQuietPeriod,
    Mutation::IntentBeforeCreate,
    Mutation::TokenFencedRelease,
    Mutation::ClaimKeptAfterPostedNotRecorded,
    Mutation::DryRunNamespace,
    Mutation::ConditionalRecord,
    Mutation::PerNetworkStrategy,
    Mutation::StagedPublishedAsOthers,
    Mutation::KeptRequestReplayed,
];

/// The runs: a CLI run (carries the draft), a Telegram Retry, a sweep, and a dry run (the
/// same draft posted by a run without this network's credentials).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Who {
    Cli,
    Retry,
    Sweep,
    DryRun,
}

pub const RUNS: [Who; 4] = [Who::Cli, Who::Retry, Who::Sweep, Who::DryRun];

impl Who {
    pub fn i(self) -> usize {
        self as usize
    }
    pub fn dry(self) -> bool {
        self == Who::DryRun
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Runs that take part (a subset of [`RUNS`]).
    pub runs: &'static [Who],
    /// Faults a behaviour may contain: crashes, claim expiries, Redis restarts, failed record
    /// writes (each counts one).
    pub faults: u8,
    /// The last tick of the clock (one tick: one quiet period).
    pub ticks: u8,
    /// LinkedIn's reconcile window (`POSTONCE_RECONCILE_WINDOW_S`), in ticks since the attempt.
    pub window: u8,
    /// Mastodon's Idempotency-Key memory, in ticks since the post.
    pub key_memory: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostId {
    pub dry: bool,
    pub n: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Claim {
    Run(Who),
    /// Kept after posted-but-not-recorded: `posted:<id>` (`None`: the network named no id).
    Posted(Option<PostId>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    New,
    Failed,
    Unknown,
    Posted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pending {
    /// Whose attempt it is (the intent's run, or the latest re-send's).
    pub run: Who,
    /// The record key the kept request carries (Bluesky), or the container it names
    /// (Threads): the intent's run.
    pub rkey: Who,
    /// The content the kept request was made from.
    pub text: u8,
    /// First send, and latest send.
    pub at: u8,
    pub last: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Draft {
    pub status: Status,
    pub pending: Option<Pending>,
    /// `unknown` that only the owner can settle (not retryable): the sweeper tells, never runs.
    pub ask_owner: bool,
    /// Tick of the last change (the sweeper re-drives a `new` draft untouched for a claim TTL).
    pub updated: u8,
    /// The stored content's version (0, or 1 once edited).
    pub content: u8,
    /// The record's copy, written with the record.
    pub record: Option<Record>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    pub post: Option<PostId>,
    pub by: Who,
}

/// One namespace of the claim store and the record store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stores {
    pub claim: Option<Claim>,
    pub record: Option<Record>,
    pub draft: Draft,
    /// Successful record writes (a record is written once).
    pub record_writes: u8,
}

/// Where a run is: the phase it does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Idle,
    /// The sweep lists the due drafts (`Pipeline::sweep`).
    List,
    /// A run without content reads the draft and the record first (`Pipeline::plan`).
    Plan,
    SaveDraft,
    Claim,
    Repair(Option<PostId>),
    RepairRelease(Option<PostId>),
    /// The read under the claim (`Lane::claimed`).
    Check,
    Reconcile,
    ReadBack,
    Resend,
    Intent,
    Create,
    /// create-post is out; the run waits for its answer (or gives up: the budget).
    Await,
    Record(Option<PostId>, bool),
    Ambiguous,
    Keep(Option<PostId>),
    Release,
    Done,
    Crashed,
}

impl Pc {
    pub fn name(self) -> &'static str {
        match self {
            Pc::Idle => "start",
            Pc::List => "sweep_list",
            Pc::Plan => "plan",
            Pc::SaveDraft => "save_draft",
            Pc::Claim => "claim",
            Pc::Repair(_) => "repair",
            Pc::RepairRelease(_) => "repair_release",
            Pc::Check => "check",
            Pc::Reconcile => "reconcile",
            Pc::ReadBack => "read_back",
            Pc::Resend => "resend",
            Pc::Intent => "intent",
            Pc::Create => "create",
            Pc::Await => "await_answer",
            Pc::Record(..) => "record",
            Pc::Ambiguous => "ambiguous",
            Pc::Keep(_) => "keep",
            Pc::Release => "release",
            Pc::Done => "done",
            Pc::Crashed => "crashed",
        }
    }
    /// Phases in which the run holds (believes it holds) its own claim.
    pub fn holds_claim(self) -> bool {
        matches!(
            self,
            Pc::Check
                | Pc::Reconcile
                | Pc::ReadBack
                | Pc::Resend
                | Pc::Intent
                | Pc::Create
                | Pc::Await
                | Pc::Record(..)
                | Pc::Ambiguous
                | Pc::Keep(_)
                | Pc::Release
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    pub pc: Pc,
    /// The draft's status as read before the claim (`seen`).
    pub seen: Option<Status>,
    /// The attempt the run's check saw (the re-send's condition).
    pub prev: Option<Who>,
    /// This run's create is a reconcile (re-send or replay).
    pub reconciling: bool,
    /// A fault took this run's claim (expiry, Redis restart).
    pub claim_lost: bool,
    /// The tick this run stamped its attempt with (its intent, or its re-send).
    pub stamp: u8,
    /// The record key (or container) of the request this run sends (the kept request's, on a
    /// re-send).
    pub rkey: Who,
    /// The content the request this run sends (or looks for) was made from.
    pub text: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub from: Who,
    pub rkey: Who,
    pub text: u8,
    /// LinkedIn: arrived and passed the duplicate check; the post is not finished yet.
    pub processing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Post {
    pub at: u8,
    pub rkey: Who,
    pub text: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub clock: u8,
    pub faults_left: u8,
    pub runs: [Run; 4],
    /// `[real, dry-run]` namespaces.
    pub ns: [Stores; 2],
    /// Requests sent and not yet processed by the network.
    pub in_flight: Vec<Request>,
    /// Posts on the network (real ones; the dry publisher posts nothing).
    pub posts: Vec<Post>,
    pub dry_ids: u8,
    /// A run ended holding the post's id unrecorded (posted but not recorded).
    pub known_posted: bool,
    /// The kept claim was lost (a fault, or another run held the claim).
    pub kept_lost: bool,
    /// The owner was asked about a post the pipeline knew, with its kept claim intact.
    pub asked_known: bool,
    /// A claim vanished from under a run that no fault touched.
    pub claim_stolen: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The run's next pipeline phase (named as in `Pc::name`).
    Step(Who, &'static str),
    /// The phase's store call fails: the record write (posted but not recorded).
    RecordFails(Who),
    /// create-post's budget runs out before the answer: the request may still land.
    GiveUp(Who),
    Crash(Who),
    /// The network processes a request (the slow accept, when its sender gave up).
    NetworkAccepts(Who),
    /// Threads publishes the container, then answers the publish with a refusal (its status
    /// reads `PUBLISHED`).
    NetworkPublishesRefusing(Who),
    ClaimExpires(usize),
    RedisRestart,
    Tick,
}

pub struct ProtocolModel {
    pub net: Net,
    pub bound: Bound,
    pub mutation: Option<Mutation>,
}

//! The per-(draft, target) protocol as a Stateright model: the runs, the claim store, the
//! record store and one network, every step an action named after the pipeline phase that
//! implements it (RELIABILITY.md "The protocol, model-checked" maps each to its function).
//!
//! Abstractions (the bound is in [`Bound`]):
//! - time is a clock of whole quiet periods: a request is delivered (or lost) before the clock
//!   moves on, so "the quiet period has passed since the latest send" is `clock > last`. This is
//!   the assumption the code states: the quiet period exceeds every network's budget and the
//!   time a network takes to finish a create;
//! - one draft, one target; its content never changes; the draft item exists from the start;
//! - store calls are atomic; the record write may fail (posted but not recorded);
//! - a dry run's publisher answers at once with a dry id and posts nothing.

use std::hash::Hash;

/// The network instance: one per duplicate semantics (DESIGN.md "Targets").
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
    // Threads (one container, one post) is not a target yet: when it is, it gets a variant
    // here, its create semantics in `Model::deliver` and its strategy in `Net::settle`.
}

pub const NETWORKS: [Net; 5] = [
    Net::Linkedin,
    Net::X,
    Net::TelegramChannel,
    Net::Mastodon,
    Net::Bluesky,
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
    IntentBeforeCreate,
    TokenFencedRelease,
    ClaimKeptAfterPostedNotRecorded,
    DryRunNamespace,
    ConditionalRecord,
    PerNetworkStrategy,
}

pub const MUTATIONS: [Mutation; 7] = [
    Mutation::QuietPeriod,
    Mutation::IntentBeforeCreate,
    Mutation::TokenFencedRelease,
    Mutation::ClaimKeptAfterPostedNotRecorded,
    Mutation::DryRunNamespace,
    Mutation::ConditionalRecord,
    Mutation::PerNetworkStrategy,
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
    fn i(self) -> usize {
        self as usize
    }
    fn dry(self) -> bool {
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
    /// The record key the kept request carries (Bluesky): the intent's run.
    pub rkey: Who,
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
    fn name(self) -> &'static str {
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
    fn holds_claim(self) -> bool {
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
    /// The record key of the request this run sends (the kept request's, on a re-send).
    pub rkey: Who,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub from: Who,
    pub rkey: Who,
    /// LinkedIn: arrived and passed the duplicate check; the post is not finished yet.
    pub processing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Post {
    pub at: u8,
    pub rkey: Who,
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
    ClaimExpires(usize),
    RedisRestart,
    Tick,
}

pub struct ProtocolModel {
    pub net: Net,
    pub bound: Bound,
    pub mutation: Option<Mutation>,
}

impl Net {
    /// `Lane::settle`, from what the network's adapter says it can do.
    pub fn settle(self, bound: &Bound) -> Settle {
        match self {
            Net::Linkedin => Settle::Resend,
            Net::X => Settle::ReadBack,
            Net::TelegramChannel => Settle::AskOwner,
            Net::Mastodon => Settle::Replay {
                window: Some(bound.key_memory),
            },
            Net::Bluesky => Settle::Replay { window: None },
        }
    }
}

impl ProtocolModel {
    fn off(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }

    fn settle(&self) -> Settle {
        if self.off(Mutation::PerNetworkStrategy) {
            // Every network treated like LinkedIn.
            return Settle::Resend;
        }
        self.net.settle(&self.bound)
    }

    /// The namespace a run's stores live in.
    fn ns_of(&self, who: Who) -> usize {
        usize::from(who.dry() && !self.off(Mutation::DryRunNamespace))
    }

    pub fn init(&self) -> State {
        let draft = Draft {
            status: Status::New,
            pending: None,
            ask_owner: false,
            updated: 0,
            record: None,
        };
        let stores = Stores {
            claim: None,
            record: None,
            draft,
            record_writes: 0,
        };
        let idle = Run {
            pc: Pc::Idle,
            seen: None,
            prev: None,
            reconciling: false,
            claim_lost: false,
            stamp: 0,
            rkey: Who::Cli,
        };
        let mut runs = [idle; 4];
        for who in RUNS {
            if !self.bound.runs.contains(&who) {
                runs[who.i()].pc = Pc::Done;
            }
        }
        State {
            clock: 0,
            faults_left: self.bound.faults,
            runs,
            ns: [stores.clone(), stores],
            in_flight: Vec::new(),
            posts: Vec::new(),
            dry_ids: 0,
            known_posted: false,
            kept_lost: false,
            asked_known: false,
            claim_stolen: false,
        }
    }

    pub fn enabled(&self, s: &State, out: &mut Vec<Action>) {
        for who in RUNS {
            let run = s.runs[who.i()];
            match run.pc {
                Pc::Done | Pc::Crashed => continue,
                // The answer comes from the network (or never).
                Pc::Await => out.push(Action::GiveUp(who)),
                pc => out.push(Action::Step(who, pc.name())),
            }
            if (matches!(run.pc, Pc::Record(..)) || (who.dry() && run.pc == Pc::Idle))
                && s.faults_left > 0
            {
                out.push(Action::RecordFails(who));
            }
            if run.pc != Pc::Idle && s.faults_left > 0 {
                out.push(Action::Crash(who));
            }
        }
        for r in &s.in_flight {
            out.push(Action::NetworkAccepts(r.from));
        }
        if s.faults_left > 0 {
            for (i, ns) in s.ns.iter().enumerate() {
                if ns.claim.is_some() {
                    out.push(Action::ClaimExpires(i));
                }
            }
            if s.ns.iter().any(|n| n.claim.is_some()) {
                out.push(Action::RedisRestart);
            }
        }
        // Nothing may still be in flight when a quiet period ends (the code's assumption:
        // the quiet period exceeds every budget and the network's processing time).
        // Nor between a reconcile's decision and its re-send's stamp (the margin in
        // `Lane::reconcile`: one store call, within the run's budget).
        let waiting = s
            .runs
            .iter()
            .any(|r| matches!(r.pc, Pc::Await | Pc::Resend));
        if s.clock < self.bound.ticks && s.in_flight.is_empty() && !waiting {
            out.push(Action::Tick);
        }
    }

    pub fn apply(&self, s: &State, action: &Action) -> State {
        let mut s = s.clone();
        match *action {
            Action::Step(who, _) => self.step(&mut s, who),
            Action::RecordFails(Who::DryRun) => {
                s.faults_left -= 1;
                self.dry_run(&mut s, false);
            }
            Action::RecordFails(who) => {
                s.faults_left -= 1;
                let Pc::Record(post, _) = s.runs[who.i()].pc else {
                    unreachable!()
                };
                s.runs[who.i()].pc = Pc::Keep(post);
            }
            Action::GiveUp(who) => s.runs[who.i()].pc = Pc::Ambiguous,
            Action::Crash(who) => {
                s.faults_left -= 1;
                s.runs[who.i()].pc = Pc::Crashed;
            }
            Action::NetworkAccepts(from) => self.deliver(&mut s, from),
            Action::ClaimExpires(i) => {
                s.faults_left -= 1;
                self.lose_claim(&mut s, i);
            }
            Action::RedisRestart => {
                s.faults_left -= 1;
                self.lose_claim(&mut s, 0);
                self.lose_claim(&mut s, 1);
            }
            Action::Tick => s.clock += 1,
        }
        self.watch_claims(&mut s);
        s
    }

    fn lose_claim(&self, s: &mut State, i: usize) {
        match s.ns[i].claim.take() {
            Some(Claim::Run(holder)) => s.runs[holder.i()].claim_lost = true,
            Some(Claim::Posted(_)) => s.kept_lost = true,
            None => {}
        }
    }

    /// A run that holds its claim and that no fault touched must still find it in the store.
    fn watch_claims(&self, s: &mut State) {
        for who in RUNS {
            let run = s.runs[who.i()];
            if run.pc.holds_claim()
                && !run.claim_lost
                && s.ns[self.ns_of(who)].claim != Some(Claim::Run(who))
            {
                s.claim_stolen = true;
            }
        }
    }

    /// The owner is asked to settle the draft (told).
    fn ask_owner(&self, s: &mut State) {
        if s.known_posted && !s.kept_lost {
            s.asked_known = true;
        }
    }

    /// The network processes `from`'s request, and answers if its sender still waits.
    fn deliver(&self, s: &mut State, from: Who) {
        let i = s.in_flight.iter().position(|r| r.from == from).unwrap();
        if self.net == Net::Linkedin && !s.in_flight[i].processing && s.posts.is_empty() {
            // Its duplicate check sees only finished posts: this one is being processed, and
            // a request that arrives meanwhile passes the check too.
            s.in_flight[i].processing = true;
            return;
        }
        let req = s.in_flight.remove(i);
        let fresh = |s: &mut State| {
            s.posts.push(Post {
                at: s.clock,
                rkey: req.rkey,
            });
            let n = u8::try_from(s.posts.len() - 1).unwrap();
            (Some(PostId { dry: false, n }), false)
        };
        let existing = |n: usize| {
            Some(PostId {
                dry: false,
                n: u8::try_from(n).unwrap(),
            })
        };
        let (post, duplicate) = match self.net {
            // 422 DUPLICATE_POST naming the post: it sees only finished posts.
            Net::Linkedin if !req.processing => (existing(0), true),
            Net::Mastodon => match s
                .posts
                .iter()
                .position(|p| s.clock - p.at < self.bound.key_memory)
            {
                // The key's post, answered as if created now.
                Some(n) => (existing(n), false),
                None => fresh(s),
            },
            Net::Bluesky => match s.posts.iter().position(|p| p.rkey == req.rkey) {
                Some(n) => (existing(n), false),
                None => fresh(s),
            },
            // X's duplicate check is not relied on (the model's X has none); a channel has none.
            _ => fresh(s),
        };
        if s.runs[from.i()].pc == Pc::Await {
            s.runs[from.i()].pc = Pc::Record(post, duplicate);
        }
    }

    /// One pipeline phase of `who`.
    fn step(&self, s: &mut State, who: Who) {
        let ns = self.ns_of(who);
        let clock = s.clock;
        let run = s.runs[who.i()];
        let next = match run.pc {
            Pc::Idle => match who {
                Who::Sweep => Pc::List,
                Who::Retry => Pc::Plan,
                Who::Cli => Pc::SaveDraft,
                Who::DryRun => return self.dry_run(s, true),
            },
            Pc::List => self.sweep_list(s),
            Pc::Plan => {
                // `Pipeline::plan`: a record is final (answered with no claim).
                let st = &mut s.ns[ns];
                if st.record.is_some() {
                    self.already(st, clock);
                    Pc::Done
                } else {
                    s.runs[who.i()].seen = Some(st.draft.status);
                    Pc::Claim
                }
            }
            Pc::SaveDraft => {
                // `RecordStore::save_draft`: a posted draft with its record's copy answers.
                let st = &mut s.ns[ns];
                if st.draft.status == Status::Posted && st.draft.record.is_some() {
                    Pc::Done
                } else {
                    st.draft.updated = clock;
                    s.runs[who.i()].seen = Some(st.draft.status);
                    Pc::Claim
                }
            }
            Pc::Claim => match s.ns[ns].claim {
                None => {
                    s.ns[ns].claim = Some(Claim::Run(who));
                    s.runs[who.i()].claim_lost = false;
                    // The direct path: a plain post of a draft no attempt is out for goes
                    // straight to its intent, whose conditions are the check.
                    match run.seen {
                        Some(Status::New | Status::Failed) => Pc::Intent,
                        _ => Pc::Check,
                    }
                }
                Some(Claim::Posted(post)) => Pc::Repair(post),
                Some(Claim::Run(_)) => Pc::Done, // being_posted
            },
            Pc::Repair(post) => {
                self.put_posted(s, ns, Record { post, by: who });
                Pc::RepairRelease(post)
            }
            Pc::RepairRelease(post) => {
                if s.ns[ns].claim == Some(Claim::Posted(post)) {
                    s.ns[ns].claim = None;
                }
                Pc::Done
            }
            Pc::Check => {
                let st = &mut s.ns[ns];
                if st.record.is_some() {
                    self.already(st, clock);
                    Pc::Release
                } else if st.draft.status == Status::Unknown {
                    s.runs[who.i()].prev = st.draft.pending.map(|p| p.run);
                    Pc::Reconcile
                } else {
                    Pc::Intent
                }
            }
            Pc::Reconcile => self.reconcile(s, who),
            Pc::ReadBack => {
                if let Some(n) = (!s.posts.is_empty()).then_some(0) {
                    // Found among the account's recent posts: recorded, nothing sent.
                    Pc::Record(Some(PostId { dry: false, n }), false)
                } else if matches!(self.settle(), Settle::Replay { .. }) {
                    // Past the key's memory and not found: only the owner can tell.
                    let st = &mut s.ns[ns];
                    if st.draft.status == Status::Unknown
                        && st.draft.pending.map(|p| p.run) == run.prev
                    {
                        st.draft.ask_owner = true;
                    }
                    self.ask_owner(s);
                    Pc::Release
                } else {
                    Pc::Resend
                }
            }
            Pc::Resend => {
                // `DraftUpdate::Resend`: only if the kept attempt is still the one seen.
                let st = &mut s.ns[ns];
                match st.draft.pending {
                    Some(p) if st.draft.status == Status::Unknown && Some(p.run) == run.prev => {
                        st.draft.pending = Some(Pending {
                            run: who,
                            last: clock,
                            ..p
                        });
                        st.draft.updated = clock;
                        s.runs[who.i()].reconciling = true;
                        s.runs[who.i()].stamp = clock;
                        s.runs[who.i()].rkey = p.rkey;
                        Pc::Create
                    }
                    _ => Pc::Release, // another run is checking it
                }
            }
            Pc::Intent => self.intent(s, who),
            Pc::Create if clock > run.stamp && !self.off(Mutation::QuietPeriod) => {
                // `Lane::create`: the attempt was stamped a quiet period ago, so a reconcile
                // may already be re-sending it: not sent (issue 25's counterexample).
                if !run.reconciling {
                    self.fail_after_intent(s, ns, who, clock);
                }
                Pc::Release
            }
            Pc::Create => {
                s.in_flight.push(Request {
                    from: who,
                    rkey: run.rkey,
                    processing: false,
                });
                Pc::Await
            }
            Pc::Await => unreachable!("answered by the network"),
            Pc::Record(post, duplicate) => {
                if duplicate && !run.reconciling {
                    // The network already has this text (not this run's attempt): a
                    // permanent failure, nothing new posted (`fail_after_intent`).
                    self.fail_after_intent(s, ns, who, clock);
                } else {
                    self.put_posted(s, ns, Record { post, by: who });
                }
                Pc::Release
            }
            Pc::Ambiguous => {
                // `Lane::ambiguous`: the draft stays `unknown` (the intent said so).
                let ask = self.settle() == Settle::AskOwner;
                let st = &mut s.ns[ns].draft;
                if st.status == Status::Unknown {
                    st.ask_owner = ask;
                    st.updated = clock;
                }
                if ask {
                    self.ask_owner(s);
                }
                Pc::Release
            }
            Pc::Keep(post) => {
                if self.off(Mutation::ClaimKeptAfterPostedNotRecorded) {
                    self.release(s, ns, who);
                } else {
                    // `ClaimStore::keep_posted`: from this run's token, or set if absent.
                    let st = &mut s.ns[ns];
                    match st.claim {
                        Some(Claim::Run(r)) if r == who => st.claim = Some(Claim::Posted(post)),
                        None => st.claim = Some(Claim::Posted(post)),
                        _ => s.kept_lost = true,
                    }
                }
                if !who.dry() {
                    s.known_posted = true;
                }
                Pc::Done
            }
            Pc::Release => {
                self.release(s, ns, who);
                Pc::Done
            }
            Pc::Done | Pc::Crashed => unreachable!(),
        };
        s.runs[who.i()].pc = next;
    }

    /// A whole dry run in one step (its publisher answers at once and posts nothing): in its
    /// namespace it saves the draft, claims, takes the intent, "creates" a dry id and records it
    /// (`recorded`), or keeps its claim holding the dry id (the record write failed).
    fn dry_run(&self, s: &mut State, recorded: bool) {
        let ns = self.ns_of(Who::DryRun);
        s.runs[Who::DryRun.i()].pc = Pc::Done;
        let st = &s.ns[ns];
        if st.record.is_some()
            || st.claim.is_some()
            || !matches!(st.draft.status, Status::New | Status::Failed)
        {
            return; // already_posted, being_posted, or another attempt is out
        }
        s.dry_ids += 1;
        let post = Some(PostId {
            dry: true,
            n: s.dry_ids,
        });
        let clock = s.clock;
        let st = &mut s.ns[ns];
        st.draft.status = Status::Unknown;
        st.draft.pending = Some(Pending {
            run: Who::DryRun,
            rkey: Who::DryRun,
            at: clock,
            last: clock,
        });
        if recorded {
            self.put_posted(
                s,
                ns,
                Record {
                    post,
                    by: Who::DryRun,
                },
            );
        } else {
            s.ns[ns].claim = Some(Claim::Posted(post));
        }
    }

    /// `ClaimGuard::release`: compare-and-delete.
    fn release(&self, s: &mut State, ns: usize, who: Who) {
        let st = &mut s.ns[ns];
        if self.off(Mutation::TokenFencedRelease) || st.claim == Some(Claim::Run(who)) {
            st.claim = None;
        }
    }

    /// `Lane::already` with `mark`: the draft says posted, with the record's copy.
    fn already(&self, st: &mut Stores, clock: u8) {
        if st.draft.status != Status::Posted {
            st.draft.status = Status::Posted;
            st.draft.record = st.record;
            st.draft.updated = clock;
        }
    }

    /// `RecordStore::put_posted`: the record if absent (conditional), the draft posted.
    fn put_posted(&self, s: &mut State, ns: usize, record: Record) {
        let st = &mut s.ns[ns];
        if st.record.is_some() && !self.off(Mutation::ConditionalRecord) {
            return;
        }
        st.record = Some(record);
        st.record_writes += 1;
        st.draft.status = Status::Posted;
        st.draft.record = Some(record);
        st.draft.pending = None;
        st.draft.ask_owner = false;
        st.draft.updated = s.clock;
    }

    /// `Lane::fail_after_intent`: back to `failed`, only if the attempt is still this run's.
    fn fail_after_intent(&self, s: &mut State, ns: usize, who: Who, clock: u8) {
        let d = &mut s.ns[ns].draft;
        if d.status == Status::Unknown && d.pending.map(|p| p.run) == Some(who) {
            d.status = Status::Failed;
            d.pending = None;
            d.updated = clock;
        }
    }

    /// `RecordStore::take_intent`: no record, the draft in a state the intent may take.
    fn intent(&self, s: &mut State, who: Who) -> Pc {
        let ns = self.ns_of(who);
        let clock = s.clock;
        let st = &mut s.ns[ns];
        if st.record.is_some() {
            self.already(st, clock);
            return Pc::Release;
        }
        if !matches!(st.draft.status, Status::New | Status::Failed) {
            return Pc::Release; // refused: being_posted
        }
        if !self.off(Mutation::IntentBeforeCreate) {
            st.draft.status = Status::Unknown;
            st.draft.pending = Some(Pending {
                run: who,
                rkey: who,
                at: clock,
                last: clock,
            });
            st.draft.ask_owner = false;
            st.draft.updated = clock;
        }
        s.runs[who.i()].stamp = clock;
        s.runs[who.i()].rkey = who;
        Pc::Create
    }

    /// `Lane::reconcile`: the draft is `unknown`; settle it the network's way.
    fn reconcile(&self, s: &mut State, who: Who) -> Pc {
        let ns = self.ns_of(who);
        let d = s.ns[ns].draft;
        let Some(p) = d.pending else {
            self.ask_owner(s);
            return Pc::Release;
        };
        let settle = self.settle();
        if settle == Settle::AskOwner {
            self.ask_owner(s);
            return Pc::Release;
        }
        // `Lane::still_quiet`: the latest send may still be in flight.
        if s.clock <= p.last && !self.off(Mutation::QuietPeriod) {
            return Pc::Release;
        }
        let age = s.clock - p.at;
        if settle == Settle::Resend && age > self.bound.window {
            self.ask_owner(s);
            return Pc::Release;
        }
        let expired = matches!(settle, Settle::Replay { window: Some(w) } if age >= w);
        if settle == Settle::ReadBack || expired {
            return Pc::ReadBack;
        }
        Pc::Resend
    }

    /// `Pipeline::sweep`: what the listing makes due now.
    fn sweep_list(&self, s: &mut State) -> Pc {
        let d = s.ns[0].draft;
        let due = match d.status {
            Status::Failed => true,
            // Untouched for a claim TTL: its run died.
            Status::New => s.clock > d.updated,
            Status::Unknown if d.ask_owner => false,
            Status::Unknown => {
                let p = d.pending.expect("an unknown draft keeps its attempt");
                let within = match self.settle() {
                    Settle::Resend => s.clock - p.at <= self.bound.window,
                    Settle::ReadBack | Settle::Replay { .. } => true,
                    Settle::AskOwner => false,
                };
                s.clock > p.last && within
            }
            Status::Posted => false,
        };
        if due {
            Pc::Plan
        } else {
            if d.status == Status::Unknown && d.ask_owner {
                // `tell_if_waiting`: the owner is reminded.
                self.ask_owner(s);
            }
            Pc::Done
        }
    }
}

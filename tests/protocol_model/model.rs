//! The per-(draft, target) protocol as a Stateright model: every step an action named after
//! the pipeline phase that implements it (RELIABILITY.md "The protocol, model-checked" maps
//! each to its function). The state it works on is in `state.rs`; the network's answers in
//! `network.rs`.

use crate::state::*;

impl ProtocolModel {
    pub fn off(&self, m: Mutation) -> bool {
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
            content: 0,
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
            text: 0,
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
            // Threads may publish a container and answer the publish with a refusal.
            if self.net == Net::Threads && !s.posts.iter().any(|p| p.rkey == r.rkey) {
                out.push(Action::NetworkPublishesRefusing(r.from));
            }
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
            Action::NetworkAccepts(from) => self.deliver(&mut s, from, false),
            Action::NetworkPublishesRefusing(from) => self.deliver(&mut s, from, true),
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
                    // The owner edited the draft while its attempt is unknown: the content is
                    // replaced, the kept attempt stays.
                    if st.draft.status == Status::Unknown {
                        st.draft.content = 1;
                    }
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
                // X's timeline by the kept request's text; Threads' kept container's status.
                let found = match self.net {
                    Net::Threads => s.posts.iter().position(|p| p.rkey == run.rkey),
                    _ => s.posts.iter().position(|p| p.text == run.text),
                };
                if let Some(n) = found.map(|n| u8::try_from(n).unwrap()) {
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
                        s.runs[who.i()].text = self.resent_text(p, st.draft.content);
                        Pc::Create
                    }
                    _ => Pc::Release, // another run is checking it
                }
            }
            Pc::Intent => self.intent(s, who),
            Pc::Create if clock > run.stamp && !self.off(Mutation::CreateWithinQuietPeriod) => {
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
                    text: run.text,
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
            text: st.draft.content,
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
        // The request is made from the stored content; a container (Threads) was staged for it
        // before this write, so one whose intent is refused is named nowhere and never
        // published.
        let text = st.draft.content;
        if !self.off(Mutation::IntentBeforeCreate) {
            st.draft.status = Status::Unknown;
            st.draft.pending = Some(Pending {
                run: who,
                rkey: who,
                text,
                at: clock,
                last: clock,
            });
            st.draft.ask_owner = false;
            st.draft.updated = clock;
        }
        s.runs[who.i()].stamp = clock;
        s.runs[who.i()].rkey = who;
        s.runs[who.i()].text = text;
        Pc::Create
    }

    /// The text a reconcile sends again and looks for: the kept request's (`kept_request`),
    /// whatever the draft says now.
    fn resent_text(&self, p: Pending, content: u8) -> u8 {
        if self.off(Mutation::KeptRequestReplayed) {
            content
        } else {
            p.text
        }
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
        // What the reconcile looks for and re-sends: the kept request.
        s.runs[who.i()].rkey = p.rkey;
        s.runs[who.i()].text = self.resent_text(p, d.content);
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

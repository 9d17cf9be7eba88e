//! The exactly-once protocol, model-checked (issue 25; RELIABILITY.md "The protocol,
//! model-checked"): every interleaving of a CLI run, a Retry, a sweep and a dry run of one
//! (draft, target), with crashes after any step, the slow accept, runs outliving their claims,
//! claim expiry, Redis restarts and failed record writes, a draft edited while its attempt is
//! `unknown`, against each network's duplicate semantics (Threads' container included). Then each guard of the protocol is switched off in turn, and the checker must find
//! a counterexample every time, so that the model cannot silently become vacuous.
//!
//! Run: `cargo test --release --test protocol_model -- --nocapture`.

#[path = "protocol_model/model.rs"]
mod model;
#[path = "protocol_model/network.rs"]
mod network;
#[path = "protocol_model/state.rs"]
mod state;

use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model, Property};

use state::{Action, Bound, Mutation, Net, ProtocolModel, State, Status, Who, MUTATIONS, NETWORKS};

/// The bound: three real runs and a dry run, two faults per behaviour, four quiet periods.
const BOUND: Bound = Bound {
    runs: &[Who::Cli, Who::Retry, Who::Sweep, Who::DryRun],
    faults: 1,
    ticks: 2,
    window: 2,
    key_memory: 2,
};

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.init()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        Some(self.apply(state, &action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one post per (draft, target)", |_, s: &State| {
                s.posts.len() <= 1
            }),
            Property::always(
                "a dry run never changes what a real run does",
                |_, s: &State| {
                    s.ns[0]
                        .record
                        .is_none_or(|r| r.post.is_none_or(|p: state::PostId| !p.dry))
                },
            ),
            Property::always(
                "no silent loss: every finished draft is posted or told",
                |_, s: &State| !finished(s) || posted_or_told(s),
            ),
            Property::always("a record, once written, is final", |_, s: &State| {
                s.ns.iter().all(|n| n.record_writes <= 1)
            }),
            Property::always("a claim is lost only to a fault", |_, s: &State| {
                !s.claim_stolen
            }),
            Property::always(
                "a post the pipeline holds the id of is never put to the owner",
                |_, s: &State| !s.asked_known,
            ),
            Property::sometimes("posted and recorded", |_, s: &State| {
                s.posts.len() == 1 && s.ns[0].record.is_some()
            }),
        ]
    }
}

/// Every run has ended and nothing is in flight.
fn finished(s: &State) -> bool {
    s.runs
        .iter()
        .all(|r| matches!(r.pc, state::Pc::Done | state::Pc::Crashed))
        && s.in_flight.is_empty()
}

/// The real draft ends posted (and recorded), or in a state that the sweeper re-drives or that
/// told the owner, and never says something untrue: posted without a post, or new/failed (to be
/// posted again) with a post out there.
fn posted_or_told(s: &State) -> bool {
    let real = &s.ns[0];
    let posted = !s.posts.is_empty();
    match (posted, real.record.is_some()) {
        (true, true) => true,
        (false, true) => false,
        (_, false) if real.draft.status == Status::Posted => false,
        // Unknown: the sweeper reconciles or repairs it, or the owner was asked.
        (true, false) => real.draft.status == Status::Unknown,
        // Nothing posted: new (re-driven once stale), failed (retried) or unknown (checked).
        (false, false) => true,
    }
}

struct Checked {
    states: usize,
    violated: Vec<&'static str>,
    found: bool,
    secs: f64,
}

fn check(net: Net, mutation: Option<Mutation>) -> Checked {
    let started = Instant::now();
    let model = ProtocolModel {
        net,
        bound: BOUND,
        mutation,
    };
    let checker = model
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    let discoveries = checker.discoveries();
    let mut violated: Vec<&'static str> = discoveries
        .keys()
        .copied()
        .filter(|name| *name != "posted and recorded")
        .collect();
    violated.sort_unstable();
    if let Some(name) = violated.first() {
        {
            let path = &discoveries[name];
            eprintln!(
                "  {mutation:?} on {net:?}: \"{name}\" violated after {:?}",
                path.clone().into_actions()
            );
        }
    }
    Checked {
        states: checker.unique_state_count(),
        found: discoveries.contains_key("posted and recorded"),
        violated,
        secs: started.elapsed().as_secs_f64(),
    }
}

#[test]
fn the_protocol_holds_and_every_guard_matters() {
    let mut states = 0;
    for net in NETWORKS {
        let c = check(net, None);
        eprintln!(
            "{net:?}: {} states, {:.1}s, violated {:?}",
            c.states, c.secs, c.violated
        );
        assert!(
            c.violated.is_empty(),
            "the protocol fails on {net:?}: {:?}",
            c.violated
        );
        assert!(
            c.found,
            "{net:?}: no behaviour posts and records (vacuous model)"
        );
        states += c.states;
    }
    let mut found = 0;
    let mut missed = Vec::new();
    for mutation in MUTATIONS {
        // The network whose counterexample is shortest goes first (a network on which a
        // mutation is safe is explored to its end); every network counts.
        let first = match mutation {
            Mutation::ClaimKeptAfterPostedNotRecorded => Net::TelegramChannel,
            Mutation::PerNetworkStrategy | Mutation::KeptRequestReplayed => Net::X,
            Mutation::StagedPublishedAsOthers => Net::Threads,
            _ => Net::Linkedin,
        };
        let order = std::iter::once(first).chain(NETWORKS.into_iter().filter(|n| *n != first));
        let hit = order
            .into_iter()
            .any(|net| !check(net, Some(mutation)).violated.is_empty());
        if hit {
            found += 1;
        } else {
            missed.push(mutation);
        }
    }
    println!(
        "protocol model: {states} states, {found} of {} mutations found",
        MUTATIONS.len()
    );
    assert!(states >= 10_000, "the bound explores only {states} states");
    assert!(missed.is_empty(), "no counterexample for {missed:?}");
}

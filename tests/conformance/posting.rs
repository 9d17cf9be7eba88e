//! The behaviours about posting exactly once: racing runs, a lost answer, a 5xx.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use postonce::key::PostKey;
use postonce::outcome::OutcomeKind;

use super::harness::{assert_on_network, past_the_quiet_period, questions, record, run, target};
use super::networks::{Ambiguous, Create, Net};
use crate::support::env::Env;

/// `figures`, with what the network made for `key`'s draft before the create where it makes
/// something ([`super::networks::ConformanceFake::staged`]).
fn with_more(env: &Env, net: Net, key: &PostKey, figures: String) -> String {
    match net.staged(env, key) {
        Some(made) => format!("{figures}, containers {made}"),
        None => figures,
    }
}

/// Where the network makes something before the create (Threads' container), the one attempt
/// of `key`'s draft made exactly one: never a second while the first could still publish.
fn one_staged(env: &Env, net: Net, key: &PostKey, figures: &str) {
    if let Some(made) = net.staged(env, key) {
        assert_eq!(
            made, 1,
            "one container for the draft, never a second while the first could still publish: {figures}"
        );
    }
}

/// How many runs of one draft race.
pub const RACERS: usize = 8;

/// [`RACERS`] runs of one draft started together over two sets of clients, the fake's own
/// duplicate check off: exactly one post, exactly one run says `posted`, the others
/// `being_posted` or `already_posted`; the draft is recorded, and a later run sends nothing.
pub async fn posted_once(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    net.set_duplicate_check(&env, false);
    let key = env.key();
    let content = super::harness::announcement(&env, &key);
    let other = env.another_app().await;
    let creates = net.creates(&env);
    let runs: Vec<_> = (0..RACERS)
        .map(|i| {
            let app = if i % 2 == 0 {
                env.app.clone()
            } else {
                other.clone()
            };
            let req = env.request_to(&key, Some(content.clone()), &[n]);
            let dl = env.deadline();
            tokio::spawn(async move { app.pipeline.run(req, dl).await })
        })
        .collect();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for r in runs {
        let o = r.await.expect("run task");
        let t = target(&o, n);
        assert!(
            matches!(
                t.outcome,
                OutcomeKind::Posted | OutcomeKind::BeingPosted | OutcomeKind::AlreadyPosted
            ),
            "a racing run ended {t:?}"
        );
        *kinds.entry(t.outcome.as_str()).or_default() += 1;
    }
    let posts = net.posts_for(&env, &key);
    let figures = with_more(
        &env,
        net,
        &key,
        format!(
            "{RACERS} racing runs: {kinds:?}; creates {}, posts {posts}",
            net.creates(&env) - creates
        ),
    );
    assert_eq!(
        posts, 1,
        "exactly one post at the fake (its duplicate check off): {figures}"
    );
    assert_eq!(
        kinds.get("posted").copied(),
        Some(1),
        "exactly one run posted: {figures}"
    );
    one_staged(&env, net, &key, &figures);
    assert!(record(&env, &key, n).await.is_some(), "recorded");
    let sent = net.requests(&env).await;
    let again = run(&env, &key, false, n).await;
    assert_eq!(again.outcome, OutcomeKind::AlreadyPosted, "{again:?}");
    assert_eq!(
        net.requests(&env).await,
        sent,
        "a recorded draft sends nothing"
    );
    ((), figures)
}

/// The network makes the post and the answer is lost (it comes after the budget): the run is
/// `unknown`. Inside the quiet period a run sends nothing. After it, a network that can settle
/// (README "Targets") is settled by the next run with exactly one post and no question to
/// the owner; the channel stays `unknown`, is never re-sent, and the owner is asked.
pub async fn lost_answer(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    net.set_duplicate_check(&env, true);
    net.set_create(&env, Create::LoseAnswer);
    let key = env.key();
    let started = Instant::now();
    let first = run(&env, &key, true, n).await;
    net.set_create(&env, Create::Accept);
    assert_eq!(
        first.outcome,
        OutcomeKind::Unknown,
        "the first run: {first:?}"
    );
    assert_eq!(
        net.posts_for(&env, &key),
        1,
        "the post exists: only the answer was lost"
    );
    let creates = net.creates(&env);

    let early = run(&env, &key, false, n).await;
    assert!(
        started.elapsed() < env.quiet_period(),
        "the run meant for inside the quiet period ended {:?} after the attempt began: the machine is too slow for this check",
        started.elapsed()
    );
    assert_eq!(
        early.outcome,
        OutcomeKind::Unknown,
        "inside the quiet period: {early:?}"
    );
    assert_eq!(
        net.creates(&env),
        creates,
        "nothing is sent inside the quiet period"
    );

    past_the_quiet_period(&env).await;
    let settled = run(&env, &key, false, n).await;
    let asked = questions(&env, &key, n);
    let figures = with_more(
        &env,
        net,
        &key,
        format!(
            "lost answer → {:?}, after the quiet period {:?}; creates {} (+{} after the first), posts {}, questions {}",
            first.outcome,
            settled.outcome,
            net.creates(&env),
            net.creates(&env) - creates,
            net.posts_for(&env, &key),
            asked.len()
        ),
    );
    match net.ambiguous() {
        Ambiguous::Settles => {
            assert_on_network(n, &settled, "after the quiet period");
            assert!(asked.is_empty(), "no question to the owner: {figures}");
            let r = record(&env, &key, n).await.expect("recorded");
            assert!(r.post_id.is_some(), "recorded with the network's id: {r:?}");
        }
        Ambiguous::AsksTheOwner => {
            assert_eq!(
                settled.outcome,
                OutcomeKind::Unknown,
                "at most once: {settled:?}"
            );
            assert_eq!(net.creates(&env), creates, "never re-sent: {figures}");
            assert_eq!(asked.len(), 2, "the owner is asked: {figures}");
            assert!(record(&env, &key, n).await.is_none());
            let again = run(&env, &key, false, n).await;
            assert_eq!(again.outcome, OutcomeKind::Unknown, "{again:?}");
            assert_eq!(net.creates(&env), creates, "never re-sent: {figures}");
        }
    }
    assert_eq!(net.posts_for(&env, &key), 1, "exactly one post: {figures}");
    one_staged(&env, net, &key, &figures);
    ((), figures)
}

/// The first step of "a 5xx is retried": the create answers a 5xx and makes nothing. Pipeline
/// rule 7: a 5xx on create may have made the post, so the run is `unknown`. Returns the key for
/// the sweep and the create requests so far.
pub async fn server_error(env: Arc<Env>, net: Net) -> ((PostKey, u64), String) {
    let n = net.network();
    net.set_duplicate_check(&env, true);
    net.set_create(&env, Create::ServerError);
    let key = env.key();
    let first = run(&env, &key, true, n).await;
    net.set_create(&env, Create::Accept);
    assert_eq!(
        first.outcome,
        OutcomeKind::Unknown,
        "a 5xx on create: {first:?}"
    );
    assert_eq!(net.posts_for(&env, &key), 0, "the fake made nothing");
    let creates = net.creates(&env);
    let figures = format!("5xx → {:?}, creates {creates}", first.outcome);
    ((key, creates), figures)
}

/// The second step, after the quiet period and a sweep: posted exactly once where the network
/// can settle an ambiguous create; the channel is left to the owner, not re-sent. A later run
/// changes nothing.
pub async fn after_the_sweep(env: Arc<Env>, net: Net, first: (PostKey, u64)) -> ((), String) {
    let n = net.network();
    let (key, creates) = first;
    let again = run(&env, &key, false, n).await;
    let figures = with_more(
        &env,
        net,
        &key,
        format!(
            "after the sweep a run says {:?}; creates {}, posts {}",
            again.outcome,
            net.creates(&env),
            net.posts_for(&env, &key)
        ),
    );
    match net.ambiguous() {
        Ambiguous::Settles => {
            assert_eq!(
                again.outcome,
                OutcomeKind::AlreadyPosted,
                "the sweep posted it: {figures}"
            );
            assert_eq!(net.posts_for(&env, &key), 1, "exactly one post: {figures}");
            one_staged(&env, net, &key, &figures);
            assert!(record(&env, &key, n).await.is_some());
        }
        Ambiguous::AsksTheOwner => {
            assert_eq!(again.outcome, OutcomeKind::Unknown, "{figures}");
            assert_eq!(net.creates(&env), creates, "never re-sent: {figures}");
            assert_eq!(net.posts_for(&env, &key), 0, "{figures}");
            assert_eq!(
                questions(&env, &key, n).len(),
                2,
                "the owner is asked: {figures}"
            );
        }
    }
    ((), figures)
}

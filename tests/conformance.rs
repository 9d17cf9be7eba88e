//! One conformance suite: the same behaviour tests run against every network's fake
//! (issue 21, item 4; object_store's `integration.rs` run over every store is the model).
//!
//! Every network is listed once, with an adapter onto its wire-format fake, in
//! `conformance/networks.rs` ([`networks::NETWORKS`]); each test below runs its
//! behaviour over all of them, concurrently in one environment (real redis-server and
//! DynamoDB Local, 1.5 s budgets, a 3 s quiet period), prints a line of figures per network
//! and fails naming each network that broke the rule, with what it did:
//!
//! 1. posted once: 8 racing runs of one draft, the fake's duplicate check off → 1 post;
//! 2. a lost answer is settled after the quiet period with exactly one post; for the
//!    Telegram channel (at most once, README "Targets") it stays `unknown`, is never
//!    re-sent, and the owner is asked;
//! 3. a 429 is paced, not failed: retryable, the next try not before the reset it named;
//! 4. a 5xx is retried: `unknown`, then a sweep after the quiet period posts it once (the
//!    channel: left to the owner, never re-sent);
//! 5. a revoked token fails the target (not retryable), the owner is told with the command
//!    that renews it, and the draft waits for a new credential (a sweep in another process
//!    sends nothing);
//! 6. an over-long text is refused before any call: 400 and exit 2 naming the network and its
//!    limit, zero requests at the fake, nothing stored;
//! 7. a dry run (no credentials) sends nothing and shows the request.
//!
//! Where a network makes something before the create (Threads' container, which the create
//! publishes), 1, 2 and 4 also hold it to one per draft: never a second container while the
//! first could still publish (issue 21, item 5).
//!
//! A new network gets all of it by adding its fake to the environment
//! (`Env::with_every_network`) and a line to `NETWORKS`; the first test below fails while a
//! network of the registry is missing from that list.

use crate::support;

pub mod harness;
pub mod networks;
pub mod posting;
pub mod refusals;

use harness::{env, past_the_quiet_period, Suite};
use networks::NETWORKS;
use postonce::networks::Network;
use support::env::Stores;

#[test]
fn every_network_of_the_registry_is_in_the_suite() {
    let listed: Vec<Network> = NETWORKS.iter().map(|n| n.network()).collect();
    assert_eq!(
        listed,
        Network::ALL.to_vec(),
        "conformance/networks.rs NETWORKS must list every network of the registry, in its order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn posted_once_on_every_network() {
    let suite = Suite::new(
        "posted once (8 racing runs, duplicate check off)",
        env(Stores::Real).await,
    );
    suite.step(posting::posted_once).await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_answer_is_settled_after_the_quiet_period_on_every_network() {
    let suite = Suite::new(
        "a lost answer is settled after the quiet period, exactly once",
        env(Stores::Real).await,
    );
    suite.step(posting::lost_answer).await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_is_paced_not_failed_on_every_network() {
    let suite = Suite::new("a 429 is paced, not failed", env(Stores::Real).await);
    suite.step(refusals::rate_limited).await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_5xx_is_retried_by_the_sweeper_on_every_network() {
    let suite = Suite::new("a 5xx is retried, posted once", env(Stores::Real).await);
    let first = std::sync::Arc::new(suite.step(posting::server_error).await);
    past_the_quiet_period(&suite.env).await;
    let swept = suite
        .env
        .app
        .pipeline
        .sweep(&suite.env.deadline())
        .await
        .expect("sweep");
    println!(
        "the sweep: examined {}, runs {:?}",
        swept.examined,
        swept
            .runs
            .iter()
            .map(|o| (o.key.clone(), o.outcome))
            .collect::<Vec<_>>()
    );
    suite
        .step(|env, net| {
            let first = first[&net.network()].clone();
            posting::after_the_sweep(env, net, first)
        })
        .await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revoked_token_is_permanent_and_the_owner_is_told_on_every_network() {
    let suite = Suite::new(
        "a revoked token is permanent, and the owner is told",
        env(Stores::Real).await,
    );
    suite.step(refusals::revoked).await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_over_long_text_is_refused_before_any_call_on_every_network() {
    let suite = Suite::new(
        "an over-long text is refused before any call",
        env(Stores::Real).await,
    );
    suite.step(refusals::too_long).await;
    suite.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dry_run_sends_nothing_and_shows_the_request_on_every_network() {
    let suite = Suite::new(
        "a dry run sends nothing and shows the request",
        env(Stores::Real).await,
    );
    suite.step(refusals::dry_run).await;
    suite.finish();
}

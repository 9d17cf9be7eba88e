//! A dropped Redis connection is not an outage (issue 8, point 7). The process stays up (one
//! in-process `App`, as a warm Lambda sandbox or a long-lived `serve` keeps its clients) while
//! the real redis-server drops every client connection, or is restarted; the next run must
//! claim, post and release as usual, not answer `failed` retryable (503). Redis is healthy again
//! by the time that run starts: a failure there is the client's, not the server's.

use crate::support;

use std::time::Duration;

use postonce::outcome::{Outcome, OutcomeKind};
use support::env::Env;

/// An idle disconnect has happened well before the next trigger: leave the client time to see
/// the closed socket, so the test is about a connection that is known dead, not a race with it.
const IDLE: Duration = Duration::from_millis(300);

fn assert_posted(outcome: &Outcome, when: &str) {
    assert_eq!(
        outcome.outcome,
        OutcomeKind::Posted,
        "{when}: the run must end posted, not {:?} (retryable {}): {}",
        outcome.outcome,
        outcome.retryable,
        outcome.detail
    );
}

/// Connections postonce holds to redis-server right now (redis-cli's own is not counted).
fn postonce_connections(env: &Env) -> usize {
    env.redis()
        .cli(&["CLIENT", "LIST", "TYPE", "normal"])
        .lines()
        .filter(|l| !l.contains("cmd=client"))
        .count()
}

/// The server closes every client connection (an idle timeout, a failover, a proxy restart);
/// the next run, of a new key, is posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_run_after_redis_dropped_every_connection_is_posted() {
    let env = Env::start().await;
    let first = env.key();
    assert_posted(
        &env.post(&first, "Before the drop #redis").await,
        "first run",
    );
    assert!(
        postonce_connections(&env) >= 1,
        "postonce holds a Redis connection after a run"
    );

    let killed = env.redis().cli(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(
        killed.parse::<u32>().is_ok_and(|n| n >= 1),
        "CLIENT KILL dropped postonce's connection (answered {killed:?})"
    );
    tokio::time::sleep(IDLE).await;

    let second = env.key();
    let outcome = env.post(&second, "After the drop #redis").await;
    println!(
        "redis reconnect (CLIENT KILL): run after the drop ended {:?}, retryable {}: {}",
        outcome.outcome, outcome.retryable, outcome.detail
    );
    assert_posted(&outcome, "first run after CLIENT KILL");
    assert_eq!(env.linkedin.posts_created(), 2, "one post per key");
    assert_eq!(
        env.redis().cli(&["EXISTS", &format!("claim:{second}")]),
        "0",
        "the claim was released over the new connection"
    );
}

/// redis-server is restarted on the same port between two runs (a deploy, a crash and its
/// supervisor); the next run is posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_run_after_a_redis_restart_is_posted() {
    let mut env = Env::start().await;
    let first = env.key();
    assert_posted(
        &env.post(&first, "Before the restart #redis").await,
        "first run",
    );

    env.redis
        .as_mut()
        .expect("this environment has a redis-server")
        .restart();
    tokio::time::sleep(IDLE).await;

    let second = env.key();
    let outcome = env.post(&second, "After the restart #redis").await;
    println!(
        "redis reconnect (restart): run after the restart ended {:?}, retryable {}: {}",
        outcome.outcome, outcome.retryable, outcome.detail
    );
    assert_posted(&outcome, "first run after a redis-server restart");
    assert_eq!(env.linkedin.posts_created(), 2, "one post per key");
    assert_eq!(
        env.redis().cli(&["EXISTS", &format!("claim:{second}")]),
        "0",
        "the claim was released over the new connection"
    );
}

//! Issue 32, step 5: a 401 is a credential problem, not a draft problem.
//!
//! A token revoked at the network's fake while 30 drafts are due for it: racing sweeper
//! processes (each its own set of clients, as separate Lambda sandboxes) tell the owner once,
//! in one Telegram message, send next to nothing with the dead token, post nothing, and list
//! every draft as waiting for a new credential; fresh processes with the same credential send
//! nothing more. Once the credential changes (the variable now names a token the network
//! accepts), racing sweeps post all 30, each exactly once, counted at the fake (whose duplicate
//! check is off), each reporting that it went out late.
//!
//! LinkedIn (401 `REVOKED_ACCESS_TOKEN`, met at `initializeUpload`) and Threads (400 OAuth code
//! 190, met at the container), over real redis-server and DynamoDB Local; Bluesky (a revoked app
//! password), X and Mastodon (a replaced token: 401) the same way with a few drafts each.

use crate::support;

use std::sync::Arc;

use futures_util::future::join_all;
use postonce::app::App;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::OutcomeKind;
use postonce::pipeline::SweepReport;
use postonce::record::{now_s, DraftStatus};
use support::env::{Env, Stores};
use support::linkedin::DuplicateCheck;

const DRAFTS: usize = 30;
const PROCESSES: usize = 3;

/// The messages to the owner's chat that tell of `network`'s refused credential.
fn refusals(env: &Env, network: Network) -> Vec<String> {
    let renew = format!("postonce auth {}", network.as_str());
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| t.contains("has expired or was revoked") && t.contains(&renew))
        .collect()
}

/// One sweep in each of `apps` at once.
async fn race(env: &Env, apps: &[Arc<App>]) -> Vec<SweepReport> {
    join_all(apps.iter().map(|app| {
        let dl = env.deadline();
        let app = app.clone();
        async move { app.pipeline.sweep(&dl).await.expect("sweep") }
    }))
    .await
}

async fn processes(env: &Env, overrides: &[(&str, &str)]) -> Vec<Arc<App>> {
    let mut apps = Vec::new();
    for _ in 0..PROCESSES {
        apps.push(env.app_with(overrides).await);
    }
    apps
}

/// `drafts` drafts for `network`, due ten minutes ago (stored as a trigger with a time stores
/// them: `scheduled`, due at their time).
async fn due_drafts(env: &Env, network: Network, drafts: usize) -> Vec<PostKey> {
    let lane = env.app.pipeline.lane(network).expect("lane").clone();
    let at = now_s() - 600;
    let mut keys = Vec::new();
    for _ in 0..drafts {
        let key = env.key().on(network);
        let saved = lane
            .records
            .save_scheduled(&key, &env.announcement(&key.base()), "ci", at, now_s())
            .await
            .expect("store the draft");
        assert!(saved.is_some());
        keys.push(key);
    }
    keys
}

/// The whole story for one network: revoked, told once, held, renewed, posted once each, for
/// `drafts` drafts. `revoked_answers` counts the calls the fake refused for the revoked token;
/// `posts` the posts it made for `key`'s text.
#[allow(clippy::too_many_arguments)]
async fn revoked_then_renewed(
    env: &Env,
    network: Network,
    drafts: usize,
    renew: &[(&str, &str)],
    revoked_answers: impl Fn() -> u64,
    posts: impl Fn(&PostKey) -> usize,
    total_posts: impl Fn() -> usize,
) {
    let keys = due_drafts(env, network, drafts).await;
    let label = network.label();

    // The sweepers of three processes race, twice, with the revoked token.
    let old = processes(env, &[]).await;
    for _ in 0..2 {
        race(env, &old).await;
    }
    let told = refusals(env, network);
    println!(
        "{network:?}: told {told:#?}; refused calls {}",
        revoked_answers()
    );
    assert_eq!(told.len(), 1, "told once for {drafts} drafts: {told:#?}");
    assert!(
        told[0].contains(&format!("postonce auth {}", network.as_str())),
        "{}",
        told[0]
    );
    assert_eq!(total_posts(), 0, "nothing posted with a dead token");
    let refused = revoked_answers();
    assert!(
        (1..=PROCESSES as u64).contains(&refused),
        "at most one refused call per process before it holds the rest: {refused}"
    );

    // Every draft waits, listed with the reason; fresh processes with the same credential
    // send nothing to the network and tell nothing.
    let fresh = processes(env, &[]).await;
    let reports = race(env, &fresh).await;
    assert!(reports.iter().all(|r| r.runs.is_empty()), "{reports:#?}");
    assert_eq!(revoked_answers(), refused, "no call with the dead token");
    assert_eq!(refusals(env, network).len(), 1);
    let because = format!("waits: {label} refused its credential");
    for waiting in [
        reports[0].waiting.clone(),
        fresh[0]
            .pipeline
            .waiting(&env.deadline())
            .await
            .expect("status --all"),
    ] {
        for key in &keys {
            let w = waiting
                .iter()
                .find(|w| w.key == key.to_string())
                .unwrap_or_else(|| panic!("{key} is not listed: {waiting:#?}"));
            assert!(w.reason.starts_with(&because), "{}", w.reason);
            assert!(
                w.reason
                    .contains(&format!("postonce auth {}", network.as_str())),
                "{}",
                w.reason
            );
        }
    }
    let listed = fresh[0]
        .pipeline
        .scheduled(&env.deadline())
        .await
        .expect("schedule list");
    for key in &keys {
        let d = listed
            .iter()
            .find(|d| d.key == key.to_string())
            .unwrap_or_else(|| panic!("{key} is not in schedule list"));
        assert!(
            d.last_error
                .as_deref()
                .is_some_and(|e| e.starts_with(&because)),
            "{d:?}"
        );
    }

    // The credential changes: every process now has the new token. Racing sweeps post each
    // draft once, by themselves.
    let new = processes(env, renew).await;
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        for r in race(env, &new).await {
            outcomes.extend(r.runs);
        }
        if total_posts() == drafts {
            break;
        }
    }
    assert_eq!(total_posts(), drafts, "every draft posted: {outcomes:#?}");
    for key in &keys {
        assert_eq!(posts(key), 1, "{key} posted once");
        let s = new[0]
            .pipeline
            .status(key, &env.deadline())
            .await
            .expect("status");
        assert!(s.snapshot.record.is_some(), "{key} recorded");
        assert_eq!(
            s.snapshot.draft.map(|d| d.status),
            Some(DraftStatus::Posted)
        );
    }
    let posted: Vec<_> = outcomes
        .iter()
        .flat_map(|o| {
            if o.parts.is_empty() {
                vec![o.clone()]
            } else {
                o.parts.clone()
            }
        })
        .filter(|p| p.outcome == OutcomeKind::Posted)
        .collect();
    assert_eq!(posted.len(), drafts, "{outcomes:#?}");
    assert!(
        posted.iter().all(|p| p.detail.contains("posted late")),
        "{posted:#?}"
    );
    // Nothing waits any more, nothing more was told, and a last sweep posts nothing.
    let after = race(env, &new).await;
    assert!(after.iter().all(|r| r.runs.is_empty()), "{after:#?}");
    assert!(after
        .iter()
        .all(|r| !r.waiting.iter().any(|w| w.reason.starts_with(&because))));
    assert_eq!(refusals(env, network).len(), 1);
    assert_eq!(total_posts(), drafts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revoked_linkedin_token_tells_once_holds_its_drafts_and_posts_each_once_when_renewed() {
    let env = Env::with(Stores::Real, &[]).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env.linkedin.set_revoked(true);
    env.linkedin.grant("AQV-renewed-linkedin-token");
    revoked_then_renewed(
        &env,
        Network::Linkedin,
        DRAFTS,
        &[("LINKEDIN_ACCESS_TOKEN", "AQV-renewed-linkedin-token")],
        || env.linkedin.revoked_answers(),
        |key| env.linkedin.posts_containing(key.slug()).len(),
        || env.linkedin.posts_created(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_threads_token_refused_with_code_190_tells_once_and_posts_each_once_when_renewed() {
    let env = Env::with_threads(Stores::Real, &[]).await;
    let t = env.threads();
    t.revoke();
    t.grant("THAAHq2ZbW9x-renewed-threads-token");
    revoked_then_renewed(
        &env,
        Network::Threads,
        DRAFTS,
        &[("THREADS_ACCESS_TOKEN", "THAAHq2ZbW9x-renewed-threads-token")],
        || t.revoked_answers(),
        |key| {
            t.posts()
                .iter()
                .filter(|p| p.text.contains(key.slug()))
                .count()
        },
        || t.posts_created(),
    )
    .await;
}

/// The ambiguous case: a Threads publish that got no answer leaves its draft `unknown`; the
/// token is then revoked. The sweep's check of that attempt (its container's status) is
/// refused with code 190: that is not a refused create, so the draft stays `unknown` and no
/// new container is made. Once the credential changes, the check finds the container
/// unpublished and publishes that same container: one post, one container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_check_of_an_earlier_attempt_leaves_it_unknown_and_never_makes_it_afresh() {
    let env = Env::with_threads(Stores::Real, &[("POSTONCE_RECONCILE_AFTER_S", "2")]).await;
    let t = env.threads();
    let key = env.key();
    t.set_publish_mode(support::threads::Mode::Hang(
        std::time::Duration::from_secs(3),
    ));
    let first = env
        .app
        .pipeline
        .run(
            env.request_to(&key, Some(env.announcement(&key)), &[Network::Threads]),
            env.deadline(),
        )
        .await;
    t.set_publish_mode(support::threads::Mode::Normal);
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    let target = key.on(Network::Threads);
    t.revoke();
    t.grant("THAAHq2ZbW9x-renewed-threads-token");
    env.wait_out_quiet_period(&target).await;

    let old = processes(&env, &[]).await;
    race(&env, &old).await;
    let draft = env.status(&target).await.snapshot.draft.expect("draft");
    assert_eq!(draft.status, DraftStatus::Unknown, "{draft:?}");
    assert!(t.revoked_answers() >= 1, "the check met the revoked token");
    assert_eq!(t.container_requests(), 1, "never made afresh");
    assert_eq!(t.posts_created(), 0);

    let new = processes(
        &env,
        &[("THREADS_ACCESS_TOKEN", "THAAHq2ZbW9x-renewed-threads-token")],
    )
    .await;
    for _ in 0..3 {
        race(&env, &new).await;
        if t.posts_created() > 0 {
            break;
        }
    }
    assert_eq!(t.posts_created(), 1);
    assert_eq!(
        t.container_requests(),
        1,
        "the same container was published"
    );
    assert!(env.status(&target).await.snapshot.record.is_some());
}

/// The same story for the other networks whose credential can be refused, kept light (one
/// environment, a few drafts each, one network after the other): Bluesky (the app password
/// revoked: its sessions are gone and `createSession` answers 401; renewed with a new app
/// password), X (the access token regenerated: the old one's requests answer 401) and Mastodon
/// (the token revoked: 401; renewed by a new authorization).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bluesky_x_and_mastodon_refused_credentials_tell_once_hold_and_post_each_once_when_renewed()
{
    const FEW: usize = 3;
    let env = Env::with_every_network(Stores::Real, &[]).await;
    let (bsky, x, masto) = (env.bluesky(), env.x(), env.mastodon());
    x.set_duplicate_check(support::x::DuplicateCheck::Off);

    let logins = bsky.create_session_requests();
    bsky.revoke_app_password();
    bsky.grant_app_password("bsky-app-pass-SECRET3-renewed");
    revoked_then_renewed(
        &env,
        Network::Bluesky,
        FEW,
        &[("BLUESKY_APP_PASSWORD", "bsky-app-pass-SECRET3-renewed")],
        || bsky.create_session_requests() - logins,
        |key| {
            bsky.records()
                .iter()
                .filter(|r| {
                    r.value["text"]
                        .as_str()
                        .is_some_and(|t| t.contains(key.slug()))
                })
                .count()
        },
        || usize::try_from(bsky.posts_created()).expect("count"),
    )
    .await;

    let refused = x.bad_signatures();
    x.renew_token(
        "2244994945-x-access-token-SECRET7-renewed",
        "x-access-token-secret-SECRET8-renewed",
    );
    revoked_then_renewed(
        &env,
        Network::X,
        FEW,
        &[
            (
                "X_ACCESS_TOKEN",
                "2244994945-x-access-token-SECRET7-renewed",
            ),
            (
                "X_ACCESS_TOKEN_SECRET",
                "x-access-token-secret-SECRET8-renewed",
            ),
        ],
        || x.bad_signatures() - refused,
        |key| {
            x.posts()
                .iter()
                .filter(|p| p.text.contains(key.slug()))
                .count()
        },
        || x.posts_created(),
    )
    .await;

    let refused = masto.bad_tokens();
    masto.renew_token("ZA-renewed-mastodon-SECRET1");
    revoked_then_renewed(
        &env,
        Network::Mastodon,
        FEW,
        &[("MASTODON_ACCESS_TOKEN", "ZA-renewed-mastodon-SECRET1")],
        || masto.bad_tokens() - refused,
        |key| {
            masto
                .statuses()
                .iter()
                .filter(|s| s.text.contains(key.slug()))
                .count()
        },
        || masto.statuses_created(),
    )
    .await;
}

//! Running one behaviour over every network of [`NETWORKS`], concurrently in one environment
//! (each network has its own fake and its own drafts there), with a report per network, and
//! the helpers the behaviours share.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::record::{Draft, DraftContent, PostedRecord};
use serde_json::Value;

use super::networks::{Net, NETWORKS};
use crate::support::env::{Env, Stores};

/// A quiet period of 3 s: above every budget the environment sets (1.5 s each), with room for
/// a run inside it on a loaded machine.
pub const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "3");

/// The environment every behaviour runs in: real Redis and DynamoDB Local (or `stores`), every
/// network of the registry through its fake ([`Env::with_every_network`]), 1.5 s budgets, a
/// 3 s quiet period.
pub async fn env(stores: Stores) -> Arc<Env> {
    Arc::new(Env::with_every_network(stores, &[QUIET]).await)
}

/// One behaviour run over every network. Each [`Suite::step`] runs its check for every
/// network still passing, concurrently; [`Suite::finish`] prints the report and fails naming
/// every network that broke the rule, with what it did.
pub struct Suite {
    behaviour: &'static str,
    pub env: Arc<Env>,
    failed: Mutex<BTreeMap<Network, String>>,
    figures: Mutex<BTreeMap<Network, Vec<String>>>,
}

impl Suite {
    pub fn new(behaviour: &'static str, env: Arc<Env>) -> Self {
        Self {
            behaviour,
            env,
            failed: Mutex::new(BTreeMap::new()),
            figures: Mutex::new(BTreeMap::new()),
        }
    }

    fn passing(&self) -> Vec<Net> {
        let failed = self.failed.lock().expect("lock");
        NETWORKS
            .iter()
            .copied()
            .filter(|n| !failed.contains_key(&n.network()))
            .collect()
    }

    /// Runs `check` for every network still passing, concurrently. A check asserts (a panic
    /// fails that network only) and returns a value for the next step and a line of figures.
    pub async fn step<T, F, Fut>(&self, check: F) -> BTreeMap<Network, T>
    where
        T: Send + 'static,
        F: Fn(Arc<Env>, Net) -> Fut,
        Fut: Future<Output = (T, String)> + Send + 'static,
    {
        let tasks: Vec<_> = self
            .passing()
            .into_iter()
            .map(|net| (net.network(), tokio::spawn(check(self.env.clone(), net))))
            .collect();
        let mut out = BTreeMap::new();
        for (n, task) in tasks {
            match task.await {
                Ok((value, figures)) => {
                    self.figures
                        .lock()
                        .expect("lock")
                        .entry(n)
                        .or_default()
                        .push(figures);
                    out.insert(n, value);
                }
                Err(e) => {
                    let why = if e.is_panic() {
                        let p = e.into_panic();
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "panicked".into())
                    } else {
                        e.to_string()
                    };
                    self.failed.lock().expect("lock").insert(n, why);
                }
            }
        }
        out
    }

    /// The report, one line per network; panics naming the networks that broke the rule.
    pub fn finish(self) {
        let failed = self.failed.into_inner().expect("lock");
        let figures = self.figures.into_inner().expect("lock");
        println!("conformance: {}", self.behaviour);
        for net in NETWORKS {
            let n = net.network();
            let shown = figures.get(&n).map(|f| f.join("; ")).unwrap_or_default();
            match failed.get(&n) {
                None => println!("  {:>8}: ok: {shown}", n.as_str()),
                Some(why) => println!("  {:>8}: FAILED: {why}", n.as_str()),
            }
        }
        if !failed.is_empty() {
            let names: Vec<&str> = failed.keys().map(|n| n.as_str()).collect();
            let whys: Vec<String> = failed
                .iter()
                .map(|(n, why)| format!("{}: {why}", n.as_str()))
                .collect();
            panic!(
                "{} does not hold on {}:\n{}",
                self.behaviour,
                names.join(", "),
                whys.join("\n")
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// `n`'s entry in the outcome's targets.
pub fn target(o: &Outcome, n: Network) -> TargetOutcome {
    o.targets
        .as_ref()
        .and_then(|t| t.get(&n))
        .cloned()
        .unwrap_or_else(|| panic!("no {} in the outcome's targets: {o:?}", n.as_str()))
}

/// The cover of every draft of the suite: a square JPEG that every network takes as it is
/// (the PNG of the other tests is outside Instagram's shapes and formats).
pub const COVER: &str = "/cover.jpg";

/// The suite's draft for `key`: [`Env::announcement`] with [`COVER`].
pub fn announcement(env: &Env, key: &PostKey) -> DraftContent {
    DraftContent {
        image: env.images.url(COVER),
        ..env.announcement(key)
    }
}

/// One run of `key` for `n` only: with a fresh draft (`fresh`) or the stored one (a Retry).
pub async fn run(env: &Env, key: &PostKey, fresh: bool, n: Network) -> TargetOutcome {
    let content = fresh.then(|| announcement(env, key));
    let o = env
        .app
        .pipeline
        .run(env.request_to(key, content, &[n]), env.deadline())
        .await;
    target(&o, n)
}

pub async fn record(env: &Env, key: &PostKey, n: Network) -> Option<PostedRecord> {
    env.status(&key.on(n)).await.snapshot.record
}

pub async fn draft(env: &Env, key: &PostKey, n: Network) -> Option<Draft> {
    env.status(&key.on(n)).await.snapshot.draft
}

/// Waits until a run started now could reconcile an attempt made before now.
pub async fn past_the_quiet_period(env: &Env) {
    tokio::time::sleep(env.quiet_period() + Duration::from_millis(1_100)).await;
}

fn markup_data(markup: &Value) -> Vec<String> {
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| b["callback_data"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Every report about `key` in the owner's chat, as each reads now: (text, reply_markup).
pub fn reports_of(env: &Env, key: &PostKey) -> Vec<(String, Value)> {
    let sent = i64::try_from(env.telegram.requests_for("sendMessage").len()).expect("count");
    (1..=sent)
        .filter_map(|id| env.telegram.message(id))
        .filter(|(text, _)| text.contains(&key.to_string()))
        .collect()
}

/// The owner's choices about `key` on `n` (*It's on …* / *Post anyway*) in the newest report
/// about it: `done:`/`force:` buttons.
pub fn questions(env: &Env, key: &PostKey, n: Network) -> Vec<String> {
    let ask = [
        format!("done:{key}@{}", n.as_str()),
        format!("force:{key}@{}", n.as_str()),
    ];
    reports_of(env, key)
        .last()
        .map(|(_, m)| markup_data(m))
        .unwrap_or_default()
        .into_iter()
        .filter(|d| ask.contains(d))
        .collect()
}

/// Asserts `t` is on its network, settled by this run or an earlier one.
pub fn assert_on_network(n: Network, t: &TargetOutcome, when: &str) {
    assert!(
        matches!(t.outcome, OutcomeKind::Posted | OutcomeKind::AlreadyPosted),
        "{}: {when}: expected posted or already_posted, got {t:?}",
        n.as_str()
    );
}

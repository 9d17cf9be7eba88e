//! A long-running `serve` and the stored credentials (issue 32). A start reads them once
//! ([`crate::startup`]); a process that runs for weeks must also see what another wrote since
//! (a new `postonce auth`, a refresh by a run or the sweeper) and refresh those due itself.
//!
//! Every [`interval`] (a minute) `serve` reads the stored credentials in one request, refreshing
//! those due as a start does and with the same code ([`flow::refresh_due`], under the same
//! lease, so racing processes refresh once). When a network's credential differs from the one
//! this process holds (its fingerprint, or anything else of it), that network's adapter and lane
//! are built anew from it ([`App::with_lanes_rebuilt`]) and requests from then on go to them;
//! a run in flight finishes with the lane it started with. A process whose every network has
//! its plain variable or `_PARAM` reads nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::app::App;
use crate::credentials::{self, flow, Credential, Source};
use crate::networks::Network;
use crate::record::RecordStore;
use crate::stores::Stores;
use crate::triggers::Router;
use crate::vars::Vars;

/// How often `serve` looks at the stored credentials.
const INTERVAL: Duration = Duration::from_secs(60);

/// The variable that shortens [`INTERVAL`] (whole seconds, 1 to 3600), for tests; README
/// "Local server" names it.
const INTERVAL_VAR: &str = "POSTONCE_CREDENTIALS_CHECK_S";

/// How often `serve` looks at the stored credentials: [`INTERVAL`], or [`INTERVAL_VAR`].
pub fn interval() -> Duration {
    let Some(v) = std::env::var(INTERVAL_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        return INTERVAL;
    };
    match v.trim().parse::<u64>() {
        Ok(s) if (1..=3600).contains(&s) => Duration::from_secs(s),
        _ => {
            tracing::warn!(variable = INTERVAL_VAR, value = %v, "not a whole number of seconds from 1 to 3600; a minute it is");
            INTERVAL
        }
    }
}

/// The router requests go to now: replaced when a stored credential changed.
#[derive(Clone)]
pub struct Current(Arc<RwLock<Arc<Router>>>);

impl Current {
    pub fn new(router: Arc<Router>) -> Self {
        Self(Arc::new(RwLock::new(router)))
    }

    pub fn get(&self) -> Arc<Router> {
        match self.0.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, router: Arc<Router>) {
        match self.0.write() {
            Ok(mut r) => *r = router,
            Err(poisoned) => *poisoned.into_inner() = router,
        }
    }
}

/// What the checks keep between them.
pub struct Reload {
    current: Current,
    /// The environment's `_PARAM`s, resolved at the first check (then kept: a changed
    /// parameter is read at the next start, as before).
    resolved: Option<HashMap<String, String>>,
    /// The real record store, where the credentials are kept.
    records: Option<Arc<dyn RecordStore>>,
    /// Each network's stored credential in use at the last check (`None`: none stored, or one
    /// shadowed by a variable); unknown before the first.
    held: Option<BTreeMap<Network, Option<Credential>>>,
}

impl Reload {
    pub fn new(current: Current) -> Self {
        Self {
            current,
            resolved: None,
            records: None,
            held: None,
        }
    }

    /// Checks every `every` until `stop` says so; a check under way finishes first.
    pub async fn run(mut self, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // The stop first: a server gone (its runtime shutting down) ends the loop
                // before a timer is polled again.
                biased;
                _ = stop.changed() => return,
                _ = ticks.tick() => {}
            }
            let budget = self.current.get().app.config.function_timeout;
            match tokio::time::timeout(budget, self.check()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not check the stored credentials; the ones in use stay");
                }
                Err(_) => {
                    tracing::warn!(
                        "checking the stored credentials took too long; the ones in use stay"
                    );
                }
            }
        }
    }

    /// One check: read (and refresh those due), and rebuild the lanes whose credential changed.
    ///
    /// # Errors
    /// The store, a parameter or a rebuilt lane that failed; nothing changed then.
    pub async fn check(&mut self) -> Result<(), String> {
        let router = self.current.get();
        let app = &router.app;
        if self.resolved.is_none() {
            let resolved = crate::secrets::resolve(|name| std::env::var(name).ok())
                .await
                .map_err(|e| e.to_string())?;
            self.resolved = Some(resolved);
        }
        let resolved = self.resolved.clone().unwrap_or_default();
        let lookup = move |name: &str| {
            resolved
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
        };
        let vars = Vars::new(&lookup);
        if !crate::startup::reads_stored(&app.config, vars) {
            return Ok(());
        }
        let records = self.records(app).await?;
        let stored = flow::refresh_due(&*records, vars, &app.http, crate::record::now_s())
            .await
            .map_err(|e| e.to_string())?;
        let held: BTreeMap<Network, Option<Credential>> = Network::ALL
            .into_iter()
            .map(|n| {
                let used = Source::of(n, vars, &stored) == Source::Stored;
                (n, stored.get(n).filter(|_| used).cloned())
            })
            .collect();
        let found = credentials::variables(vars, &stored);
        let mut config = crate::startup::with_stored(&lookup, &found).map_err(|e| e.to_string())?;
        let changed: BTreeSet<Network> = Network::ALL
            .into_iter()
            .filter(|n| {
                let lane = app.pipeline.lane(*n).map(|l| &l.fingerprint);
                let other = self.held.as_ref().is_some_and(|h| h.get(n) != held.get(n));
                config.fingerprints.get(n) != lane || other
            })
            .collect();
        if !changed.is_empty() {
            // The stores as this process opened them (`serve`'s own pool size among them).
            config.stores = app.config.stores.clone();
            let rebuilt = app.with_lanes_rebuilt(config, &changed).await?;
            if !found.is_empty() {
                credentials::mark_in_use();
            }
            self.current.set(Arc::new(Router::new(Arc::new(rebuilt))));
            let names: Vec<&str> = changed.iter().map(|n| n.label()).collect();
            eprintln!(
                "postonce: the stored credential changed for {}: new requests post with the new one",
                names.join(", ")
            );
            tracing::info!(networks = ?names, "the stored credentials changed; lanes rebuilt");
        }
        self.held = Some(held);
        Ok(())
    }

    /// The real record store: a lane's that posts for real, or one opened once on the app's
    /// shared connections.
    async fn records(&mut self, app: &App) -> Result<Arc<dyn RecordStore>, String> {
        if let Some(r) = &self.records {
            return Ok(r.clone());
        }
        let records = match app
            .pipeline
            .lanes
            .values()
            .find(|l| !l.adapter.is_dry_run())
        {
            Some(lane) => lane.records.clone(),
            None => {
                Stores::build(&app.config.stores, &app.shared, false)
                    .await?
                    .records
            }
        };
        self.records = Some(records.clone());
        Ok(records)
    }
}

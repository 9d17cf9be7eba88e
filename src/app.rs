//! Builds the process's clients once (cold start) from a validated [`Config`] and wires them
//! into the pipeline and the router. Nothing here is built per invocation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::image::ImageFetcher;
use crate::networks::{self, Context, Network, NetworkAdapter};
use crate::notify::log::LogNotifier;
use crate::notify::telegram::{TelegramClient, TelegramNotifier};
use crate::notify::Notifier;
use crate::pipeline::{Lane, Pipeline, Settings};
use crate::record::{KeptSecrets, RecordStore};
use crate::stores::{self, Stores};

/// Everything a process needs, built once.
pub struct App {
    pub config: Config,
    pub pipeline: Arc<Pipeline>,
    /// One adapter per network of the registry, each a dry run without its credentials
    /// ([`networks::build`]).
    pub adapters: BTreeMap<Network, Arc<dyn NetworkAdapter>>,
    /// Present when `TELEGRAM_BOT_TOKEN` is set: for callbacks, set-webhook and doctor.
    pub telegram: Option<Arc<TelegramClient>>,
    /// The first network's stores as the registry chose them ([`stores`]): for `table
    /// create` and doctor.
    pub stores: Stores,
    /// What the stores share (a database's pool): for doctor.
    pub shared: stores::Shared,
    /// The shared HTTP client (every network, Telegram).
    pub http: reqwest::Client,
}

/// The client used for every network and Telegram: rustls, no redirects (a redirect would carry the
/// token elsewhere), bounded connect and total time under the per-call budgets.
///
/// # Errors
/// When the TLS backend cannot be initialised.
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(crate::config::HTTP_TOTAL_TIMEOUT)
        .pool_idle_timeout(Duration::from_secs(50))
        .user_agent(concat!("postonce/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

impl App {
    /// Builds clients and stores from `config`.
    ///
    /// # Errors
    /// A message naming what could not be set up and how to fix it.
    pub async fn build(config: Config) -> Result<Self, String> {
        let http = http_client()?;

        let db = stores::Shared::open(&config.stores).await?;
        // Each target's state lives in the real stores, or in the dry-run ones when its
        // adapter is a dry run: a dry run never touches real state. Each store is built once.
        let mut stores: Vec<(bool, Stores)> = Vec::new();
        // A network that logs in keeps its session in the real record store, so that
        // a new process does not log in again (logins are rate-limited).
        let sessions = if config.networks.values().any(|n| n.keeps_sessions()) {
            let real = Stores::build(&config.stores, &db, false).await?;
            stores.push((false, real.clone()));
            Some(Arc::new(KeptSecrets(real.records)) as Arc<dyn networks::SessionStore>)
        } else {
            None
        };
        let context = Context {
            http: &http,
            sessions,
            sessions_budget: config.timeouts.records,
        };
        let adapters = networks::build(&config.networks, &context).await?;

        let telegram = config.telegram.as_ref().map(|tg| {
            Arc::new(TelegramClient::new(
                http.clone(),
                &config.telegram_api_url,
                tg.bot_token.clone(),
            ))
        });
        let notifier: Arc<dyn Notifier> = match (&config.telegram, &telegram) {
            (Some(tg), Some(client)) => Arc::new(TelegramNotifier::new(
                client.clone(),
                tg.chat_id,
                config.timeouts.telegram,
            )),
            _ => Arc::new(LogNotifier),
        };

        let images = Arc::new(ImageFetcher::with_local(
            config.image_hosts.clone(),
            config.local_covers.clone(),
        )?);
        let mut lanes = BTreeMap::new();
        for (network, adapter) in &adapters {
            let dry = adapter.is_dry_run();
            let built = match stores.iter().find(|(d, _)| *d == dry) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = Stores::build(&config.stores, &db, dry).await?;
                    stores.push((dry, s.clone()));
                    s
                }
            };
            let own = config
                .networks
                .get(network)
                .ok_or_else(|| format!("internal error: {network:?} has no configuration"))?;
            let (_, budget) = own.budget();
            // A dry run sends nothing; its budget is checked against the function timeout only
            // once the network posts for real (see Config), so keep it inside the run.
            let budget = if dry && budget >= config.function_timeout {
                config.function_timeout / 4
            } else {
                budget
            };
            lanes.insert(
                *network,
                Arc::new(Lane {
                    network: *network,
                    adapter: adapter.clone(),
                    claims: built.claims.clone(),
                    records: built.records.clone(),
                    images: images.clone(),
                    settings: Settings::from_config(&config),
                    budget,
                    missing: if dry { own.missing() } else { Vec::new() },
                    fingerprint: config
                        .fingerprints
                        .get(network)
                        .cloned()
                        .unwrap_or_default(),
                    refused: std::sync::atomic::AtomicBool::new(false),
                }),
            );
        }
        // The first network's stores keep the names from before targets (`claim:<key>`,
        // `posted:<key>`): tools that look at the stores directly use them.
        let first = lanes
            .get(&Network::default())
            .cloned()
            .ok_or_else(|| "internal error: no lane for the first network".to_owned())?;
        let first_stores = stores
            .iter()
            .find(|(d, _)| *d == first.adapter.is_dry_run())
            .map(|(_, s)| s.clone())
            .ok_or_else(|| "internal error: no stores for the first network".to_owned())?;
        let pipeline = Arc::new(Pipeline {
            claims: first.claims.clone(),
            records: first.records.clone(),
            lanes,
            notifier,
            settings: Settings::from_config(&config),
            default_targets: config.targets.clone(),
        });
        Ok(Self {
            config,
            pipeline,
            adapters,
            telegram,
            stores: first_stores,
            shared: db,
            http,
        })
    }
}

/// The real record store of `config` alone (no claims, no adapters): where `postonce auth`
/// keeps what it obtains and where a start reads the stored credentials
/// ([`crate::credentials`]).
///
/// # Errors
/// A message naming what could not be set up.
pub async fn record_store(config: &Config) -> Result<Arc<dyn RecordStore>, String> {
    stores::record_store(&config.stores).await
}

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
    /// Where covers are hosted for the networks that fetch them ([`crate::covers`]); `None`:
    /// not hosted. For the lanes, preview and doctor.
    pub covers: Option<Arc<dyn crate::covers::CoverHost>>,
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
        let mut built = Built::new(&config, db.clone());
        let adapters = built.adapters(&config.networks, &http).await?;

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
        let covers = crate::covers::build(&config.covers, &http)?;
        let mut lanes = BTreeMap::new();
        for (network, adapter) in &adapters {
            let stores = built.stores(adapter.is_dry_run()).await?;
            let lane = new_lane(&config, *network, adapter.clone(), &stores, images.clone())?
                .hosting(covers.clone());
            lanes.insert(*network, Arc::new(lane));
        }
        let (pipeline, first_stores) = assemble(&config, lanes, notifier, &built)?;
        Ok(Self {
            config,
            pipeline,
            adapters,
            telegram,
            stores: first_stores,
            shared: db,
            http,
            covers,
        })
    }

    /// This app with `config` in place of its own (the stored credentials changed, as a
    /// long-running `serve` found them: [`crate::serve`]) and the adapters and lanes of
    /// `changed` built anew from it; every other lane, the stores, the notifier and the clients
    /// are this app's own (the same stores, so a sweep still reads each once). A rebuilt lane
    /// starts without this process's memory of a refused credential: it posts with another.
    ///
    /// # Errors
    /// A message naming what could not be set up.
    pub async fn with_lanes_rebuilt(
        &self,
        config: Config,
        changed: &std::collections::BTreeSet<Network>,
    ) -> Result<Self, String> {
        let mut built = Built::new(&config, self.shared.clone());
        built.seed(&self.pipeline.lanes, &self.stores);
        let chosen: networks::Configs = config
            .networks
            .iter()
            .filter(|(n, _)| changed.contains(n))
            .map(|(n, c)| (*n, c.clone()))
            .collect();
        let fresh = built.adapters(&chosen, &self.http).await?;
        let mut adapters = self.adapters.clone();
        let mut lanes = self.pipeline.lanes.clone();
        for (network, adapter) in fresh {
            let stores = built.stores(adapter.is_dry_run()).await?;
            let images = self.pipeline.lane(network).map_or_else(
                || {
                    ImageFetcher::with_local(
                        config.image_hosts.clone(),
                        config.local_covers.clone(),
                    )
                    .map(Arc::new)
                },
                |l| Ok(l.images.clone()),
            )?;
            let lane = new_lane(&config, network, adapter.clone(), &stores, images)?
                .hosting(self.covers.clone());
            lanes.insert(network, Arc::new(lane));
            adapters.insert(network, adapter);
        }
        let (pipeline, first_stores) =
            assemble(&config, lanes, self.pipeline.notifier.clone(), &built)?;
        Ok(Self {
            config,
            pipeline,
            adapters,
            telegram: self.telegram.clone(),
            stores: first_stores,
            shared: self.shared.clone(),
            http: self.http.clone(),
            covers: self.covers.clone(),
        })
    }
}

/// The stores built so far, real and dry run, each once: every lane of one kind shares them (a
/// sweep lists each store once, knowing its lanes by the store they hold).
struct Built<'a> {
    config: &'a Config,
    db: stores::Shared,
    stores: Vec<(bool, Stores)>,
}

impl<'a> Built<'a> {
    fn new(config: &'a Config, db: stores::Shared) -> Self {
        Self {
            config,
            db,
            stores: Vec::new(),
        }
    }

    /// Takes the stores `lanes` already use (and `first`, the first network's), so that a
    /// rebuilt lane shares them.
    fn seed(&mut self, lanes: &BTreeMap<Network, Arc<Lane>>, first: &Stores) {
        if let Some(lane) = lanes.get(&Network::default()) {
            self.stores.push((lane.adapter.is_dry_run(), first.clone()));
        }
        for lane in lanes.values() {
            let dry = lane.adapter.is_dry_run();
            if !self.stores.iter().any(|(d, _)| *d == dry) {
                self.stores.push((
                    dry,
                    Stores {
                        claims: lane.claims.clone(),
                        records: lane.records.clone(),
                        dynamo: None,
                    },
                ));
            }
        }
    }

    async fn stores(&mut self, dry: bool) -> Result<Stores, String> {
        if let Some((_, s)) = self.stores.iter().find(|(d, _)| *d == dry) {
            return Ok(s.clone());
        }
        let s = Stores::build(&self.config.stores, &self.db, dry).await?;
        self.stores.push((dry, s.clone()));
        Ok(s)
    }

    /// The adapters of `configs`. A network that logs in keeps its session in the real record
    /// store, so that a new process does not log in again (logins are rate-limited).
    async fn adapters(
        &mut self,
        configs: &networks::Configs,
        http: &reqwest::Client,
    ) -> Result<BTreeMap<Network, Arc<dyn NetworkAdapter>>, String> {
        let sessions = if configs.values().any(|n| n.keeps_sessions()) {
            let real = self.stores(false).await?;
            Some(Arc::new(KeptSecrets(real.records)) as Arc<dyn networks::SessionStore>)
        } else {
            None
        };
        let context = Context {
            http,
            sessions,
            sessions_budget: self.config.timeouts.records,
        };
        networks::build(configs, &context).await
    }
}

/// One network's lane, on the stores of its kind (real or dry run).
fn new_lane(
    config: &Config,
    network: Network,
    adapter: Arc<dyn NetworkAdapter>,
    stores: &Stores,
    images: Arc<ImageFetcher>,
) -> Result<Lane, String> {
    let dry = adapter.is_dry_run();
    let own = config
        .networks
        .get(&network)
        .ok_or_else(|| format!("internal error: {network:?} has no configuration"))?;
    let (_, budget) = own.budget();
    // A dry run sends nothing; its budget is checked against the function timeout only
    // once the network posts for real (see Config), so keep it inside the run.
    let budget = if dry && budget >= config.function_timeout {
        config.function_timeout / 4
    } else {
        budget
    };
    Ok(Lane {
        network,
        adapter,
        claims: stores.claims.clone(),
        records: stores.records.clone(),
        images,
        covers: None,
        settings: Settings::from_config(config),
        budget,
        missing: if dry { own.missing() } else { Vec::new() },
        fingerprint: config
            .fingerprints
            .get(&network)
            .cloned()
            .unwrap_or_default(),
        refused: std::sync::atomic::AtomicBool::new(false),
    })
}

/// The pipeline over `lanes`, with the first network's stores. Those keep the names from
/// before targets (`claim:<key>`, `posted:<key>`): tools that look at the stores directly use
/// them.
fn assemble(
    config: &Config,
    lanes: BTreeMap<Network, Arc<Lane>>,
    notifier: Arc<dyn Notifier>,
    built: &Built<'_>,
) -> Result<(Arc<Pipeline>, Stores), String> {
    let first = lanes
        .get(&Network::default())
        .cloned()
        .ok_or_else(|| "internal error: no lane for the first network".to_owned())?;
    let first_stores = built
        .stores
        .iter()
        .find(|(d, _)| *d == first.adapter.is_dry_run())
        .map(|(_, s)| s.clone())
        .ok_or_else(|| "internal error: no stores for the first network".to_owned())?;
    let pipeline = Arc::new(Pipeline {
        claims: first.claims.clone(),
        records: first.records.clone(),
        lanes,
        notifier,
        settings: Settings::from_config(config),
        default_targets: config.targets.clone(),
    });
    Ok((pipeline, first_stores))
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

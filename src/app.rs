//! Builds the process's clients once (cold start) from a validated [`Config`] and wires them
//! into the pipeline and the router. Nothing here is built per invocation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::claim::file::FileClaims;
use crate::claim::redis::RedisClaims;
use crate::claim::ClaimStore;
use crate::config::Config;
use crate::image::ImageFetcher;
use crate::networks::{self, Context, Network, NetworkAdapter};
use crate::notify::log::LogNotifier;
use crate::notify::telegram::{TelegramClient, TelegramNotifier};
use crate::notify::Notifier;
use crate::pipeline::{Lane, Pipeline, Settings};
use crate::record::dynamodb::DynamoStore;
use crate::record::local::LocalStore;
use crate::record::{KeptSecrets, RecordStore};

/// Everything a process needs, built once.
pub struct App {
    pub config: Config,
    pub pipeline: Arc<Pipeline>,
    /// One adapter per network of the registry, each a dry run without its credentials
    /// ([`networks::build`]).
    pub adapters: BTreeMap<Network, Arc<dyn NetworkAdapter>>,
    /// Present when `TELEGRAM_BOT_TOKEN` is set: for callbacks, set-webhook and doctor.
    pub telegram: Option<Arc<TelegramClient>>,
    /// Present when `POSTONCE_TABLE` is set: for `table create` and doctor.
    pub dynamo: Option<Arc<DynamoStore>>,
    /// Present when `DATABASE_URL` is set: for doctor.
    #[cfg(feature = "postgres")]
    pub database: Option<Arc<crate::postgres::Database>>,
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

/// One namespace's stores (real or dry run).
#[derive(Clone)]
struct Stores {
    claims: Arc<dyn ClaimStore>,
    records: Arc<dyn RecordStore>,
    dynamo: Option<Arc<DynamoStore>>,
}

/// The PostgreSQL pool, when `DATABASE_URL` is set (one per process, every store shares it).
#[cfg(feature = "postgres")]
type Db = Option<Arc<crate::postgres::Database>>;
#[cfg(not(feature = "postgres"))]
type Db = Option<()>;

impl Stores {
    async fn build(config: &Config, db: &Db, dry_run: bool) -> Result<Self, String> {
        let claims: Arc<dyn ClaimStore> = match (&config.redis_url, db) {
            (Some(url), _) => Arc::new(
                RedisClaims::new(url, config.timeouts.redis, dry_run).map_err(|e| e.to_string())?,
            ),
            // With DATABASE_URL and no REDIS_URL, the claims live in the same database.
            #[cfg(feature = "postgres")]
            (None, Some(db)) => {
                Arc::new(crate::claim::postgres::PgClaims::new(db.clone(), dry_run))
            }
            // Local mode: claims are files beside the local store (its dry-run folder for dry
            // runs), shared by every process on the machine (serve, cron sweep, CLI).
            _ => Arc::new(
                FileClaims::open(LocalStore::folder(&config.data_dir, dry_run).join("claims"))
                    .map_err(|e| format!("POSTONCE_DATA_DIR: {e}"))?,
            ),
        };
        let mut dynamo = None;
        #[cfg(feature = "postgres")]
        if let Some(db) = db {
            return Ok(Self {
                claims,
                records: Arc::new(crate::record::postgres::PgStore::new(db.clone(), dry_run)),
                dynamo: None,
            });
        }
        let records: Arc<dyn RecordStore> = match &config.table {
            Some(table) => {
                let store = Arc::new(DynamoStore::connect(config, table, dry_run).await);
                dynamo = Some(store.clone());
                store
            }
            None => Arc::new(
                LocalStore::open(&config.data_dir, dry_run)
                    .map_err(|e| format!("POSTONCE_DATA_DIR: {e}"))?,
            ),
        };
        Ok(Self {
            claims,
            records,
            dynamo,
        })
    }
}

impl App {
    /// Builds clients and stores from `config`.
    ///
    /// # Errors
    /// A message naming what could not be set up and how to fix it.
    pub async fn build(config: Config) -> Result<Self, String> {
        let http = http_client()?;

        let db = database(&config).await?;
        // Each target's state lives in the real stores, or in the dry-run ones when its
        // adapter is a dry run: a dry run never touches real state. Each store is built once.
        let mut stores: Vec<(bool, Stores)> = Vec::new();
        // A network that logs in keeps its session in the real record store, so that
        // a new process does not log in again (logins are rate-limited).
        let sessions = if config.networks.values().any(|n| n.keeps_sessions()) {
            let real = Stores::build(&config, &db, false).await?;
            stores.push((false, real.clone()));
            Some(Arc::new(KeptSecrets(real.records)) as Arc<dyn networks::SessionStore>)
        } else {
            None
        };
        let context = Context {
            http: &http,
            sessions,
            sessions_budget: config.timeouts.dynamodb,
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
                    let s = Stores::build(&config, &db, dry).await?;
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
        let dynamo = stores
            .iter()
            .find(|(d, _)| *d == first.adapter.is_dry_run())
            .and_then(|(_, s)| s.dynamo.clone());
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
            dynamo,
            #[cfg(feature = "postgres")]
            database: db,
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
    let db = database(config).await?;
    #[cfg(feature = "postgres")]
    if let Some(db) = db {
        return Ok(Arc::new(crate::record::postgres::PgStore::new(db, false)));
    }
    let _ = db;
    Ok(match &config.table {
        Some(table) => Arc::new(DynamoStore::connect(config, table, false).await),
        None => Arc::new(
            LocalStore::open(&config.data_dir, false)
                .map_err(|e| format!("POSTONCE_DATA_DIR: {e}"))?,
        ),
    })
}

/// Opens the PostgreSQL pool when `DATABASE_URL` is set, and checks the schema's version: a
/// schema that is behind (or ahead) stops the start (nothing is sent); a database that cannot
/// be reached now does not (every store call reports it, as a retryable failure, and the first
/// statement that reaches it checks the version before it runs: [`crate::postgres::schema`]).
#[cfg(feature = "postgres")]
async fn database(config: &Config) -> Result<Db, String> {
    use crate::postgres::SchemaError;
    let Some(db) = config.database()? else {
        return Ok(None);
    };
    match db.check_schema().await {
        Ok(_) => {}
        Err(SchemaError::Unreachable(e)) => {
            tracing::warn!(error = %e, "PostgreSQL cannot be reached to check the schema version");
        }
        Err(e) => return Err(format!("DATABASE_URL: {e}")),
    }
    Ok(Some(Arc::new(db)))
}

#[cfg(not(feature = "postgres"))]
async fn database(_config: &Config) -> Result<Db, String> {
    Ok(None)
}

//! The stores, one folder per backend, and the registry that chooses them.
//!
//! A store carries out the roles it offers: records, drafts, pacing and kept secrets
//! ([`RecordStore`]) and claims ([`ClaimStore`]). The roles are defined where the core finds
//! them (`src/record/`, `src/claim/`); each folder here holds one backend whole: its
//! implementation, its configuration (`config.rs`: its variables, its budget, what doctor
//! says of it) and, where it has one, its doctor check.
//!
//! The registry below is the one place that names them: [`Backend`], and for each role the
//! backends that can carry it in order of precedence ([`RECORDS`], [`CLAIMS`]): the first one
//! the configuration sets up is chosen. Adding a store is one folder, its variant and its lines
//! here (the compiler then asks for its arms in this file), and its README and template rows.

#[cfg(feature = "cli")]
pub mod admin;
pub mod dynamodb;
pub mod local;
pub mod memory;
pub mod postgres;
pub mod redis;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use crate::claim::ClaimStore;
use crate::record::RecordStore;
use crate::vars::{bad, ConfigError, Vars};
use dynamodb::config::DynamoConfig;
use dynamodb::DynamoStore;
use local::claims::FileClaims;
use local::config::LocalConfig;
use local::LocalStore;
use postgres::config::PgConfig;
use redis::config::RedisConfig;
use redis::RedisClaims;

/// A store a configuration can choose (the in-process [`memory`] claims are for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Dynamodb,
    Postgres,
    Redis,
    Local,
}

/// The backends that can hold the records, in order of precedence.
pub const RECORDS: [Backend; 3] = [Backend::Postgres, Backend::Dynamodb, Backend::Local];

/// The backends that can hold the claims, in order of precedence.
pub const CLAIMS: [Backend; 3] = [Backend::Redis, Backend::Postgres, Backend::Local];

/// The variables that name the store (beside the `POSTONCE_` and `AWS_` ones), each of which
/// may be given by reference: `<NAME>_PARAM` names an SSM parameter holding it
/// ([`crate::secrets`]).
pub const BY_REFERENCE: [(&str, &str); 2] = [
    ("REDIS_URL", "REDIS_URL_PARAM"),
    ("DATABASE_URL", "DATABASE_URL_PARAM"),
];

/// Whether `var` names the store without being a `POSTONCE_` or `AWS_` variable.
pub fn names_a_store(var: &str) -> bool {
    BY_REFERENCE.iter().any(|(name, _)| *name == var)
}

/// A budget variable and its value.
pub type Budget = (&'static str, Duration);

/// Every store's own configuration, each read by its folder.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub local: LocalConfig,
    pub dynamodb: DynamoConfig,
    pub redis: RedisConfig,
    pub postgres: PgConfig,
}

impl AsRef<StoreConfig> for StoreConfig {
    fn as_ref(&self) -> &StoreConfig {
        self
    }
}

/// What doctor says of a claim store.
#[derive(Debug, Clone, Copy)]
pub struct ClaimsDoctor {
    /// The line's name.
    pub name: &'static str,
    /// The line when a claim was taken and released.
    pub ok: &'static str,
    /// What to check when it failed.
    pub fix: &'static str,
}

impl StoreConfig {
    /// Reads every store's variables, and the rules between stores.
    ///
    /// # Errors
    /// The first variable that is malformed or missing, by name.
    pub fn load(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let dynamodb = DynamoConfig::load(vars)?;
        let local = LocalConfig::load(vars);
        if vars.get("DATABASE_URL").is_some() && dynamodb.table.is_some() {
            return Err(bad(
                "DATABASE_URL",
                "DATABASE_URL and POSTONCE_TABLE are both set: choose one record store (PostgreSQL or DynamoDB) and unset the other",
            ));
        }
        let postgres = PgConfig::load(vars)?;
        if dynamodb.table.is_some() && vars.get("REDIS_URL").is_none() {
            return Err(bad(
                "REDIS_URL",
                "required when POSTONCE_TABLE is set: in-process claims are for local mode only (REDIS_URL_PARAM may name an SSM parameter holding it)",
            ));
        }
        let redis = RedisConfig::load(vars)?;
        Ok(Self {
            local,
            dynamodb,
            redis,
            postgres,
        })
    }

    /// Sizes the stores for a long-running server that answers many requests at once
    /// (`serve`), rather than a run's few.
    pub fn for_server(&mut self) {
        self.postgres.pool = postgres::config::SERVER_POOL;
    }

    /// Whether `backend`'s configuration is given.
    fn is_set(&self, backend: Backend) -> bool {
        match backend {
            Backend::Dynamodb => self.dynamodb.table.is_some(),
            Backend::Postgres => self.postgres.url.is_some(),
            Backend::Redis => self.redis.url.is_some(),
            Backend::Local => true,
        }
    }

    /// The backend that holds the records.
    pub fn records(&self) -> Backend {
        RECORDS
            .into_iter()
            .find(|b| self.is_set(*b))
            .unwrap_or(Backend::Local)
    }

    /// The backend that holds the claims.
    pub fn claims(&self) -> Backend {
        CLAIMS
            .into_iter()
            .find(|b| self.is_set(*b))
            .unwrap_or(Backend::Local)
    }

    /// The record store's budget: PostgreSQL's statement budget, else DynamoDB's (which the
    /// local store uses too).
    pub fn records_budget(&self) -> Duration {
        match self.records() {
            Backend::Postgres => self.postgres.budget,
            Backend::Dynamodb | Backend::Redis | Backend::Local => self.dynamodb.budget,
        }
    }

    /// The claim store's budget: PostgreSQL's when it holds the claims, else Redis's (which
    /// the file claims use too).
    pub fn claims_budget(&self) -> Duration {
        match self.claims() {
            Backend::Postgres => self.postgres.budget,
            Backend::Dynamodb | Backend::Redis | Backend::Local => self.redis.budget,
        }
    }

    /// The budget variables that must be shorter than the function timeout: Redis's and
    /// DynamoDB's always (checked before Telegram's and the networks'), and the database's once
    /// there is one (checked after them), as the variables were checked before the registry.
    pub fn budget_vars(&self) -> (Vec<Budget>, Vec<Budget>) {
        let always = vec![
            ("POSTONCE_REDIS_TIMEOUT_MS", self.redis.budget),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", self.dynamodb.budget),
        ];
        let when_set = self
            .postgres
            .url
            .is_some()
            .then_some(("POSTONCE_DATABASE_TIMEOUT_MS", self.postgres.budget))
            .into_iter()
            .collect();
        (always, when_set)
    }

    /// Why these stores cannot serve a Lambda function, whose sandboxes share nothing but the
    /// stores: claims or records that stay on one machine.
    pub fn lambda_refusal(&self) -> Option<&'static str> {
        if self.claims() == Backend::Local {
            return Some("REDIS_URL: required in Lambda (in-process claims would not span sandboxes), or DATABASE_URL");
        }
        if self.records() == Backend::Local {
            return Some("POSTONCE_TABLE: required in Lambda (a local store in one sandbox is not seen by the others, so another sandbox would post again), or DATABASE_URL");
        }
        None
    }

    /// Whether a secret may be kept under `name` in the real record store, looked at without
    /// opening it: always for a shared store, only when its file exists for the local one.
    pub fn may_keep(&self, name: &str) -> bool {
        self.records() != Backend::Local || LocalStore::has_secret(&self.local.data_dir, name)
    }

    /// What doctor says of the claim store.
    pub fn claims_doctor(&self) -> ClaimsDoctor {
        match self.claims() {
            Backend::Redis => redis::config::CLAIMS_DOCTOR,
            Backend::Postgres => postgres::config::CLAIMS_DOCTOR,
            Backend::Dynamodb | Backend::Local => local::config::CLAIMS_DOCTOR,
        }
    }

    /// Doctor's fix when the record store answered with `error`.
    pub fn records_fix(&self, error: &str) -> String {
        match self.records() {
            Backend::Dynamodb => dynamodb::config::records_fix(
                error,
                self.dynamodb.table.as_deref().unwrap_or_default(),
            ),
            Backend::Postgres => postgres::config::records_fix(error),
            Backend::Local | Backend::Redis => local::config::records_fix(error),
        }
    }

    /// Doctor's fix when the record store did not answer (the same words for every store, as
    /// before the registry).
    pub fn records_silent_fix(&self) -> &'static str {
        "check AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB and credentials"
    }
}

/// What a process opens once and every namespace's stores share: PostgreSQL's pool.
#[derive(Clone, Default)]
pub struct Shared {
    #[cfg(feature = "postgres")]
    pub database: Option<Arc<postgres::Database>>,
}

impl Shared {
    /// Opens the PostgreSQL pool when `DATABASE_URL` is set, and checks the schema's version:
    /// a schema that is behind (or ahead) stops the start (nothing is sent); a database that
    /// cannot be reached now does not (every store call reports it, as a retryable failure,
    /// and the first statement that reaches it checks the version before it runs:
    /// [`postgres::schema`]).
    ///
    /// # Errors
    /// A message naming the variable and the fix.
    #[cfg(feature = "postgres")]
    pub async fn open(config: &StoreConfig) -> Result<Self, String> {
        use postgres::SchemaError;
        let Some(db) = config.postgres.database()? else {
            return Ok(Self::default());
        };
        match db.check_schema().await {
            Ok(_) => {}
            Err(SchemaError::Unreachable(e)) => {
                tracing::warn!(error = %e, "PostgreSQL cannot be reached to check the schema version");
            }
            Err(e) => return Err(format!("DATABASE_URL: {e}")),
        }
        Ok(Self {
            database: Some(Arc::new(db)),
        })
    }

    /// Nothing to open without PostgreSQL.
    ///
    /// # Errors
    /// Never.
    #[cfg(not(feature = "postgres"))]
    pub async fn open(_config: &StoreConfig) -> Result<Self, String> {
        Ok(Self::default())
    }

    /// The checks doctor runs for what is shared (PostgreSQL's connection, schema and clock),
    /// each bounded by `limit`: `(line name, result)`.
    pub async fn checks(&self, limit: Duration) -> Vec<(&'static str, Result<String, String>)> {
        #[allow(unused_mut)]
        let mut checks = Vec::new();
        #[cfg(feature = "postgres")]
        if let Some(db) = &self.database {
            checks.push((
                postgres::doctor::NAME,
                postgres::doctor::check(db, limit).await,
            ));
        }
        let _ = limit;
        checks
    }
}

/// One namespace's stores (real or dry run).
#[derive(Clone)]
pub struct Stores {
    pub claims: Arc<dyn ClaimStore>,
    pub records: Arc<dyn RecordStore>,
    /// The DynamoDB store, when it holds the records (`table create`).
    pub dynamo: Option<Arc<DynamoStore>>,
}

impl Stores {
    /// The stores `config` chooses, in the dry run's namespace when `dry_run`.
    ///
    /// # Errors
    /// A message naming what could not be set up and how to fix it.
    pub async fn build(
        config: &StoreConfig,
        shared: &Shared,
        dry_run: bool,
    ) -> Result<Self, String> {
        let claims = open_claims(config, shared, dry_run)?;
        let (records, dynamo) = open_records(config, shared, dry_run).await?;
        Ok(Self {
            claims,
            records,
            dynamo,
        })
    }
}

/// The record store `config` chooses (and the DynamoDB store, when it is that one).
async fn open_records(
    config: &StoreConfig,
    shared: &Shared,
    dry_run: bool,
) -> Result<(Arc<dyn RecordStore>, Option<Arc<DynamoStore>>), String> {
    let _ = shared;
    // Every backend spelled out: a store added to [`RECORDS`] without its arm here does not
    // compile, rather than quietly keeping its records on one machine.
    Ok(match config.records() {
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = shared
                .database
                .clone()
                .ok_or("internal error: no database")?;
            (Arc::new(postgres::records::PgStore::new(db, dry_run)), None)
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => {
            return Err("internal error: PostgreSQL chosen in a build without it".into())
        }
        Backend::Dynamodb => {
            let table = config
                .dynamodb
                .table
                .as_deref()
                .ok_or("internal error: DynamoDB chosen without POSTONCE_TABLE")?;
            let store = Arc::new(DynamoStore::connect(config, table, dry_run).await);
            (store.clone(), Some(store))
        }
        Backend::Local => (
            Arc::new(
                LocalStore::open(&config.local.data_dir, dry_run)
                    .map_err(|e| format!("POSTONCE_DATA_DIR: {e}"))?,
            ),
            None,
        ),
        Backend::Redis => return Err("internal error: Redis holds no records".into()),
    })
}

/// The claim store `config` chooses, every backend spelled out (as [`open_records`]).
fn open_claims(
    config: &StoreConfig,
    shared: &Shared,
    dry_run: bool,
) -> Result<Arc<dyn ClaimStore>, String> {
    let _ = shared;
    Ok(match config.claims() {
        Backend::Redis => {
            let url = config
                .redis
                .url
                .as_ref()
                .ok_or("internal error: Redis chosen without REDIS_URL")?;
            Arc::new(
                RedisClaims::new(url, config.redis.budget, dry_run).map_err(|e| e.to_string())?,
            )
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = shared
                .database
                .clone()
                .ok_or("internal error: no database")?;
            Arc::new(postgres::claims::PgClaims::new(db, dry_run))
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => {
            return Err("internal error: PostgreSQL chosen in a build without it".into())
        }
        // Local mode: claims are files beside the local store (its dry-run folder for dry
        // runs), shared by every process on the machine (serve, cron sweep, CLI).
        Backend::Local => Arc::new(
            FileClaims::open(LocalStore::folder(&config.local.data_dir, dry_run).join("claims"))
                .map_err(|e| format!("POSTONCE_DATA_DIR: {e}"))?,
        ),
        Backend::Dynamodb => return Err("internal error: DynamoDB holds no claims".into()),
    })
}

/// The real record store of `config` alone (no claims): where `postonce auth` keeps what it
/// obtains and where a start reads the stored credentials ([`crate::credentials`]).
///
/// # Errors
/// A message naming what could not be set up.
pub async fn record_store(config: &StoreConfig) -> Result<Arc<dyn RecordStore>, String> {
    let shared = Shared::open(config).await?;
    Ok(open_records(config, &shared, false).await?.0)
}

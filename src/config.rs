//! Configuration, read once from the environment and validated before anything runs.
//!
//! The names are a public interface (DESIGN.md "Interfaces"): scripts and templates depend on
//! them. Every error names the variable and says what is wrong. Secrets are wrapped in
//! [`Secret`], whose `Debug` never shows the value.

use std::path::PathBuf;
use std::time::Duration;

use crate::image::OriginPolicy;
use crate::networks::{self, Configs, Network, Shared};
use crate::vars::{bad, Vars};
pub use crate::vars::{ConfigError, Secret};

/// Where reports go; present only when both Telegram variables are set.
#[derive(Clone, Debug)]
pub struct TelegramConfig {
    pub bot_token: Secret,
    pub chat_id: i64,
}

/// Per-call budgets (DESIGN.md rule 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub image: Duration,
    pub redis: Duration,
    pub dynamodb: Duration,
    /// The report bot and the Telegram channel target.
    pub telegram: Duration,
    /// Each PostgreSQL statement (`POSTONCE_DATABASE_TIMEOUT_MS`): server- and client-side.
    pub database: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            image: Duration::from_millis(10_000),
            redis: Duration::from_millis(8_000),
            dynamodb: Duration::from_millis(8_000),
            telegram: Duration::from_millis(8_000),
            database: Duration::from_millis(8_000),
        }
    }
}

/// Everything postonce reads from its environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// DynamoDB table; `None` means the local store under `data_dir`.
    pub table: Option<String>,
    pub data_dir: PathBuf,
    /// Claim store; `None` means in-process claims (local mode only).
    pub redis_url: Option<Secret>,
    /// `DATABASE_URL` (`postgres://` or `postgresql://`): records, drafts and pacing live in
    /// PostgreSQL, and the claims too unless `REDIS_URL` is set. May hold a password.
    pub database_url: Option<Secret>,
    /// Connections the PostgreSQL pool may open: few for a CLI run or a Lambda sandbox,
    /// more for `serve` (which sets it).
    pub database_pool: usize,
    pub aws_region: Option<String>,
    pub dynamodb_endpoint: Option<String>,
    /// Static AWS credentials when both key variables are given (local servers, tests).
    pub aws_credentials: Option<(String, Secret)>,
    pub telegram: Option<TelegramConfig>,
    pub telegram_api_url: String,
    pub telegram_webhook_secret: Option<Secret>,
    pub telegram_allowed_users: Option<Vec<i64>>,
    pub webhook_secret: Option<Secret>,
    /// The targets of a draft that names none (`POSTONCE_TARGETS`), in order, without
    /// duplicates; never empty.
    pub targets: Vec<Network>,
    /// Every network's own configuration (its folder read it), in the registry's order.
    pub networks: Configs,
    pub image_hosts: OriginPolicy,
    pub claim_ttl: Duration,
    pub function_timeout: Duration,
    pub timeouts: Timeouts,
    /// How long a posted-but-not-recorded claim is kept (holds the post URN).
    pub posted_claim_ttl: Duration,
    /// How long after an ambiguous create-post a later run may re-send it to let LinkedIn's
    /// duplicate answer reveal whether it exists.
    pub reconcile_window: Duration,
    /// The quiet period: how long after an ambiguous create-post no run may re-send it, because
    /// the first request may still be in flight at the network (DESIGN.md "Targets").
    pub reconcile_after: Duration,
    /// Sweeper: failed attempts before a draft is marked `needs_review`.
    pub max_attempts: u32,
    /// Pacing: the least time between two posts to one network (`POSTONCE_MIN_GAP_S`, and
    /// `POSTONCE_MIN_GAP_S_<NETWORK>` per network). Zero: no pacing.
    pub min_gap: std::collections::BTreeMap<Network, Duration>,
}

/// Default quiet period before an ambiguous create may be reconciled. LinkedIn documents no
/// processing time. Our side keeps a create request open at most its budget (10 s by default,
/// and never past the HTTP client's [`HTTP_TOTAL_TIMEOUT`]); what LinkedIn does with a request
/// after we stop waiting is bounded by its own gateway timeouts, which for HTTP APIs of this
/// kind are about a minute. Five minutes is well past both, and well inside the one-hour window
/// in which its duplicate answer is relied on.
pub const DEFAULT_RECONCILE_AFTER_S: u64 = 300;

/// The HTTP client's own limit on a whole request (connect, send, answer).
pub const HTTP_TOTAL_TIMEOUT: Duration = Duration::from_secs(30);

/// One target name as `POSTONCE_TARGETS` (and a draft's `targets`) spell it: lower case,
/// exact.
///
/// # Errors
/// What is wrong with `name`, listing the valid names.
pub fn parse_target(name: &str) -> Result<Network, String> {
    let valid = Network::names();
    match Network::parse(name) {
        Some(n) => Ok(n),
        None => {
            let hint = match Network::parse(&name.to_ascii_lowercase()) {
                Some(n) => format!(" (names are lower case: {})", n.as_str()),
                None => String::new(),
            };
            Err(format!(
                "{name:?} is not a target{hint}; valid targets: {valid}"
            ))
        }
    }
}

/// A comma-separated target list: names trimmed, empty entries skipped, duplicates dropped
/// (the first place kept).
fn parse_targets(var: &'static str, list: &str) -> Result<Vec<Network>, ConfigError> {
    let mut targets = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let n = parse_target(name).map_err(|e| bad(var, e))?;
        if !targets.contains(&n) {
            targets.push(n);
        }
    }
    if targets.is_empty() {
        return Err(bad(
            var,
            format!(
                "{list:?} names no target; list one or more of {} (unset means {})",
                Network::names(),
                Network::default().as_str()
            ),
        ));
    }
    Ok(targets)
}

impl Config {
    /// `network`'s own configuration as its folder's type `T` (e.g.
    /// [`crate::networks::x::config::XConfig`]); `None` for another type.
    pub fn network<T: 'static>(&self, network: Network) -> Option<&T> {
        let config: &dyn std::any::Any = self.networks.get(&network)?.as_ref();
        config.downcast_ref::<T>()
    }

    /// Reads the process environment.
    ///
    /// # Errors
    /// The first variable that is missing or malformed.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the process environment, first resolving secrets given by reference
    /// (`<NAME>_PARAM`, see [`crate::secrets`]).
    ///
    /// # Errors
    /// The first variable that is missing or malformed, or a parameter that cannot be read.
    pub async fn from_env_and_parameters() -> Result<Self, ConfigError> {
        let resolved = crate::secrets::resolve(|name| std::env::var(name).ok()).await?;
        Self::from_lookup(|name| {
            resolved
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
        })
    }

    /// Reads configuration through `get` (the environment, or a map in tests).
    ///
    /// # Errors
    /// The first variable that is missing or malformed, by name.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(&get);
        let get = |name: &str| vars.get(name);

        let table = get("POSTONCE_TABLE");
        if let Some(t) = &table {
            let ok = (3..=255).contains(&t.len())
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !ok {
                return Err(bad(
                    "POSTONCE_TABLE",
                    "a DynamoDB table name has 3-255 characters of a-z, A-Z, 0-9, _ - .",
                ));
            }
        }
        let data_dir =
            PathBuf::from(get("POSTONCE_DATA_DIR").unwrap_or_else(|| ".postonce".into()));

        let redis_url = get("REDIS_URL");
        let database_url = get("DATABASE_URL");
        if let Some(url) = &database_url {
            if table.is_some() {
                return Err(bad(
                    "DATABASE_URL",
                    "DATABASE_URL and POSTONCE_TABLE are both set: choose one record store (PostgreSQL or DynamoDB) and unset the other",
                ));
            }
            check_database_url(url)?;
        }
        if table.is_some() && redis_url.is_none() {
            return Err(bad(
                "REDIS_URL",
                "required when POSTONCE_TABLE is set: in-process claims are for local mode only (REDIS_URL_PARAM may name an SSM parameter holding it)",
            ));
        }
        if let Some(url) = &redis_url {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return Err(bad("REDIS_URL", "must start with redis:// or rediss://"));
            }
        }

        let telegram = match (get("TELEGRAM_BOT_TOKEN"), get("TELEGRAM_CHAT_ID")) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(bad(
                    "TELEGRAM_CHAT_ID",
                    "required when TELEGRAM_BOT_TOKEN is set",
                ))
            }
            (None, Some(_)) => {
                return Err(bad(
                    "TELEGRAM_BOT_TOKEN",
                    "required when TELEGRAM_CHAT_ID is set",
                ))
            }
            (Some(token), Some(chat)) => {
                let chat_id = chat.parse::<i64>().map_err(|_| {
                    bad(
                        "TELEGRAM_CHAT_ID",
                        format!("{chat:?} is not a numeric chat id"),
                    )
                })?;
                if token.contains('/') || token.contains(char::is_whitespace) {
                    return Err(bad(
                        "TELEGRAM_BOT_TOKEN",
                        "is not a bot token (expected <id>:<secret>)",
                    ));
                }
                Some(TelegramConfig {
                    bot_token: Secret::new(token),
                    chat_id,
                })
            }
        };
        let telegram_api_url = vars.base_url("TELEGRAM_API_URL", "https://api.telegram.org")?;
        let telegram_webhook_secret = match get("TELEGRAM_WEBHOOK_SECRET") {
            None => None,
            Some(s) => {
                let ok = (1..=256).contains(&s.len())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Err(bad(
                        "TELEGRAM_WEBHOOK_SECRET",
                        "Telegram allows 1-256 characters of A-Z, a-z, 0-9, _ and -",
                    ));
                }
                Some(Secret::new(s))
            }
        };
        let telegram_allowed_users = match get("TELEGRAM_ALLOWED_USERS") {
            None => None,
            Some(list) => {
                let mut ids = Vec::new();
                for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    ids.push(part.parse::<i64>().map_err(|_| {
                        bad(
                            "TELEGRAM_ALLOWED_USERS",
                            format!("{part:?} is not a numeric user id"),
                        )
                    })?);
                }
                if ids.is_empty() {
                    return Err(bad("TELEGRAM_ALLOWED_USERS", "lists no user id"));
                }
                Some(ids)
            }
        };
        let webhook_secret = get("POSTONCE_WEBHOOK_SECRET").map(Secret::new);
        if webhook_secret
            .as_ref()
            .is_some_and(|s| s.expose().len() < 16)
        {
            return Err(bad(
                "POSTONCE_WEBHOOK_SECRET",
                "too short: use at least 16 characters (e.g. openssl rand -hex 32)",
            ));
        }

        let targets = match get("POSTONCE_TARGETS") {
            None => vec![Network::default()],
            Some(list) => parse_targets("POSTONCE_TARGETS", &list)?,
        };

        let image_hosts = match get("POSTONCE_IMAGE_HOSTS") {
            None => OriginPolicy::any_public_https(),
            Some(list) => OriginPolicy::parse(&list).map_err(|e| bad("POSTONCE_IMAGE_HOSTS", e))?,
        };

        let claim_ttl = vars.seconds("POSTONCE_CLAIM_TTL_S", 120)?;
        let function_timeout = vars.seconds("POSTONCE_FUNCTION_TIMEOUT_S", 60)?;
        if claim_ttl <= function_timeout {
            return Err(bad(
                "POSTONCE_CLAIM_TTL_S",
                format!(
                    "the claim TTL ({}s) must exceed the function timeout POSTONCE_FUNCTION_TIMEOUT_S ({}s), or a claim could expire while its run still posts",
                    claim_ttl.as_secs(),
                    function_timeout.as_secs()
                ),
            ));
        }
        let mut timeouts = Timeouts {
            image: vars.millis("POSTONCE_IMAGE_TIMEOUT_MS", 10_000)?,
            redis: vars.millis("POSTONCE_REDIS_TIMEOUT_MS", 8_000)?,
            dynamodb: vars.millis("POSTONCE_DYNAMODB_TIMEOUT_MS", 8_000)?,
            telegram: vars.millis("POSTONCE_TELEGRAM_TIMEOUT_MS", 8_000)?,
            database: vars.millis("POSTONCE_DATABASE_TIMEOUT_MS", 8_000)?,
        };
        let shared = Shared {
            function_timeout,
            telegram_bot: telegram.as_ref().map(|t| t.bot_token.clone()),
            telegram_api_url: telegram_api_url.clone(),
            telegram_budget: timeouts.telegram,
        };
        let networks = networks::load(vars, &shared)?;
        // The budgets of the networks posted to: they bound the quiet period, and each must be
        // shorter than the function timeout. A network's counts once it posts for real (its
        // dry run sends nothing), or always where it says so.
        let budgets: Vec<(&'static str, Duration)> = networks
            .values()
            .filter(|n| n.budget_counts())
            .map(|n| n.budget())
            .fold(Vec::new(), |mut seen, b| {
                // The channel's is the report bot's: named once.
                if !seen.iter().any(|(var, _)| *var == b.0) {
                    seen.push(b);
                }
                seen
            });
        for (var, t) in [
            ("POSTONCE_IMAGE_TIMEOUT_MS", timeouts.image),
            ("POSTONCE_REDIS_TIMEOUT_MS", timeouts.redis),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", timeouts.dynamodb),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", timeouts.telegram),
        ]
        .into_iter()
        .chain(budgets.iter().copied())
        // The database's budget counts once there is a database.
        .chain(
            database_url
                .is_some()
                .then_some(("POSTONCE_DATABASE_TIMEOUT_MS", timeouts.database)),
        ) {
            if t >= function_timeout {
                return Err(bad(
                    var,
                    format!(
                        "{}ms is not shorter than the function timeout ({}s)",
                        t.as_millis(),
                        function_timeout.as_secs()
                    ),
                ));
            }
        }
        if database_url.is_some() {
            // The pipeline bounds record calls by the record store's budget, and claim calls
            // by the claim store's: with PostgreSQL, that is the database's.
            timeouts.dynamodb = timeouts.database;
            if redis_url.is_none() {
                timeouts.redis = timeouts.database;
            }
        }
        let posted_claim_ttl = vars.seconds("POSTONCE_POSTED_CLAIM_TTL_S", 7 * 24 * 3600)?;
        if posted_claim_ttl <= claim_ttl {
            return Err(bad(
                "POSTONCE_POSTED_CLAIM_TTL_S",
                "must exceed POSTONCE_CLAIM_TTL_S: it keeps a posted-but-not-recorded claim",
            ));
        }
        let reconcile_window = vars.seconds("POSTONCE_RECONCILE_WINDOW_S", 3600)?;
        let every = vars.gap("POSTONCE_MIN_GAP_S")?.unwrap_or(Duration::ZERO);
        let mut min_gap = std::collections::BTreeMap::new();
        for n in Network::ALL {
            min_gap.insert(n, vars.gap(n.min_gap_var())?.unwrap_or(every));
        }
        let reconcile_after =
            vars.seconds("POSTONCE_RECONCILE_AFTER_S", DEFAULT_RECONCILE_AFTER_S)?;
        // A re-send inside the budget of the request it reconciles could overtake it. (The
        // budget bounds how long our side keeps a request open: the call is dropped at it.)
        // Every network a draft may be posted to counts, not only the default targets: a
        // draft may name its own.
        let longest_budget = budgets.iter().map(|(_, t)| *t).max().unwrap_or_default();
        if reconcile_after <= longest_budget {
            let named: Vec<String> = budgets
                .iter()
                .map(|(var, t)| format!("{var} {}ms", t.as_millis()))
                .collect();
            return Err(bad(
                "POSTONCE_RECONCILE_AFTER_S",
                format!(
                    "{}s is not longer than the longest a create request may stay in flight ({}s; the budgets of the networks posted to: {}); a re-send that soon could race the first request",
                    reconcile_after.as_secs(),
                    longest_budget.as_secs_f64().ceil(),
                    named.join(", ")
                ),
            ));
        }
        if reconcile_after >= reconcile_window {
            return Err(bad(
                "POSTONCE_RECONCILE_AFTER_S",
                format!(
                    "{}s must be shorter than POSTONCE_RECONCILE_WINDOW_S ({}s), or no ambiguous attempt could ever be reconciled",
                    reconcile_after.as_secs(),
                    reconcile_window.as_secs()
                ),
            ));
        }
        let max_attempts = match get("POSTONCE_MAX_ATTEMPTS") {
            None => 5,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| {
                    bad(
                        "POSTONCE_MAX_ATTEMPTS",
                        format!("{v:?} is not a whole number from 1 to 100"),
                    )
                })?,
        };

        let aws_credentials = match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some((id, Secret::new(secret))),
            _ => None,
        };

        Ok(Self {
            table,
            data_dir,
            redis_url: redis_url.map(Secret::new),
            database_url: database_url.map(Secret::new),
            database_pool: 4,
            aws_region: get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")),
            dynamodb_endpoint: get("AWS_ENDPOINT_URL_DYNAMODB").or_else(|| get("AWS_ENDPOINT_URL")),
            aws_credentials,
            telegram,
            telegram_api_url,
            telegram_webhook_secret,
            telegram_allowed_users,
            webhook_secret,
            targets,
            networks,
            image_hosts,
            claim_ttl,
            function_timeout,
            timeouts,
            posted_claim_ttl,
            reconcile_window,
            reconcile_after,
            max_attempts,
            min_gap,
        })
    }
}

/// Checks `DATABASE_URL` without repeating it (it may hold a password).
fn check_database_url(url: &str) -> Result<(), ConfigError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(bad(
            "DATABASE_URL",
            "must start with postgres:// or postgresql:// (a PostgreSQL URL)",
        ));
    }
    #[cfg(feature = "postgres")]
    {
        crate::postgres::ConnectOptions::parse(url).map_err(|e| bad("DATABASE_URL", e))?;
        Ok(())
    }
    #[cfg(not(feature = "postgres"))]
    Err(bad(
        "DATABASE_URL",
        "this build has no PostgreSQL support: build it with `cargo build --release --features postgres`",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networks::telegram_channel::config::ChannelConfig;
    use crate::networks::x::config::XConfig;
    use std::collections::HashMap;

    fn channel(c: &Config) -> Option<String> {
        c.network::<ChannelConfig>(Network::Telegram)
            .and_then(|ch| ch.channel.clone())
    }

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_local_and_safe() {
        let c = load(&[]).unwrap();
        assert!(c.table.is_none() && c.redis_url.is_none());
        assert!(c.networks.values().all(|n| !n.is_real()));
        assert_eq!(c.claim_ttl, Duration::from_secs(120));
        assert_eq!(c.function_timeout, Duration::from_secs(60));
        assert_eq!(c.timeouts, Timeouts::default());
        assert_eq!(c.data_dir, PathBuf::from(".postonce"));
    }

    #[test]
    fn the_quiet_period_outlasts_the_linkedin_budget_and_fits_the_window() {
        let c = load(&[]).unwrap();
        assert_eq!(c.reconcile_after, Duration::from_secs(300));
        let (_, linkedin) = c.networks[&Network::Linkedin].budget();
        assert!(c.reconcile_after > linkedin && c.reconcile_after < c.reconcile_window);
        let err = load(&[("POSTONCE_RECONCILE_AFTER_S", "10")]).unwrap_err();
        assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S");
        assert!(
            err.to_string().contains("POSTONCE_LINKEDIN_TIMEOUT_MS"),
            "{err}"
        );
        let short = [
            ("POSTONCE_RECONCILE_AFTER_S", "3"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "2500"),
            ("POSTONCE_X_TIMEOUT_MS", "2500"),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", "2500"),
        ];
        let ok = load(&short).unwrap();
        assert_eq!(ok.reconcile_after, Duration::from_secs(3));
        // Every network posted to counts: the X and the channel's (Telegram) budgets too,
        // whatever POSTONCE_TARGETS says, since a draft may name its own targets.
        for var in ["POSTONCE_X_TIMEOUT_MS", "POSTONCE_TELEGRAM_TIMEOUT_MS"] {
            let mut pairs = short.to_vec();
            pairs.retain(|(k, _)| *k != var);
            pairs.push((var, "3000"));
            let err = load(&pairs).unwrap_err();
            assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S", "{var}");
            let msg = err.to_string();
            for named in [
                "POSTONCE_LINKEDIN_TIMEOUT_MS",
                "POSTONCE_X_TIMEOUT_MS",
                "POSTONCE_TELEGRAM_TIMEOUT_MS",
            ] {
                assert!(msg.contains(named), "{msg}");
            }
            assert!(msg.contains(&format!("{var} 3000ms")), "{msg}");
        }
        let err = load(&[
            ("POSTONCE_RECONCILE_AFTER_S", "600"),
            ("POSTONCE_RECONCILE_WINDOW_S", "600"),
        ])
        .unwrap_err();
        assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S");
        assert!(
            err.to_string().contains("POSTONCE_RECONCILE_WINDOW_S"),
            "{err}"
        );
    }

    #[test]
    fn the_database_budget_counts_only_with_a_database() {
        // Without DATABASE_URL, its default budget must not refuse a short function timeout.
        let short = [
            ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1000"),
            ("POSTONCE_IMAGE_TIMEOUT_MS", "1000"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "1000"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1000"),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", "1000"),
            ("POSTONCE_X_TIMEOUT_MS", "1000"),
            ("POSTONCE_RECONCILE_AFTER_S", "2"),
            ("POSTONCE_CLAIM_TTL_S", "10"),
        ];
        load(&short).expect("no database, no database budget to check");
        let mut with_db = short.to_vec();
        with_db.push(("DATABASE_URL", "postgres://u@127.0.0.1:5432/postonce"));
        if let Err(err) = load(&with_db) {
            // A build without the `postgres` feature refuses DATABASE_URL itself.
            assert!(
                err.var == "POSTONCE_DATABASE_TIMEOUT_MS" || err.var == "DATABASE_URL",
                "{err}"
            );
        } else {
            panic!("an 8 s database budget inside a 3 s function was accepted");
        }
    }

    #[test]
    fn claim_ttl_must_exceed_function_timeout() {
        let err = load(&[
            ("POSTONCE_CLAIM_TTL_S", "60"),
            ("POSTONCE_FUNCTION_TIMEOUT_S", "60"),
        ])
        .unwrap_err();
        assert_eq!(err.var, "POSTONCE_CLAIM_TTL_S");
        assert!(
            err.to_string().contains("60s")
                && err.to_string().contains("POSTONCE_FUNCTION_TIMEOUT_S"),
            "{err}"
        );
        assert!(load(&[
            ("POSTONCE_CLAIM_TTL_S", "61"),
            ("POSTONCE_FUNCTION_TIMEOUT_S", "60")
        ])
        .is_ok());
    }

    #[test]
    fn errors_name_the_variable() {
        for (pairs, var) in [
            (vec![("LINKEDIN_ACCESS_TOKEN", "t")], "LINKEDIN_AUTHOR"),
            (
                vec![("LINKEDIN_ACCESS_TOKEN", "t"), ("LINKEDIN_AUTHOR", "me")],
                "LINKEDIN_AUTHOR",
            ),
            (vec![("LINKEDIN_VERSION", "2024-01")], "LINKEDIN_VERSION"),
            (vec![("LINKEDIN_VERSION", "202413")], "LINKEDIN_VERSION"),
            (vec![("TELEGRAM_BOT_TOKEN", "1:x")], "TELEGRAM_CHAT_ID"),
            (
                vec![("TELEGRAM_BOT_TOKEN", "1:x"), ("TELEGRAM_CHAT_ID", "me")],
                "TELEGRAM_CHAT_ID",
            ),
            (
                vec![("TELEGRAM_WEBHOOK_SECRET", "a b")],
                "TELEGRAM_WEBHOOK_SECRET",
            ),
            (
                vec![("TELEGRAM_ALLOWED_USERS", "1,x")],
                "TELEGRAM_ALLOWED_USERS",
            ),
            (
                vec![("POSTONCE_REDIS_TIMEOUT_MS", "0")],
                "POSTONCE_REDIS_TIMEOUT_MS",
            ),
            (
                vec![("POSTONCE_LINKEDIN_TIMEOUT_MS", "60000")],
                "POSTONCE_LINKEDIN_TIMEOUT_MS",
            ),
            (vec![("REDIS_URL", "localhost:6379")], "REDIS_URL"),
            (vec![("LINKEDIN_API_URL", "ftp://x")], "LINKEDIN_API_URL"),
            (
                vec![("POSTONCE_IMAGE_HOSTS", "ftp://x")],
                "POSTONCE_IMAGE_HOSTS",
            ),
            (vec![("POSTONCE_TABLE", "a b")], "POSTONCE_TABLE"),
            (vec![("POSTONCE_TABLE", "postonce")], "REDIS_URL"),
            (
                vec![("POSTONCE_TARGETS", "linkedin,myspace")],
                "POSTONCE_TARGETS",
            ),
            (vec![("POSTONCE_TARGETS", " , ")], "POSTONCE_TARGETS"),
            (vec![("X_API_URL", "api.x.com")], "X_API_URL"),
            (vec![("X_API_SECRET", "s")], "X_API_KEY"),
            (
                vec![("TELEGRAM_CHANNEL_ID", "mychannel")],
                "TELEGRAM_CHANNEL_ID",
            ),
            (
                vec![("POSTONCE_X_TIMEOUT_MS", "60000")],
                "POSTONCE_X_TIMEOUT_MS",
            ),
            (
                vec![("POSTONCE_X_TIMEOUT_MS", "ten")],
                "POSTONCE_X_TIMEOUT_MS",
            ),
        ] {
            let err = load(&pairs).unwrap_err();
            assert_eq!(err.var, var, "{pairs:?}: {err}");
            assert!(err.to_string().starts_with(var));
        }
    }

    #[test]
    fn secrets_never_print() {
        let c = load(&[
            ("LINKEDIN_ACCESS_TOKEN", "AQX-very-secret-token"),
            ("LINKEDIN_AUTHOR", "urn:li:person:abc"),
            ("TELEGRAM_BOT_TOKEN", "123:tg-secret-token"),
            ("TELEGRAM_CHAT_ID", "42"),
            ("POSTONCE_WEBHOOK_SECRET", "hmac-secret-0123456789"),
            ("REDIS_URL", "rediss://default:redis-password@host:6379"),
            ("X_API_KEY", "x-consumer-key-value"),
            ("X_API_SECRET", "x-consumer-secret-value"),
            ("X_ACCESS_TOKEN", "x-access-token-value"),
            ("X_ACCESS_TOKEN_SECRET", "x-token-secret-value"),
        ])
        .unwrap();
        assert!(c.networks[&Network::X].is_real());
        let shown = format!("{c:?}");
        for secret in [
            "AQX-very-secret-token",
            "tg-secret-token",
            "hmac-secret-0123456789",
            "redis-password",
            "x-consumer-key-value",
            "x-consumer-secret-value",
            "x-access-token-value",
            "x-token-secret-value",
        ] {
            assert!(!shown.contains(secret), "{secret} leaked in Debug");
        }
    }

    #[test]
    fn targets_default_to_linkedin_and_keep_their_order_without_duplicates() {
        assert_eq!(load(&[]).unwrap().targets, vec![Network::Linkedin]);
        // An empty value is unset, as for every variable.
        assert_eq!(
            load(&[("POSTONCE_TARGETS", "  ")]).unwrap().targets,
            vec![Network::Linkedin]
        );
        assert_eq!(
            load(&[("POSTONCE_TARGETS", " telegram , x,telegram,, linkedin,x ")])
                .unwrap()
                .targets,
            vec![Network::Telegram, Network::X, Network::Linkedin]
        );
        assert_eq!(
            load(&[("POSTONCE_TARGETS", "x")]).unwrap().targets,
            vec![Network::X]
        );
    }

    #[test]
    fn the_mastodon_budget_must_hold_the_media_wait_inside_the_run() {
        let real = [
            ("MASTODON_URL", "https://mastodon.example"),
            ("MASTODON_ACCESS_TOKEN", "t"),
        ];
        let with = |ms: &str| {
            let mut pairs = real.to_vec();
            pairs.push(("POSTONCE_MASTODON_TIMEOUT_MS", ms));
            load(&pairs)
        };
        assert!(with("10000").is_ok());
        for ms in ["500", "50000"] {
            let err = with(ms).unwrap_err();
            assert_eq!(err.var, "POSTONCE_MASTODON_TIMEOUT_MS", "{err}");
            assert!(err.to_string().contains("45000ms"), "{err}");
        }
        // A dry run sends nothing: its budget is not checked.
        assert!(load(&[("POSTONCE_MASTODON_TIMEOUT_MS", "500")]).is_ok());
    }

    #[test]
    fn target_errors_name_the_variable_and_the_valid_names() {
        let err = load(&[("POSTONCE_TARGETS", "linkedin,myspace")]).unwrap_err();
        assert_eq!(err.var, "POSTONCE_TARGETS");
        let msg = err.to_string();
        assert!(
            msg.contains("\"myspace\"") && msg.contains("linkedin, x, telegram"),
            "{msg}"
        );
        // Case-sensitive, with a hint.
        let msg = load(&[("POSTONCE_TARGETS", "LinkedIn")])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("lower case: linkedin"), "{msg}");
        // Known networks this version cannot post to yet.
        assert_eq!(
            load(&[("POSTONCE_TARGETS", "linkedin,mastodon,bluesky")])
                .unwrap()
                .targets,
            vec![Network::Linkedin, Network::Mastodon, Network::Bluesky]
        );
        let err = load(&[("POSTONCE_TARGETS", ",,")]).unwrap_err();
        assert_eq!(err.var, "POSTONCE_TARGETS");
        assert!(err.to_string().contains("names no target"), "{err}");
        assert_eq!(parse_target("x"), Ok(Network::X));
        assert!(parse_target("X").is_err());
    }

    #[test]
    fn x_credentials_are_all_four_or_none() {
        let all = [
            ("X_API_KEY", "k"),
            ("X_API_SECRET", "s"),
            ("X_ACCESS_TOKEN", "t"),
            ("X_ACCESS_TOKEN_SECRET", "ts"),
        ];
        let c = load(&all).unwrap();
        let x = c
            .network::<XConfig>(Network::X)
            .and_then(|x| x.credentials.clone())
            .expect("credentials");
        assert_eq!(
            [
                x.consumer_key.expose(),
                x.consumer_secret.expose(),
                x.token.expose(),
                x.token_secret.expose()
            ],
            ["k", "s", "t", "ts"]
        );
        assert!(!load(&[]).unwrap().networks[&Network::X].is_real());
        // Any partial set is refused, naming every missing variable.
        for mask in 1..15u8 {
            let given: Vec<(&str, &str)> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, p)| *p)
                .collect();
            let missing: Vec<&str> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) == 0)
                .map(|(_, (k, _))| *k)
                .collect();
            let err = load(&given).unwrap_err();
            assert_eq!(err.var, missing[0], "{given:?}");
            let msg = err.to_string();
            let verb = if missing.len() == 1 { "is" } else { "are" };
            assert!(
                msg.contains(&format!("{} {verb} missing", missing.join(", "))),
                "{msg}"
            );
        }
    }

    #[test]
    fn x_api_url_and_timeout_have_defaults_and_are_validated() {
        let c = load(&[]).unwrap();
        let x = c.network::<XConfig>(Network::X).unwrap();
        assert_eq!(x.api_url, "https://api.x.com");
        assert_eq!(x.budget, Duration::from_millis(10_000));
        let c = load(&[
            ("X_API_URL", "http://127.0.0.1:9999/"),
            ("POSTONCE_X_TIMEOUT_MS", "2500"),
        ])
        .unwrap();
        let x = c.network::<XConfig>(Network::X).unwrap();
        assert_eq!(x.api_url, "http://127.0.0.1:9999");
        assert_eq!(x.budget, Duration::from_millis(2500));
        assert_eq!(
            load(&[("X_API_URL", "ftp://api.x.com")]).unwrap_err().var,
            "X_API_URL"
        );
    }

    #[test]
    fn the_channel_id_is_checked() {
        assert!(channel(&load(&[]).unwrap()).is_none());
        for ok in ["@postonce_chan", "-1001234567890"] {
            assert_eq!(
                channel(&load(&[("TELEGRAM_CHANNEL_ID", ok)]).unwrap()).as_deref(),
                Some(ok)
            );
        }
        for bad in ["postonce_chan", "@abc", "1234567890", "-100"] {
            let err = load(&[("TELEGRAM_CHANNEL_ID", bad)]).unwrap_err();
            assert_eq!(err.var, "TELEGRAM_CHANNEL_ID", "{bad}");
        }
    }

    #[test]
    fn pacing_gaps_are_seconds_per_network_with_a_default() {
        let c = load(&[]).unwrap();
        assert!(c.min_gap.values().all(|g| g.is_zero()));
        let c = load(&[
            ("POSTONCE_MIN_GAP_S", "90"),
            ("POSTONCE_MIN_GAP_S_X", "0.5"),
        ])
        .unwrap();
        assert_eq!(c.min_gap[&Network::Linkedin], Duration::from_secs(90));
        assert_eq!(c.min_gap[&Network::X], Duration::from_millis(500));
        for (var, bad) in [
            ("POSTONCE_MIN_GAP_S", "soon"),
            ("POSTONCE_MIN_GAP_S", "-1"),
            ("POSTONCE_MIN_GAP_S_BLUESKY", "86401"),
            ("POSTONCE_MIN_GAP_S_TELEGRAM", "NaN"),
        ] {
            let err = load(&[(var, bad)]).unwrap_err();
            assert_eq!(err.var, var, "{bad}");
        }
    }

    async fn adapters(
        c: &Config,
    ) -> std::collections::BTreeMap<Network, std::sync::Arc<dyn crate::networks::NetworkAdapter>>
    {
        let http = reqwest::Client::new();
        let context = crate::networks::Context {
            http: &http,
            sessions: None,
            sessions_budget: Duration::from_secs(1),
        };
        networks::build(&c.networks, &context).await.unwrap()
    }

    const X_VARS: [(&str, &str); 4] = [
        ("X_API_KEY", "k"),
        ("X_API_SECRET", "s"),
        ("X_ACCESS_TOKEN", "t"),
        ("X_ACCESS_TOKEN_SECRET", "ts"),
    ];

    fn note(c: &Config, n: Network) -> String {
        networks::dry_run_note(n, &c.networks[&n].missing())
    }

    #[tokio::test]
    async fn every_network_of_the_registry_gets_an_adapter_dry_without_credentials() {
        let c = load(&[]).unwrap();
        let a = adapters(&c).await;
        assert_eq!(a.keys().copied().collect::<Vec<_>>(), Network::ALL.to_vec());
        for (network, adapter) in &a {
            assert_eq!(adapter.network(), *network);
            assert!(adapter.is_dry_run(), "{network:?}");
            // What the pipeline reads before any call agrees with what the adapter counts.
            assert_eq!(adapter.capabilities().text.max, adapter.max_text());
            assert!(adapter.max_text() > 0, "{network:?}");
        }
        assert_eq!(
            note(&c, Network::X),
            "dry run: set X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET to post to X for real"
        );
        assert_eq!(
            note(&c, Network::Telegram),
            "dry run: set TELEGRAM_BOT_TOKEN, TELEGRAM_CHAT_ID and TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
        );
    }

    #[tokio::test]
    async fn configured_networks_post_for_real() {
        let mut pairs = X_VARS.to_vec();
        pairs.extend([
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_CHAT_ID", "42"),
            ("TELEGRAM_CHANNEL_ID", "@postonce_chan"),
        ]);
        let c = load(&pairs).unwrap();
        let a = adapters(&c).await;
        assert!(!a[&Network::X].is_dry_run());
        assert!(!a[&Network::Telegram].is_dry_run());
        assert!(c.networks[&Network::X].missing().is_empty());
        assert!(c.networks[&Network::Telegram].missing().is_empty());
        assert!(a[&Network::Linkedin].is_dry_run());
        assert_eq!(
            c.networks[&Network::Linkedin].missing(),
            ["LINKEDIN_ACCESS_TOKEN", "LINKEDIN_AUTHOR"]
        );
    }

    #[tokio::test]
    async fn the_channel_needs_both_the_bot_token_and_the_channel_id() {
        let c = load(&[("TELEGRAM_CHANNEL_ID", "-1001234567890")]).unwrap();
        assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
        assert_eq!(
            c.networks[&Network::Telegram].missing(),
            ["TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID"]
        );
        let c = load(&[
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_CHAT_ID", "42"),
        ])
        .unwrap();
        assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
        assert_eq!(
            note(&c, Network::Telegram),
            "dry run: set TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
        );
    }

    #[test]
    fn every_network_names_its_own_pacing_and_secret_variables() {
        for n in Network::ALL {
            let d = n.definition();
            assert!(d.min_gap_var.starts_with("POSTONCE_MIN_GAP_S_"), "{n:?}");
            for (var, param) in d.secrets {
                assert_eq!(*param, format!("{var}_PARAM"));
            }
        }
    }
}

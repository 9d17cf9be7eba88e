//! Configuration, read once from the environment and validated before anything runs.
//!
//! The names are a public interface (README "Configuration"): scripts and templates depend on
//! them. Every error names the variable and says what is wrong. Secrets are wrapped in
//! [`Secret`], whose `Debug` never shows the value.

use std::time::Duration;

use crate::covers::CoverHosting;
use crate::image::{LocalCovers, OriginPolicy};
use crate::networks::{self, Configs, Network, Shared};
use crate::stores::StoreConfig;
use crate::vars::{bad, Vars};
pub use crate::vars::{ConfigError, Secret};

/// Where reports go; present only when both Telegram variables are set.
#[derive(Clone, Debug)]
pub struct TelegramConfig {
    pub bot_token: Secret,
    pub chat_id: i64,
}

/// Per-call budgets (rule 4 in `pipeline/mod.rs`), by role. Each store's is set by its own
/// variable, which the registry picks ([`StoreConfig::records_budget`],
/// [`StoreConfig::claims_budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub image: Duration,
    /// Each call to the record store.
    pub records: Duration,
    /// Each call to the claim store.
    pub claims: Duration,
    /// The report bot and the Telegram channel target.
    pub telegram: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            image: Duration::from_millis(10_000),
            records: Duration::from_millis(8_000),
            claims: Duration::from_millis(8_000),
            telegram: Duration::from_millis(8_000),
        }
    }
}

/// Everything postonce reads from its environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// Every store's configuration, read by its folder; the registry chooses among them
    /// ([`crate::stores`]).
    pub stores: StoreConfig,
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
    /// Where covers are hosted for the networks that fetch them (`POSTONCE_PUBLIC_URL`,
    /// `POSTONCE_COVERS_BUCKET`): [`crate::covers`].
    pub covers: CoverHosting,
    /// Why the stored credentials could not be read at start, if they could not: the
    /// commands that post refuse to start (a network whose credential is stored would
    /// otherwise run as a dry run).
    pub credentials_unreadable: Option<String>,
    /// Each network's credential as a fingerprint ([`crate::networks::auth::fingerprint`] of
    /// its secrets' values; a network with no secret of its own, the channel, posts with the
    /// report bot's token): a credential refused by its network is remembered by it, and the
    /// drafts it held go out once the fingerprint in use differs.
    pub fingerprints: std::collections::BTreeMap<Network, String>,
    /// `POSTONCE_MCP_IMAGE_DIRS` as given (its entries checked); the MCP server resolves it
    /// at its start ([`Config::resolve_mcp_covers`]).
    pub mcp_image_dirs: Option<String>,
    /// The folders the MCP server may read covers from, once resolved; none until then, and
    /// none when the variable is unset.
    pub mcp_covers: LocalCovers,
    /// Where this process reads a draft's local cover from: anywhere, except in the MCP server,
    /// which sets it to [`Config::mcp_covers`].
    pub local_covers: LocalCovers,
    pub claim_ttl: Duration,
    pub function_timeout: Duration,
    pub timeouts: Timeouts,
    /// How long a posted-but-not-recorded claim is kept (holds the post id).
    pub posted_claim_ttl: Duration,
    /// How long after an ambiguous create-post a later run may re-send it to let the
    /// network's duplicate answer reveal whether it exists (a network whose duplicate answer
    /// names the post).
    pub reconcile_window: Duration,
    /// The quiet period: how long after an ambiguous create-post no run may re-send it, because
    /// the first request may still be in flight at the network (README "How it decides").
    pub reconcile_after: Duration,
    /// Sweeper: failed attempts before a draft is marked `needs_review`.
    pub max_attempts: u32,
    /// Pacing: the least time between two posts to one network (`POSTONCE_MIN_GAP_S`, and
    /// `POSTONCE_MIN_GAP_S_<NETWORK>` per network). Zero: no pacing.
    pub min_gap: std::collections::BTreeMap<Network, Duration>,
}

/// Default quiet period before an ambiguous create may be reconciled. No network documents
/// its processing time. Our side keeps a create request open at most its budget (10 s by default,
/// and never past the HTTP client's [`HTTP_TOTAL_TIMEOUT`]); what a network does with a request
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
    /// Resolves `POSTONCE_MCP_IMAGE_DIRS` to its folders (the MCP server, at its start): each
    /// must exist and be a folder.
    ///
    /// # Errors
    /// Names the variable and the entry that cannot be used.
    pub fn resolve_mcp_covers(&mut self) -> Result<(), ConfigError> {
        if let Some(list) = &self.mcp_image_dirs {
            self.mcp_covers =
                LocalCovers::parse_dirs(list).map_err(|e| bad("POSTONCE_MCP_IMAGE_DIRS", e))?;
        }
        Ok(())
    }

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

    /// Reads configuration through `get` (the environment, or a map in tests).
    ///
    /// # Errors
    /// The first variable that is missing or malformed, by name.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(&get);
        let get = |name: &str| vars.get(name);

        let stores = StoreConfig::load(vars)?;

        let telegram = report_bot(vars)?;
        let telegram_api_url = vars.base_url("TELEGRAM_API_URL", "https://api.telegram.org")?;
        let telegram_webhook_secret = telegram_webhook_secret(vars)?;
        let telegram_allowed_users = telegram_allowed_users(vars)?;
        let webhook_secret = webhook_secret(vars)?;

        let targets = match get("POSTONCE_TARGETS") {
            None => vec![Network::default()],
            Some(list) => parse_targets("POSTONCE_TARGETS", &list)?,
        };

        let image_hosts = match get("POSTONCE_IMAGE_HOSTS") {
            None => OriginPolicy::any_public_https(),
            Some(list) => OriginPolicy::parse(&list).map_err(|e| bad("POSTONCE_IMAGE_HOSTS", e))?,
        };

        let covers = CoverHosting::load(vars, &stores.local.data_dir)?;

        let mcp_image_dirs = get("POSTONCE_MCP_IMAGE_DIRS");
        if let Some(list) = &mcp_image_dirs {
            LocalCovers::dir_entries(list).map_err(|e| bad("POSTONCE_MCP_IMAGE_DIRS", e))?;
        }

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
        let timeouts = Timeouts {
            image: vars.millis("POSTONCE_IMAGE_TIMEOUT_MS", 10_000)?,
            records: stores.records_budget(),
            claims: stores.claims_budget(),
            telegram: vars.millis("POSTONCE_TELEGRAM_TIMEOUT_MS", 8_000)?,
        };
        let shared = Shared {
            function_timeout,
            telegram_bot: telegram.as_ref().map(|t| t.bot_token.clone()),
            telegram_api_url: telegram_api_url.clone(),
            telegram_budget: timeouts.telegram,
        };
        let networks = networks::load(vars, &shared)?;
        let budgets = network_budgets(&networks);
        check_budgets(function_timeout, &timeouts, &stores, &budgets)?;
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
        let reconcile_after = reconcile_after(vars, &budgets, reconcile_window)?;
        let max_attempts = max_attempts(vars)?;

        let fingerprints = fingerprints(vars);

        Ok(Self {
            fingerprints,
            stores,
            telegram,
            telegram_api_url,
            telegram_webhook_secret,
            telegram_allowed_users,
            webhook_secret,
            targets,
            networks,
            image_hosts,
            covers,
            mcp_image_dirs,
            credentials_unreadable: None,
            mcp_covers: LocalCovers::none(),
            local_covers: LocalCovers::Anywhere,
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

/// So that a store may be opened from the whole configuration.
impl AsRef<StoreConfig> for Config {
    fn as_ref(&self) -> &StoreConfig {
        &self.stores
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The report bot (`TELEGRAM_BOT_TOKEN` and `TELEGRAM_CHAT_ID`, both or neither).
fn report_bot(vars: Vars<'_>) -> Result<Option<TelegramConfig>, ConfigError> {
    let get = |name: &str| vars.get(name);
    Ok(match (get("TELEGRAM_BOT_TOKEN"), get("TELEGRAM_CHAT_ID")) {
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
    })
}

/// `TELEGRAM_WEBHOOK_SECRET`: what Telegram sends in `X-Telegram-Bot-Api-Secret-Token`.
fn telegram_webhook_secret(vars: Vars<'_>) -> Result<Option<Secret>, ConfigError> {
    Ok(match vars.get("TELEGRAM_WEBHOOK_SECRET") {
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
    })
}

/// `TELEGRAM_ALLOWED_USERS`: who may press the report's buttons.
fn telegram_allowed_users(vars: Vars<'_>) -> Result<Option<Vec<i64>>, ConfigError> {
    Ok(match vars.get("TELEGRAM_ALLOWED_USERS") {
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
    })
}

/// `POSTONCE_WEBHOOK_SECRET`: the CI webhook's HMAC key.
fn webhook_secret(vars: Vars<'_>) -> Result<Option<Secret>, ConfigError> {
    let webhook_secret = vars.get("POSTONCE_WEBHOOK_SECRET").map(Secret::new);
    if webhook_secret
        .as_ref()
        .is_some_and(|s| s.expose().len() < 16)
    {
        return Err(bad(
            "POSTONCE_WEBHOOK_SECRET",
            "too short: use at least 16 characters (e.g. openssl rand -hex 32)",
        ));
    }
    Ok(webhook_secret)
}

/// The budgets of the networks posted to: they bound the quiet period, and each must be
/// shorter than the function timeout. A network's counts once it posts for real (its dry run
/// sends nothing), or always where it says so.
fn network_budgets(networks: &Configs) -> Vec<(&'static str, Duration)> {
    networks
        .values()
        .filter(|n| n.budget_counts())
        .map(|n| n.budget())
        .fold(Vec::new(), |mut seen, b| {
            // The channel's is the report bot's: named once.
            if !seen.iter().any(|(var, _)| *var == b.0) {
                seen.push(b);
            }
            seen
        })
}

/// Every budget in use is shorter than the function timeout.
fn check_budgets(
    function_timeout: Duration,
    timeouts: &Timeouts,
    stores: &StoreConfig,
    budgets: &[(&'static str, Duration)],
) -> Result<(), ConfigError> {
    // Each store's budget counts once its store may be used (the registry says which).
    let (always, when_set) = stores.budget_vars();
    for (var, t) in [("POSTONCE_IMAGE_TIMEOUT_MS", timeouts.image)]
        .into_iter()
        .chain(always)
        .chain([("POSTONCE_TELEGRAM_TIMEOUT_MS", timeouts.telegram)])
        .chain(budgets.iter().copied())
        .chain(when_set)
    {
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
    Ok(())
}

/// `POSTONCE_RECONCILE_AFTER_S`, the quiet period: longer than any create may stay in flight,
/// shorter than the reconcile window.
fn reconcile_after(
    vars: Vars<'_>,
    budgets: &[(&'static str, Duration)],
    reconcile_window: Duration,
) -> Result<Duration, ConfigError> {
    let reconcile_after = vars.seconds("POSTONCE_RECONCILE_AFTER_S", DEFAULT_RECONCILE_AFTER_S)?;
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
    Ok(reconcile_after)
}

/// `POSTONCE_MAX_ATTEMPTS` (default 5).
fn max_attempts(vars: Vars<'_>) -> Result<u32, ConfigError> {
    Ok(match vars.get("POSTONCE_MAX_ATTEMPTS") {
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
    })
}

/// Each network's credential in use, as a fingerprint (never the secret): a refused one is
/// told of once, and the drafts it held run once it differs.
fn fingerprints(vars: Vars<'_>) -> std::collections::BTreeMap<Network, String> {
    let get = |name: &str| vars.get(name);
    Network::ALL
        .into_iter()
        .map(|n| {
            let names: Vec<&str> = match n.definition().secrets {
                [] => vec!["TELEGRAM_BOT_TOKEN"],
                secrets => secrets.iter().map(|(name, _)| *name).collect(),
            };
            let values: Vec<String> = names
                .iter()
                .map(|name| get(name).unwrap_or_default())
                .collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            (n, crate::networks::auth::fingerprint(n, &values))
        })
        .collect()
}

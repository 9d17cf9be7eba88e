//! What a process reads before it runs: the configuration from the environment, with secrets
//! given by reference (`<NAME>_PARAM`, [`crate::secrets`]) resolved and the stored credentials
//! ([`crate::credentials`]) filled in where no plain variable or `_PARAM` gives one.
//!
//! It sits above [`crate::app`] because reading the stored credentials opens the record store;
//! the entry points (the CLI, the Lambda's start) call it, and [`crate::config`] stays a reader
//! of variables that imports nothing above it.

use std::collections::HashMap;

use crate::config::{Config, ConfigError};
use crate::credentials::{self, flow, SECRET_NAME};
use crate::vars::Vars;

/// Reads the process environment, first resolving secrets given by reference, then filling in
/// the stored credentials. When the store holds (or may hold) credentials but cannot be read,
/// the configuration says why in [`Config::credentials_unreadable`], and the commands that
/// post refuse to start.
///
/// # Errors
/// The first variable that is missing or malformed, or a parameter that cannot be read.
pub async fn configured() -> Result<Config, ConfigError> {
    let resolved = crate::secrets::resolve(|name| std::env::var(name).ok()).await?;
    let lookup = |name: &str| {
        resolved
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
    };
    // The store the core's variables name (the networks' may be incomplete without the stored
    // credentials).
    let (stored, unreadable) = match Config::from_lookup(|name| {
        credentials::names_the_store(name)
            .then(|| lookup(name))
            .flatten()
    }) {
        Ok(store) => match stored_credentials(&store, Vars::new(&lookup)).await {
            Ok(stored) => (stored, None),
            Err(why) => (HashMap::new(), Some(why)),
        },
        Err(_) => (HashMap::new(), None),
    };
    let mut config = with_stored(&lookup, &stored)?;
    config.credentials_unreadable = unreadable;
    Ok(config)
}

/// The configuration from `lookup` (the environment, its `_PARAM`s resolved), the variables of
/// the stored credentials (`stored`, [`credentials::variables`]) filling in what it leaves
/// unset.
///
/// # Errors
/// The first variable that is missing or malformed.
pub fn with_stored(
    lookup: &dyn Fn(&str) -> Option<String>,
    stored: &HashMap<String, String>,
) -> Result<Config, ConfigError> {
    Config::from_lookup(|name| {
        Vars::new(lookup)
            .get(name)
            .or_else(|| stored.get(name).cloned())
    })
}

/// Whether a process with `config` and `vars` takes some network's credential from the store:
/// some network has neither its plain variable nor its `_PARAM`, and the store may keep them.
pub fn reads_stored(config: &Config, vars: Vars<'_>) -> bool {
    credentials::some_network_lacks(vars) && config.stores.may_keep(SECRET_NAME)
}

/// The configuration `postonce auth` works with: the core's variables alone (their `_PARAM`s
/// resolved), so that a network whose variables are not complete yet (the app's keys set, its
/// token not) can still be signed in to.
///
/// # Errors
/// A core variable that is missing or malformed.
pub async fn store_config() -> Result<Config, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    let resolved = crate::secrets::resolve_these(env, crate::secrets::core_by_reference()).await?;
    Config::from_lookup(|name| {
        credentials::names_the_store(name)
            .then(|| resolved.get(name).cloned().or_else(|| env(name)))
            .flatten()
    })
}

/// What a start reads from the store: the variables of the stored credentials, after
/// refreshing those due ([`flow::refresh_due`]). Reads only when some network lacks a plain or
/// `_PARAM` credential.
///
/// # Errors
/// A store that holds (or may hold) credentials but cannot be read: the networks whose
/// credential lives there cannot be told from networks that have none, so the commands that
/// post refuse to start rather than run them as dry runs (a dry run would answer `posted` for
/// a draft that was never sent).
pub async fn stored_credentials(
    config: &Config,
    vars: Vars<'_>,
) -> Result<HashMap<String, String>, String> {
    if !reads_stored(config, vars) {
        return Ok(HashMap::new());
    }
    let unreadable = |e: &dyn std::fmt::Display| {
        tracing::warn!(error = %e, "the stored credentials cannot be read");
        format!("the stored credentials cannot be read ({e}); nothing was sent: run again once the store answers (`postonce auth status` shows them)")
    };
    // A store that cannot be opened at all (a schema behind, a malformed address) stops the
    // start anyway, with its own message and fix: the app opens it the same way.
    let Ok(records) = crate::app::record_store(config).await else {
        return Ok(HashMap::new());
    };
    let http = crate::app::http_client().map_err(|e| unreadable(&e))?;
    let stored = flow::refresh_due(&*records, vars, &http, crate::record::now_s())
        .await
        .map_err(|e| unreadable(&e))?;
    let found = credentials::variables(vars, &stored);
    if !found.is_empty() {
        credentials::mark_in_use();
    }
    Ok(found)
}

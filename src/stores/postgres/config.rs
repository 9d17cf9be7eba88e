//! PostgreSQL's configuration: `DATABASE_URL` (records, drafts and pacing live in PostgreSQL,
//! and the claims too unless another claim store is set), the pool's size, and
//! `POSTONCE_DATABASE_TIMEOUT_MS` (each statement's budget, server- and client-side).

use std::time::Duration;

use crate::vars::{bad, ConfigError, Secret, Vars};

/// Connections a process opens by default: few for a CLI run or a Lambda sandbox (`serve`
/// sets more).
pub const DEFAULT_POOL: usize = 4;

/// Connections a long-running server (`serve`) may keep open: it answers many requests at once.
pub const SERVER_POOL: usize = 16;

#[derive(Clone, Debug)]
pub struct PgConfig {
    /// `DATABASE_URL` (`postgres://` or `postgresql://`). May hold a password.
    pub url: Option<Secret>,
    /// Connections the pool may open.
    pub pool: usize,
    /// Each statement's budget (`POSTONCE_DATABASE_TIMEOUT_MS`).
    pub budget: Duration,
}

impl PgConfig {
    /// Reads `DATABASE_URL` and the statement budget.
    ///
    /// # Errors
    /// A malformed URL or budget, by name (never repeating the URL).
    pub fn load(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let url = vars.get("DATABASE_URL");
        if let Some(url) = &url {
            check_url(url)?;
        }
        Ok(Self {
            url: url.map(Secret::new),
            pool: DEFAULT_POOL,
            budget: vars.millis("POSTONCE_DATABASE_TIMEOUT_MS", 8_000)?,
        })
    }

    /// The database (`None` without `DATABASE_URL`), its pool not yet connected.
    ///
    /// # Errors
    /// As [`super::Database::new`].
    #[cfg(feature = "postgres")]
    pub fn database(&self) -> Result<Option<super::Database>, String> {
        self.url
            .as_ref()
            .map(|url| super::Database::new(url, self.budget, self.pool))
            .transpose()
    }
}

/// Checks `DATABASE_URL` without repeating it (it may hold a password).
fn check_url(url: &str) -> Result<(), ConfigError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(bad(
            "DATABASE_URL",
            "must start with postgres:// or postgresql:// (a PostgreSQL URL)",
        ));
    }
    #[cfg(feature = "postgres")]
    {
        super::ConnectOptions::parse(url).map_err(|e| bad("DATABASE_URL", e))?;
        Ok(())
    }
    #[cfg(not(feature = "postgres"))]
    Err(bad(
        "DATABASE_URL",
        "this build has no PostgreSQL support: build it with `cargo build --release --features postgres`",
    ))
}

/// Doctor's claims line when the claims live in PostgreSQL.
pub const CLAIMS_DOCTOR: crate::stores::ClaimsDoctor = crate::stores::ClaimsDoctor {
    name: "claims (PostgreSQL)",
    ok: "claims in PostgreSQL (REDIS_URL unset): claim taken and released",
    fix: "REDIS_URL is not set, so claims live in PostgreSQL (DATABASE_URL): check that it is reachable and migrated (postonce db migrate)",
};

/// Doctor's fix when the records cannot be read.
pub fn records_fix(error: &str) -> String {
    format!("{error}; check DATABASE_URL, and run `postonce db migrate`")
}

//! Redis's configuration: `REDIS_URL` (the claims live in Redis when it is set) and
//! `POSTONCE_REDIS_TIMEOUT_MS` (the claim store's budget, unless PostgreSQL holds the claims).

use std::time::Duration;

use crate::vars::{bad, ConfigError, Secret, Vars};

#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://` or `rediss://`. May hold a password.
    pub url: Option<Secret>,
    pub budget: Duration,
}

impl RedisConfig {
    /// # Errors
    /// A malformed `REDIS_URL` scheme or budget, by name.
    pub fn load(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let url = vars.get("REDIS_URL");
        if let Some(url) = &url {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return Err(bad("REDIS_URL", "must start with redis:// or rediss://"));
            }
        }
        Ok(Self {
            url: url.map(Secret::new),
            budget: vars.millis("POSTONCE_REDIS_TIMEOUT_MS", 8_000)?,
        })
    }
}

/// Doctor's claims line when the claims live in Redis.
pub const CLAIMS_DOCTOR: crate::stores::ClaimsDoctor = crate::stores::ClaimsDoctor {
    name: "Redis",
    ok: "PING ok; claim taken and released",
    fix: "check REDIS_URL (redis:// or rediss:// for TLS) and that this function can reach it",
};

//! Bluesky's variables: `BLUESKY_IDENTIFIER` (a handle or DID), `BLUESKY_APP_PASSWORD`
//! (`_PARAM`), `BLUESKY_PDS_URL`, `POSTONCE_BLUESKY_TIMEOUT_MS`. Without both credentials,
//! Bluesky is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{BlueskyAdapter, DEFAULT_PDS};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "Bluesky",
    confirm_label: "It's on Bluesky",
    min_gap_var: "POSTONCE_MIN_GAP_S_BLUESKY",
    secrets: &[("BLUESKY_APP_PASSWORD", "BLUESKY_APP_PASSWORD_PARAM")],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// Bluesky's configuration.
#[derive(Clone, Debug)]
pub struct BlueskyConfig {
    /// `BLUESKY_IDENTIFIER` and `BLUESKY_APP_PASSWORD`; `None` means the dry run.
    pub credentials: Option<(String, Secret)>,
    /// The account's PDS, without a trailing `/`.
    pub pds_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let credentials = match (
        vars.get("BLUESKY_IDENTIFIER"),
        vars.get("BLUESKY_APP_PASSWORD"),
    ) {
        (Some(id), Some(password)) => Some((id, Secret::new(password))),
        (None, None) => None,
        (Some(_), None) => {
            return Err(bad(
                "BLUESKY_APP_PASSWORD",
                "is required with BLUESKY_IDENTIFIER (an app password from Settings → App passwords; or BLUESKY_APP_PASSWORD_PARAM, an SSM parameter name)",
            ))
        }
        (None, Some(_)) => {
            return Err(bad(
                "BLUESKY_IDENTIFIER",
                "is required with BLUESKY_APP_PASSWORD: the account's handle or DID",
            ))
        }
    };
    Ok(Arc::new(BlueskyConfig {
        credentials,
        pds_url: vars.base_url("BLUESKY_PDS_URL", DEFAULT_PDS)?,
        budget: vars.millis("POSTONCE_BLUESKY_TIMEOUT_MS", 10_000)?,
    }))
}

#[async_trait]
impl NetworkConfig for BlueskyConfig {
    fn is_real(&self) -> bool {
        self.credentials.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_BLUESKY_TIMEOUT_MS", self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        if self.credentials.is_some() {
            Vec::new()
        } else {
            vec!["BLUESKY_IDENTIFIER", "BLUESKY_APP_PASSWORD"]
        }
    }

    fn api_var(&self) -> &'static str {
        "BLUESKY_PDS_URL"
    }

    /// `createSession` is limited to 30 per 5 minutes: the session outlives the process.
    fn keeps_sessions(&self) -> bool {
        self.is_real()
    }

    async fn checked(&self, _context: &Context<'_>, detail: String) -> String {
        format!("{detail} at {}", self.pds_url)
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        let Some((identifier, password)) = &self.credentials else {
            return Ok(Arc::new(BlueskyAdapter::dry_run(
                context.http.clone(),
                &self.pds_url,
                None,
            )));
        };
        let adapter = BlueskyAdapter::new(
            context.http.clone(),
            &self.pds_url,
            identifier,
            password.clone(),
        );
        Ok(Arc::new(match &context.sessions {
            Some(store) => adapter.with_session_store(store.clone(), context.sessions_budget),
            None => adapter,
        }))
    }
}

//! Nostr's variables: `NOSTR_SECRET_KEY` (`_PARAM`; `nsec1…` or 64 hex digits), `NOSTR_RELAYS`
//! (comma-separated `wss://` or `ws://` URLs), `NOSTR_MIN_RELAYS` (how many must take a note;
//! 1), `NOSTR_BLOSSOM_URL` (a Blossom media server for covers; unset), and
//! `POSTONCE_NOSTR_TIMEOUT_MS`. Without the key or the relays, Nostr is a dry run. A malformed
//! value is a configuration error naming the variable (exit 2 at start-up); the key's value is
//! never repeated.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::event::Keys;
use super::relay::parse_relays;
use super::NostrAdapter;
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Vars};

pub const DEFINITION: Definition = Definition {
    label: "Nostr",
    confirm_label: "It's on Nostr",
    min_gap_var: "POSTONCE_MIN_GAP_S_NOSTR",
    secrets: &[("NOSTR_SECRET_KEY", "NOSTR_SECRET_KEY_PARAM")],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// Nostr's configuration. `Debug` shows the key's `npub` only.
#[derive(Clone, Debug)]
pub struct NostrConfig {
    pub keys: Option<Keys>,
    pub relays: Vec<String>,
    pub min_relays: usize,
    pub blossom: Option<String>,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let keys = vars
        .get("NOSTR_SECRET_KEY")
        .map(|k| Keys::parse(&k).map_err(|e| bad("NOSTR_SECRET_KEY", e)))
        .transpose()?;
    let relays = match vars.get("NOSTR_RELAYS") {
        Some(v) if !v.trim().is_empty() => parse_relays(&v)?,
        _ => Vec::new(),
    };
    if keys.is_some() && relays.is_empty() {
        return Err(bad(
            "NOSTR_RELAYS",
            "is required with NOSTR_SECRET_KEY: the relays to post to (wss://…, comma-separated)",
        ));
    }
    let min = vars.number("NOSTR_MIN_RELAYS", 1, "relays")?;
    let min_relays = usize::try_from(min).unwrap_or(usize::MAX);
    if !relays.is_empty() && min_relays > relays.len() {
        return Err(bad(
            "NOSTR_MIN_RELAYS",
            format!("{min} is more than the {} relays of NOSTR_RELAYS", relays.len()),
        ));
    }
    let blossom = match vars.get("NOSTR_BLOSSOM_URL") {
        Some(v) if !v.trim().is_empty() => Some(vars.base_url("NOSTR_BLOSSOM_URL", "")?),
        _ => None,
    };
    Ok(Arc::new(NostrConfig {
        keys,
        relays,
        min_relays,
        blossom,
        budget: vars.millis("POSTONCE_NOSTR_TIMEOUT_MS", 10_000)?,
    }))
}

#[async_trait]
impl NetworkConfig for NostrConfig {
    fn is_real(&self) -> bool {
        self.keys.is_some() && !self.relays.is_empty()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_NOSTR_TIMEOUT_MS", self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.keys.is_none() {
            missing.push("NOSTR_SECRET_KEY");
        }
        if self.relays.is_empty() {
            missing.push("NOSTR_RELAYS");
        }
        missing
    }

    fn api_var(&self) -> &'static str {
        "NOSTR_RELAYS"
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        let http = context.http.clone();
        let adapter = match &self.keys {
            Some(keys) if !self.relays.is_empty() => NostrAdapter::new(
                http,
                keys.clone(),
                self.relays.clone(),
                self.min_relays,
                self.blossom.clone(),
                self.budget,
            ),
            _ => {
                let relays = if self.relays.is_empty() {
                    vec!["<NOSTR_RELAYS>".to_owned()]
                } else {
                    self.relays.clone()
                };
                NostrAdapter::dry_run(http, relays, self.blossom.clone())
            }
        };
        Ok(Arc::new(adapter))
    }
}

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

/// The most relays a note goes to.
pub const MAX_RELAYS: usize = 16;

/// Nostr's configuration. `Debug` shows the key's `npub` only.
#[derive(Clone, Debug)]
pub struct NostrConfig {
    pub keys: Option<Keys>,
    pub relays: Vec<String>,
    pub min_relays: usize,
    pub blossom: Option<String>,
    pub budget: Duration,
}

/// Checks one relay URL: `wss://` or `ws://`, a host, no user or password, no query or
/// fragment, nothing but printable ASCII.
///
/// # Errors
/// Why it is not a relay URL (for `NOSTR_RELAYS`).
pub fn parse_relay(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("an empty relay URL".into());
    }
    if v.len() > 256 || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{:?} holds spaces, control or non-ASCII characters, or is too long", v.chars().take(60).collect::<String>()));
    }
    let url = url::Url::parse(v).map_err(|e| format!("{v:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(format!("{v:?} must start with wss:// (or ws:// for a local relay)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{v:?} names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{v:?} carries a user or password"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{v:?} carries a query or fragment"));
    }
    Ok(v.to_owned())
}

/// Checks `NOSTR_RELAYS`: one to [`MAX_RELAYS`] relay URLs, each once.
///
/// # Errors
/// A [`ConfigError`] naming `NOSTR_RELAYS`.
pub fn parse_relays(value: &str) -> Result<Vec<String>, ConfigError> {
    let mut relays: Vec<String> = Vec::new();
    for part in value.split(',') {
        let relay = parse_relay(part).map_err(|e| bad("NOSTR_RELAYS", e))?;
        if relays.contains(&relay) {
            return Err(bad("NOSTR_RELAYS", format!("{relay:?} is listed twice")));
        }
        relays.push(relay);
    }
    if relays.len() > MAX_RELAYS {
        return Err(bad(
            "NOSTR_RELAYS",
            format!("{} relays; at most {MAX_RELAYS}", relays.len()),
        ));
    }
    Ok(relays)
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

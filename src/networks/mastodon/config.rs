//! Mastodon's variables: `MASTODON_URL` (the instance), `MASTODON_ACCESS_TOKEN` (`_PARAM`),
//! `POSTONCE_MASTODON_TIMEOUT_MS`. Without both, Mastodon is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{MastodonAdapter, MIN_BUDGET};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "Mastodon",
    confirm_label: "It's on Mastodon",
    min_gap_var: "POSTONCE_MIN_GAP_S_MASTODON",
    secrets: &[("MASTODON_ACCESS_TOKEN", "MASTODON_ACCESS_TOKEN_PARAM")],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// Mastodon's configuration.
#[derive(Clone, Debug)]
pub struct MastodonConfig {
    /// The instance (`MASTODON_URL`), without a trailing `/`.
    pub url: Option<String>,
    pub token: Option<Secret>,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let url = match vars.get("MASTODON_URL") {
        Some(_) => Some(vars.base_url("MASTODON_URL", "")?),
        None => None,
    };
    let token = vars.get("MASTODON_ACCESS_TOKEN").map(Secret::new);
    if token.is_some() && url.is_none() {
        return Err(bad(
            "MASTODON_URL",
            "is required with MASTODON_ACCESS_TOKEN: the instance, e.g. https://mastodon.social",
        ));
    }
    let config = MastodonConfig {
        url,
        token,
        budget: vars.millis("POSTONCE_MASTODON_TIMEOUT_MS", 10_000)?,
    };
    // The upload waits for the image's processing inside the budget (a later try resumes the
    // wait): the budget must hold an upload and a poll, and fit the time a run has for work.
    if config.is_real() {
        shared.check_waiting_budget(
            "POSTONCE_MASTODON_TIMEOUT_MS",
            config.budget,
            MIN_BUDGET,
            "an upload and one poll of the image's processing",
        )?;
    }
    Ok(Arc::new(config))
}

#[async_trait]
impl NetworkConfig for MastodonConfig {
    fn is_real(&self) -> bool {
        self.url.is_some() && self.token.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_MASTODON_TIMEOUT_MS", self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.url.is_none() {
            missing.push("MASTODON_URL");
        }
        if self.token.is_none() {
            missing.push("MASTODON_ACCESS_TOKEN");
        }
        missing
    }

    fn api_var(&self) -> &'static str {
        "MASTODON_URL"
    }

    /// The instance's limits, read again with `GET /api/v2/instance` (a harmless public
    /// read): what text and images are checked against. A failed read is not fatal (the
    /// adapter then checks against Mastodon's defaults, and the instance still refuses what
    /// it does not take).
    async fn checked(&self, context: &Context<'_>, detail: String) -> String {
        let (Some(url), Some(token)) = (&self.url, &self.token) else {
            return detail;
        };
        let instance = MastodonAdapter::new(context.http.clone(), url, token.clone());
        let read = tokio::time::timeout(CHECK_TIMEOUT, instance.instance_limits()).await;
        let limits = match read {
            Ok(Ok((max_characters, image_size_limit))) => {
                // A lone URL's length is what the instance reserves per URL.
                let per_url = instance.text_len("https://example.com/");
                format!(
                    "instance limits: {max_characters} characters (a URL counts {per_url}), images up to {}",
                    bytes(image_size_limit)
                )
            }
            Ok(Err(e)) => format!(
                "could not read the instance's limits ({e}): text is checked against {} characters",
                instance.max_text()
            ),
            Err(_) => format!(
                "could not read the instance's limits within {CHECK_TIMEOUT:?}: text is checked against {} characters",
                instance.max_text()
            ),
        };
        format!("{detail}; {limits}")
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        let (Some(url), Some(token)) = (&self.url, &self.token) else {
            return Ok(Arc::new(MastodonAdapter::dry_run(
                context.http.clone(),
                self.url.as_deref().unwrap_or("https://mastodon.example"),
            )));
        };
        // The wait for an image's processing fits each call's budget; a later try resumes it.
        let adapter =
            MastodonAdapter::new(context.http.clone(), url, token.clone()).with_budget(self.budget);
        // The instance's own limits (characters, image size), read once so that text is checked
        // at input time against them; without them, Mastodon's default 500 holds and the
        // instance still refuses what it does not take.
        let read = tokio::time::timeout(
            self.budget.min(Duration::from_secs(3)),
            adapter.instance_limits(),
        )
        .await;
        let failed = match read {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("no answer in time".to_owned()),
        };
        if let Some(why) = failed {
            tracing::warn!(error = %why, "could not read the Mastodon instance's limits; checking text against 500 characters");
        }
        Ok(Arc::new(adapter))
    }
}

/// How long doctor waits for the instance's limits.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// `16 MiB`, `800 KiB` when the size is a whole number of them, else `1234567 bytes`.
fn bytes(n: usize) -> String {
    const MB: usize = 1024 * 1024;
    if n >= MB && n.is_multiple_of(MB) {
        format!("{} MiB", n / MB)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

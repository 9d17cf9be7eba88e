//! Threads' variables: `THREADS_ACCESS_TOKEN` (`_PARAM`), `THREADS_USER_ID` (default `me`),
//! `THREADS_API_URL` (default `https://graph.threads.net`), `POSTONCE_THREADS_TIMEOUT_MS`
//! (10000). Without a token, Threads is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{ThreadsAdapter, DEFAULT_API_URL, DEFAULT_USER};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "Threads",
    confirm_label: "It's on Threads",
    min_gap_var: "POSTONCE_MIN_GAP_S_THREADS",
    secrets: &[("THREADS_ACCESS_TOKEN", "THREADS_ACCESS_TOKEN_PARAM")],
    // A permalink needs the username and the post's shortcode, not its id.
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// The least budget the waits for a container fit in: the container request and one status
/// read, then the publish and the permalink.
pub const MIN_BUDGET: Duration = Duration::from_millis(1000);

/// Threads' configuration.
#[derive(Clone, Debug)]
pub struct ThreadsConfig {
    /// `THREADS_ACCESS_TOKEN`; `None` means the dry run.
    pub token: Option<Secret>,
    /// `THREADS_USER_ID`: the account's Threads user id, or `me` (the token's own).
    pub user: String,
    /// `THREADS_API_URL`, without a trailing `/`.
    pub api_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let user = vars
        .get("THREADS_USER_ID")
        .unwrap_or_else(|| DEFAULT_USER.to_owned());
    if user != DEFAULT_USER && !user.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            "THREADS_USER_ID",
            format!("{user:?} must be `me` or the account's numeric Threads user id"),
        ));
    }
    let config = ThreadsConfig {
        token: vars.get("THREADS_ACCESS_TOKEN").map(Secret::new),
        user,
        api_url: vars.base_url("THREADS_API_URL", DEFAULT_API_URL)?,
        budget: vars.millis("POSTONCE_THREADS_TIMEOUT_MS", 10_000)?,
    };
    // The waits for the container's processing fit inside the budget: it must hold a request
    // and a poll, and fit the time a run has for work.
    if config.is_real() {
        shared.check_waiting_budget(
            "POSTONCE_THREADS_TIMEOUT_MS",
            config.budget,
            MIN_BUDGET,
            "a request and one poll of the container's status",
        )?;
    }
    Ok(Arc::new(config))
}

#[async_trait]
impl NetworkConfig for ThreadsConfig {
    fn is_real(&self) -> bool {
        self.token.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_THREADS_TIMEOUT_MS", self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        if self.token.is_some() {
            Vec::new()
        } else {
            vec!["THREADS_ACCESS_TOKEN"]
        }
    }

    fn api_var(&self) -> &'static str {
        "THREADS_API_URL"
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(match &self.token {
            Some(token) => Arc::new(
                ThreadsAdapter::new(context.http.clone(), &self.api_url, &self.user, token.clone())
                    .with_budget(self.budget),
            ),
            None => Arc::new(ThreadsAdapter::dry_run(
                context.http.clone(),
                &self.api_url,
                &self.user,
            )),
        })
    }
}

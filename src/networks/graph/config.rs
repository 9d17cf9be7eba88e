//! The variables of a network that publishes through Graph containers, read the same way for
//! each: its token (`<NETWORK>_ACCESS_TOKEN`, `_PARAM`), its account (`<NETWORK>_USER_ID`,
//! default `me`), its API base (`<NETWORK>_API_URL`) and its budget
//! (`POSTONCE_<NETWORK>_TIMEOUT_MS`, 10000), named by its [`super::Dialect`]. Without a token
//! it is a dry run.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{GraphAdapter, Meta, DEFAULT_USER};
use crate::networks::{Context, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

/// The least budget the waits for a container fit in: the container request and one status
/// read, then the publish and the permalink.
pub const MIN_BUDGET: Duration = Duration::from_millis(1000);

/// One Graph network's configuration.
pub struct GraphConfig<M: Meta> {
    /// The token; `None` means the dry run.
    pub token: Option<Secret>,
    /// The account's numeric user id, or `me` (the token's own).
    pub user: String,
    /// The API base, without a trailing `/`.
    pub api_url: String,
    pub budget: Duration,
    meta: PhantomData<M>,
}

impl<M: Meta> std::fmt::Debug for GraphConfig<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphConfig")
            .field("network", &M::DIALECT.name)
            .field("token", &self.token)
            .field("user", &self.user)
            .field("api_url", &self.api_url)
            .field("budget", &self.budget)
            .finish()
    }
}

/// Reads and checks the network's variables (the registry's [`crate::networks::Loader`]).
///
/// # Errors
/// The variable that is malformed, or a budget the container's waits do not fit in.
pub fn load<M: Meta>(
    vars: Vars<'_>,
    shared: &Shared,
) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let d = M::DIALECT;
    let user = vars
        .get(d.user_var)
        .unwrap_or_else(|| DEFAULT_USER.to_owned());
    if user != DEFAULT_USER && !user.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            d.user_var,
            format!(
                "{user:?} must be `me` or the account's numeric {} user id",
                d.name
            ),
        ));
    }
    let api_url = vars.base_url(d.api_var, d.default_api_url)?;
    if let Some(problem) = (d.check_account)(&user, &api_url) {
        return Err(bad(d.user_var, problem));
    }
    let config = GraphConfig::<M> {
        token: vars.get(d.token_var).map(Secret::new),
        user,
        api_url,
        budget: vars.millis(d.timeout_var, 10_000)?,
        meta: PhantomData,
    };
    // The waits for the container's processing fit inside the budget: it must hold a request
    // and a poll, and fit the time a run has for work.
    if config.is_real() {
        shared.check_waiting_budget(
            d.timeout_var,
            config.budget,
            MIN_BUDGET,
            "a request and one poll of the container's status",
        )?;
    }
    Ok(Arc::new(config))
}

#[async_trait]
impl<M: Meta> NetworkConfig for GraphConfig<M> {
    fn is_real(&self) -> bool {
        self.token.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        (M::DIALECT.timeout_var, self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        if self.token.is_some() {
            Vec::new()
        } else {
            vec![M::DIALECT.token_var]
        }
    }

    fn api_var(&self) -> &'static str {
        M::DIALECT.api_var
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(match &self.token {
            Some(token) => Arc::new(
                GraphAdapter::<M>::new(
                    context.http.clone(),
                    &self.api_url,
                    &self.user,
                    token.clone(),
                )
                .with_budget(self.budget),
            ),
            None => Arc::new(GraphAdapter::<M>::dry_run(
                context.http.clone(),
                &self.api_url,
                &self.user,
            )),
        })
    }
}

//! X's variables: `X_API_KEY`, `X_API_SECRET`, `X_ACCESS_TOKEN`, `X_ACCESS_TOKEN_SECRET` (each
//! also as `<NAME>_PARAM`), `X_API_URL`, `POSTONCE_X_TIMEOUT_MS`. All four credentials or none
//! (a dry run).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::oauth1::Credentials;
use super::{XAdapter, DEFAULT_API};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "X",
    confirm_label: "It's on X",
    min_gap_var: "POSTONCE_MIN_GAP_S_X",
    secrets: &[
        ("X_API_KEY", "X_API_KEY_PARAM"),
        ("X_API_SECRET", "X_API_SECRET_PARAM"),
        ("X_ACCESS_TOKEN", "X_ACCESS_TOKEN_PARAM"),
        ("X_ACCESS_TOKEN_SECRET", "X_ACCESS_TOKEN_SECRET_PARAM"),
    ],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// The X credential variables, in the order [`Credentials`] holds them.
pub const CREDENTIAL_VARS: [&str; 4] = [
    "X_API_KEY",
    "X_API_SECRET",
    "X_ACCESS_TOKEN",
    "X_ACCESS_TOKEN_SECRET",
];

/// X's configuration.
#[derive(Clone, Debug)]
pub struct XConfig {
    /// OAuth 1.0a user-context credentials; `None` means the dry run.
    pub credentials: Option<Credentials>,
    /// `X_API_URL`, without a trailing `/`.
    pub api_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    Ok(Arc::new(XConfig::read(vars)?))
}

impl XConfig {
    /// Reads X's variables.
    ///
    /// # Errors
    /// Some but not all of the credentials, or a malformed URL or budget.
    pub fn read(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let values = CREDENTIAL_VARS.map(|v| vars.get(v));
        let credentials = match &values {
            [Some(key), Some(secret), Some(token), Some(token_secret)] => Some(Credentials {
                consumer_key: Secret::new(key.as_str()),
                consumer_secret: Secret::new(secret.as_str()),
                token: Secret::new(token.as_str()),
                token_secret: Secret::new(token_secret.as_str()),
            }),
            [None, None, None, None] => None,
            _ => {
                let missing: Vec<&'static str> = CREDENTIAL_VARS
                    .iter()
                    .zip(&values)
                    .filter(|(_, v)| v.is_none())
                    .map(|(var, _)| *var)
                    .collect();
                return Err(bad(
                    missing[0],
                    format!(
                        "X needs all four of {} (or none, for a dry run): {} missing (each may also be given as <NAME>_PARAM, an SSM parameter name)",
                        CREDENTIAL_VARS.join(", "),
                        if missing.len() == 1 {
                            format!("{} is", missing[0])
                        } else {
                            format!("{} are", missing.join(", "))
                        }
                    ),
                ));
            }
        };
        Ok(Self {
            credentials,
            api_url: vars.base_url("X_API_URL", DEFAULT_API)?,
            budget: vars.millis("POSTONCE_X_TIMEOUT_MS", 10_000)?,
        })
    }
}

#[async_trait]
impl NetworkConfig for XConfig {
    fn is_real(&self) -> bool {
        self.credentials.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_X_TIMEOUT_MS", self.budget)
    }

    /// X's budget bounds the quiet period even in a dry run (as it did when X was added).
    fn budget_counts(&self) -> bool {
        true
    }

    fn missing(&self) -> Vec<&'static str> {
        if self.credentials.is_some() {
            Vec::new()
        } else {
            CREDENTIAL_VARS.to_vec()
        }
    }

    fn api_var(&self) -> &'static str {
        "X_API_URL"
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(match &self.credentials {
            Some(credentials) => Arc::new(XAdapter::new(
                context.http.clone(),
                &self.api_url,
                credentials.clone(),
            )),
            None => Arc::new(XAdapter::dry_run(context.http.clone(), &self.api_url)),
        })
    }
}

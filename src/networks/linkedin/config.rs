//! LinkedIn's variables: `LINKEDIN_ACCESS_TOKEN` (`_PARAM`), `LINKEDIN_AUTHOR`,
//! `LINKEDIN_VERSION`, `LINKEDIN_API_URL`, `POSTONCE_LINKEDIN_TIMEOUT_MS`. Without a token,
//! LinkedIn is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::dry_run::DryRun;
use super::rest::LinkedIn;
use super::target::LinkedInTarget;
use super::{Publisher, DEFAULT_VERSION};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, PostError, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "LinkedIn",
    confirm_label: "It's on LinkedIn",
    min_gap_var: "POSTONCE_MIN_GAP_S_LINKEDIN",
    secrets: &[("LINKEDIN_ACCESS_TOKEN", "LINKEDIN_ACCESS_TOKEN_PARAM")],
    url_of: Some(super::post_url),
    load,
    auth: Some(&super::auth::FLOW),
};

/// LinkedIn's configuration.
#[derive(Clone, Debug)]
pub struct LinkedInConfig {
    /// `LINKEDIN_ACCESS_TOKEN` and `LINKEDIN_AUTHOR` (`urn:li:person:…` or
    /// `urn:li:organization:…`); `None` means the dry run.
    pub credentials: Option<(Secret, String)>,
    pub version: String,
    pub api_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    Ok(Arc::new(LinkedInConfig::read(vars)?))
}

impl LinkedInConfig {
    /// Reads LinkedIn's variables.
    ///
    /// # Errors
    /// The first one that is missing or malformed.
    pub fn read(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let version = vars
            .get("LINKEDIN_VERSION")
            .unwrap_or_else(|| DEFAULT_VERSION.into());
        let version_ok = version.len() == 6
            && version.chars().all(|c| c.is_ascii_digit())
            && matches!(
                &version[4..],
                "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "12"
            );
        if !version_ok {
            return Err(bad(
                "LINKEDIN_VERSION",
                format!("{version:?} is not a version: use YYYYMM, e.g. {DEFAULT_VERSION}"),
            ));
        }
        let credentials = match vars.get("LINKEDIN_ACCESS_TOKEN") {
            None => None,
            Some(token) => {
                let author = vars.get("LINKEDIN_AUTHOR").ok_or_else(|| {
                    bad(
                        "LINKEDIN_AUTHOR",
                        "required when LINKEDIN_ACCESS_TOKEN is set: urn:li:person:<id> or urn:li:organization:<id>",
                    )
                })?;
                let id = author
                    .strip_prefix("urn:li:person:")
                    .or_else(|| author.strip_prefix("urn:li:organization:"));
                if !id.is_some_and(|id| {
                    !id.is_empty()
                        && id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                }) {
                    return Err(bad(
                        "LINKEDIN_AUTHOR",
                        format!("{author:?} is not urn:li:person:<id> or urn:li:organization:<id>"),
                    ));
                }
                Some((Secret::new(token), author))
            }
        };
        Ok(Self {
            credentials,
            version,
            api_url: vars.base_url("LINKEDIN_API_URL", "https://api.linkedin.com")?,
            budget: vars.millis("POSTONCE_LINKEDIN_TIMEOUT_MS", 10_000)?,
        })
    }

    /// The REST publisher, or the dry run without a token.
    pub fn publisher(&self, http: &reqwest::Client) -> Arc<dyn Publisher> {
        match &self.credentials {
            Some((token, author)) => Arc::new(LinkedIn::new(
                http.clone(),
                &self.api_url,
                token.clone(),
                author,
                &self.version,
            )),
            None => Arc::new(DryRun::new(&self.api_url, None, &self.version)),
        }
    }
}

#[async_trait]
impl NetworkConfig for LinkedInConfig {
    fn is_real(&self) -> bool {
        self.credentials.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_LINKEDIN_TIMEOUT_MS", self.budget)
    }

    /// The first network's budget always bounds the quiet period (as it did before targets).
    fn budget_counts(&self) -> bool {
        true
    }

    fn missing(&self) -> Vec<&'static str> {
        if self.credentials.is_some() {
            Vec::new()
        } else {
            vec!["LINKEDIN_ACCESS_TOKEN", "LINKEDIN_AUTHOR"]
        }
    }

    fn api_var(&self) -> &'static str {
        "LINKEDIN_API_URL"
    }

    fn explain(&self, error: &PostError) -> Option<String> {
        match error {
            PostError::Rejected { status: 401, .. } | PostError::CredentialRefused { .. } => Some(
                "token rejected (401): re-authorize and update LINKEDIN_ACCESS_TOKEN (tokens last 60 days)".into(),
            ),
            PostError::Rejected { status: 426, .. } => Some(format!(
                "LINKEDIN_VERSION {} is not active (426): update it to a current YYYYMM",
                self.version
            )),
            _ => None,
        }
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(Arc::new(LinkedInTarget::new(self.publisher(context.http))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<LinkedInConfig, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let lookup = |k: &str| map.get(k).cloned();
        LinkedInConfig::read(Vars::new(&lookup))
    }

    #[test]
    fn defaults_are_a_dry_run_on_the_public_api() {
        let c = read(&[]).unwrap();
        assert!(c.credentials.is_none() && !c.is_real());
        assert_eq!(c.api_url, "https://api.linkedin.com");
        assert_eq!(c.version, DEFAULT_VERSION);
        assert_eq!(c.budget, Duration::from_millis(10_000));
    }

    #[test]
    fn a_token_needs_a_well_formed_author() {
        let err = read(&[("LINKEDIN_ACCESS_TOKEN", "t")]).unwrap_err();
        assert_eq!(err.var, "LINKEDIN_AUTHOR");
        let err = read(&[
            ("LINKEDIN_ACCESS_TOKEN", "t"),
            ("LINKEDIN_AUTHOR", "urn:li:company:1"),
        ])
        .unwrap_err();
        assert_eq!(err.var, "LINKEDIN_AUTHOR");
        let ok = read(&[
            ("LINKEDIN_ACCESS_TOKEN", "t"),
            ("LINKEDIN_AUTHOR", "urn:li:organization:5515715"),
        ])
        .unwrap();
        assert!(ok.is_real());
        assert!(!format!("{ok:?}").contains("\"t\""));
    }

    #[test]
    fn the_version_is_yyyymm() {
        for bad_version in ["2026", "202613", "20261a"] {
            let err = read(&[("LINKEDIN_VERSION", bad_version)]).unwrap_err();
            assert_eq!(err.var, "LINKEDIN_VERSION", "{bad_version}");
        }
    }

    #[test]
    fn errors_name_the_variable() {
        crate::config::tests::assert_refused_naming(&[
            (vec![("LINKEDIN_ACCESS_TOKEN", "t")], "LINKEDIN_AUTHOR"),
            (
                vec![("LINKEDIN_ACCESS_TOKEN", "t"), ("LINKEDIN_AUTHOR", "me")],
                "LINKEDIN_AUTHOR",
            ),
            (vec![("LINKEDIN_VERSION", "2024-01")], "LINKEDIN_VERSION"),
            (vec![("LINKEDIN_VERSION", "202413")], "LINKEDIN_VERSION"),
            (
                vec![("POSTONCE_LINKEDIN_TIMEOUT_MS", "60000")],
                "POSTONCE_LINKEDIN_TIMEOUT_MS",
            ),
            (vec![("LINKEDIN_API_URL", "ftp://x")], "LINKEDIN_API_URL"),
        ]);
    }
}

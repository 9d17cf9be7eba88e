//! A Facebook Page's variables: `FACEBOOK_PAGE_TOKEN` (`_PARAM`; a Page access token),
//! `FACEBOOK_PAGE_ID` (the Page's numeric id), `FACEBOOK_API_URL` (default
//! `https://graph.facebook.com`; `v25.0` goes in every path), `POSTONCE_FACEBOOK_TIMEOUT_MS`
//! (10000). Without the token or the Page, Facebook is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use super::page::{parse_page_id, PAGE_VAR, TOKEN_VAR};
use super::{FacebookAdapter, DEFAULT_API_URL};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const API_VAR: &str = "FACEBOOK_API_URL";
pub const TIMEOUT_VAR: &str = "POSTONCE_FACEBOOK_TIMEOUT_MS";

pub const DEFINITION: Definition = Definition {
    label: "the Facebook Page",
    confirm_label: "It's on the Facebook Page",
    min_gap_var: "POSTONCE_MIN_GAP_S_FACEBOOK",
    secrets: &[("FACEBOOK_PAGE_TOKEN", "FACEBOOK_PAGE_TOKEN_PARAM")],
    // `<page id>_<post id>` is enough for a permalink.
    url_of: Some(super::post_url),
    load,
    auth: Some(&super::auth::FLOW),
};

/// The Page's configuration.
#[derive(Clone, Debug)]
pub struct FacebookConfig {
    pub token: Option<Secret>,
    /// The Page's numeric id.
    pub page: Option<String>,
    /// `FACEBOOK_API_URL`, without a trailing `/`.
    pub api_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let token = vars.get(TOKEN_VAR).map(|t| Secret::new(t.trim().to_owned()));
    let page = vars.get(PAGE_VAR).map(|p| parse_page_id(&p)).transpose()?;
    if token.is_some() && page.is_none() {
        return Err(bad(
            PAGE_VAR,
            "is required with FACEBOOK_PAGE_TOKEN: the id of the Page to post to",
        ));
    }
    Ok(Arc::new(FacebookConfig {
        token,
        page,
        api_url: vars.base_url(API_VAR, DEFAULT_API_URL)?,
        budget: vars.millis(TIMEOUT_VAR, 10_000)?,
    }))
}

#[async_trait]
impl NetworkConfig for FacebookConfig {
    fn is_real(&self) -> bool {
        self.token.is_some() && self.page.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        (TIMEOUT_VAR, self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.token.is_none() {
            missing.push(TOKEN_VAR);
        }
        if self.page.is_none() {
            missing.push(PAGE_VAR);
        }
        missing
    }

    fn api_var(&self) -> &'static str {
        API_VAR
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(Arc::new(match (&self.token, self.page.as_deref()) {
            (Some(token), Some(page)) => {
                FacebookAdapter::new(context.http.clone(), &self.api_url, page, token.clone())
            }
            (_, page) => FacebookAdapter::dry_run(context.http.clone(), &self.api_url, page),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_page_id;

    #[test]
    fn page_ids() {
        assert!(parse_page_id("104758283821337").is_ok());
        for bad in ["", "me", "@mypage", "12 34", "https://facebook.com/mypage"] {
            assert_eq!(parse_page_id(bad).expect_err(bad).var, "FACEBOOK_PAGE_ID");
        }
    }
}

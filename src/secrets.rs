//! Secrets by reference: in AWS the template passes the *names* of SSM Parameter Store
//! SecureString parameters (`LINKEDIN_ACCESS_TOKEN_PARAM`, …) and the function reads the values
//! once at cold start. A plain variable (`LINKEDIN_ACCESS_TOKEN`) wins when both are set, so local
//! use needs no AWS at all. The values are returned for [`Config`] to wrap; nothing here logs them.
//!
//! [`Config`]: crate::config::Config

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_ssm::config::timeout::TimeoutConfig;
use aws_sdk_ssm::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ssm::error::DisplayErrorContext;

use crate::vars::{ConfigError, Vars};

/// The core's variables that may be given by reference, each with its `<NAME>_PARAM` variable
/// (spelled out: the template check, scripts/check_template.py, reads the names from the
/// source). Each network lists its own in its folder ([`crate::networks::Definition`]).
const CORE_OWN: [(&str, &str); 3] = [
    ("TELEGRAM_BOT_TOKEN", "TELEGRAM_BOT_TOKEN_PARAM"),
    ("TELEGRAM_WEBHOOK_SECRET", "TELEGRAM_WEBHOOK_SECRET_PARAM"),
    ("POSTONCE_WEBHOOK_SECRET", "POSTONCE_WEBHOOK_SECRET_PARAM"),
];

/// The core's variables that may be given by reference: its own and the stores'
/// ([`crate::stores::BY_REFERENCE`]).
pub fn core_by_reference() -> impl Iterator<Item = (&'static str, &'static str)> {
    CORE_OWN.into_iter().chain(crate::stores::BY_REFERENCE)
}

/// Every variable that may be given by reference, with its `<NAME>_PARAM` variable: the
/// core's and every network's.
pub fn by_reference() -> impl Iterator<Item = (&'static str, &'static str)> {
    core_by_reference().chain(crate::networks::secrets())
}

/// Reads every `<NAME>_PARAM` whose plain variable is unset, in one `GetParameters` call.
/// Returns `NAME → value`. No reference, no AWS call.
///
/// # Errors
/// A [`ConfigError`] naming the `_PARAM` variable whose parameter is missing or unreadable.
pub async fn resolve(
    get: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>, ConfigError> {
    resolve_these(get, by_reference()).await
}

/// As [`resolve`], for the variables of `list` only (an `auth` flow's app credentials).
///
/// # Errors
/// As [`resolve`].
pub async fn resolve_these(
    get: impl Fn(&str) -> Option<String>,
    list: impl Iterator<Item = (&'static str, &'static str)>,
) -> Result<HashMap<String, String>, ConfigError> {
    let vars = Vars::new(&get);
    // (the `_PARAM` variable, the parameter's name, the plain variable)
    let wanted: Vec<(&'static str, String, &'static str)> = list
        .filter(|(var, _)| vars.get(var).is_none())
        .filter_map(|(var, param)| vars.get(param).map(|name| (param, name, var)))
        .collect();
    if wanted.is_empty() {
        return Ok(HashMap::new());
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(crate::aws_http::client())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(8))
                .build(),
        );
    if let Some(region) = vars.get("AWS_REGION") {
        loader = loader.region(Region::new(region));
    }
    if let (Some(id), Some(secret)) = (
        vars.get("AWS_ACCESS_KEY_ID"),
        vars.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        loader = loader.credentials_provider(Credentials::new(
            id,
            secret,
            vars.get("AWS_SESSION_TOKEN"),
            None,
            "postonce-env",
        ));
    }
    let shared = loader.load().await;
    let mut builder = aws_sdk_ssm::config::Builder::from(&shared);
    if let Some(endpoint) = vars.get("AWS_ENDPOINT_URL_SSM") {
        builder = builder.endpoint_url(endpoint);
    }
    let client = aws_sdk_ssm::Client::from_conf(builder.build());
    // GetParameters takes at most 10 names per call.
    let mut found: HashMap<String, String> = HashMap::new();
    for chunk in wanted.chunks(10) {
        let names: Vec<String> = chunk.iter().map(|(_, n, _)| n.clone()).collect();
        let call = client
            .get_parameters()
            .set_names(Some(names))
            .with_decryption(true)
            .send();
        let out = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .map_err(|_| ConfigError {
                var: chunk[0].0,
                problem: "SSM did not answer GetParameters within 10 s".into(),
            })?
            .map_err(|e| ConfigError {
                var: chunk[0].0,
                problem: format!(
                    "could not read SSM parameters ({}); the function's role needs ssm:GetParameters on them",
                    DisplayErrorContext(e)
                ),
            })?;
        for p in out.parameters() {
            if let (Some(name), Some(value)) = (p.name(), p.value()) {
                found.insert(name.to_owned(), value.to_owned());
            }
        }
    }
    let mut resolved = HashMap::new();
    for (param, name, var) in &wanted {
        match found.get(name.as_str()) {
            Some(value) => {
                resolved.insert((*var).to_owned(), value.clone());
            }
            None => {
                return Err(ConfigError {
                    var: param,
                    problem: format!(
                        "SSM parameter {name:?} does not exist (create it as a SecureString)"
                    ),
                })
            }
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_has_its_own_param_variable() {
        let mut seen = std::collections::HashSet::new();
        for (var, param) in by_reference() {
            assert_eq!(param, format!("{var}_PARAM"));
            assert!(seen.insert(param), "{param} twice");
        }
    }

    #[tokio::test]
    async fn no_reference_means_no_aws_call() {
        // X_API_KEY is given plainly, so its _PARAM is not read; nothing else is referenced.
        let vars = [
            ("X_API_KEY", "k"),
            ("X_API_KEY_PARAM", "/postonce/x-api-key"),
        ];
        let got = resolve(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .await
        .unwrap();
        assert!(got.is_empty());
    }
}

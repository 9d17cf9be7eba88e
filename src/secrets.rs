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

use crate::config::ConfigError;

/// Variables that may be given by reference as `<NAME>_PARAM`.
pub const BY_REFERENCE: [&str; 12] = [
    "LINKEDIN_ACCESS_TOKEN",
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_WEBHOOK_SECRET",
    "POSTONCE_WEBHOOK_SECRET",
    "REDIS_URL",
    "X_API_KEY",
    "X_API_SECRET",
    "X_ACCESS_TOKEN",
    "X_ACCESS_TOKEN_SECRET",
    "MASTODON_ACCESS_TOKEN",
    "BLUESKY_APP_PASSWORD",
    "DATABASE_URL",
];

/// The `<NAME>_PARAM` variable of each [`BY_REFERENCE`] name (spelled out: the template check,
/// scripts/check_template.py, reads the names from this file).
fn param_var(var: &str) -> &'static str {
    match var {
        "LINKEDIN_ACCESS_TOKEN" => "LINKEDIN_ACCESS_TOKEN_PARAM",
        "TELEGRAM_BOT_TOKEN" => "TELEGRAM_BOT_TOKEN_PARAM",
        "TELEGRAM_WEBHOOK_SECRET" => "TELEGRAM_WEBHOOK_SECRET_PARAM",
        "POSTONCE_WEBHOOK_SECRET" => "POSTONCE_WEBHOOK_SECRET_PARAM",
        "X_API_KEY" => "X_API_KEY_PARAM",
        "X_API_SECRET" => "X_API_SECRET_PARAM",
        "X_ACCESS_TOKEN" => "X_ACCESS_TOKEN_PARAM",
        "X_ACCESS_TOKEN_SECRET" => "X_ACCESS_TOKEN_SECRET_PARAM",
        "MASTODON_ACCESS_TOKEN" => "MASTODON_ACCESS_TOKEN_PARAM",
        "BLUESKY_APP_PASSWORD" => "BLUESKY_APP_PASSWORD_PARAM",
        "DATABASE_URL" => "DATABASE_URL_PARAM",
        _ => "REDIS_URL_PARAM",
    }
}

/// Reads every `<NAME>_PARAM` whose plain variable is unset, in one `GetParameters` call.
/// Returns `NAME → value`. No reference, no AWS call.
///
/// # Errors
/// A [`ConfigError`] naming the `_PARAM` variable whose parameter is missing or unreadable.
pub async fn resolve(
    get: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>, ConfigError> {
    let get = |name: &str| {
        get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let wanted: Vec<(&str, String)> = BY_REFERENCE
        .iter()
        .filter(|var| get(var).is_none())
        .filter_map(|var| get(param_var(var)).map(|name| (*var, name)))
        .collect();
    if wanted.is_empty() {
        return Ok(HashMap::new());
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).timeout_config(
        TimeoutConfig::builder()
            .operation_timeout(Duration::from_secs(8))
            .build(),
    );
    if let Some(region) = get("AWS_REGION") {
        loader = loader.region(Region::new(region));
    }
    if let (Some(id), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
        loader = loader.credentials_provider(Credentials::new(
            id,
            secret,
            get("AWS_SESSION_TOKEN"),
            None,
            "postonce-env",
        ));
    }
    let shared = loader.load().await;
    let mut builder = aws_sdk_ssm::config::Builder::from(&shared);
    if let Some(endpoint) = get("AWS_ENDPOINT_URL_SSM") {
        builder = builder.endpoint_url(endpoint);
    }
    let client = aws_sdk_ssm::Client::from_conf(builder.build());
    // GetParameters takes at most 10 names per call.
    let mut found: HashMap<String, String> = HashMap::new();
    for chunk in wanted.chunks(10) {
        let names: Vec<String> = chunk.iter().map(|(_, n)| n.clone()).collect();
        let call = client
            .get_parameters()
            .set_names(Some(names))
            .with_decryption(true)
            .send();
        let out = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .map_err(|_| ConfigError {
                var: param_var(chunk[0].0),
                problem: "SSM did not answer GetParameters within 10 s".into(),
            })?
            .map_err(|e| ConfigError {
                var: param_var(chunk[0].0),
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
    for (var, name) in &wanted {
        match found.get(name.as_str()) {
            Some(value) => {
                resolved.insert((*var).to_owned(), value.clone());
            }
            None => {
                return Err(ConfigError {
                    var: param_var(var),
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
        for var in BY_REFERENCE {
            let param = param_var(var);
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

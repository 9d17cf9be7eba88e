//! DynamoDB's configuration: `POSTONCE_TABLE` (the records live in that table when it is set),
//! the AWS region, endpoint and static credentials, and `POSTONCE_DYNAMODB_TIMEOUT_MS` (each
//! attempt's budget, and the record store's budget unless PostgreSQL holds the records).

use std::time::Duration;

use crate::vars::{bad, ConfigError, Secret, Vars};

#[derive(Clone, Debug)]
pub struct DynamoConfig {
    /// The table; `None`: the records live elsewhere.
    pub table: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    /// Static AWS credentials when both key variables are given: the access key id, the secret
    /// and the session token, which Lambda's temporary credentials carry (`AWS_SESSION_TOKEN`)
    /// and without which their signature is refused.
    pub credentials: Option<(String, Secret, Option<Secret>)>,
    pub budget: Duration,
}

impl DynamoConfig {
    /// # Errors
    /// A malformed table name or budget, by name.
    pub fn load(vars: Vars<'_>) -> Result<Self, ConfigError> {
        let table = vars.get("POSTONCE_TABLE");
        if let Some(t) = &table {
            let ok = (3..=255).contains(&t.len())
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !ok {
                return Err(bad(
                    "POSTONCE_TABLE",
                    "a DynamoDB table name has 3-255 characters of a-z, A-Z, 0-9, _ - .",
                ));
            }
        }
        let credentials = match (
            vars.get("AWS_ACCESS_KEY_ID"),
            vars.get("AWS_SECRET_ACCESS_KEY"),
        ) {
            (Some(id), Some(secret)) => Some((
                id,
                Secret::new(secret),
                vars.get("AWS_SESSION_TOKEN").map(Secret::new),
            )),
            _ => None,
        };
        Ok(Self {
            table,
            region: vars
                .get("AWS_REGION")
                .or_else(|| vars.get("AWS_DEFAULT_REGION")),
            endpoint: vars
                .get("AWS_ENDPOINT_URL_DYNAMODB")
                .or_else(|| vars.get("AWS_ENDPOINT_URL")),
            credentials,
            budget: vars.millis("POSTONCE_DYNAMODB_TIMEOUT_MS", 8_000)?,
        })
    }
}

/// Doctor's fix when the table cannot be read.
pub fn records_fix(error: &str, table: &str) -> String {
    format!("{error}; create it with the SAM template, or `postonce table create` for a local server (table {table})")
}

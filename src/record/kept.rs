//! Secrets kept in the record store: adapters' sessions and their names.

use std::sync::Arc;

use async_trait::async_trait;

use super::{RecordStore, StoreError};
use crate::vars::Secret;

/// A record store as the place where adapters keep their sessions
/// ([`crate::networks::SessionStore`]).
pub struct KeptSecrets(pub Arc<dyn RecordStore>);

#[async_trait]
impl crate::networks::SessionStore for KeptSecrets {
    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, String> {
        self.0.load_secret(name).await.map_err(|e| e.to_string())
    }

    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), String> {
        self.0
            .save_secret(name, value)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Where a secret an adapter keeps lives (`secret:<name>`); `name` is `[a-z0-9_-]{1,32}`.
pub fn secret_name(name: &str) -> Result<String, StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(format!("secret:{name}"))
    } else {
        Err(StoreError(format!(
            "a kept secret's name must be 1 to 32 of a-z, 0-9, - and _: {name:?}"
        )))
    }
}

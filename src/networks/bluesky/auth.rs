//! `postonce auth bluesky`: no OAuth (README "Getting credentials", Bluesky): the handle (or DID)
//! and an app password (Settings → Privacy and security → App passwords), read without echo,
//! checked with `createSession` on the PDS (`BLUESKY_PDS_URL`), and stored. App passwords do not
//! expire; the session postonce keeps is its own (`secret:bluesky`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::json;

use crate::networks::oauth::{call, text};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};

/// The flow, as the registry holds it.
pub static FLOW: BlueskyAuth = BlueskyAuth;

pub struct BlueskyAuth;

#[async_trait(?Send)]
impl AuthFlow for BlueskyAuth {
    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let pds = cx.var_or("BLUESKY_PDS_URL", super::DEFAULT_PDS);
        let identifier = cx.ask("Bluesky handle (or DID): ")?;
        if identifier.is_empty() || identifier.contains(char::is_whitespace) {
            return Err(AuthError::new(
                "a handle is one word, e.g. alice.bsky.social; nothing stored",
            ));
        }
        cx.say("Create an app password in Bluesky: Settings → Privacy and security → App passwords.");
        let password = cx.ask_secret("App password (not shown): ")?;
        let session = call(
            cx.http
                .post(format!("{pds}/xrpc/com.atproto.server.createSession"))
                .json(&json!({"identifier": identifier, "password": password.expose()})),
            "Bluesky's createSession (the handle and app password)",
        )
        .await?;
        let did = text(&session, "did")
            .ok_or_else(|| AuthError::new("Bluesky's answer names no account (did); nothing stored"))?;
        let handle = text(&session, "handle").unwrap_or_else(|| identifier.clone());
        cx.say(&format!("Signed in as @{handle} ({did})."));
        let mut settings = BTreeMap::new();
        settings.insert("BLUESKY_IDENTIFIER".to_owned(), identifier);
        if cx.vars.get("BLUESKY_PDS_URL").is_some() {
            settings.insert("BLUESKY_PDS_URL".to_owned(), pds);
        }
        Ok(Some(Credential {
            account: format!("@{handle} ({did})"),
            scopes: Vec::new(),
            obtained_at: crate::record::now_s(),
            expires_at: None,
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [("BLUESKY_APP_PASSWORD".to_owned(), password)].into(),
            settings,
            kept: BTreeMap::new(),
        }))
    }
}

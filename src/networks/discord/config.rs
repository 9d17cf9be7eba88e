//! Discord's variables: `DISCORD_BOT_TOKEN` (`_PARAM`), `DISCORD_CHANNEL_ID` (the channel's
//! snowflake), `DISCORD_API_URL`, `DISCORD_CROSSPOST` (`1`: publish to the announcement
//! channel's followers), `DISCORD_NONCE_WINDOW_S` (how long Discord is taken to remember a
//! nonce), `POSTONCE_DISCORD_TIMEOUT_MS`. Without the token or the channel, Discord is a dry
//! run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::wire::is_snowflake;
use super::{DiscordAdapter, DEFAULT_API, NONCE_WINDOW};
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{bad, ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "Discord",
    confirm_label: "It's on Discord",
    min_gap_var: "POSTONCE_MIN_GAP_S_DISCORD",
    secrets: &[("DISCORD_BOT_TOKEN", "DISCORD_BOT_TOKEN_PARAM")],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// Discord's configuration.
#[derive(Clone, Debug)]
pub struct DiscordConfig {
    pub token: Option<Secret>,
    /// The channel, checked by [`parse_channel_id`].
    pub channel: Option<String>,
    /// `DISCORD_API_URL`, without a trailing `/`.
    pub api_url: String,
    pub crosspost: bool,
    pub nonce_window: Duration,
    pub budget: Duration,
}

/// Checks a `DISCORD_CHANNEL_ID`: the channel's id (a snowflake: 17 to 20 digits; Developer
/// Mode → right-click the channel → Copy Channel ID).
///
/// # Errors
/// A [`ConfigError`] naming `DISCORD_CHANNEL_ID`.
pub fn parse_channel_id(value: &str) -> Result<String, ConfigError> {
    let v = value.trim();
    if is_snowflake(v) {
        Ok(v.to_owned())
    } else {
        Err(bad(
            "DISCORD_CHANNEL_ID",
            format!("{value:?} is not a channel id (17 to 20 digits: turn on Developer Mode, right-click the channel, Copy Channel ID)"),
        ))
    }
}

fn load(vars: Vars<'_>, _shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    let token = vars
        .get("DISCORD_BOT_TOKEN")
        .map(|t| Secret::new(t.trim().to_owned()));
    let channel = vars
        .get("DISCORD_CHANNEL_ID")
        .map(|c| parse_channel_id(&c))
        .transpose()?;
    if token.is_some() && channel.is_none() {
        return Err(bad(
            "DISCORD_CHANNEL_ID",
            "is required with DISCORD_BOT_TOKEN: the id of the channel to post to",
        ));
    }
    let crosspost = match vars.get("DISCORD_CROSSPOST").as_deref().map(str::trim) {
        None | Some("" | "0") => false,
        Some("1") => true,
        Some(other) => {
            return Err(bad(
                "DISCORD_CROSSPOST",
                format!("{other:?} is neither 1 (publish each message to the announcement channel's followers) nor 0"),
            ))
        }
    };
    let nonce_window = match vars.get("DISCORD_NONCE_WINDOW_S") {
        None => NONCE_WINDOW,
        Some(_) => vars.seconds("DISCORD_NONCE_WINDOW_S", NONCE_WINDOW.as_secs())?,
    };
    Ok(Arc::new(DiscordConfig {
        token,
        channel,
        api_url: vars.base_url("DISCORD_API_URL", DEFAULT_API)?,
        crosspost,
        nonce_window,
        budget: vars.millis("POSTONCE_DISCORD_TIMEOUT_MS", 10_000)?,
    }))
}

#[async_trait]
impl NetworkConfig for DiscordConfig {
    fn is_real(&self) -> bool {
        self.token.is_some() && self.channel.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_DISCORD_TIMEOUT_MS", self.budget)
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.token.is_none() {
            missing.push("DISCORD_BOT_TOKEN");
        }
        if self.channel.is_none() {
            missing.push("DISCORD_CHANNEL_ID");
        }
        missing
    }

    fn api_var(&self) -> &'static str {
        "DISCORD_API_URL"
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        let adapter = match (&self.token, self.channel.as_deref()) {
            (Some(token), Some(channel)) => DiscordAdapter::new(
                context.http.clone(),
                &self.api_url,
                token.clone(),
                channel,
                self.budget,
            ),
            (_, channel) => DiscordAdapter::dry_run(context.http.clone(), &self.api_url, channel),
        };
        Ok(Arc::new(
            adapter
                .with_crosspost(self.crosspost)
                .with_nonce_window(self.nonce_window),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids() {
        assert!(parse_channel_id("1181234567890123456").is_ok());
        for bad in ["", "#general", "123", "12345678901234567890123", "-1001234567890"] {
            let e = parse_channel_id(bad).expect_err(bad);
            assert_eq!(e.var, "DISCORD_CHANNEL_ID");
        }
    }
}

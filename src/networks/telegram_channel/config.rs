//! The Telegram channel's variables: `TELEGRAM_CHANNEL_ID` (`@name` or `-100…`). It posts with
//! the report bot (`TELEGRAM_BOT_TOKEN`, `TELEGRAM_API_URL`) under the Bot API's budget
//! (`POSTONCE_TELEGRAM_TIMEOUT_MS`), which the core reads; without the bot or the channel,
//! it is a dry run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::TelegramChannel;
use crate::networks::{Context, Definition, NetworkAdapter, NetworkConfig, Shared};
use crate::vars::{ConfigError, Secret, Vars};

pub const DEFINITION: Definition = Definition {
    label: "the Telegram channel",
    confirm_label: "It's in the channel",
    min_gap_var: "POSTONCE_MIN_GAP_S_TELEGRAM",
    // The bot token is the core's (the reports'); the channel id is no secret.
    secrets: &[],
    url_of: None,
    load,
    auth: Some(&super::auth::FLOW),
};

/// The channel's configuration.
#[derive(Clone, Debug)]
pub struct ChannelConfig {
    /// The channel, checked by [`parse_channel_id`].
    pub channel: Option<String>,
    pub bot: Option<Secret>,
    pub api_url: String,
    pub budget: Duration,
}

fn load(vars: Vars<'_>, shared: &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError> {
    Ok(Arc::new(ChannelConfig {
        channel: vars
            .get("TELEGRAM_CHANNEL_ID")
            .map(|v| parse_channel_id(&v))
            .transpose()?,
        bot: shared.telegram_bot.clone(),
        api_url: shared.telegram_api_url.clone(),
        budget: shared.telegram_budget,
    }))
}

/// Checks a `TELEGRAM_CHANNEL_ID`: `@channelusername` (5–32 of `A-Za-z0-9_`) or a channel's
/// numeric id `-100…`.
///
/// # Errors
/// A [`ConfigError`] naming `TELEGRAM_CHANNEL_ID` and the two accepted forms.
pub fn parse_channel_id(value: &str) -> Result<String, ConfigError> {
    let v = value.trim();
    let username_ok = v.strip_prefix('@').is_some_and(|name| {
        (5..=32).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    let id_ok = v
        .strip_prefix("-100")
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    if username_ok || id_ok {
        Ok(v.to_owned())
    } else {
        Err(ConfigError {
            var: "TELEGRAM_CHANNEL_ID",
            problem: format!(
                "{value:?} is neither @channelusername (5-32 letters, digits, _) nor a channel id -100…"
            ),
        })
    }
}

#[async_trait]
impl NetworkConfig for ChannelConfig {
    fn is_real(&self) -> bool {
        self.bot.is_some() && self.channel.is_some()
    }

    fn budget(&self) -> (&'static str, Duration) {
        ("POSTONCE_TELEGRAM_TIMEOUT_MS", self.budget)
    }

    /// The Bot API's budget is the reports' too: it always counts.
    fn budget_counts(&self) -> bool {
        true
    }

    /// `TELEGRAM_BOT_TOKEN` is only taken together with `TELEGRAM_CHAT_ID`.
    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.bot.is_none() {
            missing.extend(["TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID"]);
        }
        if self.channel.is_none() {
            missing.push("TELEGRAM_CHANNEL_ID");
        }
        missing
    }

    fn api_var(&self) -> &'static str {
        "TELEGRAM_API_URL"
    }

    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String> {
        Ok(match (&self.bot, self.channel.as_deref()) {
            (Some(bot), Some(channel)) => Arc::new(
                TelegramChannel::new(
                    context.http.clone(),
                    &self.api_url,
                    bot.clone(),
                    channel,
                    self.budget,
                )
                .map_err(|e| e.to_string())?,
            ),
            (_, channel) => Arc::new(TelegramChannel::dry_run(
                context.http.clone(),
                &self.api_url,
                channel,
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids() {
        assert!(parse_channel_id("@my_channel").is_ok());
        assert!(parse_channel_id("-1001234567890").is_ok());
        for bad in [
            "",
            "@",
            "@abc",
            "mychannel",
            "-12345",
            "-100",
            "@bad-name",
            "123",
        ] {
            let e = parse_channel_id(bad).expect_err(bad);
            assert_eq!(e.var, "TELEGRAM_CHANNEL_ID");
        }
    }
}

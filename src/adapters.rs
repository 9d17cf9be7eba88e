//! One [`NetworkAdapter`] per network this version posts to (DESIGN.md "Targets"), built once
//! per process from the [`Config`]. Every supported network always gets its adapter, whatever
//! `POSTONCE_TARGETS` says (a draft may name its own targets): the real one when its credentials
//! are configured, else its dry run, which sends nothing and logs the exact requests.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{Config, X_CREDENTIAL_VARS};
use crate::publish::bluesky::{BlueskyAdapter, BlueskyDryRun};
use crate::publish::linkedin_target::LinkedInTarget;
use crate::publish::mastodon::{MastodonAdapter, MastodonDryRun};
use crate::publish::network::{Network, NetworkAdapter};
use crate::publish::telegram_channel::{DryRunChannel, TelegramChannel};
use crate::publish::x::{XAdapter, XDryRun};
use crate::publish::Publisher;
use crate::record::RecordStore;

/// The adapters of `linkedin`, `x` and `telegram` (the channel). `linkedin` is the process's
/// LinkedIn publisher (the REST adapter or its dry run, as [`crate::app::App::build`] chose);
/// `http` the shared client ([`crate::app::http_client`]).
///
/// # Errors
/// A message naming the variable when an adapter cannot be set up (a malformed
/// `TELEGRAM_CHANNEL_ID`, which [`Config`] has already refused).
/// `sessions` is the real record store, where an adapter that logs in (Bluesky) keeps its
/// session between processes; `None` keeps it for the process only.
pub async fn build(
    config: &Config,
    http: &reqwest::Client,
    linkedin: Arc<dyn Publisher>,
    sessions: Option<Arc<dyn RecordStore>>,
) -> Result<BTreeMap<Network, Arc<dyn NetworkAdapter>>, String> {
    let mut adapters: BTreeMap<Network, Arc<dyn NetworkAdapter>> = BTreeMap::new();
    adapters.insert(Network::Linkedin, Arc::new(LinkedInTarget::new(linkedin)));

    let x: Arc<dyn NetworkAdapter> = match &config.x {
        Some(credentials) => Arc::new(XAdapter::new(
            http.clone(),
            &config.x_api_url,
            credentials.clone(),
        )),
        None => Arc::new(XDryRun::new(&config.x_api_url)),
    };
    adapters.insert(Network::X, x);

    let channel: Arc<dyn NetworkAdapter> =
        match (&config.telegram, config.telegram_channel_id.as_deref()) {
            (Some(bot), Some(channel)) => Arc::new(
                TelegramChannel::new(
                    http.clone(),
                    &config.telegram_api_url,
                    bot.bot_token.clone(),
                    channel,
                    config.timeouts.telegram,
                )
                .map_err(|e| e.to_string())?,
            ),
            (_, channel) => Arc::new(DryRunChannel::new(&config.telegram_api_url, channel)),
        };
    adapters.insert(Network::Telegram, channel);

    let mastodon: Arc<dyn NetworkAdapter> = match (&config.mastodon_url, &config.mastodon_token) {
        (Some(url), Some(token)) => {
            // The wait for an image's processing fits each call's budget; a later try
            // resumes it (Config checked the budget fits the run).
            let adapter = MastodonAdapter::new(http.clone(), url, token.clone())
                .with_budget(config.timeouts.mastodon);
            // The instance's own limits (characters, image size), read once so that text is
            // checked at input time against them; without them, Mastodon's default 500 holds
            // and the instance still refuses what it does not take.
            let read = tokio::time::timeout(
                config
                    .timeouts
                    .mastodon
                    .min(std::time::Duration::from_secs(3)),
                adapter.instance_limits(),
            )
            .await;
            let failed = match read {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("no answer in time".to_owned()),
            };
            if let Some(why) = failed {
                tracing::warn!(error = %why, "could not read the Mastodon instance's limits; checking text against 500 characters");
            }
            Arc::new(adapter)
        }
        (url, _) => Arc::new(MastodonDryRun::new(
            url.as_deref().unwrap_or("https://mastodon.example"),
        )),
    };
    adapters.insert(Network::Mastodon, mastodon);

    let bluesky: Arc<dyn NetworkAdapter> = match &config.bluesky {
        Some((identifier, password)) => {
            let adapter = BlueskyAdapter::new(
                http.clone(),
                &config.bluesky_pds_url,
                identifier,
                password.clone(),
            );
            Arc::new(match sessions {
                Some(store) => adapter.with_session_store(store, config.timeouts.dynamodb),
                None => adapter,
            })
        }
        None => Arc::new(BlueskyDryRun::new(&config.bluesky_pds_url, None)),
    };
    adapters.insert(Network::Bluesky, bluesky);
    Ok(adapters)
}

/// The variables still to set for `network` to post for real; empty when it is configured.
/// (The channel posts with the report bot's token, and `TELEGRAM_BOT_TOKEN` is only taken
/// together with `TELEGRAM_CHAT_ID`.)
pub fn missing_credentials(config: &Config, network: Network) -> Vec<&'static str> {
    match network {
        Network::Linkedin if config.linkedin.is_none() => {
            vec!["LINKEDIN_ACCESS_TOKEN", "LINKEDIN_AUTHOR"]
        }
        Network::X if config.x.is_none() => X_CREDENTIAL_VARS.to_vec(),
        Network::Telegram => {
            let mut missing = Vec::new();
            if config.telegram.is_none() {
                missing.extend(["TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID"]);
            }
            if config.telegram_channel_id.is_none() {
                missing.push("TELEGRAM_CHANNEL_ID");
            }
            missing
        }
        Network::Mastodon => {
            let mut missing = Vec::new();
            if config.mastodon_url.is_none() {
                missing.push("MASTODON_URL");
            }
            if config.mastodon_token.is_none() {
                missing.push("MASTODON_ACCESS_TOKEN");
            }
            missing
        }
        Network::Bluesky if config.bluesky.is_none() => {
            vec!["BLUESKY_IDENTIFIER", "BLUESKY_APP_PASSWORD"]
        }
        _ => Vec::new(),
    }
}

/// `"dry run: set A, B and C to post for real"` for a network without its credentials.
pub fn dry_run_note(config: &Config, network: Network) -> String {
    let missing = missing_credentials(config, network);
    let names = match missing.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    };
    format!(
        "dry run: set {names} to post to {} for real",
        network.label()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    use crate::publish::dry_run::DryRun;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned()).expect("valid")
    }

    async fn adapters(c: &Config) -> BTreeMap<Network, Arc<dyn NetworkAdapter>> {
        let linkedin: Arc<dyn Publisher> =
            Arc::new(DryRun::new(&c.linkedin_api_url, None, &c.linkedin_version));
        build(c, &crate::app::http_client().unwrap(), linkedin, None)
            .await
            .unwrap()
    }

    const X_VARS: [(&str, &str); 4] = [
        ("X_API_KEY", "k"),
        ("X_API_SECRET", "s"),
        ("X_ACCESS_TOKEN", "t"),
        ("X_ACCESS_TOKEN_SECRET", "ts"),
    ];

    #[tokio::test]
    async fn every_supported_network_gets_an_adapter_dry_without_credentials() {
        let c = config(&[]);
        let a = adapters(&c).await;
        assert_eq!(
            a.keys().copied().collect::<Vec<_>>(),
            vec![
                Network::Linkedin,
                Network::X,
                Network::Telegram,
                Network::Mastodon,
                Network::Bluesky
            ]
        );
        for (network, adapter) in &a {
            assert_eq!(adapter.network(), *network);
            assert!(adapter.is_dry_run(), "{network:?}");
        }
        assert_eq!(
            dry_run_note(&c, Network::X),
            "dry run: set X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET to post to X for real"
        );
        assert_eq!(
            dry_run_note(&c, Network::Telegram),
            "dry run: set TELEGRAM_BOT_TOKEN, TELEGRAM_CHAT_ID and TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
        );
    }

    #[tokio::test]
    async fn configured_networks_post_for_real() {
        let mut pairs = X_VARS.to_vec();
        pairs.extend([
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_CHAT_ID", "42"),
            ("TELEGRAM_CHANNEL_ID", "@postonce_chan"),
        ]);
        let c = config(&pairs);
        let a = adapters(&c).await;
        assert!(!a[&Network::X].is_dry_run());
        assert!(!a[&Network::Telegram].is_dry_run());
        assert!(missing_credentials(&c, Network::X).is_empty());
        assert!(missing_credentials(&c, Network::Telegram).is_empty());
        // The LinkedIn target follows the publisher it wraps (a dry run here).
        assert!(a[&Network::Linkedin].is_dry_run());
        assert_eq!(
            missing_credentials(&c, Network::Linkedin),
            ["LINKEDIN_ACCESS_TOKEN", "LINKEDIN_AUTHOR"]
        );
    }

    #[tokio::test]
    async fn the_channel_needs_both_the_bot_token_and_the_channel_id() {
        let c = config(&[("TELEGRAM_CHANNEL_ID", "-1001234567890")]);
        assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
        assert_eq!(
            missing_credentials(&c, Network::Telegram),
            ["TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID"]
        );
        let c = config(&[
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_CHAT_ID", "42"),
        ]);
        assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
        assert_eq!(
            dry_run_note(&c, Network::Telegram),
            "dry run: set TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
        );
    }
}

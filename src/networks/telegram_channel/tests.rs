//! The channel's configuration, read through the whole configuration as the process reads it.

use super::config::ChannelConfig;
use crate::config::tests::{adapters, load, note};
use crate::config::Config;
use crate::networks::Network;

fn channel(c: &Config) -> Option<String> {
    c.network::<ChannelConfig>(Network::Telegram)
        .and_then(|ch| ch.channel.clone())
}

#[test]
fn the_channel_id_is_checked() {
    assert!(channel(&load(&[]).unwrap()).is_none());
    for ok in ["@postonce_chan", "-1001234567890"] {
        assert_eq!(
            channel(&load(&[("TELEGRAM_CHANNEL_ID", ok)]).unwrap()).as_deref(),
            Some(ok)
        );
    }
    for bad in ["postonce_chan", "@abc", "1234567890", "-100"] {
        let err = load(&[("TELEGRAM_CHANNEL_ID", bad)]).unwrap_err();
        assert_eq!(err.var, "TELEGRAM_CHANNEL_ID", "{bad}");
    }
}

#[tokio::test]
async fn the_channel_needs_both_the_bot_token_and_the_channel_id() {
    let c = load(&[("TELEGRAM_CHANNEL_ID", "-1001234567890")]).unwrap();
    assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
    assert_eq!(
        c.networks[&Network::Telegram].missing(),
        ["TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID"]
    );
    let c = load(&[
        ("TELEGRAM_BOT_TOKEN", "123:abc"),
        ("TELEGRAM_CHAT_ID", "42"),
    ])
    .unwrap();
    assert!(adapters(&c).await[&Network::Telegram].is_dry_run());
    assert_eq!(
        note(&c, Network::Telegram),
        "dry run: set TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
    );
}

#[test]
fn errors_name_the_variable() {
    crate::config::tests::assert_refused_naming(&[
        (
            vec![("TELEGRAM_CHANNEL_ID", "mychannel")],
            "TELEGRAM_CHANNEL_ID",
        ),
    ]);
}

//! `postonce auth discord`: the bot token (Developer Portal → the application → Bot → Reset
//! Token), read without echo and checked with `GET /users/@me`; then the channel: the one
//! `DISCORD_CHANNEL_ID` names, or one picked from the text and announcement channels of the
//! servers the bot is in; checked with `GET /channels/{id}` (README "Getting credentials",
//! Discord). The token does not expire; it is stored with the channel. Nothing prints it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use super::wire::{is_snowflake, PERMISSIONS};
use super::DEFAULT_API;
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::networks::oauth::{call, text};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: DiscordAuth = DiscordAuth;

pub struct DiscordAuth;

/// The servers whose channels are listed, at most.
const MAX_GUILDS: usize = 5;

/// A channel the bot can post in: id, name, server, type.
struct Candidate {
    id: String,
    name: String,
    guild: String,
    kind: u64,
}

fn get(cx: &AuthContext<'_>, url: String, token: &Secret) -> reqwest::RequestBuilder {
    cx.http
        .get(url)
        .header("Authorization", format!("Bot {}", token.expose()))
        .header("User-Agent", super::USER_AGENT)
}

/// The text (0) and announcement (5) channels of the servers the bot is in.
async fn candidates(
    cx: &AuthContext<'_>,
    api: &str,
    token: &Secret,
) -> Result<Vec<Candidate>, AuthError> {
    let guilds = call(
        get(cx, format!("{api}/users/@me/guilds"), token),
        "Discord's GET /users/@me/guilds (the servers the bot is in)",
    )
    .await?;
    let mut out = Vec::new();
    for g in guilds.as_array().into_iter().flatten().take(MAX_GUILDS) {
        let (Some(gid), gname) = (text(g, "id"), text(g, "name").unwrap_or_default()) else {
            continue;
        };
        let channels = call(
            get(cx, format!("{api}/guilds/{gid}/channels"), token),
            "Discord's GET /guilds/{id}/channels",
        )
        .await?;
        for c in channels.as_array().into_iter().flatten() {
            let kind = c.get("type").and_then(Value::as_u64).unwrap_or(u64::MAX);
            if let (Some(id), true) = (text(c, "id"), matches!(kind, 0 | 5)) {
                out.push(Candidate {
                    id,
                    name: text(c, "name").unwrap_or_default(),
                    guild: gname.clone(),
                    kind,
                });
            }
        }
    }
    Ok(out)
}

/// The channel: `DISCORD_CHANNEL_ID`, or one the person picks.
async fn pick_channel(
    cx: &mut AuthContext<'_>,
    api: &str,
    token: &Secret,
    invite: &str,
) -> Result<String, AuthError> {
    if let Some(id) = cx.vars.get("DISCORD_CHANNEL_ID") {
        return Ok(id.trim().to_owned());
    }
    let found = candidates(cx, api, token).await?;
    if found.is_empty() {
        return Err(AuthError::new(format!(
            "the bot is in no server with a text channel it can see: invite it ({invite}), then run this again; nothing stored"
        )));
    }
    cx.say("The channels the bot can see:");
    for (i, c) in found.iter().enumerate() {
        let kind = if c.kind == 5 { " (announcement)" } else { "" };
        cx.say(&format!("  {}. #{} in {}{kind}: {}", i + 1, c.name, c.guild, c.id));
    }
    let answer = cx.ask("Channel to post to (its number or id): ")?;
    let picked = answer
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=found.len()).contains(n))
        .map_or(answer, |n| found[n - 1].id.clone());
    Ok(picked)
}

#[async_trait(?Send)]
impl AuthFlow for DiscordAuth {
    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let api = cx.var_or("DISCORD_API_URL", DEFAULT_API);
        cx.say("Create an application at https://discord.com/developers/applications; on its Bot page, Reset Token shows the bot token once.");
        let token = cx.ask_secret("Bot token (not shown): ")?;
        if token.expose().is_empty() || token.expose().contains(char::is_whitespace) {
            return Err(AuthError::new(
                "that is not a bot token (one word, as the Developer Portal shows it); nothing stored",
            ));
        }
        let me = call(
            get(cx, format!("{api}/users/@me"), &token),
            "Discord's GET /users/@me (the bot token)",
        )
        .await?;
        let bot_id = text(&me, "id").ok_or_else(|| AuthError::new("Discord's answer names no bot (id); nothing stored"))?;
        let bot = text(&me, "username").unwrap_or_default();
        let invite = format!(
            "https://discord.com/oauth2/authorize?client_id={bot_id}&scope=bot&permissions={PERMISSIONS}"
        );
        cx.say(&format!("The token belongs to the bot {bot} ({bot_id})."));
        let channel_id = pick_channel(cx, &api, &token, &invite).await?;
        if !is_snowflake(&channel_id) {
            return Err(AuthError::new(format!(
                "{channel_id:?} is not a channel id (17 to 20 digits); nothing stored"
            )));
        }
        let channel = call(
            get(cx, format!("{api}/channels/{channel_id}"), &token),
            &format!("Discord's GET /channels/{channel_id} (can the bot see it? if not, invite it: {invite})"),
        )
        .await?;
        let name = text(&channel, "name").unwrap_or_default();
        let kind = channel.get("type").and_then(Value::as_u64).unwrap_or(0);
        if matches!(kind, 15 | 16) {
            return Err(AuthError::new(format!(
                "#{name} is a forum or media channel, where a bot posts only in a thread: pick a text or announcement channel; nothing stored"
            )));
        }
        let announcement = if kind == 5 {
            " It is an announcement channel: set DISCORD_CROSSPOST=1 to publish each message to its followers."
        } else {
            ""
        };
        cx.say(&format!("The bot can see #{name} ({channel_id}).{announcement}"));
        let mut settings = BTreeMap::new();
        settings.insert("DISCORD_CHANNEL_ID".to_owned(), channel_id.clone());
        if cx.vars.get("DISCORD_API_URL").is_some() {
            settings.insert("DISCORD_API_URL".to_owned(), api);
        }
        Ok(Some(Credential {
            account: format!("bot {bot} ({bot_id}) in #{name} ({channel_id})"),
            scopes: Vec::new(),
            obtained_at: crate::record::now_s(),
            expires_at: None,
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [("DISCORD_BOT_TOKEN".to_owned(), token)].into(),
            settings,
            kept: BTreeMap::new(),
        }))
    }
}

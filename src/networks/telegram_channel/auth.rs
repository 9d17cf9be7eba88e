//! `postonce auth telegram`: the bot token (from @BotFather), read without echo and checked with
//! `getMe`; then the owner sends `/start` to the bot and `getUpdates` finds the chat id and the
//! user id (README "Getting credentials", Telegram bot). It prints the variables to set (the token
//! by name only) and stores nothing: the report bot's variables are the core's.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::networks::oauth::{call, text};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};

/// The flow, as the registry holds it.
pub static FLOW: TelegramAuth = TelegramAuth;

pub struct TelegramAuth;

#[async_trait(?Send)]
impl AuthFlow for TelegramAuth {
    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let api = cx.var_or("TELEGRAM_API_URL", "https://api.telegram.org");
        cx.say("Create a bot with @BotFather (/newbot); it gives the bot token.");
        let token = cx.ask_secret("Bot token (not shown): ")?;
        let token = token.expose().to_owned();
        if token.contains('/') || token.contains(char::is_whitespace) || !token.contains(':') {
            return Err(AuthError::new(
                "that is not a bot token (expected <id>:<secret>, as @BotFather gives it); nothing stored",
            ));
        }
        let me = call(
            cx.http.post(format!("{api}/bot{token}/getMe")).json(&json!({})),
            "Telegram's getMe (the bot token)",
        )
        .await?;
        let bot = me
            .pointer("/result/username")
            .and_then(Value::as_str)
            .unwrap_or("your_bot")
            .to_owned();
        cx.ask(&format!(
            "Send /start to @{bot} from the account that will own postonce, then press Enter: "
        ))?;
        let answer = cx
            .http
            .post(format!("{api}/bot{token}/getUpdates"))
            .json(&json!({"timeout": 0, "allowed_updates": ["message"]}))
            .send()
            .await
            .map_err(|e| {
                AuthError::new(format!("Telegram could not be reached ({}); nothing stored", e.without_url()))
            })?;
        if answer.status().as_u16() == 409 {
            return Err(AuthError::new(format!(
                "a webhook is set for @{bot}, and getUpdates cannot run while it is: delete it (curl -X POST https://api.telegram.org/bot<token>/deleteWebhook), run this again, then set it again with `postonce telegram set-webhook --url …`"
            )));
        }
        let updates: Value = answer.json().await.unwrap_or_default();
        let start = updates
            .get("result")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .rev()
            .filter_map(|u| u.get("message"))
            .find(|m| {
                m.get("text").and_then(Value::as_str).is_some_and(|t| t.starts_with("/start"))
                    && m.pointer("/chat/type").and_then(Value::as_str) == Some("private")
            });
        let Some(start) = start else {
            return Err(AuthError::new(format!(
                "no /start from a private chat has reached @{bot}: send it, then run this again"
            )));
        };
        let chat = start.get("chat").and_then(|c| text(c, "id"));
        let user = start.get("from").and_then(|f| text(f, "id"));
        let (Some(chat), Some(user)) = (chat, user) else {
            return Err(AuthError::new("the /start message names no chat or user"));
        };
        cx.say(&format!("Found @{bot}'s owner: user {user}, chat {chat}."));
        println!("Set these (the bot token is the one you entered; keep it secret, e.g. in SSM as TELEGRAM_BOT_TOKEN_PARAM):");
        println!("TELEGRAM_BOT_TOKEN=<the bot token>");
        println!("TELEGRAM_CHAT_ID={chat}");
        println!("TELEGRAM_ALLOWED_USERS={user}");
        println!("To post to a channel as well: add @{bot} to it as an administrator allowed to post, and set TELEGRAM_CHANNEL_ID=@<channel name> (or its -100… id).");
        Ok(None)
    }
}

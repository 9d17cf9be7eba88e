//! A Telegram Bot API fake (`POST /bot<token>/<method>`, JSON in and out):
//! sendMessage, editMessageText (with "message is not modified"), answerCallbackQuery, getMe,
//! setWebhook, getWebhookInfo; 401 for a wrong token; 429 with `retry_after`. Records every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TgMode {
    Normal,
    Down,
    TooManyRequests { retry_after_s: u64, times: u32 },
}

#[derive(Default)]
struct State {
    requests: Vec<(String, Value)>,
    messages: HashMap<i64, (String, Value)>,
    next_message: i64,
    webhook: Option<Value>,
    mode: Option<TgMode>,
    /// What `getUpdates` answers.
    updates: Vec<Value>,
}

struct Bot {
    state: Arc<Mutex<State>>,
    token: String,
}

fn ok(result: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"ok": true, "result": result}))
}

fn err(code: u16, description: &str) -> ResponseTemplate {
    ResponseTemplate::new(code)
        .set_body_json(json!({"ok": false, "error_code": code, "description": description}))
}

/// Inline keyboard buttons a row may hold: 8, as measured by users (not documented; pyTelegramBotAPI
/// `max_row_keys`, tginfo/Telegram-Limits#228), and 100 in all.
pub const MAX_ROW_BUTTONS: usize = 8;
pub const MAX_BUTTONS: usize = 100;

/// The Bot API's refusal of a keyboard too wide or too large, as users see it.
fn keyboard_refusal(markup: &Value) -> Option<ResponseTemplate> {
    let rows = markup.get("inline_keyboard")?.as_array()?;
    let widest = rows
        .iter()
        .map(|r| r.as_array().map_or(0, Vec::len))
        .max()
        .unwrap_or(0);
    let total: usize = rows.iter().map(|r| r.as_array().map_or(0, Vec::len)).sum();
    (widest > MAX_ROW_BUTTONS || total > MAX_BUTTONS)
        .then(|| err(400, "Bad Request: reply markup is too long"))
}

impl Respond for Bot {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let p = req.url.path().to_owned();
        let mut parts = p.trim_start_matches("/bot").splitn(2, '/');
        let token = parts.next().unwrap_or("");
        let name = parts.next().unwrap_or("").to_owned();
        if token != self.token {
            return err(401, "Unauthorized");
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests.push((name.clone(), body.clone()));
        match st.mode.unwrap_or(TgMode::Normal) {
            TgMode::Normal => {}
            TgMode::Down => return err(500, "Internal Server Error"),
            TgMode::TooManyRequests {
                retry_after_s,
                times,
            } => {
                st.mode = Some(if times <= 1 {
                    TgMode::Normal
                } else {
                    TgMode::TooManyRequests {
                        retry_after_s,
                        times: times - 1,
                    }
                });
                return ResponseTemplate::new(429).set_body_json(json!({
                    "ok": false, "error_code": 429,
                    "description": format!("Too Many Requests: retry after {retry_after_s}"),
                    "parameters": {"retry_after": retry_after_s}
                }));
            }
        }
        let text = body
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let markup = body.get("reply_markup").cloned().unwrap_or(Value::Null);
        let chat = body.get("chat_id").cloned().unwrap_or(json!(0));
        if matches!(name.as_str(), "sendMessage" | "editMessageText") {
            if let Some(refusal) = keyboard_refusal(&markup) {
                return refusal;
            }
        }
        match name.as_str() {
            "sendMessage" => {
                if text.is_empty() || text.chars().count() > 4096 {
                    return err(400, "Bad Request: message text is empty or too long");
                }
                st.next_message += 1;
                let id = st.next_message;
                st.messages.insert(id, (text.clone(), markup));
                ok(
                    json!({"message_id": id, "date": 1_700_000_000, "chat": {"id": chat, "type": "private"}, "text": text}),
                )
            }
            "editMessageText" => {
                let id = body.get("message_id").and_then(Value::as_i64).unwrap_or(0);
                match st.messages.get(&id) {
                    None => err(400, "Bad Request: message to edit not found"),
                    Some((t, m)) if *t == text && *m == markup => err(
                        400,
                        "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                    ),
                    Some(_) => {
                        st.messages.insert(id, (text.clone(), markup));
                        ok(json!({"message_id": id, "date": 1_700_000_000, "chat": {"id": chat, "type": "private"}, "text": text}))
                    }
                }
            }
            "answerCallbackQuery" => {
                if body
                    .get("callback_query_id")
                    .and_then(Value::as_str)
                    .is_none()
                {
                    return err(400, "Bad Request: query is too old and response timeout expired or query ID is invalid");
                }
                ok(json!(true))
            }
            // The owner's /start (set with [`TelegramFake::set_updates`]); refused while a
            // webhook is set, as the Bot API does.
            "getUpdates" => {
                if st.webhook.as_ref().is_some_and(|w| {
                    w.get("url")
                        .and_then(Value::as_str)
                        .is_some_and(|u| !u.is_empty())
                }) {
                    return err(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first");
                }
                ok(Value::Array(st.updates.clone()))
            }
            "getMe" => ok(
                json!({"id": 1, "is_bot": true, "first_name": "postonce", "username": "postonce_test_bot"}),
            ),
            "setWebhook" => {
                st.webhook = Some(body);
                ResponseTemplate::new(200).set_body_json(
                    json!({"ok": true, "result": true, "description": "Webhook was set"}),
                )
            }
            "getWebhookInfo" => {
                let url = st
                    .webhook
                    .as_ref()
                    .and_then(|w| w.get("url"))
                    .cloned()
                    .unwrap_or(json!(""));
                ok(json!({"url": url, "has_custom_certificate": false, "pending_update_count": 0}))
            }
            _ => err(404, "Not Found: method not found"),
        }
    }
}

#[derive(Clone)]
pub struct TelegramFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

impl TelegramFake {
    pub async fn start(token: &str) -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State::default()));
        Mock::given(method("POST"))
            .and(path_regex(r"^/bot[^/]+/[A-Za-z]+$"))
            .respond_with(Bot {
                state: state.clone(),
                token: token.to_owned(),
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// The server, to mount the channel's methods on ([`super::tg_channel::TgChannelFake::mount_on`]).
    pub fn server(&self) -> Arc<MockServer> {
        self.server.clone()
    }

    /// What `getUpdates` answers from now on (Bot API `Update` objects).
    pub fn set_updates(&self, updates: Vec<Value>) {
        self.with(|s| s.updates = updates);
    }

    /// A webhook is set (as `setWebhook` with this URL would).
    pub fn set_webhook_url(&self, url: &str) {
        self.with(|s| s.webhook = Some(serde_json::json!({ "url": url })));
    }

    pub fn requests(&self) -> Vec<(String, Value)> {
        self.with(|s| s.requests.clone())
    }

    pub fn requests_for(&self, name: &str) -> Vec<Value> {
        self.with(|s| {
            s.requests
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, b)| b.clone())
                .collect()
        })
    }

    pub fn set_mode(&self, mode: TgMode) {
        self.with(|s| s.mode = Some(mode));
    }

    /// The message a report created, as it reads now.
    pub fn message(&self, id: i64) -> Option<(String, Value)> {
        self.with(|s| s.messages.get(&id).cloned())
    }

    pub fn webhook(&self) -> Option<Value> {
        self.with(|s| s.webhook.clone())
    }
}

/// A realistic Bot API update carrying a callback query.
pub fn callback_update(
    update_id: i64,
    from_id: i64,
    chat_id: i64,
    message_id: i64,
    data: &str,
) -> Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": format!("{}", 4_000_000_000_000_000i64 + update_id),
            "from": {"id": from_id, "is_bot": false, "first_name": "Owner", "language_code": "en"},
            "message": {
                "message_id": message_id,
                "date": 1_700_000_000,
                "chat": {"id": chat_id, "type": "private", "first_name": "Owner"},
                "text": "report"
            },
            "chat_instance": "-1234567890",
            "data": data
        }
    })
}

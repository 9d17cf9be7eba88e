//! A Telegram Bot API fake for posting to a channel, speaking its real wire format:
//! `POST /bot<token>/sendPhoto` as `multipart/form-data` (`chat_id`, a `photo`
//! file part, `caption`, `parse_mode`), the caption parsed as Telegram parses HTML and its limit
//! (1,024 UTF-16 units of the parsed text) enforced, `getMe` and `getChat`, the documented error
//! bodies as modes, and hangs before and after posting.
//!
//! Like Telegram it has **no duplicate check**: every accepted `sendPhoto` posts a new message.
//! It counts `sendPhoto` requests and messages posted, and keeps every message (parsed caption,
//! photo bytes) for the test to look at.
//!
//! The photo is held to the limits of `sendPhoto`: JPEG or PNG judged by the
//! bytes, at most 10,000,000 bytes, width + height at most 10,000, a shape of at most 20:1;
//! anything else is refused with Telegram's 400, and every photo that arrived is kept
//! ([`TgChannelFake::images`]) with its hash and facts.
//!
//! Kept apart from `telegram.rs` (the owner's report chat, JSON methods, a different state) so
//! that the channel's counts are never mixed with the report's. In production one bot token and
//! one `TELEGRAM_API_URL` serve both the reports and the channel; [`TgChannelFake::mount_on`]
//! gives the same shape in a test: the channel's methods (`sendPhoto`, `getChat`) mounted on the
//! report fake's server, ahead of its catch-all, with their own state and counts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;

/// `sendPhoto`'s limits for an uploaded photo.
pub const MAX_PHOTO_BYTES: usize = 10_000_000;
pub const MAX_SIDE_SUM: u32 = 10_000;
pub const MAX_RATIO: u32 = 20;

/// The channel's numeric id (`-100` + its internal id).
pub const CHANNEL_ID: i64 = -1_001_234_567_890;

/// How `sendPhoto` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelMode {
    Normal,
    /// 400 `Bad Request: chat not found` (also for `getChat`).
    ChatNotFound,
    /// 400 `Bad Request: need administrator rights in the channel chat`.
    NotAdmin,
    /// 400 `Bad Request: not enough rights to send text messages to the chat`.
    NotEnoughRights,
    /// 403 `Forbidden: bot is not a member of the channel chat`.
    NotMember,
    /// 400 `Bad Request: message caption is too long`, whatever the caption.
    CaptionTooLong,
    /// 400 `Bad Request: MEDIA_CAPTION_TOO_LONG`, whatever the caption.
    MediaCaptionTooLong,
    /// 429 with `parameters.retry_after`.
    TooManyRequests {
        retry_after_s: u64,
    },
    /// The bot token was revoked (regenerated at @BotFather): every method answers 401
    /// `Unauthorized`, as for any unknown token; nothing posted.
    Revoked,
    /// 500 `Internal Server Error`, JSON; nothing posted.
    ServerError,
    /// 502 from a gateway, an HTML page (echoing the request path, as some proxies do);
    /// nothing posted.
    BadGateway,
    /// Post nothing; answer 500 only after the delay.
    Hang(Duration),
    /// Post the message, then answer 200 only after the delay (a short delay is a slow
    /// success; a long one makes the client time out although the message exists).
    AcceptThenHang(Duration),
}

/// A message the fake posted.
#[derive(Debug, Clone)]
pub struct ChannelMessage {
    pub message_id: i64,
    /// `chat_id` as sent.
    pub chat_id: String,
    /// The caption after entity parsing (what readers see).
    pub caption: String,
    /// The caption field as sent.
    pub caption_sent: String,
    pub parse_mode: Option<String>,
    pub photo: Vec<u8>,
    pub photo_content_type: String,
    pub photo_file_name: String,
    /// The photo as the fake judged it.
    pub image: Received,
    /// When the `sendPhoto` arrived.
    pub received: std::time::Instant,
}

struct State {
    mode: ChannelMode,
    messages: Vec<ChannelMessage>,
    /// Every photo that reached `sendPhoto` (taken or refused), in order.
    images: Vec<Received>,
    /// Requests of any kind that reached the channel's routes (a wrong token included).
    requests: u64,
    send_photo_requests: u64,
    methods: Vec<String>,
    next_id: i64,
}

struct Api {
    state: Arc<Mutex<State>>,
    token: String,
    username: Option<String>,
}

/// The fake Bot API, serving one channel (public with a username, or private).
#[derive(Clone)]
pub struct TgChannelFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
    token: String,
    username: Option<String>,
    /// Mounted on another fake's server ([`TgChannelFake::mount_on`]).
    shared: bool,
}

fn ok(result: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"ok": true, "result": result}))
}

fn err(code: u16, description: &str) -> ResponseTemplate {
    ResponseTemplate::new(code)
        .set_body_json(json!({"ok": false, "error_code": code, "description": description}))
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone)]
pub struct FormPart {
    pub name: String,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() || needle.is_empty() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// Parses a `multipart/form-data` body (RFC 7578) by its `boundary`.
pub fn parse_multipart(content_type: &str, body: &[u8]) -> Result<Vec<FormPart>, String> {
    if !content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return Err(format!("not multipart/form-data: {content_type}"));
    }
    let boundary = param(content_type, "boundary").ok_or("no boundary")?;
    let delim = format!("--{boundary}").into_bytes();
    let next_delim = format!("\r\n--{boundary}").into_bytes();
    let mut at = find(body, &delim, 0).ok_or("no first boundary")? + delim.len();
    let mut parts = vec![];
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        if body.get(at..at + 2) != Some(b"\r\n") {
            return Err("no CRLF after a boundary".into());
        }
        at += 2;
        let head_end = find(body, b"\r\n\r\n", at).ok_or("part headers do not end")?;
        let head = std::str::from_utf8(&body[at..head_end]).map_err(|_| "headers not UTF-8")?;
        let data_start = head_end + 4;
        let data_end = find(body, &next_delim, data_start).ok_or("part does not end")?;
        let mut part = FormPart {
            name: String::new(),
            file_name: None,
            content_type: None,
            data: body[data_start..data_end].to_vec(),
        };
        for line in head.split("\r\n") {
            let Some((k, v)) = line.split_once(':') else {
                return Err(format!("bad part header {line:?}"));
            };
            if k.trim().eq_ignore_ascii_case("content-disposition") {
                part.name = param(v, "name").ok_or("part without a name")?;
                part.file_name = param(v, "filename");
            } else if k.trim().eq_ignore_ascii_case("content-type") {
                part.content_type = Some(v.trim().to_owned());
            }
        }
        parts.push(part);
        at = data_end + next_delim.len();
    }
}

const TAGS: [&str; 16] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "tg-spoiler",
    "span",
    "blockquote",
    "tg-emoji",
];

/// Telegram's HTML entity parsing, as far as a caption needs it: the tags it supports are
/// markup (not counted), `&lt;` `&gt;` `&amp;` `&quot;` and numeric references are one
/// character each, an unknown `&…` stays as it is, and a `<` that starts no supported tag is
/// refused the way Telegram refuses it.
pub fn parse_html(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with('<') {
            let Some(end) = rest.find('>') else {
                return Err(format!(
                    "Bad Request: can't parse entities: Unclosed start tag at byte offset {i}"
                ));
            };
            let inner = rest[1..end].trim_start_matches('/');
            let name: String = inner
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !TAGS.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(format!(
                    "Bad Request: can't parse entities: Unsupported start tag \"{name}\" at byte offset {i}"
                ));
            }
            i += end + 1;
            continue;
        }
        if rest.starts_with('&') {
            if let Some(semi) = rest.bytes().take(12).position(|b| b == b';') {
                let entity = &rest[1..semi];
                let decoded = match entity {
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "amp" => Some('&'),
                    "quot" => Some('"'),
                    e => e
                        .strip_prefix("#x")
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .or_else(|| e.strip_prefix('#').and_then(|d| d.parse().ok()))
                        .and_then(char::from_u32),
                };
                if let Some(c) = decoded {
                    out.push(c);
                    i += semi + 1;
                    continue;
                }
            }
        }
        let c = rest.chars().next().unwrap_or('\0');
        out.push(c);
        i += c.len_utf8();
    }
    Ok(out)
}

/// Why Telegram refuses this photo, as its `description`; `None`: within `sendPhoto`'s limits.
///
/// `PHOTO_INVALID_DIMENSIONS` (sides or shape) and `IMAGE_PROCESS_FAILED` (not an image it
/// takes as a photo) are the answers seen from the Bot API (telepot#135, aiogram,
/// TelegramBot/Api#302). Over 10 MB, `PHOTO_SAVE_FILE_INVALID` is what Telegram's own API
/// answered (webogram#1011); the Bot API's wording for it is not confirmed. Telegram may
/// convert other types (GIF, WebP) itself; the fake takes only the documented JPEG and PNG.
fn photo_refusal(got: &Received) -> Option<&'static str> {
    if !got.is_one_of(&["image/jpeg", "image/png"]) || got.width == 0 || got.height == 0 {
        Some("Bad Request: IMAGE_PROCESS_FAILED")
    } else if got.bytes > MAX_PHOTO_BYTES {
        Some("Bad Request: PHOTO_SAVE_FILE_INVALID")
    } else if got.width + got.height > MAX_SIDE_SUM || got.shape_over(MAX_RATIO) {
        Some("Bad Request: PHOTO_INVALID_DIMENSIONS")
    } else {
        None
    }
}

impl Api {
    fn chat(&self) -> Value {
        let mut chat =
            json!({"id": CHANNEL_ID, "title": "postonce test channel", "type": "channel"});
        if let Some(u) = &self.username {
            chat["username"] = json!(u);
        }
        chat
    }

    fn knows_chat(&self, chat_id: &str) -> bool {
        chat_id == CHANNEL_ID.to_string()
            || self.username.as_deref().is_some_and(|u| {
                chat_id
                    .strip_prefix('@')
                    .is_some_and(|c| c.eq_ignore_ascii_case(u))
            })
    }

    fn get_chat(&self, req: &Request, mode: ChannelMode) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let chat_id = match body.get("chat_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => req
                .url
                .query_pairs()
                .find(|(k, _)| k == "chat_id")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default(),
        };
        if chat_id.is_empty() {
            return err(400, "Bad Request: chat_id is empty");
        }
        if mode == ChannelMode::ChatNotFound || !self.knows_chat(&chat_id) {
            return err(400, "Bad Request: chat not found");
        }
        ok(self.chat())
    }

    fn send_photo(&self, req: &Request, st: &mut State) -> ResponseTemplate {
        st.send_photo_requests += 1;
        let content_type = req
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let parts = match parse_multipart(content_type, &req.body) {
            Ok(p) => p,
            Err(e) => return err(400, &format!("Bad Request: fake wants multipart: {e}")),
        };
        let text = |name: &str| {
            parts
                .iter()
                .find(|p| p.name == name && p.file_name.is_none())
                .map(|p| String::from_utf8_lossy(&p.data).into_owned())
        };
        let Some(chat_id) = text("chat_id").filter(|c| !c.is_empty()) else {
            return err(400, "Bad Request: chat_id is empty");
        };
        let Some(photo) = parts
            .iter()
            .find(|p| p.name == "photo" && p.file_name.is_some())
        else {
            return err(400, "Bad Request: there is no photo in the request");
        };
        let image = Received::of(
            &photo.data,
            photo.content_type.as_deref().unwrap_or_default(),
        );
        if let Some(why) = photo_refusal(&image) {
            st.images.push(image.refused(why));
            return err(400, why);
        }
        st.images.push(image.clone());
        let caption_sent = text("caption").unwrap_or_default();
        let parse_mode = text("parse_mode").filter(|m| !m.is_empty());

        let mode = st.mode;
        match mode {
            ChannelMode::Normal | ChannelMode::AcceptThenHang(_) => {}
            ChannelMode::ChatNotFound => return err(400, "Bad Request: chat not found"),
            ChannelMode::NotAdmin => {
                return err(
                    400,
                    "Bad Request: need administrator rights in the channel chat",
                )
            }
            ChannelMode::NotEnoughRights => {
                return err(
                    400,
                    "Bad Request: not enough rights to send text messages to the chat",
                )
            }
            ChannelMode::NotMember => {
                return err(403, "Forbidden: bot is not a member of the channel chat")
            }
            ChannelMode::CaptionTooLong => {
                return err(400, "Bad Request: message caption is too long")
            }
            ChannelMode::MediaCaptionTooLong => {
                return err(400, "Bad Request: MEDIA_CAPTION_TOO_LONG")
            }
            ChannelMode::TooManyRequests { retry_after_s } => {
                return ResponseTemplate::new(429).set_body_json(json!({
                    "ok": false, "error_code": 429,
                    "description": format!("Too Many Requests: retry after {retry_after_s}"),
                    "parameters": {"retry_after": retry_after_s}
                }))
            }
            ChannelMode::Revoked => return err(401, "Unauthorized"),
            ChannelMode::ServerError => return err(500, "Internal Server Error: fake"),
            ChannelMode::BadGateway => {
                let page = format!(
                    "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><p>upstream failed for POST {}</p><hr>nginx</body></html>",
                    req.url.path()
                );
                return ResponseTemplate::new(502).set_body_raw(page, "text/html");
            }
            ChannelMode::Hang(d) => {
                return err(500, "Internal Server Error: fake hang").set_delay(d)
            }
        }

        if !self.knows_chat(&chat_id) {
            return err(400, "Bad Request: chat not found");
        }
        let caption = match parse_mode.as_deref() {
            None => caption_sent.clone(),
            Some("HTML") => match parse_html(&caption_sent) {
                Ok(c) => c,
                Err(e) => return err(400, &e),
            },
            Some(_) => return err(400, "Bad Request: unsupported parse_mode"),
        };
        if caption.encode_utf16().count() > 1024 {
            return err(400, "Bad Request: message caption is too long");
        }

        st.next_id += 1;
        let message_id = st.next_id;
        st.messages.push(ChannelMessage {
            message_id,
            chat_id,
            caption: caption.clone(),
            caption_sent,
            parse_mode,
            photo: photo.data.clone(),
            photo_content_type: photo.content_type.clone().unwrap_or_default(),
            photo_file_name: photo.file_name.clone().unwrap_or_default(),
            image: image.clone(),
            received: std::time::Instant::now(),
        });
        let chat = self.chat();
        let answer = ok(json!({
            "message_id": message_id,
            "sender_chat": chat,
            "chat": chat,
            "date": 1_764_756_000,
            "photo": [{"file_id": format!("AgAC{message_id}"), "file_unique_id": format!("AQAD{message_id}"), "file_size": photo.data.len(), "width": image.width, "height": image.height}],
            "caption": caption,
        }));
        match mode {
            ChannelMode::AcceptThenHang(d) => answer.set_delay(d),
            _ => answer,
        }
    }
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let p = req.url.path().to_owned();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let Some((token, name)) = p.trim_start_matches("/bot").split_once('/') else {
            return err(404, "Not Found");
        };
        if token != self.token {
            return err(401, "Unauthorized");
        }
        st.methods.push(name.to_owned());
        let mode = st.mode;
        if mode == ChannelMode::Revoked {
            if name == "sendPhoto" {
                st.send_photo_requests += 1;
            }
            return err(401, "Unauthorized");
        }
        match name {
            "getMe" => ok(json!({
                "id": 7_000_000_001_i64, "is_bot": true, "first_name": "postonce",
                "username": "postonce_test_bot", "can_join_groups": true
            })),
            "getChat" => self.get_chat(req, mode),
            "sendPhoto" => self.send_photo(req, &mut st),
            _ => err(404, "Not Found"),
        }
    }
}

impl TgChannelFake {
    /// A public channel `@<username>`.
    pub async fn public(token: &str, username: &str) -> Self {
        Self::start(token, Some(username)).await
    }

    /// A private channel: no username, only [`CHANNEL_ID`].
    pub async fn private(token: &str) -> Self {
        Self::start(token, None).await
    }

    async fn start(token: &str, username: Option<&str>) -> Self {
        let server = Arc::new(MockServer::start().await);
        Self::mount(server, r"^/bot[^/]*/[A-Za-z]+$", token, username, false).await
    }

    /// A public channel `@<username>` served at `server`, another Bot API fake's server (the
    /// owner's report chat, [`super::telegram::TelegramFake::server`]): one `TELEGRAM_API_URL`
    /// and one bot token for both, as in production. The channel's methods, `sendPhoto` and
    /// `getChat`, are answered here with this fake's own state and counts, ahead of the other
    /// fake's catch-all; every other method (`sendMessage`, `getMe`, …) stays the other fake's.
    pub async fn mount_on(server: Arc<MockServer>, token: &str, username: &str) -> Self {
        Self::mount(
            server,
            r"^/bot[^/]*/(sendPhoto|getChat)$",
            token,
            Some(username),
            true,
        )
        .await
    }

    async fn mount(
        server: Arc<MockServer>,
        paths: &str,
        token: &str,
        username: Option<&str>,
        shared: bool,
    ) -> Self {
        let state = Arc::new(Mutex::new(State {
            mode: ChannelMode::Normal,
            messages: vec![],
            images: vec![],
            requests: 0,
            send_photo_requests: 0,
            methods: vec![],
            next_id: 100,
        }));
        Mock::given(path_regex(paths))
            .respond_with(Api {
                state: state.clone(),
                token: token.to_owned(),
                username: username.map(str::to_owned),
            })
            // Ahead of a shared server's catch-all (wiremock's default priority is 5).
            .with_priority(1)
            .mount(&server)
            .await;
        Self {
            server,
            state,
            token: token.to_owned(),
            username: username.map(str::to_owned),
            shared,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The Bot API base (without `/bot<token>`).
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The `TELEGRAM_CHANNEL_ID` that names this channel: `@username`, or the `-100…` id.
    pub fn channel_id(&self) -> String {
        match &self.username {
            Some(u) => format!("@{u}"),
            None => CHANNEL_ID.to_string(),
        }
    }

    pub fn set_mode(&self, mode: ChannelMode) {
        self.with(|s| s.mode = mode);
    }

    /// `sendPhoto` requests that carried the right token (posted or not).
    pub fn send_photo_requests(&self) -> u64 {
        self.with(|s| s.send_photo_requests)
    }

    pub fn messages_posted(&self) -> usize {
        self.with(|s| s.messages.len())
    }

    pub fn messages(&self) -> Vec<ChannelMessage> {
        self.with(|s| s.messages.clone())
    }

    /// Every photo that reached `sendPhoto` (taken or refused), in order.
    pub fn images(&self) -> Vec<Received> {
        self.with(|s| s.images.clone())
    }

    /// The methods called with the right token, in order.
    pub fn methods(&self) -> Vec<String> {
        self.with(|s| s.methods.clone())
    }

    /// Requests of any kind that reached the fake (a wrong token included). On a shared
    /// server ([`Self::mount_on`]), those that reached the channel's methods.
    pub async fn total_requests(&self) -> usize {
        if self.shared {
            return self.with(|s| usize::try_from(s.requests).unwrap_or(usize::MAX));
        }
        self.server.received_requests().await.map_or(0, |r| r.len())
    }
}

//! A Discord fake that speaks the bot REST API's wire format (Discord's documentation), under `/api/v10`: `Authorization: Bot <token>` checked on every call
//! (401 `{"message": "401: Unauthorized", "code": 0}` otherwise), `GET /users/@me`,
//! `GET /users/@me/guilds`, `GET /guilds/{id}/channels`, `GET /channels/{id}`,
//! `POST /channels/{id}/messages` (multipart `payload_json` + `files[0]`, matched by
//! `attachments[].id`), `GET /channels/{id}/messages?after=&limit=` (newest first, no `nonce`
//! in what it reads), `POST /channels/{id}/messages/{id}/crosspost`, Discord's error bodies
//! (`{"code": 50013, "message": "Missing Permissions"}`, 40033 for a second crosspost) and its
//! rate-limit headers (`X-RateLimit-Limit`, `-Remaining`, `-Reset`, `-Reset-After`, `-Bucket`;
//! a 429 with `Retry-After` and `retry_after`).
//!
//! **The nonce semantics that decide exactly-once**: a create with `enforce_nonce: true` whose
//! nonce the same author used within the window ([`NONCE_WINDOW`] on the fake's clock, which
//! [`DiscordFake::advance`] moves) answers the **first** message (200, same id) and creates
//! nothing. Past the window, or with the check off ([`DiscordFake::set_nonce_check`]), the same
//! request creates a second message: the fake can show a duplicate. Reading the channel is
//! paced: each read takes one of [`READ_BUCKET`] requests, the bucket refilling
//! [`READ_RESET`] after its first; a read with none left is answered 429 (counted:
//! [`DiscordFake::read_429s`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;
use super::tg_channel::parse_multipart;

/// The bot token (the `SECRET5` mark lets scripts/test.sh and the tests find it in logs).
pub const TOKEN: &str = "MTE4MTIzNDU2Nzg5MDEyMzQ1Ng.GdYq2x.discord-bot-SECRET5";
pub const BOT_ID: &str = "1181234567890123456";
pub const BOT_NAME: &str = "postonce-bot";
pub const GUILD_ID: &str = "1181234567890000001";
pub const CHANNEL_ID: &str = "1181234567890999001";
pub const CHANNEL_NAME: &str = "announcements";
/// Another channel of the server, of another type (voice).
pub const VOICE_ID: &str = "1181234567890999002";
/// How long the fake remembers a nonce ("a few minutes").
pub const NONCE_WINDOW: Duration = Duration::from_secs(180);
/// Reads of the channel's messages a bucket allows before it must reset.
pub const READ_BUCKET: u32 = 5;
/// When a read bucket resets after its first read.
pub const READ_RESET: Duration = Duration::from_millis(300);
/// Discord's epoch in Unix ms.
const EPOCH_MS: i64 = 1_420_070_400_000;

/// How the create answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Discord's body for this status; nothing is created.
    Status(u16),
    /// 429 naming a reset `reset_in` seconds ahead; nothing is created.
    RateLimited {
        reset_in: u64,
    },
    /// Create nothing; answer 503 only after the delay (the request was lost on the way).
    Hang(Duration),
    /// Create the message, then answer only after the delay (the answer is lost).
    AcceptThenHang(Duration),
}

/// How reading the channel back answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Normal,
    /// 403 `Missing Access` (no Read Message History).
    Refused,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    pub author_id: String,
    pub content: String,
    pub nonce: Option<String>,
    pub file_name: Option<String>,
    pub description: Option<String>,
    pub image: Option<Received>,
    pub flags: u64,
    pub created_ms: i64,
}

struct State {
    clock_offset: Duration,
    seq: u64,
    messages: Vec<Message>,
    /// (author, nonce) → (message id, when it was made, ms).
    nonces: HashMap<(String, String), (String, i64)>,
    nonce_check: bool,
    channel_type: u64,
    create_mode: Mode,
    read_mode: Read,
    revoked: bool,
    read_bucket: (u32, Option<Instant>),
    requests: u64,
    create_requests: u64,
    nonce_replays: u64,
    read_requests: u64,
    read_429s: u64,
    crosspost_requests: u64,
    bad_tokens: u64,
    last_payload: Value,
}

#[derive(Clone)]
pub struct DiscordFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

fn real_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

fn iso(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}000+00:00",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        ms.rem_euclid(1000)
    )
}

fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json")
        .set_body_json(body)
}

/// Discord's error body.
pub fn error(status: u16, code: u64, message: &str) -> ResponseTemplate {
    json_answer(status, json!({"code": code, "message": message}))
}

fn unauthorized() -> ResponseTemplate {
    json_answer(401, json!({"message": "401: Unauthorized", "code": 0}))
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn rate_headers(
    t: ResponseTemplate,
    bucket: &str,
    remaining: u32,
    reset_after: Duration,
) -> ResponseTemplate {
    let reset = (real_now_ms() as f64 + reset_after.as_millis() as f64) / 1000.0;
    t.insert_header("x-ratelimit-limit", READ_BUCKET.to_string().as_str())
        .insert_header("x-ratelimit-remaining", remaining.to_string().as_str())
        .insert_header("x-ratelimit-reset", format!("{reset:.3}").as_str())
        .insert_header(
            "x-ratelimit-reset-after",
            format!("{:.3}", reset_after.as_secs_f64()).as_str(),
        )
        .insert_header("x-ratelimit-bucket", bucket)
}

fn rate_limited(reset_in: Duration, scope: &str) -> ResponseTemplate {
    let secs = reset_in.as_secs_f64();
    rate_headers(
        json_answer(
            429,
            json!({"message": "You are being rate limited.", "retry_after": secs, "global": false}),
        ),
        "fake-bucket",
        0,
        reset_in,
    )
    .insert_header("retry-after", secs.ceil().to_string().as_str())
    .insert_header("x-ratelimit-scope", scope)
}

impl State {
    fn now_ms(&self) -> i64 {
        real_now_ms() + i64::try_from(self.clock_offset.as_millis()).unwrap_or(0)
    }

    fn next_id(&mut self, at_ms: i64) -> String {
        self.seq += 1;
        ((u64::try_from(at_ms - EPOCH_MS).unwrap_or(0) << 22) | (self.seq & 0xfff)).to_string()
    }

    fn render(&self, m: &Message, with_nonce: bool) -> Value {
        let attachments: Vec<Value> = m
            .image
            .iter()
            .map(|i| {
                let name = m.file_name.clone().unwrap_or_default();
                json!({
                    "id": format!("{}1", m.id),
                    "filename": name,
                    "size": i.bytes,
                    "content_type": i.declared,
                    "description": m.description,
                    "url": format!("https://cdn.discordapp.com/attachments/{}/{}1/{name}?ex=67a1&is=67a0&hm=abc", m.channel_id, m.id),
                    "width": i.width,
                    "height": i.height,
                })
            })
            .collect();
        let mut v = json!({
            "id": m.id,
            "type": 0,
            "channel_id": m.channel_id,
            "author": {"id": m.author_id, "username": BOT_NAME, "bot": true, "discriminator": "0"},
            "content": m.content,
            "timestamp": iso(m.created_ms),
            "edited_timestamp": null,
            "tts": false,
            "mention_everyone": false,
            "mentions": [],
            "attachments": attachments,
            "embeds": [],
            "pinned": false,
            "flags": m.flags,
        });
        if with_nonce {
            v["nonce"] = json!(m.nonce);
        }
        v
    }

    fn channel(&self) -> Value {
        json!({"id": CHANNEL_ID, "type": self.channel_type, "guild_id": GUILD_ID, "name": CHANNEL_NAME, "position": 0, "nsfw": false})
    }

    fn create(&mut self, req: &Request) -> ResponseTemplate {
        match self.create_mode {
            Mode::Normal | Mode::AcceptThenHang(_) => {}
            Mode::Status(s) if s >= 500 => {
                return json_answer(
                    s,
                    json!({"message": format!("{s}: Internal Server Error"), "code": 0}),
                )
            }
            Mode::Status(403) => return error(403, 50013, "Missing Permissions"),
            Mode::Status(401) => return unauthorized(),
            Mode::Status(s) => return error(s, 0, "Error"),
            Mode::RateLimited { reset_in } => {
                return rate_limited(Duration::from_secs(reset_in), "user")
            }
            Mode::Hang(d) => {
                return json_answer(503, json!({"message": "upstream connect error", "code": 0}))
                    .set_delay(d)
            }
        }
        let ct = header(req, "content-type").to_owned();
        let parts = match parse_multipart(&ct, &req.body) {
            Ok(p) => p,
            Err(e) => return error(400, 50035, &format!("Invalid Form Body ({e})")),
        };
        let Some(payload) = parts
            .iter()
            .find(|p| p.name == "payload_json")
            .and_then(|p| serde_json::from_slice::<Value>(&p.data).ok())
        else {
            return error(400, 50006, "Cannot send an empty message");
        };
        self.last_payload = payload.clone();
        let content = payload["content"].as_str().unwrap_or_default().to_owned();
        if content.chars().count() > 2000 {
            return json_answer(
                400,
                json!({"code": 50035, "message": "Invalid Form Body", "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}),
            );
        }
        let nonce = payload["nonce"].as_str().map(str::to_owned);
        if nonce.as_ref().is_some_and(|n| n.chars().count() > 25) {
            return error(
                400,
                50035,
                "Invalid Form Body (nonce: Must be 25 or fewer in length.)",
            );
        }
        // `files[n]` matches `attachments[].id`.
        let attachment = payload["attachments"]
            .get(0)
            .cloned()
            .unwrap_or(Value::Null);
        let file = attachment["id"]
            .as_u64()
            .and_then(|n| parts.iter().find(|p| p.name == format!("files[{n}]")));
        let now = self.now_ms();
        let enforce = payload["enforce_nonce"].as_bool() == Some(true);
        if let (Some(n), true, true) = (&nonce, enforce, self.nonce_check) {
            let key = (BOT_ID.to_owned(), n.clone());
            if let Some((id, at)) = self.nonces.get(&key).cloned() {
                if now - at <= i64::try_from(NONCE_WINDOW.as_millis()).unwrap_or(0) {
                    self.nonce_replays += 1;
                    return match self.messages.iter().find(|m| m.id == id) {
                        Some(m) => json_answer(200, self.render(m, true)),
                        None => error(404, 10008, "Unknown Message"),
                    };
                }
            }
        }
        let id = self.next_id(now);
        let image = file.map(|f| Received::of(&f.data, f.content_type.as_deref().unwrap_or("")));
        let m = Message {
            id: id.clone(),
            channel_id: CHANNEL_ID.to_owned(),
            author_id: BOT_ID.to_owned(),
            content,
            nonce: nonce.clone(),
            file_name: file.and_then(|f| f.file_name.clone()),
            description: attachment["description"].as_str().map(str::to_owned),
            image,
            flags: 0,
            created_ms: now,
        };
        if let Some(n) = nonce {
            self.nonces.insert((BOT_ID.to_owned(), n), (id, now));
        }
        let answer = json_answer(200, self.render(&m, true));
        self.messages.push(m);
        match self.create_mode {
            Mode::AcceptThenHang(d) => answer.set_delay(d),
            _ => answer,
        }
    }

    /// `GET /channels/{id}/messages?after=&limit=`: the `limit` messages right after `after`,
    /// newest first, paced by the read bucket.
    fn list(&mut self, req: &Request) -> ResponseTemplate {
        self.read_requests += 1;
        if self.read_mode == Read::Refused {
            return error(403, 50001, "Missing Access");
        }
        let (used, since) = self.read_bucket;
        let since = since.filter(|t| t.elapsed() < READ_RESET);
        let used = if since.is_some() { used } else { 0 };
        let started = since.unwrap_or_else(Instant::now);
        let reset_after = READ_RESET.saturating_sub(started.elapsed());
        if used >= READ_BUCKET {
            self.read_429s += 1;
            return rate_limited(reset_after, "user");
        }
        self.read_bucket = (used + 1, Some(started));
        let q: HashMap<String, String> = req.url.query_pairs().into_owned().collect();
        let after: u64 = q.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
        let limit: usize = q
            .get("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(50)
            .clamp(1, 100);
        let mut page: Vec<&Message> = self
            .messages
            .iter()
            .filter(|m| m.id.parse::<u64>().unwrap_or(0) > after)
            .collect();
        page.sort_by_key(|m| m.id.parse::<u64>().unwrap_or(0));
        page.truncate(limit);
        page.reverse();
        let body: Vec<Value> = page.iter().map(|m| self.render(m, false)).collect();
        rate_headers(
            json_answer(200, Value::Array(body)),
            "fake-read-bucket",
            READ_BUCKET - used - 1,
            reset_after,
        )
    }

    fn crosspost(&mut self, id: &str) -> ResponseTemplate {
        self.crosspost_requests += 1;
        if self.channel_type != 5 {
            return error(400, 50024, "Cannot execute action on this channel type");
        }
        let Some(i) = self.messages.iter().position(|m| m.id == id) else {
            return error(404, 10008, "Unknown Message");
        };
        if self.messages[i].flags & 1 != 0 {
            return error(400, 40033, "This message has already been crossposted.");
        }
        self.messages[i].flags |= 1;
        json_answer(200, self.render(&self.messages[i], false))
    }
}

struct Api {
    state: Arc<Mutex<State>>,
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let path = req.url.path().to_owned();
        let method = req.method.as_str().to_owned();
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let Some(["api", "v10", rest @ ..]) = Some(segs.as_slice()) else {
            return error(404, 0, "404: Not Found");
        };
        if matches!(
            (method.as_str(), rest),
            ("POST", ["channels", _, "messages"])
        ) {
            st.create_requests += 1;
        }
        let auth_ok = header(req, "authorization") == format!("Bot {TOKEN}")
            && header(req, "user-agent").starts_with("DiscordBot (");
        if !auth_ok || st.revoked {
            st.bad_tokens += 1;
            return unauthorized();
        }
        match (method.as_str(), rest) {
            ("GET", ["users", "@me"]) => json_answer(
                200,
                json!({"id": BOT_ID, "username": BOT_NAME, "discriminator": "0", "bot": true, "global_name": null}),
            ),
            ("GET", ["users", "@me", "guilds"]) => json_answer(
                200,
                json!([{"id": GUILD_ID, "name": "postonce test", "owner": false, "permissions": "117760"}]),
            ),
            ("GET", ["guilds", g, "channels"]) if *g == GUILD_ID => json_answer(
                200,
                json!([st.channel(), {"id": VOICE_ID, "type": 2, "guild_id": GUILD_ID, "name": "voice"}]),
            ),
            ("GET", ["channels", c]) if *c == CHANNEL_ID => json_answer(200, st.channel()),
            ("POST", ["channels", c, "messages"]) if *c == CHANNEL_ID => st.create(req),
            ("GET", ["channels", c, "messages"]) if *c == CHANNEL_ID => st.list(req),
            ("POST", ["channels", c, "messages", id, "crosspost"]) if *c == CHANNEL_ID => {
                let id = (*id).to_owned();
                st.crosspost(&id)
            }
            (_, ["channels", ..]) => error(404, 10003, "Unknown Channel"),
            _ => error(404, 0, "404: Not Found"),
        }
    }
}

impl DiscordFake {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State {
            clock_offset: Duration::ZERO,
            seq: 0,
            messages: Vec::new(),
            nonces: HashMap::new(),
            nonce_check: true,
            channel_type: 0,
            create_mode: Mode::Normal,
            read_mode: Read::Normal,
            revoked: false,
            read_bucket: (0, None),
            requests: 0,
            create_requests: 0,
            nonce_replays: 0,
            read_requests: 0,
            read_429s: 0,
            crosspost_requests: 0,
            bad_tokens: 0,
            last_payload: Value::Null,
        }));
        Mock::given(any())
            .respond_with(Api {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `DISCORD_API_URL`.
    pub fn api_url(&self) -> String {
        format!("{}/api/v10", self.server.uri())
    }

    /// Moves the fake's clock forward (the nonce window, the messages' times).
    pub fn advance(&self, d: Duration) {
        self.with(|s| s.clock_offset += d);
    }

    pub fn set_create_mode(&self, mode: Mode) {
        self.with(|s| s.create_mode = mode);
    }

    pub fn set_read_mode(&self, read: Read) {
        self.with(|s| s.read_mode = read);
    }

    /// Every call refused as for a reset token (401).
    pub fn set_revoked(&self, revoked: bool) {
        self.with(|s| s.revoked = revoked);
    }

    /// `false`: `enforce_nonce` is not honoured: every create makes a new message.
    pub fn set_nonce_check(&self, on: bool) {
        self.with(|s| s.nonce_check = on);
    }

    /// The channel's type: 0 text, 5 announcement.
    pub fn set_channel_type(&self, kind: u64) {
        self.with(|s| s.channel_type = kind);
    }

    /// Adds another member's message `age` ago (the channel is not the bot's alone).
    pub fn seed_message(&self, author: &str, content: &str, age: Duration) -> String {
        self.with(|s| {
            let at = s.now_ms() - i64::try_from(age.as_millis()).unwrap_or(0);
            let id = s.next_id(at);
            s.messages.push(Message {
                id: id.clone(),
                channel_id: CHANNEL_ID.to_owned(),
                author_id: author.to_owned(),
                content: content.to_owned(),
                nonce: None,
                file_name: None,
                description: None,
                image: None,
                flags: 0,
                created_ms: at,
            });
            s.messages.sort_by_key(|m| m.id.parse::<u64>().unwrap_or(0));
            id
        })
    }

    pub fn messages(&self) -> Vec<Message> {
        self.with(|s| s.messages.clone())
    }

    /// Messages that exist (created or seeded).
    pub fn messages_posted(&self) -> usize {
        self.with(|s| s.messages.len())
    }

    /// Every `POST /channels/{id}/messages` that reached the fake.
    pub fn create_requests(&self) -> u64 {
        self.with(|s| s.create_requests)
    }

    /// Creates answered with the first message for a remembered nonce.
    pub fn nonce_replays(&self) -> u64 {
        self.with(|s| s.nonce_replays)
    }

    pub fn read_requests(&self) -> u64 {
        self.with(|s| s.read_requests)
    }

    /// Reads answered 429 (a client that did not wait for the bucket).
    pub fn read_429s(&self) -> u64 {
        self.with(|s| s.read_429s)
    }

    pub fn crosspost_requests(&self) -> u64 {
        self.with(|s| s.crosspost_requests)
    }

    pub fn bad_tokens(&self) -> u64 {
        self.with(|s| s.bad_tokens)
    }

    pub fn requests(&self) -> u64 {
        self.with(|s| s.requests)
    }

    pub fn last_payload(&self) -> Value {
        self.with(|s| s.last_payload.clone())
    }
}

//! A Facebook Page fake that speaks the Graph API's wire format (Meta's Pages documentation),
//! under `/v25.0`: the Page token as the `access_token` parameter (query for reads, a form
//! field for the create) on every call, `GET /{page}?fields=id,name`,
//! `POST /{page}/photos` (multipart `source`, `message`, `published`) answered
//! `{"id":<photo>,"post_id":<page>_<post>}`, `GET /{page}/published_posts` (newest first,
//! `limit`, `after` cursors, `created_time` as `2026-12-02T10:15:00+0000`), and the Graph
//! error body `{"error":{"message","type","code","error_subcode","fbtrace_id"}}` (190 for a
//! dead token, 506 for a duplicate, 32 for a rate limit, 2 for a server fault).
//!
//! **What decides exactly-once**: Facebook keeps no idempotency key. With its duplicate check on
//! ([`FacebookFake::set_duplicate_check`]) a create whose caption is the Page's latest post's is
//! refused 506 "Duplicate Post" (nothing made, the post not named); with it off, the Page takes
//! every post, twice if sent twice: the fake can show a duplicate. It counts the posts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;
use super::tg_channel::parse_multipart;

/// The Page token (the `SECRET9` mark lets scripts/test.sh and the tests find it in logs).
pub const TOKEN: &str = "EAAGfacebook-page-token-SECRET9-xyz";
pub const PAGE_ID: &str = "104758283821337";
pub const PAGE_NAME: &str = "postonce test Page";

/// How the create answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// The Graph error of this status; nothing is posted.
    Status(u16),
    /// Code 32, "Page request limit reached" (no time named); nothing is posted.
    RateLimited,
    /// 506 "Duplicate status message", whatever the Page holds; nothing is posted.
    Duplicate,
    /// Post nothing; answer 500 only after the delay (the request was lost on the way).
    Hang(Duration),
    /// Post, then answer only after the delay (the answer is lost).
    AcceptThenHang(Duration),
}

#[derive(Debug, Clone)]
pub struct Post {
    pub id: String,
    pub message: String,
    pub created_s: i64,
    pub image: Option<Received>,
}

#[derive(Default)]
struct State {
    seq: u64,
    posts: Vec<Post>,
    duplicate_check: bool,
    create_mode: Option<Mode>,
    revoked: bool,
    read_refused: bool,
    requests: u64,
    create_requests: u64,
    duplicates_refused: u64,
    read_requests: u64,
}

#[derive(Clone)]
pub struct FacebookFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

fn graph_time(s: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(s).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}+0000",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The Graph error body.
pub fn error(status: u16, code: i64, subcode: Option<i64>, message: &str) -> ResponseTemplate {
    let mut e = json!({"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEfFake"});
    if let Some(s) = subcode {
        e["error_subcode"] = json!(s);
    }
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json")
        .set_body_json(json!({ "error": e }))
}

fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "application/json")
        .set_body_json(body)
}

fn dead_token() -> ResponseTemplate {
    error(400, 190, Some(460), "Error validating access token: The session has been invalidated because the user changed their password.")
}

impl State {
    fn create(&mut self, req: &Request) -> ResponseTemplate {
        let ct = req
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let parts = match parse_multipart(&ct, &req.body) {
            Ok(p) => p,
            Err(e) => return error(400, 100, None, &format!("(#100) Invalid parameter ({e})")),
        };
        let field = |n: &str| {
            parts
                .iter()
                .find(|p| p.name == n)
                .map(|p| String::from_utf8_lossy(&p.data).into_owned())
        };
        if field("access_token").as_deref() != Some(TOKEN) || self.revoked {
            return dead_token();
        }
        match self.create_mode.unwrap_or(Mode::Normal) {
            Mode::Normal | Mode::AcceptThenHang(_) => {}
            Mode::Status(s) if s >= 500 => {
                return error(s, 2, None, "Service temporarily unavailable")
            }
            Mode::Status(s) => return error(s, 100, None, "(#100) Invalid parameter"),
            Mode::RateLimited => return error(400, 32, None, "Page request limit reached"),
            Mode::Duplicate => return error(400, 506, None, "Duplicate status message"),
            Mode::Hang(d) => return error(500, 1, None, "An unknown error occurred").set_delay(d),
        }
        let Some(source) = parts.iter().find(|p| p.name == "source") else {
            return error(400, 324, None, "(#324) Requires upload file");
        };
        let message = field("message").unwrap_or_default();
        if message.chars().count() > 63_206 {
            return error(400, 100, None, "(#100) The message is too long");
        }
        if self.duplicate_check && self.posts.last().is_some_and(|p| p.message == message) {
            self.duplicates_refused += 1;
            return error(400, 506, None, "Duplicate status message");
        }
        self.seq += 1;
        let photo = format!("{}", 900_000_000_000 + self.seq);
        let id = format!("{PAGE_ID}_{}", 100_000_000_000 + self.seq);
        self.posts.push(Post {
            id: id.clone(),
            message,
            created_s: now_s(),
            image: Some(Received::of(
                &source.data,
                source.content_type.as_deref().unwrap_or(""),
            )),
        });
        let answer = ok(json!({"id": photo, "post_id": id}));
        match self.create_mode {
            Some(Mode::AcceptThenHang(d)) => answer.set_delay(d),
            _ => answer,
        }
    }

    fn list(&mut self, q: &HashMap<String, String>) -> ResponseTemplate {
        self.read_requests += 1;
        if self.read_refused {
            return error(
                403,
                200,
                None,
                "(#200) Missing permissions: pages_read_engagement",
            );
        }
        let limit: usize = q
            .get("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(25)
            .clamp(1, 100);
        let start: usize = q.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
        let newest: Vec<&Post> = self.posts.iter().rev().collect();
        let page: Vec<Value> = newest
            .iter()
            .skip(start)
            .take(limit)
            .map(|p| json!({"id": p.id, "message": p.message, "created_time": graph_time(p.created_s), "permalink_url": format!("https://www.facebook.com/{}", p.id)}))
            .collect();
        let mut body = json!({ "data": page });
        if start + limit < newest.len() {
            body["paging"] = json!({"cursors": {"before": start.to_string(), "after": (start + limit).to_string()}, "next": "https://graph.facebook.com/next"});
        }
        ok(body)
    }
}

struct Api {
    state: Arc<Mutex<State>>,
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let q: HashMap<String, String> = req.url.query_pairs().into_owned().collect();
        let segs: Vec<String> = req
            .url
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let method = req.method.as_str();
        if let ("POST", ["v25.0", page, "photos"]) = (method, segs.as_slice()) {
            st.create_requests += 1;
            if *page != PAGE_ID {
                return error(
                    400,
                    100,
                    Some(33),
                    "Unsupported post request. Object with ID does not exist",
                );
            }
            return st.create(req);
        }
        if q.get("access_token").map(String::as_str) != Some(TOKEN) || st.revoked {
            return dead_token();
        }
        match (method, segs.as_slice()) {
            ("GET", ["v25.0", page]) if *page == PAGE_ID => {
                ok(json!({"id": PAGE_ID, "name": PAGE_NAME}))
            }
            ("GET", ["v25.0", page, "published_posts"]) if *page == PAGE_ID => st.list(&q),
            _ => error(
                400,
                100,
                Some(33),
                "Unsupported get request. Object with ID does not exist",
            ),
        }
    }
}

impl FacebookFake {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State {
            duplicate_check: true,
            ..State::default()
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

    /// `FACEBOOK_API_URL`.
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn set_create_mode(&self, mode: Mode) {
        self.with(|s| s.create_mode = Some(mode));
    }

    /// Every call refused 190, as for a Page token that died.
    pub fn set_revoked(&self, revoked: bool) {
        self.with(|s| s.revoked = revoked);
    }

    /// `false`: the Page takes every post, the same caption again too.
    pub fn set_duplicate_check(&self, on: bool) {
        self.with(|s| s.duplicate_check = on);
    }

    /// Reading the Page's posts refused `(#200)`.
    pub fn set_read_refused(&self, refused: bool) {
        self.with(|s| s.read_refused = refused);
    }

    /// A post made on the Page by hand (no image), now.
    pub fn seed_post(&self, message: &str) -> String {
        self.with(|s| {
            s.seq += 1;
            let id = format!("{PAGE_ID}_{}", 100_000_000_000 + s.seq);
            s.posts.push(Post {
                id: id.clone(),
                message: message.to_owned(),
                created_s: now_s(),
                image: None,
            });
            id
        })
    }

    pub fn posts(&self) -> Vec<Post> {
        self.with(|s| s.posts.clone())
    }

    /// The ids of the posts whose caption holds `slug`.
    pub fn posts_with(&self, slug: &str) -> Vec<String> {
        self.posts()
            .into_iter()
            .filter(|p| p.message.contains(slug))
            .map(|p| p.id)
            .collect()
    }

    pub fn images_with(&self, slug: &str) -> Vec<Received> {
        self.posts()
            .into_iter()
            .filter(|p| p.message.contains(slug))
            .filter_map(|p| p.image)
            .collect()
    }

    /// (create requests, posts).
    pub fn totals(&self) -> (u64, usize) {
        self.with(|s| (s.create_requests, s.posts.len()))
    }

    pub fn requests(&self) -> u64 {
        self.with(|s| s.requests)
    }

    pub fn read_requests(&self) -> u64 {
        self.with(|s| s.read_requests)
    }

    pub fn duplicates_refused(&self) -> u64 {
        self.with(|s| s.duplicates_refused)
    }
}

//! A fake of Meta's Graph container publishing, as Threads and Instagram speak it (one fake,
//! two [`Dialect`]s: `threads.rs` and `instagram.rs` name theirs; below, Threads' words stand
//! for both, the dialect giving Instagram's paths `/v25.0/{user}/media`,
//! `/v25.0/{user}/media_publish`, `content_publishing_limit`, its `caption` field, its
//! `status_code` and its limits): `access_token` checked on every call (as
//! a query or form parameter, as the Graph API takes it), `POST /v1.0/{user}/threads` making a
//! **container** from form fields (`media_type=IMAGE`, `image_url`, `text`, `alt_text`), the
//! image **fetched by the fake itself** from `image_url` as Threads does, the container's status
//! (`IN_PROGRESS` until the image is fetched and a configurable processing time has passed, then
//! `FINISHED`; `ERROR` when the image cannot be fetched or is outside Threads' image limits
//! (JPEG or PNG judged by the bytes, at most 8,000,000 bytes, 320 to 1440 pixels wide, a shape
//! of at most 10:1; the fetched image is kept on the container, [`Container::image`]); `EXPIRED` 24 hours
//! after it was made, on the fake's clock; `PUBLISHED`), `POST /v1.0/{user}/threads_publish`
//! with `creation_id`, `GET /v1.0/{id}` for a container or a post, the account's posts newest
//! first with cursor paging, the publishing quota (250 per 24 hours), and Graph error bodies
//! `{"error":{"message","type","code","error_subcode","fbtrace_id"}}`.
//!
//! What decides exactly-once, as on Threads: one container publishes at most once (a second
//! publish of it is refused), and **nothing else stops a duplicate**: two containers made from
//! one draft both publish, and the fake keeps both posts ([`MetaFake::max_posts_per_text`]).
//! [`MetaFake::set_republish`] breaks even that, as a faulty network would: a published
//! container publishes again, a second post (so that a test can show a duplicate).
//!
//! Fault modes ([`Mode`]) are applied before the request is looked at, as a rate limiter or a
//! proxy would answer, except `AcceptThenHang`, which does the work and answers late, and
//! `AcceptThenRefuse`, which does the work and answers a refusal. Which
//! wire details are guesses: the codes of the refusals of an already published or expired
//! container and of the publishing quota (Meta does not document them; the adapter must not
//! depend on them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use unicode_segmentation::UnicodeSegmentation;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;

/// What one network's Graph API calls things, and its limits.
pub struct FakeDialect {
    /// `v1.0`, `v25.0`.
    pub version: &'static str,
    /// The container (and list) path, the publish path, the quota path.
    pub container: &'static str,
    pub publish: &'static str,
    pub quota: &'static str,
    /// The text's field (`text`, `caption`).
    pub text_field: &'static str,
    /// The status read's fields: the status, and its error.
    pub status_key: &'static str,
    pub error_key: &'static str,
    pub token: &'static str,
    pub user_id: &'static str,
    pub username: &'static str,
    pub quota_total: u64,
    /// The Graph code of a used-up publishing quota.
    pub quota_code: i64,
    /// A refusal of the container's form (its media type, its text), or `None`.
    pub check_form: fn(&HashMap<String, String>, Counting) -> Option<ResponseTemplate>,
    /// Why it refuses an image it fetched; `None`: within its limits.
    pub image_refusal: fn(&Received) -> Option<String>,
    /// A post's permalink from its shortcode.
    pub permalink: fn(&str) -> String,
}

/// A network the fake speaks for.
pub trait Dialect: Send + Sync + 'static {
    const DIALECT: &'static FakeDialect;
}

pub const QUOTA_DURATION_S: i64 = 86_400;
/// A container not published within this long expires.
pub const CONTAINER_LIFETIME_MS: i64 = 24 * 3_600_000;

/// How a call answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// This status with Meta's body for it (500: Graph code 2; 502–504: a proxy's HTML page).
    /// Nothing is done.
    Status(u16),
    /// HTTP 429 with Graph code 613 ("Calls to this api have exceeded the rate limit").
    TooMany,
    /// HTTP 400 with Graph code 4 (a quota: "Application request limit reached").
    Quota,
    /// Do nothing; answer 503 only after the delay.
    Hang(Duration),
    /// Do the work, then answer only after the delay (the answer is lost to a client that
    /// gives up earlier).
    AcceptThenHang(Duration),
    /// Do the work, then answer a refusal (HTTP 400, Graph code 100), as a repeat of the
    /// request would be answered: a publish that published its container and was answered
    /// "already published" (a retry at Meta's edge). The container is `PUBLISHED` all the
    /// same, and its status says so.
    AcceptThenRefuse,
}

/// Which reading of Meta's "emojis are counted as the number of UTF-8 bytes" the fake enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// Unicode scalar values.
    Characters,
    /// An emoji grapheme counts its UTF-8 bytes.
    EmojiBytes,
}

#[derive(Debug, Clone)]
pub struct Container {
    pub id: String,
    pub media_type: String,
    pub image_url: Option<String>,
    pub text: String,
    pub alt_text: Option<String>,
    /// On the fake's clock (Unix ms).
    pub created_ms: i64,
    /// Processing ends at this real time (Unix ms).
    pub ready_at_ms: i64,
    /// The image fetch: `None` while it runs; `Some(Err(why))` when it failed or the image
    /// is outside the limits (the container is then in `ERROR`).
    pub fetched: Option<Result<usize, String>>,
    /// The image as fetched (taken or refused); `None` before the fetch, or when nothing came.
    pub image: Option<Received>,
    pub published_as: Option<String>,
    /// Set by the test: the container is in ERROR (or EXPIRED) whatever else.
    pub forced: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct Post {
    pub id: String,
    pub container: Option<String>,
    pub text: String,
    pub alt_text: Option<String>,
    pub image_url: Option<String>,
    pub shortcode: String,
    /// On the fake's clock (Unix ms).
    pub created_ms: i64,
}

struct State {
    d: &'static FakeDialect,
    /// A published container publishes again (a faulty network), making a duplicate.
    republish: bool,
    clock_offset: Duration,
    seq: u64,
    containers: HashMap<String, Container>,
    posts: Vec<Post>,
    processing: Duration,
    fetch_images: bool,
    counting: Counting,
    quota_total: u64,
    revoked: bool,
    /// Tokens minted later (a new `auth`, a refresh): accepted, never revoked by
    /// [`MetaFake::revoke`].
    granted: Vec<String>,
    /// Calls answered code 190 because their token was revoked.
    revoked_answers: u64,
    container_mode: Mode,
    publish_mode: Mode,
    read_mode: Mode,
    requests: u64,
    container_requests: u64,
    publish_requests: u64,
    status_reads: u64,
    media_reads: u64,
    list_reads: u64,
    limit_reads: u64,
    bad_tokens: u64,
    /// POSTs that carried parameters in the query string instead of the form.
    post_query_params: u64,
    image_fetches: u64,
    last_container_form: HashMap<String, String>,
}

pub struct MetaFake<D: Dialect> {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
    dialect: std::marker::PhantomData<D>,
}

impl<D: Dialect> Clone for MetaFake<D> {
    fn clone(&self) -> Self {
        Self {
            server: self.server.clone(),
            state: self.state.clone(),
            dialect: std::marker::PhantomData,
        }
    }
}

fn real_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

/// Threads' timestamp: `2026-12-04T10:15:00+0000`.
pub fn timestamp(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
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

fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json; charset=UTF-8")
        .set_body_json(body)
}

/// A Graph error body.
pub fn graph_error(
    status: u16,
    code: i64,
    subcode: Option<i64>,
    message: &str,
) -> ResponseTemplate {
    let mut error = json!({
        "message": message,
        "type": if code == 190 || code == 2500 { "OAuthException" } else { "THApiException" },
        "code": code,
        "fbtrace_id": format!("A{:x}", rand::random::<u64>()),
    });
    if let Some(s) = subcode {
        error["error_subcode"] = json!(s);
    }
    if code == 2 {
        error["is_transient"] = json!(true);
    }
    json_answer(status, json!({ "error": error }))
}

fn proxy_page(status: u16) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "text/html")
        .set_body_string(format!(
            "<html><head><title>{status}</title></head><body>Sorry, something went wrong.</body></html>"
        ))
}

pub fn bad_param(message: &str) -> ResponseTemplate {
    graph_error(400, 100, None, message)
}

/// The length the fake enforces, on its own: scalar values, or emoji graphemes as their bytes.
pub fn fake_len(text: &str, counting: Counting) -> usize {
    match counting {
        Counting::Characters => text.chars().count(),
        Counting::EmojiBytes => text
            .graphemes(true)
            .map(|g| {
                let emoji = g.chars().any(|c| {
                    matches!(u32::from(c), 0xFE0F | 0x200D | 0x20E3 | 0x1F000..=0x1FAFF | 0x2600..=0x27BF)
                });
                if emoji {
                    g.len()
                } else {
                    g.chars().count()
                }
            })
            .sum(),
    }
}

/// Fetches an image as Threads does, off the server's thread: `Ok(bytes)` for an image within
/// Threads' limits, else why not; and what arrived, if anything did.
fn fetch_image(
    url: &str,
    refusal: fn(&Received) -> Option<String>,
) -> (Result<usize, String>, Option<Received>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return (Err(e.to_string()), None),
    };
    rt.block_on(async {
        let client = match reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
        {
            Ok(c) => c,
            Err(e) => return (Err(e.to_string()), None),
        };
        let resp = match client.get(url).send().await {
            Ok(r) => r,
            Err(e) => return (Err(e.to_string()), None),
        };
        if !resp.status().is_success() {
            return (Err(format!("the image answered {}", resp.status())), None);
        }
        let declared = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return (Err(e.to_string()), None),
        };
        let got = Received::of(&bytes, &declared);
        match refusal(&got) {
            Some(why) => (Err(why.clone()), Some(got.refused(why))),
            None => (Ok(bytes.len()), Some(got)),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The API.

struct Api {
    state: Arc<Mutex<State>>,
}

impl State {
    fn now_ms(&self) -> i64 {
        real_now_ms() + i64::try_from(self.clock_offset.as_millis()).unwrap_or(0)
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("1789{:013}", self.seq)
    }

    fn fault(&self, mode: Mode) -> Option<ResponseTemplate> {
        match mode {
            Mode::Normal | Mode::AcceptThenHang(_) | Mode::AcceptThenRefuse => None,
            Mode::Status(500) => Some(graph_error(
                500,
                2,
                None,
                "An unexpected error has occurred. Please retry your request later.",
            )),
            Mode::Status(s) if (502..=504).contains(&s) => Some(proxy_page(s)),
            Mode::Status(s) => Some(graph_error(s, 1, None, "An unknown error occurred")),
            Mode::TooMany => Some(graph_error(
                429,
                613,
                None,
                "Calls to this api have exceeded the rate limit.",
            )),
            Mode::Quota => Some(graph_error(
                400,
                4,
                None,
                "Application request limit reached",
            )),
            Mode::Hang(d) => Some(proxy_page(503).set_delay(d)),
        }
    }

    fn late(mode: Mode, answer: ResponseTemplate) -> ResponseTemplate {
        match mode {
            Mode::AcceptThenHang(d) => answer.set_delay(d),
            Mode::AcceptThenRefuse => bad_param("This media has already been published"),
            _ => answer,
        }
    }

    /// The container's status now.
    fn status_of(&self, c: &Container) -> (&'static str, Option<String>) {
        if c.published_as.is_some() {
            return ("PUBLISHED", None);
        }
        if let Some(forced) = c.forced {
            let message = (forced == "ERROR").then(|| "UNKNOWN".to_owned());
            return (forced, message);
        }
        if self.now_ms() - c.created_ms > CONTAINER_LIFETIME_MS {
            return ("EXPIRED", None);
        }
        match &c.fetched {
            Some(Err(_)) => ("ERROR", Some("UNKNOWN".into())),
            Some(Ok(_)) if real_now_ms() >= c.ready_at_ms => ("FINISHED", None),
            _ => ("IN_PROGRESS", None),
        }
    }

    fn make_container(
        &mut self,
        p: &HashMap<String, String>,
        state: &Arc<Mutex<State>>,
    ) -> ResponseTemplate {
        self.last_container_form = p.clone();
        let mode = self.container_mode;
        if let Some(r) = self.fault(mode) {
            return r;
        }
        let media_type = p.get("media_type").cloned().unwrap_or_default();
        let text = p.get(self.d.text_field).cloned().unwrap_or_default();
        let image_url = p.get("image_url").cloned().filter(|u| !u.is_empty());
        if let Some(refusal) = (self.d.check_form)(p, self.counting) {
            return refusal;
        }
        match &image_url {
            None if media_type == "TEXT" => {}
            None => return bad_param("Param image_url is required for an image"),
            Some(u) if !(u.starts_with("https://") || u.starts_with("http://")) => {
                return bad_param("Param image_url must be a valid URL")
            }
            // A host that can never resolve (RFC 2606): refused at once.
            Some(u)
                if url::Url::parse(u)
                    .ok()
                    .and_then(|u| u.host_str().map(|h| h.ends_with(".invalid")))
                    .unwrap_or(true) =>
            {
                return graph_error(
                    400,
                    100,
                    Some(2_207_052),
                    "The media could not be fetched from this URI",
                )
            }
            Some(_) => {}
        }
        let id = self.next_id();
        let fetch = self.fetch_images && image_url.is_some();
        let container = Container {
            id: id.clone(),
            media_type,
            image_url: image_url.clone(),
            text,
            alt_text: p.get("alt_text").cloned().filter(|a| !a.is_empty()),
            created_ms: self.now_ms(),
            ready_at_ms: real_now_ms() + i64::try_from(self.processing.as_millis()).unwrap_or(0),
            fetched: if fetch { None } else { Some(Ok(0)) },
            image: None,
            published_as: None,
            forced: None,
        };
        self.containers.insert(id.clone(), container);
        if let (true, Some(url)) = (fetch, image_url) {
            self.image_fetches += 1;
            let state = state.clone();
            let cid = id.clone();
            let refusal = self.d.image_refusal;
            std::thread::spawn(move || {
                let (got, image) = fetch_image(&url, refusal);
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(c) = st.containers.get_mut(&cid) {
                    c.fetched = Some(got);
                    c.image = image;
                }
            });
        }
        Self::late(mode, json_answer(200, json!({ "id": id })))
    }

    fn publish(&mut self, p: &HashMap<String, String>) -> ResponseTemplate {
        let mode = self.publish_mode;
        if let Some(r) = self.fault(mode) {
            return r;
        }
        let Some(cid) = p.get("creation_id").filter(|c| !c.is_empty()).cloned() else {
            return bad_param("The parameter creation_id is required");
        };
        let Some(c) = self.containers.get(&cid).cloned() else {
            return graph_error(
                400,
                24,
                Some(4_279_009),
                "The requested resource does not exist",
            );
        };
        match self.status_of(&c).0 {
            "FINISHED" => {}
            "IN_PROGRESS" => {
                return graph_error(
                    400,
                    24,
                    Some(4_279_009),
                    "The requested resource does not exist",
                )
            }
            "PUBLISHED" if self.republish => {}
            "PUBLISHED" => return bad_param("This media has already been published"),
            "EXPIRED" => return bad_param("The media container has expired"),
            _ => return bad_param("The media container could not be published"),
        }
        let now = self.now_ms();
        let used = self
            .posts
            .iter()
            .filter(|p| now - p.created_ms < QUOTA_DURATION_S * 1000)
            .count() as u64;
        if used >= self.quota_total {
            return graph_error(
                400,
                self.d.quota_code,
                None,
                "Application request limit reached",
            );
        }
        let id = self.next_id();
        let shortcode = format!("C{:010x}", rand::random::<u64>() & 0xff_ffff_ffff);
        self.posts.push(Post {
            id: id.clone(),
            container: Some(cid.clone()),
            text: c.text.clone(),
            alt_text: c.alt_text.clone(),
            image_url: c.image_url.clone(),
            shortcode,
            created_ms: now,
        });
        if let Some(c) = self.containers.get_mut(&cid) {
            c.published_as = Some(id.clone());
        }
        Self::late(mode, json_answer(200, json!({ "id": id })))
    }

    fn post_json(&self, p: &Post, fields: &[String]) -> Value {
        let mut v = json!({ "id": p.id });
        for f in fields {
            let value = match f.as_str() {
                "permalink" => json!((self.d.permalink)(&p.shortcode)),
                "shortcode" => json!(p.shortcode),
                f if f == self.d.text_field => json!(p.text),
                "timestamp" => json!(timestamp(p.created_ms)),
                "alt_text" => json!(p.alt_text),
                "media_type" => json!("IMAGE"),
                "username" => json!(self.d.username),
                "media_product_type" => json!("THREADS"),
                _ => continue,
            };
            v[f.as_str()] = value;
        }
        v
    }

    fn read_object(&mut self, id: &str, fields: &[String]) -> ResponseTemplate {
        if let Some(c) = self.containers.get(id).cloned() {
            self.status_reads += 1;
            let (status, message) = self.status_of(&c);
            let mut v = json!({ "id": c.id });
            if fields.iter().any(|f| f == self.d.status_key) {
                v[self.d.status_key] = json!(status);
            }
            if let (true, Some(m)) = (fields.iter().any(|f| f == self.d.error_key), message) {
                v[self.d.error_key] = json!(m);
            }
            return json_answer(200, v);
        }
        if let Some(p) = self.posts.iter().find(|p| p.id == id).cloned() {
            self.media_reads += 1;
            return json_answer(200, self.post_json(&p, fields));
        }
        graph_error(
            400,
            100,
            Some(33),
            &format!("Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."),
        )
    }

    fn list(
        &mut self,
        q: &HashMap<String, String>,
        fields: &[String],
        base: &str,
    ) -> ResponseTemplate {
        self.list_reads += 1;
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(25)
            .clamp(1, 100);
        let mut list: Vec<&Post> = self.posts.iter().collect();
        list.sort_by_key(|p| std::cmp::Reverse((p.created_ms, p.id.clone())));
        let start = match q.get("after") {
            Some(cursor) => match list.iter().position(|p| cursor_of(&p.id) == *cursor) {
                Some(i) => i + 1,
                None => return bad_param("Invalid after cursor"),
            },
            None => 0,
        };
        let page: Vec<&Post> = list.iter().skip(start).take(limit).copied().collect();
        let more = start + page.len() < list.len();
        let data: Vec<Value> = page.iter().map(|p| self.post_json(p, fields)).collect();
        let mut body = json!({ "data": data });
        if let (Some(first), Some(last)) = (page.first(), page.last()) {
            body["paging"] =
                json!({"cursors": {"before": cursor_of(&first.id), "after": cursor_of(&last.id)}});
            if more {
                body["paging"]["next"] = json!(format!(
                    "{base}/{}/{}/{}?fields={}&limit={limit}&after={}",
                    self.d.version,
                    self.d.user_id,
                    self.d.container,
                    fields.join(","),
                    cursor_of(&last.id)
                ));
            }
        }
        json_answer(200, body)
    }

    fn limit(&mut self) -> ResponseTemplate {
        self.limit_reads += 1;
        let now = self.now_ms();
        let used = self
            .posts
            .iter()
            .filter(|p| now - p.created_ms < QUOTA_DURATION_S * 1000)
            .count();
        json_answer(
            200,
            json!({"data": [{"quota_usage": used, "config": {"quota_total": self.quota_total, "quota_duration": QUOTA_DURATION_S}}]}),
        )
    }
}

/// An opaque-looking cursor for a post.
fn cursor_of(id: &str) -> String {
    format!("QVFI{}", hex::encode(id))
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let method = req.method.as_str().to_owned();
        let query: HashMap<String, String> = req.url.query_pairs().into_owned().collect();
        let form: HashMap<String, String> = if method == "POST" {
            url::form_urlencoded::parse(&req.body)
                .into_owned()
                .collect()
        } else {
            HashMap::new()
        };
        if method == "POST" && !query.is_empty() {
            st.post_query_params += 1;
        }
        // The Graph API takes parameters from either; the form wins.
        let mut params = query.clone();
        params.extend(form);
        let d = st.d;
        let Some(path) = req.url.path().strip_prefix(&format!("/{}/", d.version)) else {
            return graph_error(400, 2500, None, "Unknown path components");
        };
        let decoded: Vec<String> = path
            .split('/')
            .map(|p| {
                percent_encoding::percent_decode_str(p)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
        match (method.as_str(), parts.as_slice()) {
            ("POST", [_, p]) if *p == d.container => st.container_requests += 1,
            ("POST", [_, p]) if *p == d.publish => st.publish_requests += 1,
            _ => {}
        }
        match params.get("access_token").map(String::as_str) {
            None | Some("") => {
                st.bad_tokens += 1;
                return graph_error(
                    400,
                    2500,
                    None,
                    "An active access token must be used to query information about the current user.",
                );
            }
            Some(t) if t != d.token && !st.granted.iter().any(|g| g == t) => {
                st.bad_tokens += 1;
                return graph_error(
                    400,
                    190,
                    None,
                    "Invalid OAuth access token - Cannot parse access token",
                );
            }
            Some(t) if st.revoked && t == d.token => {
                st.revoked_answers += 1;
                return graph_error(
                    400,
                    190,
                    Some(460),
                    "Error validating access token: The session has been invalidated because the user changed their password or Facebook has changed the session for security reasons.",
                );
            }
            Some(_) => {}
        }
        let fields: Vec<String> = params
            .get("fields")
            .map(|f| {
                f.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let me = |u: &str| u == "me" || u == d.user_id;
        let read_fault = st.fault(st.read_mode);
        let base = self.base(req);
        match (method.as_str(), parts.as_slice()) {
            ("POST", [u, p]) if me(u) && *p == d.container => {
                let state = self.state.clone();
                st.make_container(&params, &state)
            }
            ("POST", [u, p]) if me(u) && *p == d.publish => st.publish(&params),
            ("GET", [u, p]) if me(u) && *p == d.container => {
                read_fault.unwrap_or_else(|| st.list(&params, &fields, &base))
            }
            ("GET", [u, p]) if me(u) && *p == d.quota => {
                read_fault.unwrap_or_else(|| st.limit())
            }
            ("GET", [id]) => read_fault.unwrap_or_else(|| st.read_object(id, &fields)),
            (_, [u, ..]) if !me(u) => graph_error(
                400,
                100,
                Some(33),
                &format!("Unsupported request. Object with ID '{u}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."),
            ),
            _ => graph_error(400, 2500, None, "Unknown path components"),
        }
    }
}

impl Api {
    fn base(&self, req: &Request) -> String {
        format!(
            "{}://{}",
            req.url.scheme(),
            req.url
                .host_str()
                .map_or_else(String::new, |h| match req.url.port() {
                    Some(p) => format!("{h}:{p}"),
                    None => h.to_owned(),
                })
        )
    }
}

impl<D: Dialect> MetaFake<D> {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let d = D::DIALECT;
        let state = Arc::new(Mutex::new(State {
            d,
            republish: false,
            clock_offset: Duration::ZERO,
            seq: 0,
            containers: HashMap::new(),
            posts: Vec::new(),
            processing: Duration::ZERO,
            fetch_images: true,
            counting: Counting::EmojiBytes,
            quota_total: d.quota_total,
            revoked: false,
            granted: Vec::new(),
            revoked_answers: 0,
            container_mode: Mode::Normal,
            publish_mode: Mode::Normal,
            read_mode: Mode::Normal,
            requests: 0,
            container_requests: 0,
            publish_requests: 0,
            status_reads: 0,
            media_reads: 0,
            list_reads: 0,
            limit_reads: 0,
            bad_tokens: 0,
            post_query_params: 0,
            image_fetches: 0,
            last_container_form: HashMap::new(),
        }));
        Mock::given(any())
            .respond_with(Api {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        Self {
            server,
            state,
            dialect: std::marker::PhantomData,
        }
    }

    /// A published container publishes again from now on (`true`): a faulty network, on
    /// which a second publish of the kept container makes a duplicate.
    pub fn set_republish(&self, on: bool) {
        self.with(|s| s.republish = on);
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// Moves the fake's clock forward (container expiry, the quota's window, posts' dates).
    pub fn advance(&self, d: Duration) {
        self.with(|s| s.clock_offset += d);
    }

    /// Containers made from now on stay `IN_PROGRESS` this long (real time) after their image
    /// is fetched.
    pub fn set_processing(&self, d: Duration) {
        self.with(|s| s.processing = d);
    }

    /// Whether the fake fetches `image_url` (on by default); off, every image is taken as good.
    pub fn set_fetch_images(&self, on: bool) {
        self.with(|s| s.fetch_images = on);
    }

    pub fn set_counting(&self, c: Counting) {
        self.with(|s| s.counting = c);
    }

    pub fn set_quota_total(&self, n: u64) {
        self.with(|s| s.quota_total = n);
    }

    /// The owner revoked the token (or it expired): every call answers code 190.
    pub fn revoke(&self) {
        self.set_revoked(true);
    }

    /// Revoked (as [`MetaFake::revoke`]) or not: `false` gives the token back its rights.
    pub fn set_revoked(&self, on: bool) {
        self.with(|s| s.revoked = on);
    }

    /// A new token for the same user (a new `auth`, a refresh): accepted from now on, and
    /// never revoked by [`MetaFake::revoke`] (which revokes the fake's own token).
    #[allow(dead_code)]
    pub fn grant(&self, token: &str) {
        self.with(|s| s.granted.push(token.to_owned()));
    }

    /// Calls answered code 190 because their token was revoked.
    #[allow(dead_code)]
    pub fn revoked_answers(&self) -> u64 {
        self.with(|s| s.revoked_answers)
    }

    pub fn set_container_mode(&self, m: Mode) {
        self.with(|s| s.container_mode = m);
    }

    pub fn set_publish_mode(&self, m: Mode) {
        self.with(|s| s.publish_mode = m);
    }

    /// Every GET (status, post, list, quota).
    pub fn set_read_mode(&self, m: Mode) {
        self.with(|s| s.read_mode = m);
    }

    /// Puts a container in `ERROR` or `EXPIRED` whatever else.
    pub fn force_status(&self, container: &str, status: &'static str) {
        assert!(matches!(status, "ERROR" | "EXPIRED"), "{status}");
        self.with(|s| {
            if let Some(c) = s.containers.get_mut(container) {
                c.forced = Some(status);
            }
        });
    }

    /// Adds a post as if published `age` ago (other posts on the account).
    pub fn seed_post(&self, text: &str, age: Duration) -> String {
        self.with(|s| {
            let at = s.now_ms() - i64::try_from(age.as_millis()).unwrap_or(0);
            let id = s.next_id();
            s.posts.push(Post {
                id: id.clone(),
                container: None,
                text: text.to_owned(),
                alt_text: None,
                image_url: None,
                shortcode: format!("S{:010x}", rand::random::<u64>() & 0xff_ffff_ffff),
                created_ms: at,
            });
            id
        })
    }

    /// The container's status as Threads would answer it now.
    pub fn status(&self, container: &str) -> Option<&'static str> {
        self.with(|s| {
            s.containers
                .get(container)
                .cloned()
                .map(|c| s.status_of(&c).0)
        })
    }

    pub fn container(&self, id: &str) -> Option<Container> {
        self.with(|s| s.containers.get(id).cloned())
    }

    pub fn containers(&self) -> Vec<Container> {
        self.with(|s| {
            let mut all: Vec<Container> = s.containers.values().cloned().collect();
            all.sort_by(|a, b| a.id.cmp(&b.id));
            all
        })
    }

    pub fn posts(&self) -> Vec<Post> {
        self.with(|s| s.posts.clone())
    }

    /// Every image the fake fetched for a container (taken or refused), in container order.
    pub fn images(&self) -> Vec<Received> {
        self.containers()
            .into_iter()
            .filter_map(|c| c.image)
            .collect()
    }

    /// Posts that exist (published or seeded).
    pub fn posts_created(&self) -> usize {
        self.with(|s| s.posts.len())
    }

    /// The ids of the posts whose text contains `needle`.
    pub fn posts_with(&self, needle: &str) -> Vec<String> {
        self.posts()
            .into_iter()
            .filter(|p| p.text.contains(needle))
            .map(|p| p.id)
            .collect()
    }

    /// (publish requests, posts) over the whole test.
    pub fn totals(&self) -> (u64, usize) {
        (self.publish_requests(), self.posts_created())
    }

    /// The images of the posts whose text contains `needle`: each as the fake fetched it
    /// from its container's URL.
    pub fn images_with(&self, needle: &str) -> Vec<Received> {
        self.posts()
            .into_iter()
            .filter(|p| p.text.contains(needle))
            .filter_map(|p| {
                p.container
                    .and_then(|c| self.container(&c))
                    .and_then(|c| c.image)
            })
            .collect()
    }

    /// The most posts that carry one text: 1 means no duplicate was published.
    pub fn max_posts_per_text(&self) -> usize {
        self.with(|s| {
            let mut counts = HashMap::new();
            for p in &s.posts {
                *counts.entry(p.text.as_str()).or_insert(0usize) += 1;
            }
            counts.into_values().max().unwrap_or(0)
        })
    }

    /// The permalink the network shows for a post.
    pub fn permalink(&self, post: &Post) -> String {
        (D::DIALECT.permalink)(&post.shortcode)
    }

    pub fn requests(&self) -> u64 {
        self.with(|s| s.requests)
    }

    pub fn container_requests(&self) -> u64 {
        self.with(|s| s.container_requests)
    }

    pub fn publish_requests(&self) -> u64 {
        self.with(|s| s.publish_requests)
    }

    pub fn status_reads(&self) -> u64 {
        self.with(|s| s.status_reads)
    }

    pub fn media_reads(&self) -> u64 {
        self.with(|s| s.media_reads)
    }

    pub fn list_reads(&self) -> u64 {
        self.with(|s| s.list_reads)
    }

    pub fn limit_reads(&self) -> u64 {
        self.with(|s| s.limit_reads)
    }

    /// Requests refused for a missing or wrong token.
    pub fn bad_tokens(&self) -> u64 {
        self.with(|s| s.bad_tokens)
    }

    /// POSTs that put parameters (the token) in the URL instead of the form.
    pub fn post_query_params(&self) -> u64 {
        self.with(|s| s.post_query_params)
    }

    pub fn image_fetches(&self) -> u64 {
        self.with(|s| s.image_fetches)
    }

    /// The form of the latest `POST /{user}/threads`.
    pub fn last_container_form(&self) -> HashMap<String, String> {
        self.with(|s| s.last_container_form.clone())
    }
}

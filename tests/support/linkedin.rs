//! A LinkedIn fake speaking its real wire format: versioned headers, initializeUpload, the upload
//! PUT, create-post with `x-restli-id`, the exact error bodies, and LinkedIn's duplicate-content
//! answer. It counts every create-post request and every post it created.
//!
//! The upload PUT holds an image to LinkedIn's documented limits:
//! JPEG, PNG or GIF judged by the bytes, at most 36,152,320 pixels; anything else is refused,
//! and every image that arrived is kept ([`LinkedInFake::images`]) with its hash and facts.
//!
//! Its duplicate check is a setting ([`DuplicateCheck`]), so that a test of "no duplicate" can
//! run against a fake that *would* create the duplicate: with the check off, or racy the way
//! LinkedIn's is (a post becomes visible to the check only once it has been processed).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wiremock::matchers::{method, path, path_regex, query_param};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::received::Received;

/// LinkedIn's documented image limit: "under 36,152,320 pixels".
pub const MAX_PIXELS: u64 = 36_152_320;
/// The formats LinkedIn documents for images.
pub const FORMATS: [&str; 3] = ["image/jpeg", "image/png", "image/gif"];

/// How a step answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Answer this status with LinkedIn's error body.
    Status(u16),
    /// Answer this status `n` times, then normally.
    StatusTimes(u16, u32),
    /// Create nothing, answer only after the delay.
    Hang(Duration),
    /// Create the post, then answer 201 only after the delay.
    AcceptThenHang(Duration),
}

/// How the fake answers a create-post whose commentary it already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateCheck {
    /// No duplicate check at all: every well-formed create-post makes a new post. The setting
    /// for every "exactly one post" proof that must not lean on LinkedIn.
    Off,
    /// LinkedIn's real behaviour as far as it is known: a create-post takes `processing` before
    /// the post exists and becomes visible to the duplicate check, and the answer comes only
    /// then; a request that arrives meanwhile with the same text makes a second post. Repeats
    /// are refused with 422 DUPLICATE_POST for `window` after the post exists (`None`: forever).
    Racy {
        processing: Duration,
        window: Option<Duration>,
    },
}

impl DuplicateCheck {
    /// Instant processing and an endless window: the kindest LinkedIn there could be. Only
    /// tests that say in their name that they rely on LinkedIn's duplicate answer use it.
    pub const INSTANT: Self = Self::Racy {
        processing: Duration::ZERO,
        window: None,
    };
}

#[derive(Debug, Clone)]
pub struct Post {
    pub urn: String,
    pub commentary: String,
    pub image: String,
    pub alt: Option<String>,
    /// When the request arrived.
    pub received: Instant,
    /// When the post exists (and the duplicate check can see it).
    pub visible: Instant,
}

struct State {
    duplicate_check: DuplicateCheck,
    next: u64,
    posts: Vec<Post>,
    create_requests: u64,
    /// Create-posts answered 422 DUPLICATE_POST.
    duplicate_answers: u64,
    init_requests: u64,
    uploads: u64,
    /// Every image PUT that reached the upload route with the right token: (image URN, what
    /// arrived), in order.
    images: Vec<(String, Received)>,
    create_mode: Option<Mode>,
    init_mode: Option<Mode>,
    upload_mode: Option<Mode>,
    last_create_body: Value,
    bad_headers: u64,
    /// Added to every answer's own delay (to widen crash windows).
    delay: Duration,
    /// The owner revoked the fake's own token: every call with it answers 401
    /// `REVOKED_ACCESS_TOKEN`.
    revoked: bool,
    /// Tokens minted later (a new `auth`, a refresh), accepted beside the fake's own.
    granted: Vec<String>,
    /// Calls answered 401 because their token was revoked.
    revoked_answers: u64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            duplicate_check: DuplicateCheck::INSTANT,
            next: 0,
            posts: Vec::new(),
            create_requests: 0,
            duplicate_answers: 0,
            init_requests: 0,
            uploads: 0,
            images: Vec::new(),
            create_mode: None,
            init_mode: None,
            upload_mode: None,
            last_create_body: Value::Null,
            bad_headers: 0,
            delay: Duration::ZERO,
            revoked: false,
            granted: Vec::new(),
            revoked_answers: 0,
        }
    }
}

#[derive(Clone)]
pub struct LinkedInFake {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
    token: String,
}

pub fn error_body(status: u16) -> Value {
    match status {
        401 => {
            json!({"message": "Empty oauth2_access_token", "serviceErrorCode": 65604, "status": 401})
        }
        403 => {
            json!({"message": "Not enough permissions to access: partnerApiPostsExternal.CREATE.20240101", "serviceErrorCode": 100, "status": 403})
        }
        426 => {
            json!({"status": 426, "code": "NONEXISTENT_VERSION", "message": "Requested version 20240901 is not active"})
        }
        429 => {
            json!({"message": "Resource level throttle APPLICATION DAY limit for calls to this resource is reached.", "status": 429})
        }
        s => json!({"message": "Internal Server Error", "status": s}),
    }
}

fn duplicate_body(urn: &str) -> Value {
    json!({
        "errorDetailType": "com.linkedin.common.error.BadRequest",
        "message": format!("com.linkedin.content.common.exception.BadRequestResponseException: Content is a duplicate of {urn}"),
        "errorDetails": {"inputErrors": [{"description": "Duplicate post is detected", "input": {}, "code": "DUPLICATE_POST"}]},
        "status": 422
    })
}

/// Why LinkedIn refuses this image, with its answer; `None`: within the documented limits.
///
/// LinkedIn documents the limits (JPG, PNG, GIF; under 36,152,320 pixels) but no body for a
/// refused upload: the fake answers 400 in LinkedIn's usual error shape
/// (`{"message","serviceErrorCode","status"}`); the wording and the code are not confirmed.
fn image_refusal(got: &Received) -> Option<(String, Value)> {
    let why = if !got.is_one_of(&FORMATS) {
        format!(
            "Unsupported image type {}: JPG, PNG and GIF are supported",
            got.format.unwrap_or("(unknown)")
        )
    } else if got.pixels() > MAX_PIXELS {
        format!(
            "Image of {}x{} = {} pixels exceeds the maximum of {MAX_PIXELS} pixels",
            got.width,
            got.height,
            got.pixels()
        )
    } else {
        return None;
    };
    let body = json!({"message": why, "serviceErrorCode": 100, "status": 400});
    Some((why, body))
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// An answer and how long after the request it is given.
type Answer = (ResponseTemplate, Duration);

fn now_answer(t: ResponseTemplate) -> Answer {
    (t, Duration::ZERO)
}

/// Applies a fault mode; `None` means "answer normally".
fn fault(mode: &mut Option<Mode>) -> Option<Answer> {
    match mode.unwrap_or(Mode::Normal) {
        Mode::Normal | Mode::AcceptThenHang(_) => None,
        Mode::Status(s) => Some(now_answer(
            ResponseTemplate::new(s).set_body_json(error_body(s)),
        )),
        Mode::StatusTimes(s, n) => {
            *mode = if n <= 1 {
                Some(Mode::Normal)
            } else {
                Some(Mode::StatusTimes(s, n - 1))
            };
            Some(now_answer(
                ResponseTemplate::new(s).set_body_json(error_body(s)),
            ))
        }
        Mode::Hang(d) => Some((ResponseTemplate::new(500), d)),
    }
}

struct Api {
    state: Arc<Mutex<State>>,
    token: String,
    base: String,
    route: Route,
}

#[derive(Clone, Copy)]
enum Route {
    Init,
    Upload,
    Create,
}

impl Api {
    fn headers_ok(&self, st: &State, req: &Request, versioned: bool) -> bool {
        let got = header(req, "authorization");
        let bearer = |t: &str| got == format!("Bearer {t}");
        let auth_ok = (bearer(&self.token) && !st.revoked) || st.granted.iter().any(|t| bearer(t));
        if !versioned {
            return auth_ok;
        }
        let v = header(req, "linkedin-version");
        auth_ok
            && v.len() == 6
            && v.chars().all(|c| c.is_ascii_digit())
            && header(req, "x-restli-protocol-version") == "2.0.0"
            && header(req, "content-type").starts_with("application/json")
    }
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let delay = self.state.lock().unwrap_or_else(|p| p.into_inner()).delay;
        // The extra delay adds to the answer's own (a fault's hang, LinkedIn's processing), so
        // that a slowed fake can never answer 201 before its post exists.
        let (answer, own) = self.answer(req);
        let total = own + delay;
        if total.is_zero() {
            answer
        } else {
            answer.set_delay(total)
        }
    }
}

impl Api {
    /// A 401: `REVOKED_ACCESS_TOKEN` (README "Getting credentials", LinkedIn) for the revoked token,
    /// LinkedIn's answer to a missing or unknown one otherwise.
    fn unauthorized(&self, st: &mut State, req: &Request) -> Answer {
        if st.revoked && header(req, "authorization") == format!("Bearer {}", self.token) {
            st.revoked_answers += 1;
            return now_answer(ResponseTemplate::new(401).set_body_json(json!({
                "status": 401,
                "serviceErrorCode": 65601,
                "code": "REVOKED_ACCESS_TOKEN",
                "message": "The token used in the request has been revoked by the user"
            })));
        }
        st.bad_headers += 1;
        now_answer(ResponseTemplate::new(401).set_body_json(error_body(401)))
    }

    fn answer(&self, req: &Request) -> Answer {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match self.route {
            Route::Init => {
                st.init_requests += 1;
                if !self.headers_ok(&st, req, true) {
                    return self.unauthorized(&mut st, req);
                }
                if let Some(r) = fault(&mut st.init_mode) {
                    return r;
                }
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let owner = body
                    .pointer("/initializeUploadRequest/owner")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !(owner.starts_with("urn:li:person:")
                    || owner.starts_with("urn:li:organization:"))
                {
                    return now_answer(
                        ResponseTemplate::new(422)
                            .set_body_json(json!({"message": "owner is invalid", "status": 422})),
                    );
                }
                st.next += 1;
                let n = st.next;
                now_answer(ResponseTemplate::new(200).set_body_json(json!({"value": {
                    "uploadUrlExpiresAt": 1_900_000_000_000u64,
                    "uploadUrl": format!("{}/upload/{n}", self.base),
                    "image": format!("urn:li:image:C4E{n}")
                }})))
            }
            Route::Upload => {
                if !self.headers_ok(&st, req, false) {
                    return self.unauthorized(&mut st, req);
                }
                if let Some(r) = fault(&mut st.upload_mode) {
                    return r;
                }
                let n = req.url.path().trim_start_matches("/upload/");
                let urn = format!("urn:li:image:C4E{n}");
                let got = Received::of(&req.body, header(req, "content-type"));
                if let Some((why, body)) = image_refusal(&got) {
                    st.images.push((urn, got.refused(why)));
                    return now_answer(ResponseTemplate::new(400).set_body_json(body));
                }
                st.images.push((urn, got));
                st.uploads += 1;
                now_answer(ResponseTemplate::new(201))
            }
            Route::Create => {
                st.create_requests += 1;
                if !self.headers_ok(&st, req, true) {
                    return self.unauthorized(&mut st, req);
                }
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                st.last_create_body = body.clone();
                let mode = st.create_mode.unwrap_or(Mode::Normal);
                if let Some(r) = fault(&mut st.create_mode) {
                    return r;
                }
                let commentary = body
                    .get("commentary")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let image = body
                    .pointer("/content/media/id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let well_formed = body
                    .get("author")
                    .and_then(Value::as_str)
                    .is_some_and(|a| a.starts_with("urn:li:"))
                    && body.get("visibility") == Some(&json!("PUBLIC"))
                    && body.get("lifecycleState") == Some(&json!("PUBLISHED"))
                    && body.pointer("/distribution/feedDistribution") == Some(&json!("MAIN_FEED"))
                    && image.starts_with("urn:li:image:")
                    && !commentary.is_empty();
                if !well_formed {
                    return now_answer(
                        ResponseTemplate::new(422)
                            .set_body_json(json!({"message": "malformed post", "status": 422})),
                    );
                }
                let now = Instant::now();
                let processing = match st.duplicate_check {
                    DuplicateCheck::Off => Duration::ZERO,
                    DuplicateCheck::Racy { processing, window } => {
                        // Only posts that exist already, and are inside the window, are seen.
                        let seen = st
                            .posts
                            .iter()
                            .find(|p| {
                                p.commentary == commentary
                                    && p.visible <= now
                                    && window.is_none_or(|w| now.duration_since(p.visible) <= w)
                            })
                            .map(|p| p.urn.clone());
                        if let Some(existing) = seen {
                            st.duplicate_answers += 1;
                            return now_answer(
                                ResponseTemplate::new(422).set_body_json(duplicate_body(&existing)),
                            );
                        }
                        processing
                    }
                };
                st.next += 1;
                let urn = format!("urn:li:share:71{:015}", st.next);
                st.posts.push(Post {
                    urn: urn.clone(),
                    commentary,
                    image,
                    alt: body
                        .pointer("/content/media/altText")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    received: now,
                    visible: now + processing,
                });
                let answer = ResponseTemplate::new(201).insert_header("x-restli-id", urn.as_str());
                match mode {
                    Mode::AcceptThenHang(d) => (answer, processing + d),
                    _ => (answer, processing),
                }
            }
        }
    }
}

impl LinkedInFake {
    pub async fn start(token: &str) -> Self {
        let server = Arc::new(MockServer::start().await);
        let state = Arc::new(Mutex::new(State::default()));
        let api = |route| Api {
            state: state.clone(),
            token: token.to_owned(),
            base: server.uri(),
            route,
        };
        Mock::given(method("POST"))
            .and(path("/rest/images"))
            .and(query_param("action", "initializeUpload"))
            .respond_with(api(Route::Init))
            .mount(&server)
            .await;
        Mock::given(method("PUT"))
            .and(path_regex(r"^/upload/\d+$"))
            .respond_with(api(Route::Upload))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/rest/posts"))
            .respond_with(api(Route::Create))
            .mount(&server)
            .await;
        // Reading posts needs a restricted permission: nothing may rely on it.
        Mock::given(method("GET"))
            .and(path("/rest/posts"))
            .respond_with(ResponseTemplate::new(403).set_body_json(error_body(403)))
            .mount(&server)
            .await;
        Self {
            server,
            state,
            token: token.to_owned(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn create_requests(&self) -> u64 {
        self.with(|s| s.create_requests)
    }

    /// Create-posts refused with 422 DUPLICATE_POST (LinkedIn's duplicate answer).
    pub fn duplicate_answers(&self) -> u64 {
        self.with(|s| s.duplicate_answers)
    }

    pub fn posts_created(&self) -> usize {
        self.with(|s| s.posts.len())
    }

    pub fn posts(&self) -> Vec<Post> {
        self.with(|s| s.posts.clone())
    }

    pub fn init_requests(&self) -> u64 {
        self.with(|s| s.init_requests)
    }

    /// Image PUTs taken (within the limits).
    pub fn uploads(&self) -> u64 {
        self.with(|s| s.uploads)
    }

    /// Every image that reached the upload PUT (taken or refused), in order.
    pub fn images(&self) -> Vec<Received> {
        self.with(|s| s.images.iter().map(|(_, r)| r.clone()).collect())
    }

    /// The image a post carries, as it was uploaded (its URN's upload).
    pub fn image_of(&self, post: &Post) -> Option<Received> {
        self.with(|s| {
            s.images
                .iter()
                .rev()
                .find(|(urn, r)| *urn == post.image && r.taken())
                .map(|(_, r)| r.clone())
        })
    }

    pub fn bad_headers(&self) -> u64 {
        self.with(|s| s.bad_headers)
    }

    pub fn last_create_body(&self) -> Value {
        self.with(|s| s.last_create_body.clone())
    }

    /// Sets how repeated text is treated (see [`DuplicateCheck`]).
    pub fn set_duplicate_check(&self, check: DuplicateCheck) {
        self.with(|s| s.duplicate_check = check);
    }

    /// The most posts that carry one text: 1 means no duplicate was created.
    pub fn max_posts_per_text(&self) -> usize {
        self.with(|s| {
            let mut counts = std::collections::HashMap::new();
            for p in &s.posts {
                *counts.entry(p.commentary.as_str()).or_insert(0usize) += 1;
            }
            counts.into_values().max().unwrap_or(0)
        })
    }

    /// Posts whose commentary contains `needle` (a key's slug: every caption carries it).
    pub fn posts_containing(&self, needle: &str) -> Vec<Post> {
        self.with(|s| {
            s.posts
                .iter()
                .filter(|p| p.commentary.contains(needle))
                .cloned()
                .collect()
        })
    }

    /// Texts that were posted more than once: 0 means no duplicate was created.
    pub fn duplicated_texts(&self) -> usize {
        self.with(|s| {
            let mut counts = std::collections::HashMap::new();
            for p in &s.posts {
                *counts.entry(p.commentary.as_str()).or_insert(0usize) += 1;
            }
            counts.values().filter(|n| **n > 1).count()
        })
    }

    /// The duplicate check now in force.
    pub fn duplicate_check(&self) -> DuplicateCheck {
        self.with(|s| s.duplicate_check)
    }

    /// The owner revoked the fake's own token (every call with it answers 401
    /// `REVOKED_ACCESS_TOKEN`), or not.
    #[allow(dead_code)]
    pub fn set_revoked(&self, on: bool) {
        self.with(|s| s.revoked = on);
    }

    /// A new token for the same member (a new `auth`, a refresh): accepted from now on.
    #[allow(dead_code)]
    pub fn grant(&self, token: &str) {
        self.with(|s| s.granted.push(token.to_owned()));
    }

    /// Calls answered 401 because their token was revoked.
    #[allow(dead_code)]
    pub fn revoked_answers(&self) -> u64 {
        self.with(|s| s.revoked_answers)
    }

    pub fn set_create_mode(&self, mode: Mode) {
        self.with(|s| s.create_mode = Some(mode));
    }

    pub fn set_init_mode(&self, mode: Mode) {
        self.with(|s| s.init_mode = Some(mode));
    }

    /// Delays every answer by `d` more (on top of a fault's hang or LinkedIn's processing).
    pub fn set_delay(&self, d: Duration) {
        self.with(|s| s.delay = d);
    }

    pub fn set_upload_mode(&self, mode: Mode) {
        self.with(|s| s.upload_mode = Some(mode));
    }

    /// Number of requests of any kind that reached the fake.
    pub async fn total_requests(&self) -> usize {
        self.server.received_requests().await.map_or(0, |r| r.len())
    }
}

//! Triggers: one router for the HTTP routes (Function URL and `postonce serve` alike), the
//! console event, the sweep and the MCP server; with what `status`, `schedule list` ([`stored`])
//! and a preview ([`preview`]) show. Each trigger turns its event into a [`PostRequest`] and the
//! [`Outcome`] back into a response; none of them decides anything about posting.

pub mod ci;
pub mod console;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "cli")]
pub mod preview;
pub mod stored;
pub mod sweep;
pub mod telegram;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::app::App;
use crate::budget::Deadline;
use crate::image::{LocalCovers, OriginPolicy};
use crate::key::PostKey;
use crate::networks::Network;
use crate::networks::INPUT_MAX_CHARS as MAX_CHARS;
use crate::outcome::Outcome;
use crate::record::DraftContent;

/// Largest request body any route reads.
pub const MAX_BODY: usize = 256 * 1024;

/// A transport-neutral HTTP request. Header names are lower case.
#[derive(Debug, Clone, Default)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Bytes,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// A JSON response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    body: Body,
}

/// What a response carries: a run's outcome is kept as it is until it is written, so that
/// it is serialized once, straight into the bytes sent, rather than first built as a
/// `serde_json::Value` (which cost an already-posted run some 15,000 instructions: the tree,
/// its serialization and its drop; issue 34).
#[derive(Debug, Clone)]
enum Body {
    Value(Value),
    Outcome(Box<Outcome>),
}

impl HttpResponse {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: Body::Value(body),
        }
    }

    /// A 4xx/5xx with `{"error": code, "detail": …}`.
    pub fn error(status: u16, code: &str, detail: impl Into<String>) -> Self {
        Self::json(status, json!({"error": code, "detail": detail.into()}))
    }

    /// The outcome JSON with the outcomes table's status.
    pub fn outcome(outcome: Outcome) -> Self {
        Self {
            status: outcome.http_status(),
            body: Body::Outcome(Box::new(outcome)),
        }
    }

    /// The body as a JSON value.
    #[must_use]
    pub fn body(&self) -> Value {
        match &self.body {
            Body::Value(v) => v.clone(),
            Body::Outcome(o) => serde_json::to_value(o).unwrap_or(Value::Null),
        }
    }

    /// The body as the JSON text sent (Lambda's API Gateway answer carries it as a string).
    #[must_use]
    pub fn to_text(&self) -> String {
        let text = match &self.body {
            Body::Value(v) => serde_json::to_string(v),
            Body::Outcome(o) => serde_json::to_string(o),
        };
        text.unwrap_or_else(|_| "{}".to_owned())
    }

    /// The body as the bytes sent.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_text().into_bytes()
    }
}

/// Routes requests to the triggers.
pub struct Router {
    pub app: Arc<App>,
}

impl Router {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }

    /// Handles one request within `dl`; `run_id` identifies the run it may start.
    pub async fn handle(&self, req: HttpRequest, dl: Deadline, run_id: String) -> HttpResponse {
        if req.body.len() > MAX_BODY {
            return HttpResponse::error(
                413,
                "payload_too_large",
                format!("the body is larger than {MAX_BODY} bytes"),
            );
        }
        let path = req
            .path
            .split('?')
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        match (req.method.as_str(), path) {
            ("GET" | "HEAD", "/healthz") => HttpResponse::json(200, json!({"ok": true})),
            ("POST", "/ci") => ci::handle(&self.app, &req, dl, run_id).await,
            ("POST", "/telegram") => telegram::handle(&self.app, &req, dl, run_id).await,
            (_, "/healthz" | "/ci" | "/telegram") => HttpResponse::error(
                405,
                "method_not_allowed",
                format!("{} is not allowed on {path}", req.method),
            ),
            _ => HttpResponse::error(
                404,
                "not_found",
                format!("no route {path}; routes: POST /ci, POST /telegram, GET /healthz"),
            ),
        }
    }
}

/// A field of a draft that failed validation: 400 naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    pub field: String,
    pub problem: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    pub fn response(&self) -> HttpResponse {
        HttpResponse::json(
            400,
            json!({"error": "bad_request", "field": self.field, "detail": self.to_string()}),
        )
    }
}

fn text_field(v: &Value, field: &'static str) -> Result<Option<String>, FieldError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(FieldError::new(field, "must be a string")),
    }
}

/// Parses and validates `{"kind","slug","caption","image_url","link"?,"alt"?}`.
/// `content_required`: the CI route needs the draft; the console may post a stored one.
///
/// # Errors
/// The first field that is missing or invalid.
pub fn parse_draft(
    v: &Value,
    content_required: bool,
    images: &OriginPolicy,
) -> Result<(PostKey, Option<DraftContent>), FieldError> {
    parse_draft_from(v, content_required, images, None)
}

/// [`parse_draft`], and with `local` an `image_url` that is not an http(s) URL is a file on
/// this machine, read under that rule (the MCP server: beneath `POSTONCE_MCP_IMAGE_DIRS`): it
/// must be usable and sound, and its canonical path is kept. Blocking with `local`: call it
/// from a blocking thread.
///
/// # Errors
/// The first field that is missing or invalid.
pub fn parse_draft_from(
    v: &Value,
    content_required: bool,
    images: &OriginPolicy,
    local: Option<&LocalCovers>,
) -> Result<(PostKey, Option<DraftContent>), FieldError> {
    if !v.is_object() {
        return Err(FieldError::new("body", "must be a JSON object"));
    }
    let kind = text_field(v, "kind")?.ok_or_else(|| FieldError::new("kind", "is required"))?;
    let slug = text_field(v, "slug")?.ok_or_else(|| FieldError::new("slug", "is required"))?;
    let key = PostKey::new(&kind, &slug).map_err(|e| {
        let field = match e {
            crate::key::KeyError::Kind(_) => "kind",
            _ => "slug",
        };
        FieldError::new(field, e.to_string())
    })?;
    let caption = text_field(v, "caption")?;
    let image = text_field(v, "image_url")?;
    let content = match (caption, image) {
        (None, None) if !content_required => None,
        (None, _) => return Err(FieldError::new("caption", "is required")),
        (_, None) => return Err(FieldError::new("image_url", "is required")),
        (Some(caption), Some(image)) => {
            if caption.trim().is_empty() {
                return Err(FieldError::new("caption", "is empty"));
            }
            // Longer than any network takes: refused before it is looked at further.
            let chars = caption.chars().count();
            if chars > MAX_CHARS {
                return Err(FieldError::new(
                    "caption",
                    format!("has {chars} characters; no target takes more than {MAX_CHARS}"),
                ));
            }
            let remote = image.starts_with("https://") || image.starts_with("http://");
            let image = match local {
                Some(rule) if !remote => rule
                    .check(&image)
                    .map_err(|why| FieldError::new("image_url", why))?,
                _ => {
                    images
                        .check(&image)
                        .map_err(|e| FieldError::new("image_url", e.to_string()))?;
                    image
                }
            };
            let link = text_field(v, "link")?;
            if let Some(l) = &link {
                let ok = url::Url::parse(l).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
                if !ok {
                    return Err(FieldError::new("link", "must be an http(s) URL"));
                }
            }
            let alt = text_field(v, "alt")?;
            if alt.as_ref().is_some_and(|a| a.chars().count() > 4000) {
                return Err(FieldError::new("alt", "is longer than 4000 characters"));
            }
            let captions = parse_captions(v)?;
            Some(DraftContent {
                caption,
                image,
                link,
                alt,
                captions,
            })
        }
    };
    if content.is_none() && v.get("captions").is_some_and(|c| !c.is_null()) {
        return Err(FieldError::new(
            "captions",
            "needs the draft: send caption and image_url with it",
        ));
    }
    Ok((key, content))
}

/// `"captions": {"x": "…", "telegram": "…"}`: a caption per network.
fn parse_captions(v: &Value) -> Result<BTreeMap<Network, String>, FieldError> {
    let mut captions = BTreeMap::new();
    let Some(raw) = v.get("captions").filter(|c| !c.is_null()) else {
        return Ok(captions);
    };
    let Some(map) = raw.as_object() else {
        return Err(FieldError::new(
            "captions",
            "must be an object of network name to text, e.g. {\"x\": \"…\"}",
        ));
    };
    for (name, text) in map {
        let Some(network) = Network::parse(name) else {
            return Err(FieldError::new(
                "captions",
                format!(
                    "{:?} is not a network: use {}",
                    name.chars().take(32).collect::<String>(),
                    Network::names()
                ),
            ));
        };
        let field = format!("captions.{}", network.as_str());
        let Some(text) = text.as_str() else {
            return Err(FieldError::new(field, "must be a string"));
        };
        if text.trim().is_empty() {
            return Err(FieldError::new(field, "is empty"));
        }
        if text.chars().count() > MAX_CHARS {
            return Err(FieldError::new(
                field,
                format!(
                    "has {} characters; no target takes more than {MAX_CHARS}",
                    text.chars().count()
                ),
            ));
        }
        captions.insert(network, text.to_owned());
    }
    Ok(captions)
}

/// `"targets": ["linkedin", "x"]`: the networks to post the draft to (absent: the default).
pub fn parse_targets(v: &Value) -> Result<Vec<Network>, FieldError> {
    let Some(raw) = v.get("targets").filter(|t| !t.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(items) = raw.as_array() else {
        return Err(FieldError::new(
            "targets",
            "must be an array of network names, e.g. [\"linkedin\", \"x\"]",
        ));
    };
    if items.is_empty() {
        return Err(FieldError::new(
            "targets",
            "is empty: name at least one network, or leave it out for POSTONCE_TARGETS",
        ));
    }
    let mut targets = Vec::new();
    for item in items {
        let network = item.as_str().and_then(Network::parse).ok_or_else(|| {
            FieldError::new(
                "targets",
                format!(
                    "{} is not a network: use {}",
                    item.to_string().chars().take(32).collect::<String>(),
                    Network::names()
                ),
            )
        })?;
        if !targets.contains(&network) {
            targets.push(network);
        }
    }
    Ok(targets)
}

/// The furthest ahead a draft can be scheduled.
pub const MAX_SCHEDULE_AHEAD_S: i64 = 366 * 24 * 3600;

/// Parses a `publish_at` (RFC 3339 with a zone, e.g. `2026-12-07T09:00:00+01:00`) into Unix
/// seconds, checked against `now`: at most a year ahead. A time in the past is fine (it
/// posts at once). `field` names the input in the error (`publish_at`, `--at`).
///
/// # Errors
/// No zone, unparseable, or more than a year ahead.
pub fn parse_publish_at(raw: &str, now: i64, field: &str) -> Result<i64, FieldError> {
    use time::format_description::well_known::Rfc3339;
    let raw = raw.trim();
    let at = match time::OffsetDateTime::parse(raw, &Rfc3339) {
        Ok(t) => t.unix_timestamp(),
        Err(_) => {
            let shown: String = raw.chars().take(40).collect();
            // Without a zone the time means nothing certain: say so rather than guess.
            let zoneless = time::PrimitiveDateTime::parse(
                raw,
                time::macros::format_description!(
                    "[year]-[month]-[day]T[hour]:[minute]:[second][optional [.[subsecond]]]"
                ),
            )
            .is_ok();
            let problem = if zoneless {
                format!("{shown:?} has no time zone: add one, e.g. {shown}Z or {shown}+01:00")
            } else {
                format!(
                    "{shown:?} is not an RFC 3339 time with a zone, e.g. 2026-12-07T09:00:00+01:00"
                )
            };
            return Err(FieldError::new(field, problem));
        }
    };
    if at - now > MAX_SCHEDULE_AHEAD_S {
        return Err(FieldError::new(
            field,
            format!(
                "{} is more than a year ahead; schedule at most a year ahead",
                crate::record::rfc3339(at)
            ),
        ));
    }
    Ok(at)
}

/// A draft event (CI body, console) as a run.
#[derive(Debug, Clone)]
pub struct ParsedRun {
    pub key: PostKey,
    pub content: Option<DraftContent>,
    pub targets: Vec<Network>,
    /// `publish_at`, Unix seconds.
    pub publish_at: Option<i64>,
}

/// A draft event (CI body, console) as a run: the draft, its targets, its time, and every
/// target's text checked the target's way before anything is stored.
///
/// # Errors
/// The first field that is missing or invalid; a text too long for a target names the target
/// and its limit.
pub fn parse_run(app: &App, v: &Value, content_required: bool) -> Result<ParsedRun, FieldError> {
    parse_run_from(app, v, content_required, None)
}

/// [`parse_run`]; with `local`, the image may be a file on this machine, read under that rule
/// ([`parse_draft_from`]; blocking then).
///
/// # Errors
/// As [`parse_run`].
pub fn parse_run_from(
    app: &App,
    v: &Value,
    content_required: bool,
    local: Option<&LocalCovers>,
) -> Result<ParsedRun, FieldError> {
    let (key, content) = parse_draft_from(v, content_required, &app.config.image_hosts, local)?;
    let targets = parse_targets(v)?;
    let publish_at =
        match v.get("publish_at") {
            None | Some(Value::Null) => None,
            Some(Value::String(raw)) => {
                Some(parse_publish_at(raw, crate::record::now_s(), "publish_at")?)
            }
            Some(_) => return Err(FieldError::new(
                "publish_at",
                "must be a string: an RFC 3339 time with a zone, e.g. 2026-12-07T09:00:00+01:00",
            )),
        };
    if publish_at.is_some() && content.is_none() {
        return Err(FieldError::new(
            "publish_at",
            "needs the draft: send caption and image_url with it",
        ));
    }
    if let Some(content) = &content {
        let all = app.pipeline.targets_for(&targets);
        app.pipeline
            .check_text(content, &all)
            .map_err(|e| FieldError::new(e.field, e.message))?;
    } else if let Some(n) = targets.iter().find(|n| app.pipeline.lane(**n).is_none()) {
        return Err(FieldError::new(
            "targets",
            format!("{} is not supported by this version", n.as_str()),
        ));
    }
    Ok(ParsedRun {
        key,
        content,
        targets,
        publish_at,
    })
}

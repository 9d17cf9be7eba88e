//! Triggers: one router for the HTTP routes (Function URL and `postonce serve` alike), plus the
//! console event. Each trigger turns its event into a [`PostRequest`] and the [`Outcome`] back
//! into a response; none of them decides anything about posting.

pub mod ci;
pub mod console;
pub mod sweep;
pub mod telegram;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::app::App;
use crate::budget::Deadline;
use crate::image::OriginPolicy;
use crate::key::PostKey;
use crate::outcome::Outcome;
use crate::publish::little_text::MAX_CHARS;
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
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Value,
}

impl HttpResponse {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, body }
    }

    /// A 4xx/5xx with `{"error": code, "detail": …}`.
    pub fn error(status: u16, code: &str, detail: impl Into<String>) -> Self {
        Self::json(status, json!({"error": code, "detail": detail.into()}))
    }

    /// The outcome JSON with the outcomes table's status.
    pub fn outcome(outcome: &Outcome) -> Self {
        Self::json(
            outcome.http_status(),
            serde_json::to_value(outcome).unwrap_or(Value::Null),
        )
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
    pub field: &'static str,
    pub problem: String,
}

impl FieldError {
    pub fn new(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            field,
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
            let chars = caption.chars().count();
            if caption.trim().is_empty() || chars > MAX_CHARS {
                return Err(FieldError::new(
                    "caption",
                    format!("has {chars} characters; LinkedIn takes 1 to {MAX_CHARS}"),
                ));
            }
            images
                .check(&image)
                .map_err(|e| FieldError::new("image_url", e.to_string()))?;
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
            let content = DraftContent {
                caption,
                image,
                link,
                alt,
                ..Default::default()
            };
            let total = crate::pipeline::full_text(&content).chars().count();
            if total > MAX_CHARS {
                return Err(FieldError::new(
                    "caption",
                    format!("with the link appended has {total} characters; LinkedIn takes at most {MAX_CHARS}"),
                ));
            }
            Some(content)
        }
    };
    Ok((key, content))
}

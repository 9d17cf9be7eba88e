//! `postonce mcp`: a Model Context Protocol server over stdio (the official Rust SDK, `rmcp`).
//! Protocol messages go to stdout only; logs go to stderr.
//!
//! Each tool is a translation onto the same pipeline the other triggers use, with no rule of
//! its own: `post` turns its arguments into a [`PostRequest`] exactly as the CI route and the
//! console event do ([`super::parse_run_from`]) and answers the outcome JSON of `post --json`;
//! `status`, `schedule_list` and `doctor` read what the CLI's commands read; `cancel` is the
//! Telegram Cancel button's run (`Action::Cancel`); `preview` checks like `post` and sends
//! nothing.
//!
//! A run goes on in a task of its own, as in `postonce serve`: a client that abandons a call
//! (`notifications/cancelled`, or a timeout on its side) stops waiting for the answer, and the
//! run keeps every rule to its end; a later call answers what is stored (`being_posted` while
//! it runs, `already_posted` once it is recorded). When stdin closes, the server waits for the
//! runs still in flight (up to the function timeout) before it exits; a run cut off by the
//! process ending is a dropped run, and its claim guard keeps rule 6.

mod preview;
pub mod tools;

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio_util::task::TaskTracker;

use super::{parse_run_from, FieldError, ParsedRun};
use crate::app::App;
use crate::budget::Deadline;
use crate::key::PostKey;
use crate::outcome::{Outcome, OutcomeKind};
use crate::pipeline::{new_run_id, Action, PostRequest, Source};

/// The protocol versions this server speaks: 2025-06-18 (the first with structured tool
/// results) and later. A client that asks for an older one is answered with the newest of
/// these, as the specification's negotiation says, and may then disconnect.
pub const PROTOCOL_VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The MCP server: the process's [`App`] and the runs it started.
#[derive(Clone)]
pub struct McpServer {
    app: Arc<App>,
    runs: TaskTracker,
}

/// Serves MCP on stdin/stdout until the client closes stdin, then waits for the runs still in
/// flight (bounded by the function timeout).
///
/// # Errors
/// When the transport fails before the client initialised the session.
pub async fn serve(app: Arc<App>) -> Result<(), String> {
    let grace = app.config.function_timeout;
    let server = McpServer {
        app,
        runs: TaskTracker::new(),
    };
    let runs = server.runs.clone();
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP session did not start: {e}"))?;
    let quit = running.waiting().await;
    tracing::info!(reason = ?quit, "the MCP client closed the session");
    runs.close();
    if tokio::time::timeout(grace, runs.wait()).await.is_err() {
        tracing::error!(
            left = runs.len(),
            "runs still in flight after the function timeout are abandoned; their claims expire with their TTL"
        );
    }
    Ok(())
}

/// A tool error for bad input: the field, the problem and its fix, and nothing stored.
fn bad_input(e: &FieldError) -> CallToolResult {
    let (field, detail) = (&e.field, &e.problem);
    let text = format!("bad input: {field}: {detail}");
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.clone())]);
    result.structured_content = Some(json!({
        "error": "bad_request",
        "field": field,
        "detail": text,
    }));
    result
}

/// The MCP name of a field the shared parser names (`image_url` → `image`,
/// `captions.x` → `caption_for.x`).
fn mcp_field(field: &str) -> String {
    if field == "image_url" {
        "image".into()
    } else if let Some(rest) = field.strip_prefix("captions") {
        format!("caption_for{rest}")
    } else {
        field.to_owned()
    }
}

fn mcp_text(text: &str) -> String {
    text.replace("image_url", "image")
        .replace("captions", "caption_for")
}

/// A draft's field error from the shared parser, in the MCP arguments' names.
fn in_mcp_names(e: FieldError) -> FieldError {
    FieldError::new(mcp_field(&e.field), mcp_text(&e.problem))
}

/// The call's arguments: an object with only the names `tool` takes.
fn arguments(tool: &str, given: Option<&JsonObject>) -> Result<Value, FieldError> {
    let Some(map) = given else {
        return Ok(Value::Object(JsonObject::new()));
    };
    let known = tools::arguments_of(tool);
    if let Some(name) = map.keys().find(|k| !known.contains(&k.as_str())) {
        let shown: String = name.chars().take(40).collect();
        let fix = if known.is_empty() {
            format!("{tool} takes no arguments")
        } else {
            format!("{tool} takes {}", known.join(", "))
        };
        return Err(FieldError::new(
            shown,
            format!("is not an argument of {tool}: {fix}"),
        ));
    }
    Ok(Value::Object(map.clone()))
}

/// `post` and `preview` arguments as the shared parser reads a draft event.
fn draft_event(args: &Value) -> Result<Value, FieldError> {
    let mut event = args.clone();
    if let Some(map) = event.as_object_mut() {
        if let Some(image) = map.remove("image") {
            map.insert("image_url".into(), image);
        }
        if let Some(captions) = map.remove("caption_for") {
            map.insert("captions".into(), captions);
        }
        for field in ["kind", "slug"] {
            if !map.contains_key(field) {
                return Err(FieldError::new(
                    field,
                    "is required: kind and slug name the draft (kind \"agent\", a slug derived from the content)",
                ));
            }
        }
    }
    Ok(event)
}

fn key_of(args: &Value) -> Result<PostKey, FieldError> {
    let text = |f: &str| match args.get(f) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(FieldError::new(f, "is required")),
        Some(_) => Err(FieldError::new(f, "must be a string")),
    };
    let (kind, slug) = (text("kind")?, text("slug")?);
    PostKey::new(&kind, &slug).map_err(|e| {
        let field = match e {
            crate::key::KeyError::Kind(_) => "kind",
            _ => "slug",
        };
        FieldError::new(field, e.to_string())
    })
}

/// The one-line summary beside an outcome.
fn summary(outcome: &Outcome) -> String {
    let mut line = format!("{}: {}", outcome.outcome.as_str(), outcome.key);
    if let Some(targets) = &outcome.targets {
        let each: Vec<String> = targets
            .iter()
            .map(|(n, t)| {
                let at = t
                    .url
                    .as_deref()
                    .or(t.id.as_deref())
                    .or(t.publish_at.as_deref())
                    .map(|u| format!(" {u}"))
                    .unwrap_or_default();
                format!("{} {}{at}", n.as_str(), t.outcome.as_str())
            })
            .collect();
        line.push_str(&format!(" ({})", each.join("; ")));
    }
    if !outcome.detail.is_empty() {
        line.push_str(&format!(" — {}", outcome.detail));
    }
    line.replace('\n', " ")
}

/// An outcome as a tool result: the outcome JSON as structured content, a one-line summary
/// as text; an error only when the run `failed`.
fn outcome_result(outcome: &Outcome) -> CallToolResult {
    let value = serde_json::to_value(outcome).unwrap_or(Value::Null);
    let text = vec![ContentBlock::text(summary(outcome))];
    let mut result = if outcome.outcome == OutcomeKind::Failed {
        CallToolResult::error(text)
    } else {
        CallToolResult::success(text)
    };
    result.structured_content = Some(value);
    result
}

/// A read's answer: `value` as structured content and `text` beside it.
fn read_result(value: Value, text: String) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// A store that could not be read: an error result naming it (not bad input; try again).
fn store_error(what: &str, e: &str) -> CallToolResult {
    let text = format!("could not read {what}: {e}; nothing changed, try again");
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.clone())]);
    result.structured_content = Some(json!({"error": "unavailable", "detail": text}));
    result
}

impl McpServer {
    fn deadline(&self) -> Deadline {
        Deadline::after(self.app.config.function_timeout)
    }

    /// Runs `request` in a task of its own (the run outlives an abandoned call) and waits
    /// for its outcome.
    async fn run(&self, request: PostRequest) -> CallToolResult {
        let app = self.app.clone();
        let dl = self.deadline();
        let key = request.key.clone();
        let run = self
            .runs
            .spawn(async move { app.pipeline.run(request, dl).await });
        match run.await {
            Ok(outcome) => outcome_result(&outcome),
            Err(e) => {
                // The run panicked outside a target's lane: what is stored stands.
                tracing::error!(error = %e, "the run ended abnormally");
                let text = format!(
                    "the run for {key} ended abnormally; call status for {key} to see what is stored"
                );
                let mut result = CallToolResult::error(vec![ContentBlock::text(text.clone())]);
                result.structured_content = Some(json!({
                    "key": key.draft(),
                    "outcome": "failed",
                    "retryable": true,
                    "detail": text,
                }));
                result
            }
        }
    }

    /// The draft of a `post` or `preview` call, parsed on a blocking thread: a local cover is
    /// read (only beneath `POSTONCE_MCP_IMAGE_DIRS`) and decoded there, never on the async
    /// threads every run in flight shares.
    async fn parsed(&self, args: &Value) -> Result<ParsedRun, FieldError> {
        let app = self.app.clone();
        let args = args.clone();
        // A local cover is decoded here: one decode at a time in the process, as a run's.
        let permit = crate::image::decode_permit()
            .await
            .map_err(|e| FieldError::new("image", format!("{e}; nothing was stored")))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            draft_event(&args).and_then(|event| {
                parse_run_from(&app, &event, false, Some(&app.config.mcp_covers))
                    .map_err(in_mcp_names)
            })
        })
        .await
        .unwrap_or_else(|e| {
            Err(FieldError::new(
                "image",
                format!("could not be checked ({e}); nothing was stored"),
            ))
        })
    }

    async fn post(&self, args: &Value) -> CallToolResult {
        let parsed = match self.parsed(args).await {
            Ok(p) => p,
            Err(e) => return bad_input(&e),
        };
        let ParsedRun {
            key,
            content,
            targets,
            publish_at,
        } = parsed;
        self.run(PostRequest {
            key,
            content,
            action: Action::Post,
            source: Source::Mcp,
            run_id: new_run_id(),
            reply_to: None,
            targets,
            publish_at,
        })
        .await
    }

    async fn cancel(&self, args: &Value) -> CallToolResult {
        let key = match key_of(args) {
            Ok(k) => k,
            Err(e) => return bad_input(&e),
        };
        self.run(PostRequest {
            key,
            content: None,
            action: Action::Cancel,
            source: Source::Mcp,
            run_id: new_run_id(),
            reply_to: None,
            targets: Vec::new(),
            publish_at: None,
        })
        .await
    }

    async fn status(&self, args: &Value) -> CallToolResult {
        let dl = self.deadline();
        let given = args.as_object().is_some_and(|m| !m.is_empty());
        if given {
            let key = match key_of(args) {
                Ok(k) => k,
                Err(e) => return bad_input(&e),
            };
            return match crate::triggers::stored::key_status(&self.app, &key, &dl).await {
                Ok(found) => {
                    let text = found
                        .targets
                        .iter()
                        .filter(|t| t.3)
                        .map(|(_, n, s, _)| {
                            let state = match (&s.snapshot.record, &s.snapshot.draft) {
                                (Some(r), _) => format!(
                                    "posted {}",
                                    r.url
                                        .as_deref()
                                        .or(r.post_id.as_deref())
                                        .unwrap_or("(no id)")
                                ),
                                (None, Some(d)) => d.status.as_str().to_owned(),
                                (None, None) => "claimed".to_owned(),
                            };
                            format!("{} {state}", n.as_str())
                        })
                        .collect::<Vec<_>>();
                    let text = if text.is_empty() {
                        format!("{key}: nothing is stored (never sent)")
                    } else {
                        format!("{key}: {}", text.join("; "))
                    };
                    read_result(found.json, text)
                }
                Err(e) => store_error(&format!("the state of {key}"), &e),
            };
        }
        let waiting = match self.app.pipeline.waiting(&dl).await {
            Ok(w) => w,
            Err(e) => return store_error("the drafts that wait", &e),
        };
        let scheduled = match crate::triggers::stored::scheduled_entries(&self.app, &dl).await {
            Ok(s) => s,
            Err(e) => return store_error("the scheduled drafts", &e),
        };
        let text = format!(
            "{} drafts wait for a person, {} for a time",
            waiting.len(),
            scheduled.len()
        );
        let scheduled = crate::triggers::stored::scheduled_json(&scheduled);
        read_result(
            json!({ "waiting": waiting, "scheduled": scheduled["scheduled"] }),
            text,
        )
    }

    async fn schedule_list(&self) -> CallToolResult {
        let dl = self.deadline();
        match crate::triggers::stored::scheduled_entries(&self.app, &dl).await {
            Ok(entries) => {
                let text = if entries.is_empty() {
                    "nothing is scheduled".to_owned()
                } else {
                    entries
                        .iter()
                        .map(|e| {
                            format!(
                                "{} {} → {}",
                                crate::record::rfc3339(e.at),
                                e.key,
                                e.targets.join(", ")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                read_result(crate::triggers::stored::scheduled_json(&entries), text)
            }
            Err(e) => store_error("the scheduled drafts", &e),
        }
    }

    async fn doctor(&self) -> CallToolResult {
        let checks = crate::doctor::doctor(&self.app).await;
        let ok = checks.iter().all(|c| c.ok);
        let list: Vec<Value> = checks
            .iter()
            .map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail}))
            .collect();
        let text = checks
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        read_result(json!({"ok": ok, "checks": list}), text)
    }

    async fn preview(&self, args: &Value) -> CallToolResult {
        match self.parsed(args).await {
            Ok(parsed) => preview::answer(&self.app, &parsed, &self.deadline()).await,
            Err(e) => bad_input(&e),
        }
    }

    async fn call(&self, name: &str, given: Option<&JsonObject>) -> CallToolResult {
        let args = match arguments(name, given) {
            Ok(a) => a,
            Err(e) => return bad_input(&e),
        };
        match name {
            "post" => self.post(&args).await,
            "status" => self.status(&args).await,
            "schedule_list" => self.schedule_list().await,
            "cancel" => self.cancel(&args).await,
            "preview" => self.preview(&args).await,
            _ => self.doctor().await,
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("postonce", env!("CARGO_PKG_VERSION"))
                    .with_title("postonce: post exactly once"),
            )
            .with_instructions(
                format!(
                    "postonce publishes a draft (caption and cover image) to each of its networks ({}) exactly once per key. Name each piece of content with kind \"agent\" and a slug derived from what it is about (never from the time): calling post again with the same key never posts twice, it answers what the first call did. Use preview to see each network's text first, status to see where a key stands.",
                    crate::networks::Network::names()
                ),
            );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list(&self.app)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if !tools::NAMES.contains(&name) {
            // An unknown tool is the one protocol error the specification asks for.
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool {:?}; the tools are {}",
                    name.chars().take(40).collect::<String>(),
                    tools::NAMES.join(", ")
                ),
                None,
            ));
        }
        Ok(self.call(name, request.arguments.as_ref()).await.into())
    }
}

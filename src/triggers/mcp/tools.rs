//! The MCP tools' definitions: names, descriptions, input schemas and annotations. The schemas
//! are built from the running configuration, so the caption limits they state are the ones
//! this process enforces (each network's own count, from its adapter).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

use crate::app::App;
use crate::key::{MAX_KEY_LEN, MAX_KIND_LEN};
use crate::networks::INPUT_MAX_CHARS as MAX_CHARS;

/// The tool names, in the order `tools/list` gives them.
pub const NAMES: [&str; 6] = [
    "post",
    "status",
    "schedule_list",
    "cancel",
    "preview",
    "doctor",
];

/// The arguments each tool takes (anything else is refused, naming it).
pub fn arguments_of(tool: &str) -> &'static [&'static str] {
    match tool {
        "post" | "preview" => &[
            "kind",
            "slug",
            "caption",
            "image",
            "alt",
            "link",
            "targets",
            "caption_for",
            "publish_at",
        ],
        "status" | "cancel" => &["kind", "slug"],
        _ => &[],
    }
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// Each network's caption limit as this process counts it: "linkedin 3000 characters; …".
pub fn caption_limits(app: &App) -> String {
    app.pipeline
        .lanes
        .iter()
        .map(|(n, lane)| {
            format!(
                "{} {} {}",
                n.as_str(),
                lane.adapter.max_text(),
                lane.adapter.capabilities().text.counting.describe()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn network_names(app: &App) -> Vec<&'static str> {
    app.pipeline.lanes.keys().map(|n| n.as_str()).collect()
}

fn key_properties() -> Value {
    json!({
        "kind": {
            "type": "string",
            "description": format!("The draft's kind, 1 to {MAX_KIND_LEN} of a-z and 0-9. Agents use \"agent\"."),
            "pattern": format!("^[a-z0-9]{{1,{MAX_KIND_LEN}}}$"),
            "minLength": 1,
            "maxLength": MAX_KIND_LEN,
        },
        "slug": {
            "type": "string",
            "description": format!("The draft's name: words of a-z and 0-9 joined by single hyphens, e.g. \"launch-v2-announcement\"; kind-slug at most {MAX_KEY_LEN} bytes. Derive it from what the post is about, never from the time: the same content must get the same slug, so that a retry is recognised."),
            "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$",
            "minLength": 1,
            "maxLength": MAX_KEY_LEN - 2,
        },
    })
}

/// What the `image` argument takes, with the folders local files may come from (or none).
fn image_description(app: &App) -> String {
    let local = match app.config.mcp_covers.folders() {
        Some(dirs) => format!(
            "or the absolute path of a JPEG, PNG, GIF or WebP file of at most {} MiB inside {dirs} on the machine this server runs on (POSTONCE_MCP_IMAGE_DIRS; reached without a symbolic link)",
            crate::image::MAX_IMAGE_BYTES / (1024 * 1024)
        ),
        None => "no local file: this server reads none (POSTONCE_MCP_IMAGE_DIRS is not set)".into(),
    };
    format!("The cover image: an https URL (from a host POSTONCE_IMAGE_HOSTS allows), {local}. Required with caption.")
}

fn draft_schema(app: &App) -> Value {
    let networks = network_names(app);
    let limits = caption_limits(app);
    let mut props = key_properties();
    let extra = json!({
        "caption": {
            "type": "string",
            "description": format!("The post's text, for every target without its own caption_for. Each network counts it its own way, with the link appended on its own line unless the caption contains it, and nothing is ever truncated: {limits}. Without caption and image, the draft stored for this key is posted."),
            "minLength": 1,
            "maxLength": MAX_CHARS,
        },
        "image": {
            "type": "string",
            "description": image_description(app),
            "minLength": 1,
            "maxLength": 2048,
        },
        "alt": {
            "type": "string",
            "description": "The image's alternative text.",
            "maxLength": 4000,
        },
        "link": {
            "type": "string",
            "format": "uri",
            "description": "An http(s) link, appended to the text on its own line unless the caption already contains it.",
            "maxLength": 2048,
        },
        "targets": {
            "type": "array",
            "description": "The networks to post to; left out, the configured default (POSTONCE_TARGETS).",
            "items": { "type": "string", "enum": networks },
            "minItems": 1,
            "uniqueItems": true,
        },
        "caption_for": {
            "type": "object",
            "description": format!("A caption for one network instead of caption there, e.g. {{\"x\": \"short text\"}}. Each must fit its network: {limits}."),
            "propertyNames": { "enum": networks },
            "additionalProperties": { "type": "string", "minLength": 1, "maxLength": MAX_CHARS },
        },
        "publish_at": {
            "type": "string",
            "format": "date-time",
            "description": "Publish at this time instead of now: RFC 3339 with a time zone, e.g. 2026-12-07T09:00:00+01:00 or 2026-12-07T08:00:00Z; at most a year ahead; a time in the past posts now. Needs caption and image. The scheduled sweeper posts it then.",
            "pattern": "(Z|z|[+-][0-9]{2}:[0-9]{2})$",
        },
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut props, extra) {
        p.extend(e);
    }
    json!({
        "type": "object",
        "properties": props,
        "required": ["kind", "slug"],
        "additionalProperties": false,
    })
}

fn key_schema() -> Value {
    json!({
        "type": "object",
        "properties": key_properties(),
        "required": ["kind", "slug"],
        "additionalProperties": false,
    })
}

fn empty_schema() -> Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

fn read_only(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// Every tool this server offers, described from `app`.
pub fn list(app: &App) -> Vec<Tool> {
    let post = Tool::new(
        "post",
        "Publish a draft (caption and cover image) to its networks exactly once. It is idempotent per key: once a key's post is out or on its way, every later call with the same kind and slug answers what happened (already_posted with each target's link, or being_posted while a run holds it) and never posts again, so retry it freely after a timeout or an error. Answers the same outcome JSON as `postonce post --json` as structured content (`outcome`: posted, already_posted, being_posted, unknown, partial, scheduled, cancelled, posted_not_recorded or failed; `targets` per network); isError is true only for bad input and `failed`.",
        object(draft_schema(app)),
    )
    .with_title("Post exactly once")
    .with_annotations(
        ToolAnnotations::with_title("Post exactly once")
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(true),
    );
    let status = Tool::new(
        "status",
        "Where a draft stands as stored now: with kind and slug, each target's record, draft and claim (the same JSON as `postonce status --json`); with no arguments, every draft that waits for a person (failed, unknown, needs review) or for a time (scheduled). Sends nothing.",
        object(json!({
            "type": "object",
            "properties": key_properties(),
            "dependentRequired": { "kind": ["slug"], "slug": ["kind"] },
            "additionalProperties": false,
        })),
    )
    .with_title("Status")
    .with_annotations(read_only("Status"));
    let schedule = Tool::new(
        "schedule_list",
        "Every scheduled draft, soonest first: its key, when it goes (RFC 3339, UTC), its targets and any note (the same JSON as `postonce schedule list --json`). Sends nothing.",
        object(empty_schema()),
    )
    .with_title("Scheduled drafts")
    .with_annotations(read_only("Scheduled drafts"));
    let cancel = Tool::new(
        "cancel",
        "Cancel a scheduled (or failed, not yet posted) draft that no run holds: it is then never posted unless it is sent again. A draft already posted, or being posted, is not cancelled; the answer says where it stands. The same as the Cancel button in Telegram.",
        object(key_schema()),
    )
    .with_title("Cancel a scheduled draft")
    .with_annotations(
        ToolAnnotations::with_title("Cancel a scheduled draft")
            .read_only(false)
            .destructive(true)
            .idempotent(true)
            .open_world(false),
    );
    let preview = Tool::new(
        "preview",
        "What each target would get for these arguments (or, with only kind and slug, for the draft stored for the key), checked exactly as post checks them: the exact text each network is sent (after its own markup), its length counted the network's way against the network's limit, and the cover each network gets: the original byte for byte where it fits the network's limits, else the rendition made for it (format, bytes, width, height, kind original or rendition), or why it gets none. The cover image is fetched (a read); nothing is sent to any network and nothing is stored.",
        object(draft_schema(app)),
    )
    .with_title("Preview")
    // It fetches the cover from its URL: a read of the open world.
    .with_annotations(read_only("Preview").open_world(true));
    let doctor = Tool::new(
        "doctor",
        "Check every part the configuration would use (stores, network credentials, Telegram), one line each with the fix; ok is true only when all pass. Changes nothing (the claim store is probed with a throwaway claim of its own, taken and released).",
        object(empty_schema()),
    )
    .with_title("Doctor")
    .with_annotations(
        ToolAnnotations::with_title("Doctor")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(true),
    );
    vec![post, status, schedule, cancel, preview, doctor]
}

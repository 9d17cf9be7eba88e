//! The `preview` tool: what each target would get, checked as `post` checks it, with nothing
//! sent and nothing stored. The per-network image renditions come with the images work; until
//! then the image facts are the ones known without fetching it.

use std::io::Read;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};

use super::{bad_input, read_result, store_error};
use crate::app::App;
use crate::budget::Deadline;
use crate::pipeline::full_text;
use crate::record::DraftContent;
use crate::triggers::{FieldError, ParsedRun};

/// What is known of the image without fetching it: its source, and for a local file its
/// size and type (from its first bytes).
fn image_facts(content: &DraftContent) -> Value {
    let source = &content.image;
    let remote = source.starts_with("https://") || source.starts_with("http://");
    let mut facts = json!({
        "source": source,
        "kind": if remote { "url" } else { "file" },
        "alt": content.alt,
        "renditions": null,
        "note": "Per-network renditions (size, format, crop) are not shown yet; the image is checked when it is fetched, at post time.",
    });
    if !remote {
        if let Ok(meta) = std::fs::metadata(source) {
            facts["bytes"] = json!(meta.len());
        }
        let mut head = [0u8; 16];
        let n = std::fs::File::open(source)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        facts["content_type"] = json!(crate::image::sniff(&head[..n]));
    }
    facts
}

/// The preview of `parsed` (a draft it carried, or the one stored for its key).
pub(super) async fn answer(app: &App, parsed: &ParsedRun, dl: &Deadline) -> CallToolResult {
    let key = &parsed.key;
    let stored = match crate::triggers::stored::key_status(app, key, dl).await {
        Ok(s) => s,
        Err(e) => return store_error(&format!("the state of {key}"), &e),
    };
    let content = match &parsed.content {
        Some(c) => c.clone(),
        None => {
            let found = stored
                .targets
                .iter()
                .find_map(|(_, _, s, _)| s.snapshot.draft.as_ref()?.content.clone());
            match found {
                Some(c) => c,
                None => {
                    return bad_input(&FieldError::new(
                        "caption",
                        format!("is required: no draft is stored for {key}; give caption and image to preview them"),
                    ))
                }
            }
        }
    };
    let targets = app.pipeline.targets_for(&parsed.targets);
    let mut each = Vec::new();
    let mut lines = Vec::new();
    for n in &targets {
        let Some(lane) = app.pipeline.lane(*n) else {
            continue;
        };
        let mine = content.for_target(*n);
        let text = full_text(&mine);
        let length = lane.adapter.text_len(&text);
        let max = lane.adapter.max_text();
        let recorded = stored
            .targets
            .iter()
            .find(|(_, net, _, _)| net == n)
            .and_then(|(_, _, s, _)| s.snapshot.record.as_ref());
        let already = recorded.map(|r| {
            json!({
                "url": r.url,
                "id": r.urn,
                "posted_at": crate::record::rfc3339(r.posted_at),
            })
        });
        lines.push(format!(
            "{}: {length}/{max}{}{}",
            n.as_str(),
            if lane.adapter.is_dry_run() {
                " (dry run)"
            } else {
                ""
            },
            if already.is_some() {
                " (already posted)"
            } else {
                ""
            }
        ));
        each.push(json!({
            "network": n.as_str(),
            "text": text,
            "caption_from": if content.captions.contains_key(n) {
                format!("caption_for.{}", n.as_str())
            } else {
                "caption".to_owned()
            },
            "length": length,
            "max": max,
            "counted_as": lane.adapter.capabilities().text.counting.describe(),
            "dry_run": lane.adapter.is_dry_run(),
            "already_posted": already,
        }));
    }
    let publish_at = parsed.publish_at.map(crate::record::rfc3339);
    let value = json!({
        "key": key.draft(),
        "sent": false,
        "publish_at": publish_at,
        "targets": each,
        "image": image_facts(&content),
    });
    let mut result = read_result(
        value,
        format!("preview of {key}, nothing sent: {}", lines.join("; ")),
    );
    result.content.push(ContentBlock::text(
        "The image renditions per network are not shown yet.",
    ));
    result
}

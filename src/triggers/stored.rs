//! What is stored for a key, and what is scheduled, as the CLI (`status --json`,
//! `schedule list --json`) and the MCP server show it: one shape for both.

use serde_json::json;

use crate::app::App;
use crate::budget::Deadline;
use crate::key::PostKey;
use crate::networks::Network;

/// One scheduled draft: its key, when it goes (Unix seconds), its targets and the note.
pub struct ScheduledEntry {
    pub key: String,
    pub at: i64,
    pub targets: Vec<String>,
    pub note: Option<String>,
}

/// Every scheduled draft, soonest first, its targets grouped (`schedule list`, MCP
/// `schedule_list`).
pub async fn scheduled_entries(app: &App, dl: &Deadline) -> Result<Vec<ScheduledEntry>, String> {
    let drafts = app.pipeline.scheduled(dl).await?;
    let mut entries: Vec<ScheduledEntry> = Vec::new();
    for d in &drafts {
        let Ok(key) = PostKey::parse(&d.key) else {
            continue;
        };
        let at = d.goes_at().unwrap_or(0);
        match entries.iter_mut().find(|e| e.key == key.draft()) {
            Some(e) => {
                e.at = e.at.min(at);
                e.targets.push(key.network().as_str().to_owned());
                // Each target's own note (one may wait for its network's credentials).
                if let Some(note) = d.last_error.as_ref() {
                    e.note = match e.note.take() {
                        Some(prev) if !prev.contains(note.as_str()) => {
                            Some(format!("{prev}; {note}"))
                        }
                        Some(prev) => Some(prev),
                        None => Some(note.clone()),
                    };
                }
            }
            None => entries.push(ScheduledEntry {
                key: key.draft(),
                at,
                targets: vec![key.network().as_str().to_owned()],
                note: d.last_error.clone(),
            }),
        }
    }
    entries.sort_by(|a, b| (a.at, &a.key).cmp(&(b.at, &b.key)));
    Ok(entries)
}

/// `{"scheduled": [{"key","publish_at","targets","note"}]}` (`schedule list --json`).
pub fn scheduled_json(entries: &[ScheduledEntry]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            json!({
                "key": e.key,
                "publish_at": crate::record::rfc3339(e.at),
                "targets": e.targets,
                "note": e.note,
            })
        })
        .collect();
    json!({ "scheduled": list })
}

/// Each target's state of one key as stored now.
pub struct KeyStatus {
    /// The `status --json` object: the state of the network with bare names
    /// ([`Network::bare_names`]) at the top level (as before targets existed) and every target
    /// that has any in `targets`.
    pub json: serde_json::Value,
    /// (per-target key, network, its state, whether anything is stored for it).
    pub targets: Vec<(PostKey, Network, crate::pipeline::Status, bool)>,
}

/// The record, draft and claim of every target of `key` (`status`, MCP `status`).
pub async fn key_status(app: &App, key: &PostKey, dl: &Deadline) -> Result<KeyStatus, String> {
    let mut targets = serde_json::Map::new();
    let mut linkedin = None;
    let mut all = Vec::new();
    for network in app.pipeline.lanes.keys() {
        let k = key.on(*network);
        let status = app
            .pipeline
            .status(&k, dl)
            .await
            .map_err(|e| format!("{}: {e}", network.as_str()))?;
        let claim = status.claim.as_ref().map(|(value, ttl)| {
            json!({
                "value": value.raw(),
                "ttl_ms": ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            })
        });
        let one = json!({
            "record": status.snapshot.record,
            "draft": status.snapshot.draft,
            "claim": claim,
        });
        let has = status.snapshot.record.is_some()
            || status.snapshot.draft.is_some()
            || status.claim.is_some();
        if network.bare_names() {
            linkedin = Some(one.clone());
        }
        if has {
            targets.insert(network.as_str().to_owned(), one);
        }
        all.push((k, *network, status, has));
    }
    let top = linkedin.unwrap_or_else(|| json!({"record": null, "draft": null, "claim": null}));
    let json = json!({
        "key": key.to_string(),
        "record": top["record"],
        "draft": top["draft"],
        "claim": top["claim"],
        "targets": targets,
    });
    Ok(KeyStatus { json, targets: all })
}

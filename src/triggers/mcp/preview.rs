//! The `preview` tool: what each target would get, checked as `post` checks it, with nothing
//! sent and nothing stored: the exact text, its length and limit, and the cover the network
//! would get (the original, or the rendition made for it, with its format, bytes and size) or
//! why it would get none. The work is [`crate::triggers::preview`]'s, shared with
//! `postonce preview`; this only translates it into a tool result.

use rmcp::model::CallToolResult;

use super::{bad_input, read_result, store_error};
use crate::app::App;
use crate::budget::Deadline;
use crate::triggers::preview::{preview, PreviewError};
use crate::triggers::ParsedRun;

/// The preview of `parsed` (a draft it carried, or the one stored for its key).
pub(super) async fn answer(app: &App, parsed: &ParsedRun, dl: &Deadline) -> CallToolResult {
    match preview(app, parsed, dl).await {
        Ok(p) => {
            let lines: Vec<String> = p.targets.iter().map(|t| t.line()).collect();
            read_result(
                p.to_json(),
                format!(
                    "preview of {}, nothing sent: {}",
                    p.key.draft(),
                    lines.join("; ")
                ),
            )
        }
        Err(PreviewError::NoDraft(e)) => bad_input(&e),
        Err(PreviewError::Unavailable { key, why }) => {
            store_error(&format!("the state of {key}"), &why)
        }
    }
}

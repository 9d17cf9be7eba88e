//! A direct Lambda invocation (console or CLI): `{"kind","slug", …draft fields optional,
//! "action"?: "post"|"done"|"force"}` → the outcome JSON as the function's result.

use serde_json::Value;

use super::{parse_run, FieldError};
use crate::app::App;
use crate::budget::Deadline;
use crate::outcome::Outcome;
use crate::pipeline::{Action, PostRequest, Source};

/// Parses a console event into a run.
///
/// # Errors
/// The field that is missing or invalid.
pub fn parse(app: &App, event: &Value, run_id: String) -> Result<PostRequest, FieldError> {
    let (key, content, targets) = parse_run(app, event, false)?;
    let action = match event.get("action").and_then(Value::as_str) {
        None | Some("post" | "retry") => Action::Post,
        Some("done") => Action::Done,
        Some("force") => Action::Force,
        Some(other) => {
            return Err(FieldError::new(
                "action",
                format!("{other:?} is not post, done or force"),
            ))
        }
    };
    Ok(PostRequest {
        key,
        content,
        action,
        source: Source::Console,
        run_id,
        reply_to: None,
        targets,
    })
}

/// Runs a console event.
///
/// # Errors
/// Bad input, before anything ran.
pub async fn handle(
    app: &App,
    event: &Value,
    dl: Deadline,
    run_id: String,
) -> Result<Outcome, FieldError> {
    let request = parse(app, event, run_id)?;
    Ok(app.pipeline.run(request, dl).await)
}

//! A direct Lambda invocation (console or CLI): `{"kind","slug", …draft fields optional,
//! "publish_at"?, "action"?: "post"|"done"|"force"|"now"|"cancel"}` → the outcome JSON as the
//! function's result.

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
    let parsed = parse_run(app, event, false)?;
    let action = match event.get("action").and_then(Value::as_str) {
        None | Some("post" | "retry") => Action::Post,
        Some("done") => Action::Done,
        Some("force") => Action::Force,
        Some("now") => Action::Now,
        Some("cancel") => Action::Cancel,
        Some(other) => {
            return Err(FieldError::new(
                "action",
                format!(
                    "{:?} is not post, done, force, now or cancel",
                    other.chars().take(32).collect::<String>()
                ),
            ))
        }
    };
    if action != Action::Post && parsed.content.is_some() {
        return Err(FieldError::new(
            "action",
            "acts on the stored draft: send it without caption and image_url",
        ));
    }
    Ok(PostRequest {
        key: parsed.key,
        content: parsed.content,
        action,
        source: Source::Console,
        run_id,
        reply_to: None,
        targets: parsed.targets,
        publish_at: parsed.publish_at,
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

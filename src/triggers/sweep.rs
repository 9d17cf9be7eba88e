//! The scheduled sweep (EventBridge event, or `postonce sweep`): re-drives failed and stuck
//! drafts and surfaces those that need a person. The policy is [`Pipeline::sweep`]'s.
//!
//! [`Pipeline::sweep`]: crate::pipeline::Pipeline::sweep

use serde_json::Value;

/// Whether a Lambda event is the sweeper's schedule: `{"postonce":"sweep"}` or an EventBridge
/// scheduled event.
pub fn is_sweep_event(event: &Value) -> bool {
    event.get("postonce").and_then(Value::as_str) == Some("sweep")
        || (event.get("source").and_then(Value::as_str) == Some("aws.events")
            && event.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event"))
}

//! The Lambda transport: one handler for Function URL requests (HTTP API payload v2), direct
//! console invocations and the sweeper's schedule. Translation only: the router and the
//! pipeline decide. The run's deadline is the invocation's.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine;
use bytes::Bytes;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::{json, Value};

use crate::app::App;
use crate::budget::Deadline;
use crate::triggers::{console, sweep, HttpRequest, HttpResponse, Router};

/// Runs the Lambda runtime loop with clients built once, before the loop.
///
/// # Errors
/// When the runtime API cannot be reached.
pub async fn run(app: Arc<App>) -> Result<(), lambda_runtime::Error> {
    let router = Arc::new(Router::new(app));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let router = router.clone();
        async move {
            let remaining = event
                .context
                .deadline()
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            let dl = Deadline::at(tokio::time::Instant::now() + remaining, remaining);
            handle(&router, event.payload, dl, event.context.request_id.clone())
                .await
                .map_err(lambda_runtime::Error::from)
        }
    }))
    .await
}

/// Handles one invocation event.
///
/// # Errors
/// An unrecognised event, or a console event with bad input: a message saying what was
/// expected (Lambda reports it as the function error).
pub async fn handle(
    router: &Router,
    event: Value,
    dl: Deadline,
    request_id: String,
) -> Result<Value, String> {
    if event.get("requestContext").is_some() && event.get("rawPath").is_some() {
        let response = match http_request(&event) {
            Ok(req) => router.handle(req, dl, request_id).await,
            Err(e) => HttpResponse::error(400, "bad_request", e),
        };
        return Ok(http_response(&response));
    }
    if sweep::is_sweep_event(&event) {
        let report = router.app.pipeline.sweep(&dl).await?;
        return serde_json::to_value(report).map_err(|e| e.to_string());
    }
    if event.get("kind").is_some() {
        let outcome = console::handle(&router.app, &event, dl, request_id)
            .await
            .map_err(|e| format!("bad input: {e}"))?;
        return serde_json::to_value(outcome).map_err(|e| e.to_string());
    }
    Err(
        "unrecognised event: expected a Function URL request, a console event {\"kind\":\"blog\",\"slug\":\"hello\"}, or {\"postonce\":\"sweep\"}"
            .into(),
    )
}

/// Reads a Function URL (payload v2) event. A base64 body is decoded before anything else sees
/// it, so the CI signature is checked over the raw bytes.
///
/// # Errors
/// When the event is malformed.
pub fn http_request(event: &Value) -> Result<HttpRequest, String> {
    let method = event
        .pointer("/requestContext/http/method")
        .and_then(Value::as_str)
        .ok_or("requestContext.http.method missing")?
        .to_ascii_uppercase();
    let path = event
        .get("rawPath")
        .and_then(Value::as_str)
        .ok_or("rawPath missing")?
        .to_owned();
    let headers = event
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.to_ascii_lowercase(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let raw = event
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = if event.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(raw)
            .map_err(|e| format!("body: invalid base64 ({e})"))?
    } else {
        raw.as_bytes().to_vec()
    };
    Ok(HttpRequest {
        method,
        path,
        headers,
        body: Bytes::from(body),
    })
}

/// The Function URL response for a router response.
pub fn http_response(r: &HttpResponse) -> Value {
    json!({
        "statusCode": r.status,
        "headers": {"content-type": "application/json"},
        "body": r.to_text(),
        "isBase64Encoded": false
    })
}

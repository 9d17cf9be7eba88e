//! `POST /ci`: a CI job's signed draft. The signature (GitHub's scheme, `X-Hub-Signature-256`)
//! is verified over the raw bytes, in constant time, before the body is parsed.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::{parse_run, HttpRequest, HttpResponse};
use crate::app::App;
use crate::budget::Deadline;
use crate::pipeline::{Action, PostRequest, Source};

/// Checks `sha256=<hex>` against the HMAC-SHA256 of `body` under `secret`, in constant time.
pub fn signature_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex_sig) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// Handles the CI route.
pub async fn handle(app: &App, req: &HttpRequest, dl: Deadline, run_id: String) -> HttpResponse {
    let Some(secret) = &app.config.webhook_secret else {
        return HttpResponse::error(
            503,
            "not_configured",
            "POSTONCE_WEBHOOK_SECRET is not set, so the /ci route is disabled",
        );
    };
    if !signature_valid(
        secret.expose().as_bytes(),
        &req.body,
        req.header("x-hub-signature-256"),
    ) {
        tracing::warn!("CI webhook with a missing or wrong signature refused");
        return HttpResponse::error(
            401,
            "invalid_signature",
            "X-Hub-Signature-256 must be sha256=<hex HMAC-SHA256 of the raw body under POSTONCE_WEBHOOK_SECRET>",
        );
    }
    if req.header("x-github-event") == Some("ping") {
        return HttpResponse::json(200, json!({"ok": true, "pong": true}));
    }
    // One UTF-8 check of the whole body, not one per string in it (`from_slice`'s way).
    let value: Result<Value, String> = match std::str::from_utf8(&req.body) {
        Ok(text) => serde_json::from_str(text).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let value = match value {
        Ok(v) => v,
        Err(e) => {
            return HttpResponse::error(400, "bad_request", format!("body: not valid JSON ({e})"))
        }
    };
    let parsed = match parse_run(app, &value, true) {
        Ok(parsed) => parsed,
        Err(e) => return e.response(),
    };
    let request = PostRequest {
        key: parsed.key,
        content: parsed.content,
        action: Action::Post,
        source: Source::Ci,
        run_id,
        reply_to: None,
        targets: parsed.targets,
        publish_at: parsed.publish_at,
    };
    HttpResponse::outcome(app.pipeline.run(request, dl).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_documented_test_vector_verifies() {
        let secret = b"It's a Secret to Everybody";
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signature_valid(secret, b"Hello, World!", Some(header)));
        assert!(!signature_valid(secret, b"Hello, World?", Some(header)));
        let flipped = header.replace("757107", "757108");
        assert!(!signature_valid(secret, b"Hello, World!", Some(&flipped)));
        assert!(!signature_valid(secret, b"Hello, World!", None));
        assert!(!signature_valid(
            secret,
            b"Hello, World!",
            Some("sha1=757107")
        ));
        assert!(!signature_valid(
            secret,
            b"Hello, World!",
            Some("sha256=zz")
        ));
    }
}

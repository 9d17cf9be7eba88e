//! XRPC on the account's PDS (`/xrpc/<nsid>`): one call, its answer read whole, and what a
//! non-2xx answer (`{"error":"<Name>","message":"…"}`) or a failure below HTTP means for the
//! post, as a [`PostError`] whose message names the fix. Describes only: the pipeline
//! decides.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Method;
use serde_json::Value;

use super::{BlueskyAdapter, NETWORK};
use crate::networks::{http, PostError};
use crate::vars::Secret;

/// Which call an answer belongs to: the same answer means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `com.atproto.server.createSession`.
    Login,
    /// `com.atproto.server.refreshSession`.
    Refresh,
    Upload,
    /// `com.atproto.repo.putRecord`: the create.
    Put,
    /// `com.atproto.repo.getRecord`.
    Get,
    /// `com.atproto.server.getSession` as the doctor's check.
    Check,
}

#[derive(Clone)]
pub(super) enum Body {
    None,
    Json(Value),
    Bytes(Bytes, &'static str),
}

/// An XRPC answer: the answer every network reads ([`http::Answer`]), read the XRPC way.
pub(super) use crate::networks::http::Answer;

/// What an XRPC answer says: its error's name, whether the token was refused, and its 2xx
/// body or what its failure means.
pub(super) trait Xrpc {
    fn error_name(&self) -> String;
    fn token_refused(&self) -> bool;
    fn result(self, op: Op) -> Result<Value, PostError>;
}

impl Xrpc for Answer {
    fn error_name(&self) -> String {
        self.error_json()
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_default()
    }

    /// The access token was refused: expired (400 `ExpiredToken`), not verifiable (400
    /// `InvalidToken`) or any 401.
    fn token_refused(&self) -> bool {
        self.status == 401
            || (self.status == 400
                && matches!(self.error_name().as_str(), "ExpiredToken" | "InvalidToken"))
    }

    /// The 2xx answer's JSON, or the answer described as a [`PostError`].
    fn result(self, op: Op) -> Result<Value, PostError> {
        if self.is_success() {
            return serde_json::from_str(&self.body).map_err(|_| PostError::InDoubt {
                network: NETWORK,
                message: format!(
                    "Bluesky answered {} with a body that is not JSON",
                    self.status
                ),
            });
        }
        Err(classify(op, self.status, &self.headers, &self.body))
    }
}

impl BlueskyAdapter {
    pub(super) async fn xrpc(
        &self,
        method: Method,
        nsid: &str,
        query: &[(&str, &str)],
        bearer: Option<&Secret>,
        body: Body,
    ) -> Result<Answer, PostError> {
        let url = format!("{}/xrpc/{nsid}", self.pds);
        let mut req = self.transport.client().request(method, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(token) = bearer {
            req = req.header(AUTHORIZATION, format!("Bearer {}", token.expose()));
        }
        let (req, shown) = match body {
            Body::None => (req, None),
            Body::Json(v) => (req.json(&v), None),
            Body::Bytes(b, content_type) => {
                let shown = vec![format!("<{} bytes>", b.len())];
                (req.header(CONTENT_TYPE, content_type).body(b), Some(shown))
            }
        };
        let resp = self
            .transport
            .send_showing(req, || shown)
            .await
            .map_err(transport)?;
        Answer::read(NETWORK, resp).await
    }
}

pub(super) fn local_refusal(message: &str) -> PostError {
    PostError::Rejected {
        network: NETWORK,
        status: 0,
        message: message.to_owned(),
    }
}

/// A failed re-upload before `putRecord`: the create itself was not sent.
pub(super) fn before_put(e: PostError) -> PostError {
    match e {
        PostError::InDoubt { message, .. } | PostError::NotSent { message, .. } => {
            PostError::NotSent {
                network: NETWORK,
                message: format!(
                    "re-uploading the image failed ({message}); putRecord was not sent"
                ),
            }
        }
        PostError::Rejected {
            status, message, ..
        } => PostError::Rejected {
            network: NETWORK,
            status,
            message: format!("re-uploading the image: {message}; putRecord was not sent"),
        },
        other => other,
    }
}

/// A failure below HTTP, as every network describes it ([`http::transport`]): nothing sent
/// (connect, DNS, a request that could not be built), or sent with no clear answer (timeout
/// after sending, a broken exchange, an unreadable body).
pub(super) fn transport(e: reqwest::Error) -> PostError {
    http::transport(NETWORK, e)
}

/// When a 429 ends: `RateLimit-Reset` (Unix seconds), counted from now.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    http::header_u64(headers, "ratelimit-reset").map(http::until_unix)
}

/// Turns a non-2xx XRPC answer (`{"error":"<Name>","message":"…"}`) into a [`PostError`]
/// whose message names the fix.
pub fn classify(op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let name = v.get("error").and_then(Value::as_str).unwrap_or("");
    let message = v.get("message").and_then(Value::as_str).unwrap_or("");
    let detail = match (name.is_empty(), message.is_empty()) {
        (false, false) => format!("{name}: {message}"),
        (false, true) => name.to_owned(),
        (true, false) => message.to_owned(),
        (true, true) => body.chars().take(300).collect(),
    };
    let rejected = |message: String| PostError::Rejected {
        network: NETWORK,
        status,
        message,
    };
    let token = status == 401 || matches!(name, "ExpiredToken" | "InvalidToken");
    match status {
        429 => PostError::RateLimited {
            network: NETWORK,
            retry_after: retry_after(headers),
            message: format!("{detail}; nothing was written"),
        },
        500..=599 => PostError::InDoubt {
            network: NETWORK,
            message: format!("Bluesky answered {status}: {detail}"),
        },
        _ if op == Op::Login && token => PostError::credential_refused(
            crate::networks::Network::Bluesky,
            "Bluesky app password",
            status,
            &format!(
                "the identifier or app password was refused ({detail}); check BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD (create a new app password in Settings → Privacy and security → App passwords if it was revoked)"
            ),
        ),
        _ if token => rejected(format!(
            "the session was refused ({detail}) and could not be renewed; check BLUESKY_APP_PASSWORD"
        )),
        400 if name == "InvalidSwap" => rejected(format!(
            "{detail}: a different record is already at this record key, so nothing was overwritten; this key does not hold this post"
        )),
        400 if name == "BlobNotFound" => rejected(format!(
            "{detail}: the image blob is gone (unreferenced blobs are collected within minutes); upload the image again"
        )),
        400 if matches!(name, "InvalidMimeType" | "InvalidSize" | "BlobTooLarge") => rejected(format!(
            "{detail}: the image does not match its blob or is too large for a post (2,000,000 bytes on bsky.social, 1,000,000 on older PDSs)"
        )),
        413 => rejected(format!("{detail}: the image is larger than the PDS takes")),
        _ => rejected(detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use std::time::{SystemTime, UNIX_EPOCH};
    use serde_json::json;

    #[test]
    fn classifies_the_documented_answers() {
        let none = HeaderMap::new();
        let body = |e: &str, m: &str| json!({"error": e, "message": m}).to_string();
        assert!(matches!(
            classify(Op::Put, 400, &none, &body("InvalidSwap", "Record was at bafyreiabc")),
            PostError::Rejected { status: 400, message, .. } if message.contains("different record") && message.contains("bafyreiabc")
        ));
        assert!(matches!(
            classify(Op::Put, 400, &none, &body("BlobNotFound", "Could not find blob: bafkrei")),
            PostError::Rejected { message, .. } if message.contains("upload the image again")
        ));
        assert!(matches!(
            classify(Op::Login, 401, &none, &body("AuthenticationRequired", "Invalid identifier or password")),
            PostError::CredentialRefused { message, .. } if message.contains("BLUESKY_APP_PASSWORD")
        ));
        for s in [500, 502, 503, 504] {
            assert!(classify(
                Op::Put,
                s,
                &none,
                &body("InternalServerError", "Internal Server Error")
            )
            .may_exist());
        }
        let mut h = HeaderMap::new();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        h.insert(
            "ratelimit-reset",
            HeaderValue::from_str(&(now + 120).to_string()).unwrap(),
        );
        match classify(
            Op::Put,
            429,
            &h,
            &body("RateLimitExceeded", "Rate Limit Exceeded"),
        ) {
            PostError::RateLimited {
                retry_after: Some(d),
                ..
            } => {
                assert!(d <= Duration::from_secs(120) && d >= Duration::from_secs(110));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(Op::Put, 400, &none, "not json"),
            PostError::Rejected { status: 400, message, .. } if message == "not json"
        ));
    }
}

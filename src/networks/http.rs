//! What every network adapter does with HTTP, written once: send a request and describe a
//! failure below HTTP by what it means for the post ([`transport`]: nothing sent, or sent
//! with no clear answer), read the answer ([`Answer`]), parse a 2xx body as JSON, keep a
//! rate limit's reset ([`retry_after_seconds`], [`until_unix`]), and keep secrets out of
//! every message that leaves an adapter ([`Redactor`]).
//!
//! Each network keeps only what is its own: its URLs and headers, and its classifier, which
//! turns a non-2xx answer into a [`PostError`] naming the fix (object_store's shared errors
//! are the model).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::{show, PostError};
use crate::vars::Secret;

/// Which kind of call an answer belongs to: a classifier reads a 5xx differently for a
/// create (the post may exist) than for an upload or a read (safe to repeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// An image upload (safe to repeat).
    Upload,
    /// The create (or publish): never repeated without the pipeline's decision.
    Create,
    /// A read: the account, a post, the account's posts (safe to repeat).
    Read,
    /// The doctor's harmless read that proves the credentials work: a refusal there is
    /// about the credentials, not about reading posts back.
    Check,
}

/// The error and its causes, one line, without the URL (a URL may carry a token: the Bot
/// API's path does).
pub fn chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(&e);
    while let Some(err) = source {
        parts.push(err.to_string());
        source = err.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// A failure below HTTP, described by what it means for the post: a request that could not
/// be built or a connection that was never made sent nothing ([`PostError::NotSent`]);
/// anything else (a timeout after the request went out, a reset, an unreadable answer) may
/// have reached the network ([`PostError::InDoubt`]).
pub fn transport(network: &'static str, e: reqwest::Error) -> PostError {
    if e.is_builder() || e.is_connect() {
        return PostError::NotSent {
            network,
            message: chain(e),
        };
    }
    let message = if e.is_timeout() {
        format!("no answer in time ({})", chain(e))
    } else {
        chain(e)
    };
    PostError::InDoubt { network, message }
}

/// An HTTP answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    /// Reads `resp` to its end; a body that breaks off is a [`transport`] failure.
    ///
    /// # Errors
    /// The body could not be read.
    pub async fn read(network: &'static str, resp: reqwest::Response) -> Result<Self, PostError> {
        Self::read_with(resp, |e| transport(network, e)).await
    }

    /// [`Self::read`] for a network that describes a failure below HTTP its own way
    /// (`describe`, which wraps [`transport`]: a timeout that names the call's budget).
    ///
    /// # Errors
    /// The body could not be read, as `describe` says.
    pub async fn read_with(
        resp: reqwest::Response,
        describe: impl FnOnce(reqwest::Error) -> PostError,
    ) -> Result<Self, PostError> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.map_err(describe)?;
        Ok(Self {
            status,
            headers,
            body,
        })
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A 2xx body as JSON (an empty body is `null`). A 2xx the adapter cannot read leaves
    /// the call in doubt: the network did something.
    ///
    /// # Errors
    /// [`PostError::InDoubt`] for a body that is not JSON.
    pub fn json(&self, network: &'static str) -> Result<Value, PostError> {
        if self.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&self.body).map_err(|_| PostError::InDoubt {
            network,
            message: format!(
                "{network} answered {} with a body that is not JSON",
                self.status
            ),
        })
    }

    /// A header's value as a whole number.
    pub fn header_u64(&self, name: &str) -> Option<u64> {
        header_u64(&self.headers, name)
    }

    /// The JSON body of an error answer, or `null` when it has none.
    pub fn error_json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The start of the body, for an error that found nothing better to say.
    pub fn excerpt(&self) -> String {
        excerpt(&self.body)
    }
}

/// The start of an answer's body (300 characters), for an error that found nothing better to
/// say.
pub fn excerpt(body: &str) -> String {
    body.chars().take(300).collect()
}

/// What a non-2xx answer means when the network's classifier knows nothing more of it: a 5xx
/// leaves the call in doubt (the post may exist), any other status is a refusal in the
/// network's own words (`detail`).
pub fn unclassified(network: &'static str, status: u16, detail: String) -> PostError {
    if (500..600).contains(&status) {
        PostError::InDoubt {
            network,
            message: format!("{network} answered {status}: {detail}"),
        }
    } else {
        PostError::Rejected {
            network,
            status,
            message: detail,
        }
    }
}

/// A header's value as a whole number.
pub fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The time from now until `unix` (Unix seconds); zero when it has passed.
pub fn until_unix(unix: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Duration::from_secs(unix.saturating_sub(now))
}

/// The standard `Retry-After` header in seconds (the HTTP-date form is not used by these
/// networks' APIs).
pub fn retry_after_seconds(headers: &HeaderMap) -> Option<Duration> {
    header_u64(headers, "retry-after").map(Duration::from_secs)
}

/// Where an adapter's requests go: to the network, or, in a dry run, nowhere: each request is
/// shown (as [`show::show`] shows it) and answered with what the network's API would answer,
/// by the network's own [`DryAnswers`]. Everything else is the same code as a real post.
#[derive(Clone)]
pub struct Transport {
    http: reqwest::Client,
    dry: Option<DryAnswers>,
}

/// A network's answers in a dry run: for a request, the status and JSON body its API would
/// answer, any ids in it made by [`show::dry_id`].
pub type DryAnswers = std::sync::Arc<dyn Fn(&reqwest::Request) -> (u16, Value) + Send + Sync>;

impl Transport {
    /// Sends for real through the process's shared client.
    pub fn real(http: reqwest::Client) -> Self {
        Self { http, dry: None }
    }

    /// Sends nothing: shows each request and answers it with `answers`.
    pub fn dry(http: reqwest::Client, answers: DryAnswers) -> Self {
        Self {
            http,
            dry: Some(answers),
        }
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry.is_some()
    }

    /// The client the requests are built with.
    pub fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends `req`. A dry run shows it with its JSON body (or none) and answers it.
    ///
    /// # Errors
    /// The request could not be built or sent.
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, reqwest::Error> {
        self.send_showing(req, || None).await
    }

    /// [`Self::send`] for a body that cannot be read back (a multipart form, raw bytes) or
    /// that a person reads better another way: a dry run shows `lines` as its body.
    ///
    /// # Errors
    /// The request could not be built or sent.
    pub async fn send_showing(
        &self,
        req: reqwest::RequestBuilder,
        lines: impl FnOnce() -> Option<Vec<String>>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let Some(answers) = &self.dry else {
            return req.send().await;
        };
        let request = req.build()?;
        show_request(&request, lines());
        let (status, body) = answers(&request);
        let answer = http::Response::builder()
            .status(status)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .unwrap_or_default();
        Ok(reqwest::Response::from(answer))
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_dry_run() {
            "Transport::Dry"
        } else {
            "Transport::Real"
        })
    }
}

/// A URL as people read it: not percent-encoded, so a placeholder reads `<NAME>`; the query
/// decoded as the form it is (`+` a space).
fn readable_url(url: &reqwest::Url) -> String {
    let mut base = url.clone();
    base.set_query(None);
    let mut out = percent_encoding::percent_decode_str(base.as_str())
        .decode_utf8_lossy()
        .into_owned();
    if url.query().is_some() {
        let pairs: Vec<String> = url.query_pairs().map(|(k, v)| format!("{k}={v}")).collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

/// Shows `request` as a dry run's block: its URL as people read it ([`readable_url`]), its
/// headers (a multipart type without its boundary), and `lines` or its JSON body.
fn show_request(request: &reqwest::Request, lines: Option<Vec<String>>) {
    let url = readable_url(request.url());
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        // The length is the transport's, not what the adapter wrote.
        .filter(|(name, _)| *name != reqwest::header::CONTENT_LENGTH)
        .map(|(name, value)| {
            let value = value.to_str().unwrap_or("<not text>");
            let value = value.split("; boundary=").next().unwrap_or(value);
            (show::header_name(name.as_str()), value.to_owned())
        })
        .collect();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let json = request
        .body()
        .and_then(reqwest::Body::as_bytes)
        .and_then(|b| serde_json::from_slice::<Value>(b).ok());
    let body = match (lines, &json) {
        (Some(lines), _) => show::ShownBody::Lines(lines),
        (None, Some(v)) => show::ShownBody::Json(v),
        (None, None) => show::ShownBody::None,
    };
    show::show(request.method().as_str(), &url, &headers, body);
}

/// Keeps secrets out of every message that leaves an adapter: each is replaced by a
/// placeholder naming its variable (`<MASTODON_ACCESS_TOKEN>`), in case a server or a
/// transport error echoes it.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<(Secret, &'static str)>,
}

impl Redactor {
    /// Replaces `secret` by `<placeholder>` (empty secrets are ignored).
    #[must_use]
    pub fn hide(mut self, secret: &Secret, placeholder: &'static str) -> Self {
        if !secret.expose().is_empty() {
            self.secrets.push((secret.clone(), placeholder));
        }
        self
    }

    /// `text` without any of the secrets.
    pub fn clean(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (secret, placeholder) in &self.secrets {
            if out.contains(secret.expose()) {
                out = out.replace(secret.expose(), placeholder);
            }
        }
        out
    }

    /// `e` with every message cleaned.
    pub fn error(&self, e: PostError) -> PostError {
        e.map_message(|m| self.clean(&m))
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_leave_in_a_message() {
        let r = Redactor::default()
            .hide(&Secret::new("tok-123"), "<TOKEN>")
            .hide(&Secret::new(""), "<EMPTY>");
        assert_eq!(
            r.clean("bad tok-123 and tok-123"),
            "bad <TOKEN> and <TOKEN>"
        );
        let e = r.error(PostError::Rejected {
            network: "X",
            status: 401,
            message: "token tok-123 revoked".into(),
        });
        assert_eq!(e.to_string(), "X refused (401): token <TOKEN> revoked");
        assert!(!format!("{r:?}").contains("tok-123"));
    }

    #[test]
    fn a_shown_url_reads_as_people_read_it() {
        let url = reqwest::Url::parse(
            "https://pds.example/xrpc/com.atproto.repo.getRecord?repo=%3Csession+did%3E&rkey=3k",
        )
        .unwrap();
        assert_eq!(
            readable_url(&url),
            "https://pds.example/xrpc/com.atproto.repo.getRecord?repo=<session did>&rkey=3k"
        );
        let url =
            reqwest::Url::parse("https://m.example/api/v1/accounts/%3Cid%3E/statuses").unwrap();
        assert_eq!(
            readable_url(&url),
            "https://m.example/api/v1/accounts/<id>/statuses"
        );
    }

    #[test]
    fn a_2xx_body_that_is_not_json_leaves_the_call_in_doubt() {
        let a = Answer {
            status: 200,
            headers: HeaderMap::new(),
            body: "<html>".into(),
        };
        assert!(a.json("X").unwrap_err().may_exist());
        let empty = Answer {
            body: " ".into(),
            ..a
        };
        assert_eq!(empty.json("X").unwrap(), Value::Null);
    }

    #[test]
    fn resets_count_from_now_and_never_go_negative() {
        assert_eq!(until_unix(0), Duration::ZERO);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let d = until_unix(now + 90);
        assert!(
            d <= Duration::from_secs(90) && d >= Duration::from_secs(88),
            "{d:?}"
        );
    }
}

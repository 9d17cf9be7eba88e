//! The Graph wire format Threads and Instagram share: the container's status, the Graph API's
//! error body and what each answer means for the post ([`classify`]), the account's list of
//! posts, Meta's timestamps. Each network's words (its name, its variables, its fix for a
//! refused token) come from its [`Voice`].

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::{Dialect, Voice};
use crate::networks::http::{self, Answer};
use crate::networks::PostError;

/// Which call an answer belongs to: the same answer means different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Making the container (nothing can post from it by itself).
    Container,
    /// The container's status.
    Status,
    /// The publish: the one call that posts.
    Publish,
    /// `GET /{media}?fields=permalink`, after a publish.
    Media,
    /// The account's posts, to find one.
    List,
    /// The publishing quota (doctor; Instagram before a publish).
    Check,
}

/// A container's status (Threads' `status`, Instagram's `status_code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerStatus {
    InProgress,
    /// Ready to publish.
    Finished,
    /// Its media object has been published.
    Published,
    /// Failed; the network's error (Threads' `error_message`, Instagram's `status`).
    Error(Option<String>),
    /// Not published within 24 hours.
    Expired,
}

impl ContainerStatus {
    /// The status of a status read's answer, in `d`'s field names.
    pub fn parse(d: &Dialect, v: &Value) -> Option<Self> {
        let message = v
            .get(d.error_key)
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        Some(match v.get(d.status_key)?.as_str()? {
            "IN_PROGRESS" => Self::InProgress,
            "FINISHED" => Self::Finished,
            "PUBLISHED" => Self::Published,
            "ERROR" => Self::Error(message),
            "EXPIRED" => Self::Expired,
            _ => return None,
        })
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::InProgress => "IN_PROGRESS",
            Self::Finished => "FINISHED",
            Self::Published => "PUBLISHED",
            Self::Error(_) => "ERROR",
            Self::Expired => "EXPIRED",
        }
    }
}

/// The Graph API's error body: `{"error":{"message","type","code","error_subcode","fbtrace_id"}}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GraphError {
    #[serde(default)]
    pub message: String,
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub error_subcode: Option<i64>,
    #[serde(default)]
    pub error_user_msg: Option<String>,
    #[serde(default)]
    pub fbtrace_id: Option<String>,
}

impl GraphError {
    /// The error of a body, if it has the Graph shape.
    pub fn parse(body: &str) -> Option<Self> {
        #[derive(Deserialize)]
        struct Envelope {
            error: GraphError,
        }
        serde_json::from_str::<Envelope>(body).ok().map(|e| e.error)
    }

    /// One line for a person: the message, the user message when there is one, and the codes
    /// (which Meta's support asks for).
    pub fn describe(&self) -> String {
        let mut out = if self.message.is_empty() {
            "no error message".to_owned()
        } else {
            self.message.clone()
        };
        if let Some(user) = self.error_user_msg.as_deref().filter(|m| !m.is_empty()) {
            out.push_str(&format!(" ({user})"));
        }
        let mut codes = vec![];
        if let Some(c) = self.code {
            codes.push(format!("code {c}"));
        }
        if let Some(s) = self.error_subcode {
            codes.push(format!("subcode {s}"));
        }
        if let Some(t) = self.fbtrace_id.as_deref().filter(|t| !t.is_empty()) {
            codes.push(format!("fbtrace_id {t}"));
        }
        if !codes.is_empty() {
            out.push_str(&format!(" [{}]", codes.join(", ")));
        }
        out
    }
}

/// Graph codes that mean "too many calls" (4, 17, 32, 613), the publishing quota
/// included (9: Instagram's used-up publishing quota, as observed).
pub const RATE_LIMIT_CODES: [i64; 5] = [4, 9, 17, 32, 613];
/// Code 190: the token is invalid, expired or revoked.
pub const TOKEN_CODE: i64 = 190;
/// Code 100: an invalid parameter (an image URL the network cannot fetch, …).
pub const PARAMETER_CODE: i64 = 100;
/// Graph codes for a failure on Meta's side ("An unknown error occurred", "Service
/// temporarily unavailable"): as a 5xx.
pub const SERVER_CODES: [i64; 2] = [1, 2];

/// Turns a non-2xx answer into a [`PostError`] whose message names the fix.
pub fn classify(d: &Voice, op: Op, status: u16, headers: &HeaderMap, body: &str) -> PostError {
    let graph = GraphError::parse(body);
    let detail = graph.as_ref().map_or_else(
        || {
            let snippet: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let snippet: String = snippet.chars().take(200).collect();
            if snippet.is_empty() {
                format!("HTTP {status}, no error text")
            } else {
                format!("HTTP {status}: {snippet}")
            }
        },
        GraphError::describe,
    );
    let code = graph.as_ref().and_then(|g| g.code);
    if code == Some(TOKEN_CODE) || (status == 401 && code.is_none()) {
        return PostError::credential_refused(
            d.network,
            &format!("{} token", d.name),
            status,
            &format!("the access token was refused ({detail}); or {}", d.renew),
        );
    }
    if status == 429 || code.is_some_and(|c| RATE_LIMIT_CODES.contains(&c)) {
        let what = if op == Op::Publish && d.default_quota > 0 {
            format!(
                "the rate limit or the publishing quota ({} posts per 24 h) is used up",
                d.default_quota
            )
        } else {
            "the rate limit is used up".to_owned()
        };
        return PostError::RateLimited {
            network: d.name,
            retry_after: http::retry_after_seconds(headers),
            message: format!("{what}: {detail}"),
        };
    }
    if (500..=599).contains(&status) || code.is_some_and(|c| SERVER_CODES.contains(&c)) {
        return PostError::InDoubt {
            network: d.name,
            message: format!("{} answered {status}: {detail}", d.name),
        };
    }
    // A token without the scope a read needs: the post may still exist, only this account
    // cannot look.
    if op == Op::List && (status == 403 || matches!(code, Some(10 | 200..=299))) {
        return PostError::ReadRefused {
            network: d.name,
            message: format!(
                "{detail}; reading the account's posts needs the {} scope",
                d.read_scope
            ),
        };
    }
    let subcode = graph.as_ref().and_then(|g| g.error_subcode);
    let on_user = matches!(op, Op::Container | Op::Publish | Op::List | Op::Check);
    let message = match (op, code) {
        // "Object with ID '…' does not exist": the user in the path.
        (_, Some(PARAMETER_CODE)) if on_user && subcode == Some(33) => format!(
            "{detail}; {} must be the token's {} user id or `me`",
            d.user_var, d.name
        ),
        (Op::Container, Some(PARAMETER_CODE)) => format!(
            "{detail}; {} fetches the image itself, so its URL must be public (https, reachable from the internet) and {}",
            d.name, d.image_rule
        ),
        (_, Some(10 | 200..=299)) => format!(
            "{detail}; the token lacks a permission: {}",
            d.renew
        ),
        (_, _) if status == 404 => format!(
            "{detail}; {} must be the account's {} user id or `me`, and {} {}'s base ({})",
            d.user_var, d.name, d.api_var, d.name, d.default_api_url
        ),
        _ => detail,
    };
    PostError::Rejected {
        network: d.name,
        status,
        message,
    }
}

/// A refusal made here, before anything was sent.
pub fn local_refusal(d: &Voice, message: String) -> PostError {
    PostError::Rejected {
        network: d.name,
        status: 0,
        message: format!("not sent: {message}"),
    }
}

/// A failure below HTTP ([`http::transport`]), as the network's.
pub fn transport(d: &Voice, e: reqwest::Error) -> PostError {
    http::transport(d.name, e)
}

/// A 2xx answer's JSON, or the answer described as a [`PostError`].
pub async fn answer(d: &Voice, resp: reqwest::Response, op: Op) -> Result<Value, PostError> {
    let a = Answer::read(d.name, resp).await?;
    if a.is_success() {
        return a.json(d.name);
    }
    Err(classify(d, op, a.status, &a.headers, &a.body))
}

/// The `id` of an answer (`{"id":"17889615691921648"}`).
pub fn id_of(v: &Value) -> Option<String> {
    match v.get("id")? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One post of the account's list (`fields=id,permalink,<text field>,timestamp`).
#[derive(Debug, Clone, Default)]
pub struct ListedPost {
    pub id: String,
    pub permalink: Option<String>,
    /// Threads' `text`, Instagram's `caption`.
    pub text: Option<String>,
    pub timestamp: Option<String>,
}

impl ListedPost {
    fn parse(d: &Dialect, v: &Value) -> Option<Self> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let id = match v.get("id")? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        Some(Self {
            id,
            permalink: s("permalink"),
            text: s(d.text_field),
            timestamp: s("timestamp"),
        })
    }
}

/// One page of the account's list: its posts (newest first) and the cursor of the next page.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    pub posts: Vec<ListedPost>,
    /// `paging.cursors.after`, when `paging.next` says there is a next page.
    pub after: Option<String>,
}

impl ListPage {
    pub fn parse(d: &Dialect, v: &Value) -> Self {
        let posts = v
            .get("data")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| ListedPost::parse(d, i))
                    .filter(|p| !p.id.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let has_next = v
            .pointer("/paging/next")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let after = has_next
            .then(|| v.pointer("/paging/cursors/after").and_then(Value::as_str))
            .flatten()
            .filter(|a| !a.is_empty())
            .map(str::to_owned);
        Self { posts, after }
    }
}

/// A text as both sides are compared: line breaks as `\n`, NFC, the surrounding space trimmed.
pub fn comparable(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let text: String = text
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .nfc()
        .collect();
    text.trim().to_owned()
}

/// A Graph timestamp (`2026-12-04T10:15:00+0000`; `Z` and `+00:00` accepted too) → Unix
/// seconds, or what is wrong with it. Any text gets an answer: the network's answer is outside
/// input (a timestamp ending in a multi-byte character once split off a character boundary
/// and panicked, on every reconcile: issue 30).
pub fn parse_timestamp(s: &str) -> Result<i64, String> {
    let s = s.trim();
    // The last five bytes, if they make a zone: `str::get` answers `None` off a character
    // boundary instead of panicking.
    let split = s
        .len()
        .checked_sub(5)
        .and_then(|i| Some((s.get(..i)?, s.get(i..)?)));
    let fixed = match split {
        // `+0000` → `+00:00`, which RFC 3339 wants.
        Some((head, zone))
            if (zone.starts_with('+') || zone.starts_with('-'))
                && zone[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{head}{}:{}", &zone[..3], &zone[3..])
        }
        _ => s.to_owned(),
    };
    time::OffsetDateTime::parse(&fixed, &time::format_description::well_known::Rfc3339)
        .map(time::OffsetDateTime::unix_timestamp)
        .map_err(|e| {
            let shown: String = s.chars().take(40).collect();
            format!(
                "a post timestamp answered that is not RFC 3339 ({shown:?}: {e}); the post is compared by its text alone"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::parse_timestamp;

    #[test]
    fn timestamps() {
        let t = 1_796_206_500; // 2026-12-02T10:15:00Z
        assert_eq!(parse_timestamp("2026-12-02T10:15:00+0000"), Ok(t));
        assert_eq!(parse_timestamp("2026-12-02T10:15:00Z"), Ok(t));
        assert_eq!(parse_timestamp("2026-12-02T11:15:00+01:00"), Ok(t));
        assert_eq!(parse_timestamp("2026-12-02T11:15:00+0100"), Ok(t));
        let e = parse_timestamp("yesterday").unwrap_err();
        assert!(e.contains("not RFC 3339") && e.contains("yesterday"), "{e}");
    }

    /// Issue 30: the last five bytes of a timestamp are not always five characters. Each of
    /// these once panicked (`split_at` off a character boundary); now each is an error that
    /// says what was answered.
    #[test]
    fn a_non_ascii_timestamp_is_an_error_never_a_panic() {
        for s in [
            "2026-12-02T10:15:00+00é",
            "2026-12-02T10:15😀😀",
            "é",
            "ééé",
            "2026-12-02T10:15:00+０００0",
            "\u{feff}2026-12-02T10:15:00+0000\u{200b}",
        ] {
            let e = parse_timestamp(s).unwrap_err();
            assert!(e.contains("not RFC 3339"), "{s:?}: {e}");
        }
    }
}

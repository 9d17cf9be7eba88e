//! The LinkedIn REST adapter: versioned headers, the two-step image upload, create-post, and
//! error answers turned into [`PublishError`].

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

use super::{NewPost, PublishError, Publisher, UploadTarget};
use crate::networks::{http, PostError};
use crate::vars::Secret;

/// Publishes through LinkedIn's versioned REST API.
pub struct LinkedIn {
    http: reqwest::Client,
    api: String,
    token: Secret,
    author: String,
    version: String,
}

impl LinkedIn {
    /// `api` is the base (`https://api.linkedin.com`); `http` the process's shared client.
    pub fn new(
        http: reqwest::Client,
        api: &str,
        token: Secret,
        author: &str,
        version: &str,
    ) -> Self {
        Self {
            http,
            api: api.trim_end_matches('/').to_owned(),
            token,
            author: author.to_owned(),
            version: version.to_owned(),
        }
    }

    fn headers(&self) -> Result<HeaderMap, PublishError> {
        let mut h = HeaderMap::new();
        let auth =
            HeaderValue::from_str(&format!("Bearer {}", self.token.expose())).map_err(|_| {
                PublishError::Rejected {
                    status: 401,
                    message: "LINKEDIN_ACCESS_TOKEN contains characters a header cannot carry"
                        .into(),
                }
            })?;
        h.insert(AUTHORIZATION, auth);
        h.insert(
            "LinkedIn-Version",
            HeaderValue::from_str(&self.version).map_err(|_| PublishError::Rejected {
                status: 426,
                message: "LINKEDIN_VERSION is not a valid header value".into(),
            })?,
        );
        h.insert(
            "X-Restli-Protocol-Version",
            HeaderValue::from_static("2.0.0"),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(h)
    }

    /// The upload URL comes from LinkedIn's answer; the token is only sent to LinkedIn's own
    /// hosts (or to the configured API origin, e.g. a local test server).
    fn upload_url_allowed(&self, upload_url: &str) -> bool {
        let Ok(u) = url::Url::parse(upload_url) else {
            return false;
        };
        let Ok(api) = url::Url::parse(&self.api) else {
            return false;
        };
        let same_origin = u.origin() == api.origin();
        let linkedin_host = u.scheme() == "https"
            && u.host_str()
                .is_some_and(|h| h == "linkedin.com" || h.ends_with(".linkedin.com"));
        same_origin || linkedin_host
    }
}

/// A failure below HTTP, as every network describes it ([`http::transport`], its message
/// without the URL: upload URLs carry signed query strings), in LinkedIn's terms.
fn transport(e: reqwest::Error) -> PublishError {
    match http::transport("LinkedIn", e) {
        PostError::NotSent { message, .. } => PublishError::NotSent(message),
        PostError::InDoubt { message, .. } => PublishError::Broken(message),
        other => PublishError::Broken(other.to_string()),
    }
}

/// Finds `urn:li:<type>:<id>` in a text (the duplicate answer names the existing post).
fn find_urn(text: &str) -> Option<String> {
    let start = text.find("urn:li:")?;
    let urn: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-'))
        .collect();
    (urn.matches(':').count() >= 3).then_some(urn)
}

/// Turns a non-success answer into a classified error whose message names the fix.
pub fn classify(status: u16, headers: &HeaderMap, body: &str) -> PublishError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = parsed
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| body.chars().take(300).collect());
    let is_duplicate = parsed
        .pointer("/errorDetails/inputErrors")
        .and_then(Value::as_array)
        .is_some_and(|errs| {
            errs.iter()
                .any(|e| e.get("code").and_then(Value::as_str) == Some("DUPLICATE_POST"))
        })
        || message.contains("duplicate of urn:li:");
    match status {
        422 if is_duplicate => match find_urn(&message) {
            Some(urn) => PublishError::Duplicate { urn },
            None => PublishError::Rejected {
                status,
                message: format!("duplicate content, but LinkedIn named no post: {message}"),
            },
        },
        401 => PublishError::Rejected {
            status,
            message: format!(
                "the access token is missing, expired or revoked ({message}); re-authorize and update LINKEDIN_ACCESS_TOKEN (tokens last 60 days)"
            ),
        },
        403 => PublishError::Rejected {
            status,
            message: format!(
                "access denied ({message}); the token needs w_member_social (or w_organization_social for an organization) and LINKEDIN_AUTHOR must be the token's member or an organization it administers"
            ),
        },
        426 => PublishError::Rejected {
            status,
            message: format!("{message}; update LINKEDIN_VERSION to an active YYYYMM version"),
        },
        429 => PublishError::RateLimited {
            retry_after: http::retry_after_seconds(headers),
            message: format!("{message}; quotas reset at midnight UTC"),
        },
        500..=599 => PublishError::Server { status, message },
        _ => PublishError::Rejected { status, message },
    }
}

async fn failure(resp: reqwest::Response) -> PublishError {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap_or_default();
    classify(status, &headers, &body)
}

#[async_trait]
impl Publisher for LinkedIn {
    async fn initialize_upload(&self) -> Result<UploadTarget, PublishError> {
        let body = json!({"initializeUploadRequest": {"owner": self.author}});
        let resp = self
            .http
            .post(format!("{}/rest/images?action=initializeUpload", self.api))
            .headers(self.headers()?)
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        if !resp.status().is_success() {
            return Err(failure(resp).await);
        }
        let v: Value = resp.json().await.map_err(transport)?;
        let upload_url = v.pointer("/value/uploadUrl").and_then(Value::as_str);
        let image = v.pointer("/value/image").and_then(Value::as_str);
        match (upload_url, image) {
            (Some(u), Some(i)) if self.upload_url_allowed(u) => Ok(UploadTarget {
                upload_url: u.to_owned(),
                image_urn: i.to_owned(),
            }),
            (Some(_), Some(_)) => Err(PublishError::Rejected {
                status: 200,
                message: "initializeUpload returned an upload URL outside LinkedIn; refusing to send the token there".into(),
            }),
            _ => Err(PublishError::Broken("initializeUpload answer lacks value.uploadUrl or value.image".into())),
        }
    }

    async fn upload_image(
        &self,
        target: &UploadTarget,
        bytes: Bytes,
        content_type: &str,
    ) -> Result<(), PublishError> {
        if !self.upload_url_allowed(&target.upload_url) {
            return Err(PublishError::Rejected {
                status: 0,
                message: "upload URL outside LinkedIn".into(),
            });
        }
        let resp = self
            .http
            .put(&target.upload_url)
            .bearer_auth(self.token.expose())
            .header(CONTENT_TYPE, content_type)
            .body(bytes)
            .send()
            .await
            .map_err(transport)?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(failure(resp).await)
        }
    }

    async fn create_post(&self, post: &NewPost) -> Result<Option<String>, PublishError> {
        let body = super::create_post_body(&self.author, post);
        let resp = self
            .http
            .post(format!("{}/rest/posts", self.api))
            .headers(self.headers()?)
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        if resp.status().is_success() {
            let urn = resp
                .headers()
                .get("x-restli-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Ok(urn);
        }
        Err(failure(resp).await)
    }

    fn is_dry_run(&self) -> bool {
        false
    }

    async fn check(&self) -> Result<String, PublishError> {
        // initializeUpload exercises the token, the author and the version; an unused upload
        // slot simply expires.
        self.initialize_upload().await?;
        Ok(format!(
            "token accepted for {}, version {} active",
            self.author, self.version
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const DUPLICATE: &str = r#"{"errorDetailType":"com.linkedin.common.error.BadRequest","message":"com.linkedin.content.common.exception.BadRequestResponseException: Content is a duplicate of urn:li:share:7141138937766391808","errorDetails":{"inputErrors":[{"description":"Duplicate post is detected","input":{},"code":"DUPLICATE_POST"}]},"status":422}"#;

    #[test]
    fn classifies_the_documented_answers() {
        let h = HeaderMap::new();
        assert_eq!(
            classify(422, &h, DUPLICATE),
            PublishError::Duplicate {
                urn: "urn:li:share:7141138937766391808".into()
            }
        );
        let e = classify(
            426,
            &h,
            r#"{"status":426,"code":"NONEXISTENT_VERSION","message":"Requested version 20240901 is not active"}"#,
        );
        assert!(
            matches!(&e, PublishError::Rejected { status: 426, message } if message.contains("LINKEDIN_VERSION"))
        );
        assert!(
            matches!(classify(401, &h, "{}"), PublishError::Rejected { status: 401, message } if message.contains("re-authorize"))
        );
        assert!(matches!(
            classify(403, &h, "{}"),
            PublishError::Rejected { status: 403, .. }
        ));
        let mut rh = HeaderMap::new();
        rh.insert("retry-after", HeaderValue::from_static("30"));
        assert_eq!(
            classify(429, &rh, "{}"),
            PublishError::RateLimited {
                retry_after: Some(Duration::from_secs(30)),
                message: "{}; quotas reset at midnight UTC".into()
            }
        );
        assert!(classify(503, &h, "oops").is_ambiguous());
        assert!(!classify(422, &h, r#"{"message":"FIELD_LENGTH_TOO_LONG"}"#).is_transient());
    }
}

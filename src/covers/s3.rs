//! Covers in an S3 bucket (`POSTONCE_COVERS_BUCKET`; the template makes it private, encrypted,
//! its objects expiring after a day): each cover a `PUT` of `covers/<name>`, signed with SigV4,
//! handed over as a presigned `GET` URL valid for [`PRESIGNED_FOR`]. Without the S3 SDK (the
//! Lambda's artifact stays small): `aws-sigv4` signs, the process's HTTP client sends.
//!
//! Addressing: virtual-hosted (`https://<bucket>.s3.<region>.amazonaws.com/<key>`), path-style
//! for a bucket with a dot and for `AWS_ENDPOINT_URL_S3` (a local S3 server).

use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
    SignatureLocation, SigningInstructions, SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::sync::OnceCell;

use super::config::BucketConfig;
use super::{CoverHost, CoverName, PRESIGNED_FOR};
use crate::image::ImageError;

/// What SigV4 leaves unencoded in a query value: letters, digits and `-_.~`.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The bucket adapter.
pub struct S3Host {
    config: BucketConfig,
    http: reqwest::Client,
    /// The SDK's default chain, loaded on first use when no static credentials are given.
    chain: OnceCell<Option<aws_credential_types::provider::SharedCredentialsProvider>>,
}

impl S3Host {
    /// # Errors
    /// Never today; kept for a configuration that cannot be used.
    pub fn new(config: BucketConfig, http: reqwest::Client) -> Result<Self, String> {
        Ok(Self {
            config,
            http,
            chain: OnceCell::new(),
        })
    }

    /// The object's URL (unsigned).
    fn object_url(&self, key: &str) -> String {
        let c = &self.config;
        match &c.endpoint {
            Some(ep) => format!("{ep}/{}/{key}", c.bucket),
            None if c.bucket.contains('.') => {
                format!("https://s3.{}.amazonaws.com/{}/{key}", c.region, c.bucket)
            }
            None => format!("https://{}.s3.{}.amazonaws.com/{key}", c.bucket, c.region),
        }
    }

    async fn credentials(&self) -> Result<Credentials, ImageError> {
        if let Some(s) = &self.config.credentials {
            return Ok(Credentials::new(
                s.access_key_id.clone(),
                s.secret_access_key.expose().to_owned(),
                s.session_token.as_ref().map(|t| t.expose().to_owned()),
                None,
                "postonce-env",
            ));
        }
        let chain = self
            .chain
            .get_or_init(|| async {
                // The SDK's providers (the container's, IMDS, SSO) on the process's one TLS
                // stack ([`crate::aws_http`]).
                let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .region(aws_config::Region::new(self.config.region.clone()))
                    .http_client(crate::aws_http::client())
                    .load()
                    .await;
                shared.credentials_provider()
            })
            .await;
        let Some(chain) = chain else {
            return Err(unavailable("no AWS credentials are configured".into()));
        };
        chain
            .provide_credentials()
            .await
            .map_err(|e| unavailable(format!("the AWS credentials could not be read ({e})")))
    }

    /// SigV4 settings for S3: single percent-encoding, the path as it is.
    fn settings(location: SignatureLocation) -> SigningSettings {
        let mut s = SigningSettings::default();
        s.percent_encoding_mode = PercentEncodingMode::Single;
        s.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        s.signature_location = location;
        s
    }

    /// `request` signed for S3 in the bucket's region, now, with `settings`.
    fn signed(
        &self,
        identity: &Identity,
        settings: SigningSettings,
        request: SignableRequest<'_>,
    ) -> Result<SigningInstructions, ImageError> {
        let params = v4::SigningParams::builder()
            .identity(identity)
            .region(&self.config.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| unavailable(format!("could not sign ({e})")))?
            .into();
        let (instructions, _) = sign(request, &params)
            .map_err(|e| unavailable(format!("could not sign ({e})")))?
            .into_parts();
        Ok(instructions)
    }

    /// A presigned `GET` of `key`, valid for [`PRESIGNED_FOR`].
    async fn presign(&self, key: &str) -> Result<String, ImageError> {
        let identity: Identity = self.credentials().await?.into();
        let mut settings = Self::settings(SignatureLocation::QueryParams);
        settings.expires_in = Some(PRESIGNED_FOR);
        let url = self.object_url(key);
        let request = SignableRequest::new(
            "GET",
            url.as_str(),
            std::iter::empty(),
            SignableBody::UnsignedPayload,
        )
        .map_err(|e| unavailable(format!("could not sign ({e})")))?;
        let instructions = self.signed(&identity, settings, request)?;
        let query: Vec<String> = instructions
            .params()
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, QUERY_VALUE)))
            .collect();
        Ok(format!("{url}?{}", query.join("&")))
    }

    /// A signed `PUT` of `bytes` as `key`.
    async fn put_object(
        &self,
        key: &str,
        bytes: &Bytes,
        content_type: &str,
    ) -> Result<(), ImageError> {
        use sha2::{Digest, Sha256};
        let identity: Identity = self.credentials().await?.into();
        let mut settings = Self::settings(SignatureLocation::Headers);
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let url = self.object_url(key);
        let hash = hex::encode(Sha256::digest(bytes));
        let request = SignableRequest::new(
            "PUT",
            url.as_str(),
            [("content-type", content_type)].into_iter(),
            SignableBody::Precomputed(hash),
        )
        .map_err(|e| unavailable(format!("could not sign ({e})")))?;
        let instructions = self.signed(&identity, settings, request)?;
        let mut req = self
            .http
            .put(&url)
            .header("content-type", content_type)
            .body(bytes.clone());
        for (name, value) in instructions.headers() {
            req = req.header(name, value);
        }
        let answer = req
            .send()
            .await
            .map_err(|e| unavailable(format!("S3 could not be reached ({})", e.without_url())))?;
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        let body = answer.text().await.unwrap_or_default();
        let code = between(&body, "<Code>", "</Code>").unwrap_or("no error code");
        let said = format!(
            "S3 answered {} ({code}) to the upload to the bucket {}",
            status.as_u16(),
            self.config.bucket
        );
        if answer_is_transient(status.as_u16(), code) {
            return Err(unavailable(said));
        }
        // A refusal a retry would only repeat (a wrong key or signature, no such bucket, no
        // permission): the draft fails, and the owner is told what to fix.
        Err(ImageError::Refused(format!(
            "could not host the cover: {said}; check POSTONCE_COVERS_BUCKET, its region and the credentials' permission (s3:PutObject on covers/*)"
        )))
    }
}

/// Whether S3's answer may change on a retry: a server error, a throttle or a timeout, or
/// temporary credentials that expired (Lambda's are renewed), a clock that drifted, or a
/// conflicting operation on the bucket still in progress.
fn answer_is_transient(status: u16, code: &str) -> bool {
    status >= 500
        || status == 408
        || status == 429
        || matches!(
            code,
            "ExpiredToken"
                | "TokenRefreshRequired"
                | "OperationAborted"
                | "RequestTimeTooSkewed"
                | "SlowDown"
                | "RequestTimeout"
                | "InternalError"
        )
}

fn unavailable(why: String) -> ImageError {
    ImageError::Unavailable(format!("could not host the cover: {why}"))
}

/// The text between `open` and `close` in `s`.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let len = s[start..].find(close)?;
    Some(&s[start..start + len])
}

/// Where a cover's object lives in the bucket.
fn key_of(name: &CoverName) -> String {
    format!("covers/{name}")
}

#[async_trait]
impl CoverHost for S3Host {
    async fn put(&self, name: &CoverName, bytes: &Bytes) -> Result<String, ImageError> {
        let key = key_of(name);
        self.put_object(&key, bytes, name.format.mime()).await?;
        self.presign(&key).await
    }

    async fn locate(&self, name: &CoverName) -> Result<String, ImageError> {
        self.presign(&key_of(name)).await
    }

    async fn check(&self) -> Result<String, String> {
        let fix = "check POSTONCE_COVERS_BUCKET and the function's permission (s3:PutObject, s3:GetObject on it)";
        let key = "covers/doctor-probe.txt";
        let probe = Bytes::from_static(b"postonce doctor");
        self.put_object(key, &probe, "text/plain")
            .await
            .map_err(|e| format!("{e}; {fix}"))?;
        let url = self.presign(key).await.map_err(|e| e.to_string())?;
        let got = self.http.get(&url).send().await.map_err(|e| {
            format!(
                "the presigned URL could not be fetched ({}); {fix}",
                e.without_url()
            )
        })?;
        if !got.status().is_success() {
            return Err(format!(
                "the presigned URL answered {}; {fix}",
                got.status().as_u16()
            ));
        }
        Ok(format!(
            "the bucket {} takes covers, and a presigned URL fetches them back",
            self.config.bucket
        ))
    }

    fn describe(&self) -> String {
        format!(
            "hosted in the bucket {} (a presigned URL valid {} min)",
            self.config.bucket,
            PRESIGNED_FOR.as_secs() / 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::covers::config::StaticCredentials;
    use crate::image::Format;
    use crate::vars::Secret;

    #[test]
    fn only_answers_a_retry_may_change_are_transient() {
        for (status, code) in [
            (500, "InternalError"),
            (503, "SlowDown"),
            (400, "ExpiredToken"),
            (403, "RequestTimeTooSkewed"),
            (408, ""),
            (409, "OperationAborted"),
            (400, "TokenRefreshRequired"),
        ] {
            assert!(answer_is_transient(status, code), "{status} {code}");
        }
        for (status, code) in [
            (403, "AccessDenied"),
            (403, "SignatureDoesNotMatch"),
            (403, "InvalidAccessKeyId"),
            (404, "NoSuchBucket"),
            (400, "InvalidBucketName"),
        ] {
            assert!(!answer_is_transient(status, code), "{status} {code}");
        }
    }

    fn host(endpoint: Option<&str>, bucket: &str) -> S3Host {
        S3Host::new(
            BucketConfig {
                bucket: bucket.into(),
                region: "eu-west-1".into(),
                endpoint: endpoint.map(str::to_owned),
                credentials: Some(StaticCredentials {
                    access_key_id: "AKIDEXAMPLE".into(),
                    secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                    session_token: Some(Secret::new("token/with+odd=chars")),
                }),
            },
            reqwest::Client::new(),
        )
        .expect("host")
    }

    #[tokio::test]
    async fn a_presigned_url_carries_the_sigv4_query() {
        let name = CoverName::of(b"x", Format::Jpeg);
        let url = host(None, "covers-1")
            .locate(&name)
            .await
            .expect("presigned");
        assert!(
            url.starts_with(&format!(
                "https://covers-1.s3.eu-west-1.amazonaws.com/covers/{name}?"
            )),
            "{url}"
        );
        for part in [
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Credential=AKIDEXAMPLE%2F",
            "%2Feu-west-1%2Fs3%2Faws4_request",
            "X-Amz-Expires=3600",
            "X-Amz-SignedHeaders=host",
            "X-Amz-Security-Token=token%2Fwith%2Bodd%3Dchars",
            "X-Amz-Signature=",
        ] {
            assert!(url.contains(part), "{part} in {url}");
        }
        assert!(!url.contains("wJalrXUtnFEMI"), "the secret key never shows");
        let local = host(Some("http://127.0.0.1:5000"), "covers-1")
            .locate(&name)
            .await
            .expect("presigned");
        assert!(local.starts_with(&format!("http://127.0.0.1:5000/covers-1/covers/{name}?")));
        let dotted = host(None, "a.b.c").locate(&name).await.expect("presigned");
        assert!(dotted.starts_with("https://s3.eu-west-1.amazonaws.com/a.b.c/covers/"));
    }
}

//! Where covers are hosted, from the environment: `POSTONCE_COVERS_BUCKET` (AWS: the
//! template's bucket, with `AWS_REGION`, `AWS_ENDPOINT_URL_S3` and the AWS credentials), or
//! `POSTONCE_PUBLIC_URL` (self-hosted: `postonce serve` answers there, from
//! `POSTONCE_COVERS_DIR`), or neither (covers are not hosted: a network that fetches the image
//! itself gets the draft's own URL or nothing).

use std::path::{Path, PathBuf};

use crate::vars::{bad, ConfigError, Secret, Vars};

/// The bucket covers go to, and how to reach it.
#[derive(Clone, Debug)]
pub struct BucketConfig {
    pub bucket: String,
    pub region: String,
    /// `AWS_ENDPOINT_URL_S3` (a local S3 server): path-style addressing then.
    pub endpoint: Option<String>,
    /// Static credentials when the key variables are given (the Lambda's own environment,
    /// local servers, tests); otherwise the AWS SDK's default chain.
    pub credentials: Option<StaticCredentials>,
}

/// An access key, its secret and the session token of temporary credentials.
#[derive(Clone, Debug)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// Where covers are hosted.
#[derive(Clone, Debug, Default)]
pub enum CoverHosting {
    /// Not hosted.
    #[default]
    None,
    /// Files in `dir`, answered by `postonce serve` at `<public_url>/covers/<name>`.
    Folder { dir: PathBuf, public_url: String },
    /// Objects in a bucket, handed over as presigned URLs.
    Bucket(BucketConfig),
}

impl CoverHosting {
    /// Reads the variables; `data_dir` is the local store's folder (`POSTONCE_DATA_DIR`),
    /// under which the covers folder is by default.
    ///
    /// # Errors
    /// A malformed `POSTONCE_PUBLIC_URL`, `POSTONCE_COVERS_BUCKET`, `AWS_ENDPOINT_URL_S3` or
    /// `POSTONCE_COVERS_DIR`, or both ways set at once.
    pub fn load(vars: Vars<'_>, data_dir: &Path) -> Result<Self, ConfigError> {
        let public = vars.get("POSTONCE_PUBLIC_URL");
        let bucket = vars.get("POSTONCE_COVERS_BUCKET");
        match (public, bucket) {
            (Some(_), Some(_)) => Err(bad(
                "POSTONCE_PUBLIC_URL",
                "set it or POSTONCE_COVERS_BUCKET, not both: covers are hosted by `postonce serve` at the public URL, or in the bucket (in AWS)",
            )),
            (None, None) => Ok(Self::None),
            (Some(url), None) => Ok(Self::Folder {
                public_url: public_url(&url)?,
                dir: covers_dir(vars, data_dir)?,
            }),
            (None, Some(bucket)) => Ok(Self::Bucket(bucket_config(vars, bucket)?)),
        }
    }

    pub fn is_hosted(&self) -> bool {
        !matches!(self, Self::None)
    }
}

/// `POSTONCE_PUBLIC_URL`: https, or http on a loopback host (a local try, tests); no query,
/// fragment or credentials; without its trailing `/`.
fn public_url(raw: &str) -> Result<String, ConfigError> {
    const VAR: &str = "POSTONCE_PUBLIC_URL";
    let u = url::Url::parse(raw).map_err(|e| {
        bad(
            VAR,
            format!("{raw:?} is not a URL ({e}); give where `postonce serve` is reachable from the networks, e.g. https://postonce.example.com"),
        )
    })?;
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let scheme_ok = u.scheme() == "https" || (u.scheme() == "http" && loopback);
    if !scheme_ok || u.host().is_none() {
        return Err(bad(
            VAR,
            format!("{raw:?} must be an https URL (plain http only on a loopback host, for a local try): the networks fetch covers from it"),
        ));
    }
    if u.query().is_some()
        || u.fragment().is_some()
        || !u.username().is_empty()
        || u.password().is_some()
    {
        return Err(bad(
            VAR,
            "give the base URL alone: no query, fragment or user name (covers are at <base>/covers/<name>)",
        ));
    }
    Ok(u.as_str().trim_end_matches('/').to_owned())
}

/// `POSTONCE_COVERS_DIR`, by default `covers` under the data folder.
fn covers_dir(vars: Vars<'_>, data_dir: &Path) -> Result<PathBuf, ConfigError> {
    match vars.get("POSTONCE_COVERS_DIR") {
        None => Ok(data_dir.join("covers")),
        Some(d) if Path::new(&d).is_absolute() => Ok(PathBuf::from(d)),
        Some(d) => Err(bad(
            "POSTONCE_COVERS_DIR",
            format!("{d:?} must be an absolute path (`postonce serve` and every other process must find the same folder)"),
        )),
    }
}

/// `POSTONCE_COVERS_BUCKET` and how to reach it.
fn bucket_config(vars: Vars<'_>, bucket: String) -> Result<BucketConfig, ConfigError> {
    let ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ok {
        return Err(bad(
            "POSTONCE_COVERS_BUCKET",
            format!("{bucket:?} is not an S3 bucket name (3-63 characters of a-z, 0-9, - and ., starting and ending with a letter or digit)"),
        ));
    }
    let endpoint = match vars.get("AWS_ENDPOINT_URL_S3") {
        None => None,
        Some(_) => Some(vars.base_url("AWS_ENDPOINT_URL_S3", "")?),
    };
    let region = vars
        .get("AWS_REGION")
        .or_else(|| vars.get("AWS_DEFAULT_REGION"));
    let region = match (region, &endpoint) {
        (Some(r), _) => r,
        (None, Some(_)) => "us-east-1".to_owned(),
        (None, None) => {
            return Err(bad(
                "AWS_REGION",
                "required with POSTONCE_COVERS_BUCKET (the bucket's region; Lambda sets it)",
            ))
        }
    };
    if !region
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(bad(
            "AWS_REGION",
            format!("{region:?} is not a region name"),
        ));
    }
    let credentials = match (
        vars.get("AWS_ACCESS_KEY_ID"),
        vars.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => Some(StaticCredentials {
            access_key_id: id,
            secret_access_key: Secret::new(secret),
            session_token: vars.get("AWS_SESSION_TOKEN").map(Secret::new),
        }),
        _ => None,
    };
    Ok(BucketConfig {
        bucket,
        region,
        endpoint,
        credentials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(pairs: &[(&str, &str)]) -> Result<CoverHosting, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let get = move |k: &str| map.get(k).cloned();
        CoverHosting::load(Vars::new(&get), Path::new("/data"))
    }

    #[test]
    fn a_public_url_must_be_https_or_loopback() {
        for ok in [
            "https://postonce.example.com",
            "https://example.com/postonce/",
            "http://127.0.0.1:8787",
            "http://localhost:9000",
            "http://[::1]:8787",
        ] {
            let h = load(&[("POSTONCE_PUBLIC_URL", ok)]).expect(ok);
            let CoverHosting::Folder { dir, public_url } = h else {
                panic!("{ok}: not a folder")
            };
            assert_eq!(dir, Path::new("/data/covers"));
            assert!(!public_url.ends_with('/'), "{public_url}");
        }
        for bad in [
            "http://postonce.example.com",
            "ftp://example.com",
            "not a url",
            "https://example.com/?a=b",
            "https://user:pw@example.com",
            "/covers",
        ] {
            let e = load(&[("POSTONCE_PUBLIC_URL", bad)]).expect_err(bad);
            assert_eq!(e.var, "POSTONCE_PUBLIC_URL", "{bad}");
        }
        let e = load(&[
            ("POSTONCE_PUBLIC_URL", "https://a.example.com"),
            ("POSTONCE_COVERS_DIR", "relative/dir"),
        ])
        .expect_err("relative");
        assert_eq!(e.var, "POSTONCE_COVERS_DIR");
    }

    #[test]
    fn a_bucket_needs_a_name_and_a_region_and_not_both_ways() {
        let e = load(&[("POSTONCE_COVERS_BUCKET", "Bad_Bucket")]).expect_err("name");
        assert_eq!(e.var, "POSTONCE_COVERS_BUCKET");
        let e = load(&[("POSTONCE_COVERS_BUCKET", "covers-1")]).expect_err("region");
        assert_eq!(e.var, "AWS_REGION");
        let e = load(&[
            ("POSTONCE_COVERS_BUCKET", "covers-1"),
            ("POSTONCE_PUBLIC_URL", "https://a.example.com"),
        ])
        .expect_err("both");
        assert_eq!(e.var, "POSTONCE_PUBLIC_URL");
        let h = load(&[
            ("POSTONCE_COVERS_BUCKET", "covers-1"),
            ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:5000/"),
        ])
        .expect("a local endpoint");
        let CoverHosting::Bucket(b) = h else {
            panic!("not a bucket")
        };
        assert_eq!(b.region, "us-east-1");
        assert_eq!(b.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert!(matches!(load(&[]), Ok(CoverHosting::None)));
    }
}

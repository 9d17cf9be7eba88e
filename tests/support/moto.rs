//! A real S3 server for the covers bucket: moto (PyPI `moto[server]`), installed by
//! `scripts/test.sh` into `.tools/moto-venv` (or `$POSTONCE_MOTO_VENV`). With `auth`, moto's
//! authentication is on (`INITIAL_NO_AUTH_ACTION_COUNT`): after the four set-up calls below it
//! checks every request's SigV4 signature against the access key it made, and the key's policy.
//! Moto 5.2.5 cannot check a presigned URL that way (it answers 500: it looks for an
//! `Authorization` header), so the tests that fetch presigned URLs run it without `auth`, and
//! [`MotoServer::botocore_signature`] checks a presigned URL's signature with botocore instead.
//! A missing moto is a loud failure naming the install step, never a skip.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::services::free_port;

pub struct MotoServer {
    child: Child,
    pub endpoint: String,
    pub bucket: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

fn venv() -> PathBuf {
    std::env::var_os("POSTONCE_MOTO_VENV").map_or_else(
        || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.tools/moto-venv")),
        PathBuf::from,
    )
}

/// What the set-up calls make (run by moto's own Python, with boto3): a user, its access key,
/// a policy that lets it put and get objects of the bucket only, and the bucket. Each is one
/// of the calls moto lets through unauthenticated.
const SETUP: &str = r#"
import boto3, json, sys
ep, bucket = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=ep, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="postonce")
key = iam.create_access_key(UserName="postonce")["AccessKey"]
iam.put_user_policy(UserName="postonce", PolicyName="covers", PolicyDocument=json.dumps({
  "Version": "2012-10-17",
  "Statement": [{"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"],
                 "Resource": "arn:aws:s3:::" + bucket + "/*"}]}))
boto3.client("s3", **kw).create_bucket(Bucket=bucket)
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;

impl MotoServer {
    /// Starts moto on a free port (`auth`: checking signatures), makes the user, its key and
    /// the bucket.
    pub fn start(auth: bool) -> Self {
        let bin = venv().join("bin/moto_server");
        assert!(
            bin.exists(),
            "moto is not installed at {}: run scripts/test.sh (it installs `moto[server]` from PyPI into .tools/moto-venv), or `python3 -m venv .tools/moto-venv && .tools/moto-venv/bin/pip install 'moto[server]==5.2.5'`",
            bin.display()
        );
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        if auth {
            cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", "4");
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let endpoint = format!("http://127.0.0.1:{port}");
        let begun = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                begun.elapsed() < Duration::from_secs(30),
                "moto_server did not come up on {endpoint}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let bucket = "postonce-covers-test".to_owned();
        let out = Command::new(venv().join("bin/python"))
            .args(["-c", SETUP, &endpoint, &bucket])
            .output()
            .expect("run the moto set-up");
        assert!(
            out.status.success(),
            "the moto set-up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut words = text.split_whitespace();
        let (id, secret) = (
            words.next().expect("an access key id").to_owned(),
            words.next().expect("a secret access key").to_owned(),
        );
        Self {
            child,
            endpoint,
            bucket,
            access_key_id: id,
            secret_access_key: secret,
        }
    }

    /// The variables that point postonce's covers at this bucket.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("POSTONCE_COVERS_BUCKET", self.bucket.clone()),
            ("AWS_ENDPOINT_URL_S3", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
        ]
    }
}

/// botocore's SigV4 query signature of a presigned GET, at the instant `amz_date` says.
const BOTOCORE_PRESIGN: &str = r#"
import sys, datetime, boto3, botocore.auth
from botocore.config import Config
ep, bucket, key, ak, sk, amz_date = sys.argv[1:7]
fixed = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
botocore.auth.get_current_datetime = lambda *a, **k: fixed
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id=ak,
                  aws_secret_access_key=sk, config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600)
print(url.split("X-Amz-Signature=")[1].split("&")[0])
"#;

impl MotoServer {
    /// What botocore signs for a presigned GET of `key` at `amz_date` (`X-Amz-Date`) with
    /// this server's key: an implementation of SigV4 that is not postonce's.
    pub fn botocore_signature(&self, key: &str, amz_date: &str) -> String {
        let out = Command::new(venv().join("bin/python"))
            .args([
                "-c",
                BOTOCORE_PRESIGN,
                &self.endpoint,
                &self.bucket,
                key,
                &self.access_key_id,
                &self.secret_access_key,
                amz_date,
            ])
            .output()
            .expect("run botocore");
        assert!(
            out.status.success(),
            "botocore failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

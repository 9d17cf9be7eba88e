//! The flows without a browser: `postonce auth bluesky` (handle and app password from standard
//! input, checked with `createSession`), then a real post with the stored credential against
//! the Bluesky fake; a wrong app password is refused and stores nothing.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::bluesky::{self, BlueskyFake};
use support::images::ImageHost;

fn postonce(dir: &Path, vars: &[(&str, String)], args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_postonce"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("postonce starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("answers");
    child.wait_with_output().expect("postonce ends")
}

fn texts(out: &Output) -> (String, String) {
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !o.contains("SECRET") && !e.contains("SECRET"),
        "a secret shown:\n{o}\n{e}"
    );
    (o, e)
}

#[tokio::test]
async fn bluesky_auth_checks_the_app_password_stores_it_and_a_real_post_uses_it() {
    let fake = BlueskyFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let pds = [("BLUESKY_PDS_URL", fake.uri())];

    let wrong = postonce(
        dir.path(),
        &pds,
        &["auth", "bluesky"],
        &format!("{}\nwrong-pass-SECRET7\n", bluesky::HANDLE),
    );
    let (o, e) = texts(&wrong);
    assert_eq!(wrong.status.code(), Some(2), "{o}\n{e}");
    assert!(
        e.contains("createSession") && e.contains("nothing stored"),
        "{e}"
    );
    assert!(!dir
        .path()
        .join("secrets")
        .join("secret-credentials")
        .exists());

    let out = postonce(
        dir.path(),
        &pds,
        &["auth", "bluesky"],
        &format!("{}\n{}\n", bluesky::HANDLE, bluesky::APP_PASSWORD),
    );
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        o.contains(&format!("@{} ({})", bluesky::HANDLE, bluesky::DID)),
        "{o}"
    );
    assert!(o.contains("does not expire"), "{o}");

    let status = postonce(dir.path(), &[], &["auth", "status"], "");
    let (o, _) = texts(&status);
    assert!(
        o.contains("bluesky: stored (postonce auth bluesky)")
            && o.contains("expires never, no refresh needed"),
        "{o}"
    );

    let images = ImageHost::start().await;
    let post = postonce(
        dir.path(),
        &[
            ("BLUESKY_PDS_URL", fake.uri()),
            ("POSTONCE_TARGETS", "bluesky".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "sky",
            "--caption",
            "Hello, Bluesky",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
        "",
    );
    let (o, e) = texts(&post);
    assert_eq!(post.status.code(), Some(0), "{o}\n{e}");
    assert_eq!(
        fake.posts_created(),
        1,
        "posted with the stored app password: {o}"
    );
}

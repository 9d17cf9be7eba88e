//! LinkedIn's refresh-token path (README "Getting credentials", LinkedIn: approved partners get a
//! refresh token): a stored LinkedIn credential with a refresh token and fewer than 7 days left
//! is refreshed at start, once however many processes start together, against the token
//! endpoint's fake (`grant_type=refresh_token`), and every process posts with the new token
//! (the LinkedIn fake accepts only that one). The refresh token's own expiry is kept: it counts
//! from the first authorization.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::images::ImageHost;
use support::linkedin::LinkedInFake;
use support::oauth::{self, OAuthFake};

const DAY: i64 = 86_400;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

fn file(dir: &Path) -> std::path::PathBuf {
    dir.join("secrets").join("secret-credentials")
}

/// A LinkedIn credential as `postonce auth linkedin` stores it for an approved partner: the
/// access token with `left_s` to go, the refresh token (`refresh_expires_at`), and the app's
/// client id and secret kept beside them.
fn store(dir: &Path, left_s: i64, refresh_expires_at: i64) {
    std::fs::create_dir_all(dir.join("secrets")).expect("dir");
    let v = json!({
        "networks": {"linkedin": {
            "account": "urn:li:person:782bbtaQ (Ada Lovelace)",
            "scopes": ["openid", "profile", "w_member_social"],
            "obtained_at": now() - 54 * DAY,
            "expires_at": now() + left_s,
            "refresh_token": oauth::LINKEDIN_REFRESH,
            "refresh_expires_at": refresh_expires_at,
            "secrets": {"LINKEDIN_ACCESS_TOKEN": "AQV-old-SECRET3-about-to-lapse"},
            "settings": {"LINKEDIN_AUTHOR": "urn:li:person:782bbtaQ"},
            "kept": {
                "client_id": oauth::LINKEDIN_CLIENT_ID,
                "client_secret": oauth::LINKEDIN_CLIENT_SECRET
            }
        }},
        "state": {}
    });
    std::fs::write(file(dir), v.to_string()).expect("stored");
}

fn post(
    dir: &Path,
    oauth: &OAuthFake,
    li: &LinkedInFake,
    images: &ImageHost,
    slug: &str,
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir)
        .env("LINKEDIN_API_URL", li.uri())
        .env("LINKEDIN_OAUTH_URL", oauth.uri())
        .env("POSTONCE_IMAGE_HOSTS", images.uri())
        .args([
            "post",
            "--kind",
            "blog",
            "--slug",
            slug,
            "--caption",
            &format!("Refreshed and posted: {slug}"),
            "--image",
            &images.url("/cover.png"),
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linkedin_token_with_a_refresh_token_and_6_days_left_is_refreshed_once_at_start() {
    let oauth = OAuthFake::start().await;
    let li = LinkedInFake::start(oauth::LINKEDIN_REFRESHED).await;
    let images = ImageHost::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let refresh_expires_at = now() + 200 * DAY;
    store(dir.path(), 6 * DAY, refresh_expires_at);

    // Three processes start at once, each to post its own draft.
    let children: Vec<_> = (0..3)
        .map(|i| {
            post(dir.path(), &oauth, &li, &images, &format!("refreshed-{i}"))
                .spawn()
                .expect("post starts")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("post ends");
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
        assert!(o.contains("\"posted\""), "{o}\n{e}");
        assert!(!o.contains("SECRET") && !e.contains("SECRET"), "{o}\n{e}");
    }
    assert_eq!(oauth.linkedin_refreshes(), 1, "refreshed once");
    assert_eq!(
        li.posts_created(),
        3,
        "every process posted with the new token"
    );

    let stored: Value =
        serde_json::from_slice(&std::fs::read(file(dir.path())).expect("read")).expect("json");
    let cred = &stored["networks"]["linkedin"];
    assert_eq!(
        cred["secrets"]["LINKEDIN_ACCESS_TOKEN"],
        oauth::LINKEDIN_REFRESHED
    );
    let left = cred["expires_at"].as_i64().expect("expires_at") - now();
    assert!((59 * DAY..=60 * DAY).contains(&left), "{left}");
    assert_eq!(
        cred["refresh_expires_at"].as_i64(),
        Some(refresh_expires_at),
        "the refresh token's life counts from the first authorization"
    );

    // The next start finds nothing due: no second refresh.
    let out = post(dir.path(), &oauth, &li, &images, "refreshed-again")
        .output()
        .expect("post");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(oauth.linkedin_refreshes(), 1);
    assert_eq!(li.posts_created(), 4);
}

/// A long-running `serve` refreshes a stored credential that falls due while it runs, with the
/// code a start uses, from its own periodic check (a minute; 1 s here,
/// `POSTONCE_CREDENTIALS_CHECK_S`), and posts with the new token: the LinkedIn fake accepts only
/// it. Here the credential "falls due" by the store saying it has 6 days left rather than 30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_serve_refreshes_a_credential_that_falls_due_and_posts_with_the_new_token() {
    use support::env::CI_SECRET;
    use support::serve::ServeProcess;

    let oauth = OAuthFake::start().await;
    let li = LinkedInFake::start(oauth::LINKEDIN_REFRESHED).await;
    let images = ImageHost::start().await;
    let dir = tempfile::tempdir().expect("dir");
    store(dir.path(), 30 * DAY, now() + 200 * DAY);
    let vars = [
        ("POSTONCE_DATA_DIR", dir.path().display().to_string()),
        ("LINKEDIN_API_URL", li.uri()),
        ("LINKEDIN_OAUTH_URL", oauth.uri()),
        ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ("POSTONCE_WEBHOOK_SECRET", CI_SECRET.to_owned()),
        ("POSTONCE_CREDENTIALS_CHECK_S", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut serve = ServeProcess::start(&vars, true).await;
    let mut said = serve.stderr_lines();
    assert_eq!(oauth.linkedin_refreshes(), 0, "not due at the start");

    store(dir.path(), 6 * DAY, now() + 200 * DAY);
    said.wait_for(
        "stored credential changed for LinkedIn",
        std::time::Duration::from_secs(30),
    );
    assert_eq!(oauth.linkedin_refreshes(), 1, "serve refreshed it");
    let (status, body) = serve
        .ci(json!({
            "kind": "blog", "slug": "served",
            "caption": "Refreshed by serve and posted",
            "image_url": images.url("/cover.png")
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"posted\""), "{body}");
    assert_eq!(li.posts_created(), 1);
    assert!(!said.seen.join("\n").contains("SECRET"), "{:?}", said.seen);
    let stored: Value =
        serde_json::from_slice(&std::fs::read(file(dir.path())).expect("read")).expect("json");
    assert_eq!(
        stored["networks"]["linkedin"]["secrets"]["LINKEDIN_ACCESS_TOKEN"],
        oauth::LINKEDIN_REFRESHED
    );
}

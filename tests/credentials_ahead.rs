//! Told ahead, once per step: a stored LinkedIn token that postonce cannot refresh is announced
//! in Telegram at 14 days or fewer, again at 3 days, and when it has expired, once per step
//! across many sweeps in several processes; a renewed token stops it.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::linkedin::LinkedInFake;
use support::telegram::TelegramFake;

const TG_TOKEN: &str = "123456789:AAtelegram-SECRET8-bot";
const LI_TOKEN: &str = "AQV-stored-SECRET3-linkedin";
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

/// Stores a LinkedIn credential as `postonce auth linkedin` would (no refresh token), with
/// nothing told yet.
fn store(dir: &Path, token: &str, left_s: i64) {
    std::fs::create_dir_all(dir.join("secrets")).expect("dir");
    let v = json!({
        "networks": {"linkedin": {
            "account": "urn:li:person:782bbtaQ (Ada Lovelace)",
            "scopes": ["openid", "profile", "w_member_social"],
            "obtained_at": now() - 54 * DAY,
            "expires_at": now() + left_s,
            "secrets": {"LINKEDIN_ACCESS_TOKEN": token},
            "settings": {"LINKEDIN_AUTHOR": "urn:li:person:782bbtaQ"}
        }},
        "state": {}
    });
    std::fs::write(file(dir), v.to_string()).expect("stored");
}

/// Time passes: the stored credential now has `left_s` to go (what was told stays).
fn set_left(dir: &Path, left_s: i64) {
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(file(dir)).expect("read")).expect("json");
    v["networks"]["linkedin"]["expires_at"] = (now() + left_s).into();
    std::fs::write(file(dir), v.to_string()).expect("written");
}

/// `rounds` rounds of `n` `postonce sweep` processes started at once.
fn sweeps(dir: &Path, tg: &TelegramFake, li: &LinkedInFake, rounds: usize, n: usize) {
    for _ in 0..rounds {
        let children: Vec<_> = (0..n)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_postonce"))
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("POSTONCE_DATA_DIR", dir)
                    .env("TELEGRAM_BOT_TOKEN", TG_TOKEN)
                    .env("TELEGRAM_CHAT_ID", "42")
                    .env("TELEGRAM_API_URL", tg.uri())
                    .env("LINKEDIN_API_URL", li.uri())
                    .arg("sweep")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("sweep starts")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("sweep ends");
            let (o, e) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
            for text in [&o, &e] {
                assert!(
                    !text.contains("SECRET"),
                    "a secret in the sweep's output: {text}"
                );
            }
        }
    }
}

fn messages(tg: &TelegramFake) -> Vec<String> {
    tg.requests_for("sendMessage")
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_linkedin_token_postonce_cannot_refresh_is_told_once_at_14_days_at_3_days_and_when_expired(
) {
    let tg = TelegramFake::start(TG_TOKEN).await;
    let li = LinkedInFake::start(LI_TOKEN).await;
    let dir = tempfile::tempdir().expect("dir");
    store(dir.path(), LI_TOKEN, 6 * DAY + DAY / 2);

    sweeps(dir.path(), &tg, &li, 5, 4);
    let told = messages(&tg);
    assert_eq!(
        told.len(),
        1,
        "one message over 20 sweeps in 4 processes: {told:?}"
    );
    assert!(
        told[0].contains(
            "The LinkedIn credential (urn:li:person:782bbtaQ (Ada Lovelace)) expires in 6 days"
        ),
        "{}",
        told[0]
    );
    assert!(
        told[0].contains("run `postonce auth linkedin` to renew it"),
        "{}",
        told[0]
    );

    // `status --all` lists it beside the drafts.
    let listed = Command::new(env!("CARGO_BIN_EXE_postonce"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir.path())
        .env("LINKEDIN_API_URL", li.uri())
        .args(["status", "--all"])
        .output()
        .expect("status runs");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("1 credentials to renew:")
            && listed.contains("run `postonce auth linkedin` to renew it"),
        "{listed}"
    );
    assert!(!listed.contains("SECRET"), "{listed}");

    set_left(dir.path(), 2 * DAY + DAY / 2);
    sweeps(dir.path(), &tg, &li, 3, 4);
    let told = messages(&tg);
    assert_eq!(told.len(), 2, "a second one at 3 days: {told:?}");
    assert!(told[1].contains("expires in 2 days"), "{}", told[1]);

    set_left(dir.path(), -60);
    sweeps(dir.path(), &tg, &li, 3, 4);
    let told = messages(&tg);
    assert_eq!(told.len(), 3, "a third when expired: {told:?}");
    assert!(
        told[2].contains("has expired")
            && told[2].contains("until you run `postonce auth linkedin`"),
        "{}",
        told[2]
    );

    // Renewed (as a new `auth` stores it: a new token, nothing told): no more messages.
    store(dir.path(), "AQV-renewed-SECRET9-linkedin", 60 * DAY);
    sweeps(dir.path(), &tg, &li, 3, 4);
    assert_eq!(messages(&tg).len(), 3, "a renewed token stops them");
    for m in messages(&tg) {
        assert!(!m.contains("SECRET"), "{m}");
    }
}

/// The MCP server's answers (doctor, and a post made with the stored credential) carry no
/// secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_answers_with_a_stored_credential_show_no_secret() {
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;
    let li = LinkedInFake::start(LI_TOKEN).await;
    let images = support::images::ImageHost::start().await;
    let dir = tempfile::tempdir().expect("dir");
    store(dir.path(), LI_TOKEN, 10 * DAY);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir.path())
        .env("LINKEDIN_API_URL", li.uri())
        .env("POSTONCE_IMAGE_HOSTS", images.uri());
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("postonce-tests", "1.0.0"),
    )
    .serve(TokioChildProcess::new(cmd).expect("start postonce mcp"))
    .await
    .expect("initialize");
    let mut said = String::new();
    let calls = [
        ("doctor", json!({})),
        (
            "post",
            json!({"kind": "blog", "slug": "mcp", "caption": "Hello over MCP", "image": images.url("/cover.png")}),
        ),
    ];
    for (tool, arguments) in calls {
        let serde_json::Value::Object(arguments) = arguments else {
            unreachable!("objects")
        };
        let answer = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .expect("a tool result");
        said.push_str(&serde_json::to_string(&answer).expect("json"));
    }
    assert!(
        said.contains("credentials") && said.contains("stored (postonce auth linkedin)"),
        "{said}"
    );
    assert!(said.contains("posted"), "{said}");
    assert_eq!(li.posts_created(), 1, "posted with the stored token");
    for mark in (1..=9).map(|i| format!("SECRET{i}")) {
        assert!(
            !said.contains(&mark),
            "an MCP answer shows a secret: {said}"
        );
    }
    client.cancel().await.expect("close");
}

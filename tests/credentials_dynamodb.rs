//! `postonce auth` against DynamoDB (issue 32, README "Getting credentials", In AWS): the real
//! binary signs in to LinkedIn's OAuth fake with `POSTONCE_TABLE` set, the credential lands in
//! the table's item `secret:credentials` (DynamoDB Local, with redis-server for the claims),
//! `auth status` reads it from there, and a `postonce post` with no LinkedIn token of its own
//! posts with it at the LinkedIn fake, which checks the token.

use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use support::env::{Env, Stores};
use support::linkedin::LinkedInFake;
use support::oauth::{self, OAuthFake};

/// The real binary with only `vars` (and PATH) in its environment.
fn postonce(vars: &HashMap<String, String>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(vars)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_stores_into_the_dynamodb_table_and_a_post_uses_it() {
    // The deployment's stores, with no LinkedIn token of its own.
    let env = Env::with(
        Stores::Real,
        &[("LINKEDIN_ACCESS_TOKEN", ""), ("LINKEDIN_AUTHOR", "")],
    )
    .await;
    let fake = OAuthFake::start().await;
    let mut vars = env.vars.clone();
    for (k, v) in [
        ("LINKEDIN_CLIENT_ID", oauth::LINKEDIN_CLIENT_ID.to_owned()),
        (
            "LINKEDIN_CLIENT_SECRET",
            oauth::LINKEDIN_CLIENT_SECRET.to_owned(),
        ),
        ("LINKEDIN_OAUTH_URL", fake.uri()),
        ("LINKEDIN_API_URL", fake.uri()),
    ] {
        vars.insert(k.to_owned(), v);
    }

    // `postonce auth linkedin`: the browser follows the printed URL; the listener catches it.
    let mut child = postonce(&vars, &["auth", "linkedin", "--no-browser"])
        .spawn()
        .expect("auth starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let url = loop {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("an authorization URL");
        let t = line.trim();
        if t.starts_with("http") && t.contains('?') {
            break t.to_owned();
        }
    };
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let answer = browser.get(&url).send().await.expect("the fake answers");
    let location = answer.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    let page = reqwest::get(&location)
        .await
        .expect("the listener answers")
        .text()
        .await
        .expect("page");
    assert!(page.contains("received the authorization"), "{page}");
    let out = child.wait_with_output().expect("auth ends");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("SECRET"), "{}", text(&out));

    // The credential is in the table, as `secret:credentials`.
    let item = env
        .dynamo_client()
        .get_item()
        .table_name(&env.vars["POSTONCE_TABLE"])
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("secret:credentials".into()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("get_item");
    assert!(item.item().is_some(), "secret:credentials is stored");

    let out = postonce(&vars, &["auth", "status"])
        .output()
        .expect("status");
    let status = text(&out);
    assert!(
        status
            .contains("linkedin: stored (postonce auth linkedin), account urn:li:person:782bbtaQ"),
        "{status}"
    );
    assert!(!status.contains("SECRET"), "{status}");

    // A post with nothing but the stored credential, at the LinkedIn fake that checks it.
    let li = LinkedInFake::start(oauth::LINKEDIN_TOKEN).await;
    vars.insert("LINKEDIN_API_URL".into(), li.uri());
    for k in [
        "LINKEDIN_CLIENT_ID",
        "LINKEDIN_CLIENT_SECRET",
        "LINKEDIN_OAUTH_URL",
    ] {
        vars.remove(k);
    }
    let out = postonce(
        &vars,
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            env.key().slug(),
            "--caption",
            "Hello from postonce, stored in DynamoDB",
            "--image",
            &env.images.url("/cover.png"),
            "--json",
        ],
    )
    .output()
    .expect("post");
    let body = text(&out);
    assert_eq!(out.status.code(), Some(0), "{body}");
    assert!(body.contains("\"outcome\":\"posted\""), "{body}");
    assert!(!body.contains("SECRET"), "{body}");
    assert_eq!(li.posts_created(), 1);
    assert_eq!(li.bad_headers(), 0, "the fake saw the stored token");
    assert_eq!(li.last_create_body()["author"], "urn:li:person:782bbtaQ");
}

//! `postonce doctor` and `postonce telegram set-webhook` against the test services.

mod support;

use postonce::doctor::{doctor, set_webhook};
use support::env::{build, Env, Stores, TG_SECRET};
use support::linkedin::Mode;

fn line<'a>(checks: &'a [postonce::doctor::Check], name: &str) -> &'a postonce::doctor::Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} check in {checks:?}"))
}

#[tokio::test]
async fn doctor_passes_then_names_each_broken_part() {
    let mut env = Env::start().await;
    let checks = doctor(&env.app).await;
    for c in &checks {
        println!("{c}");
    }
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");

    env.linkedin.set_init_mode(Mode::Status(401));
    let c = doctor(&env.app).await;
    assert!(
        !line(&c, "LinkedIn").ok && line(&c, "LinkedIn").detail.contains("re-authorize"),
        "{c:?}"
    );
    env.linkedin.set_init_mode(Mode::Status(426));
    let c = doctor(&env.app).await;
    assert!(
        !line(&c, "LinkedIn").ok && line(&c, "LinkedIn").detail.contains("LINKEDIN_VERSION"),
        "{c:?}"
    );
    env.linkedin.set_init_mode(Mode::Normal);

    let mut vars = env.vars.clone();
    vars.insert("TELEGRAM_BOT_TOKEN".into(), "999:wrong-token".into());
    let c = doctor(&build(&vars).await).await;
    assert!(
        !line(&c, "Telegram").ok && line(&c, "Telegram").detail.contains("401"),
        "{c:?}"
    );

    let mut vars = env.vars.clone();
    vars.insert("POSTONCE_TABLE".into(), "postonce-missing-table".into());
    let c = doctor(&build(&vars).await).await;
    assert!(
        !line(&c, "records").ok && line(&c, "records").detail.contains("table create"),
        "{c:?}"
    );

    if let Some(r) = env.redis.as_mut() {
        r.kill();
    }
    let c = doctor(&env.app).await;
    assert!(
        !line(&c, "Redis").ok && line(&c, "Redis").detail.contains("REDIS_URL"),
        "{c:?}"
    );
}

#[tokio::test]
async fn doctor_exit_codes_from_the_binary() {
    let env = Env::with(Stores::Local, &[]).await;
    let run = |extra: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_postonce"));
        cmd.arg("doctor")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        for (k, v) in &env.vars {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.output().expect("run postonce doctor")
    };
    let ok = run(&[]);
    let text = String::from_utf8_lossy(&ok.stdout).to_string();
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(text.lines().all(|l| l.starts_with('✓')), "{text}");
    env.linkedin.set_init_mode(Mode::Status(426));
    let bad = run(&[]);
    let text = String::from_utf8_lossy(&bad.stdout).to_string();
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("✗ LinkedIn")), "{text}");
    for secret in [support::env::LI_TOKEN, support::env::TG_TOKEN, TG_SECRET] {
        assert!(!text.contains(secret) && !String::from_utf8_lossy(&bad.stderr).contains(secret));
    }
}

#[tokio::test]
async fn set_webhook_sends_the_documented_request() {
    let env = Env::with(Stores::Local, &[]).await;
    let info = set_webhook(&env.app, "https://abc.lambda-url.us-east-1.on.aws/telegram")
        .await
        .expect("set");
    assert_eq!(
        info["url"],
        "https://abc.lambda-url.us-east-1.on.aws/telegram"
    );
    let sent = env.telegram.webhook().expect("setWebhook called");
    assert_eq!(
        sent,
        serde_json::json!({
            "url": "https://abc.lambda-url.us-east-1.on.aws/telegram",
            "secret_token": TG_SECRET,
            "allowed_updates": ["callback_query"]
        })
    );
    assert!(set_webhook(&env.app, "http://insecure.example/telegram")
        .await
        .is_err());
}

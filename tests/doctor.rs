//! `postonce doctor` and `postonce telegram set-webhook` against the test services.

use crate::support;

use postonce::doctor::{doctor, set_webhook};
use support::bluesky::{BlueskyFake, APP_PASSWORD, DID, HANDLE};
use support::env::{build, Env, Stores, TG_SECRET, TG_TOKEN};
use support::linkedin::Mode;
use support::mastodon::{MastodonFake, TOKEN as MASTODON_TOKEN, USERNAME as MASTODON_USER};
use support::tg_channel::{ChannelMode, TgChannelFake};
use support::x::{XFake, ACCESS_TOKEN, ACCESS_TOKEN_SECRET, CONSUMER_KEY, CONSUMER_SECRET};

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
    let all = run(&[("POSTONCE_TARGETS", "linkedin,x,telegram")]);
    let text = String::from_utf8_lossy(&all.stdout).to_string();
    assert_eq!(all.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("✓ X: dry run: set X_API_KEY")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("✓ Telegram channel: dry run: set TELEGRAM_CHANNEL_ID")),
        "{text}"
    );
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

/// Lines named after the configured targets, in `POSTONCE_TARGETS` order.
fn target_lines(checks: &[postonce::doctor::Check]) -> Vec<&'static str> {
    checks
        .iter()
        .map(|c| c.name)
        .filter(|n| ["LinkedIn", "X", "Telegram channel", "Mastodon", "Bluesky"].contains(n))
        .collect()
}

#[tokio::test]
async fn doctor_checks_each_target_with_one_harmless_read() {
    // Without credentials, X and the channel are dry runs: they pass and name what to set.
    let env = Env::with(
        Stores::Local,
        &[("POSTONCE_TARGETS", "telegram,linkedin,x")],
    )
    .await;
    let c = doctor(&env.app).await;
    assert_eq!(target_lines(&c), ["Telegram channel", "LinkedIn", "X"]);
    let x = line(&c, "X");
    assert!(x.ok, "{c:?}");
    for var in [
        "X_API_KEY",
        "X_API_SECRET",
        "X_ACCESS_TOKEN",
        "X_ACCESS_TOKEN_SECRET",
    ] {
        assert!(x.detail.contains(var), "{x}");
    }
    assert!(x.detail.starts_with("dry run: set "), "{x}");
    // The bot token is set (for the reports); only the channel id is missing.
    let ch = line(&c, "Telegram channel");
    assert!(ch.ok, "{c:?}");
    assert_eq!(
        ch.detail,
        "dry run: set TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
    );

    // With credentials: GET /2/users/me at X; getMe and getChat at the channel; nothing posted.
    let xf = XFake::start().await;
    let chan = TgChannelFake::public(TG_TOKEN, "postonce_chan").await;
    let mut vars = env.vars.clone();
    for (k, v) in [
        ("POSTONCE_TARGETS", "x,telegram".to_owned()),
        ("X_API_KEY", CONSUMER_KEY.to_owned()),
        ("X_API_SECRET", CONSUMER_SECRET.to_owned()),
        ("X_ACCESS_TOKEN", ACCESS_TOKEN.to_owned()),
        ("X_ACCESS_TOKEN_SECRET", ACCESS_TOKEN_SECRET.to_owned()),
        ("X_API_URL", xf.uri()),
        ("TELEGRAM_API_URL", chan.uri()),
        ("TELEGRAM_CHANNEL_ID", chan.channel_id()),
    ] {
        vars.insert(k.to_owned(), v);
    }
    let app = build(&vars).await;
    let c = doctor(&app).await;
    for c in &c {
        println!("{c}");
    }
    assert_eq!(target_lines(&c), ["X", "Telegram channel"], "{c:?}");
    let x = line(&c, "X");
    assert!(x.ok && x.detail.contains("@postonce_test"), "{x}");
    assert_eq!(xf.me_requests(), 1);
    assert_eq!(xf.bad_signatures(), 0);
    assert_eq!(
        (
            xf.create_requests(),
            xf.upload_requests(),
            xf.posts_created()
        ),
        (0, 0, 0)
    );
    let ch = line(&c, "Telegram channel");
    assert!(ch.ok && ch.detail.contains("@postonce_chan"), "{ch}");
    // (The report bot's own check follows on the same Bot API fake: getMe, getWebhookInfo.)
    assert_eq!(chan.methods()[..2], ["getMe", "getChat"]);
    assert!(!chan.methods().iter().any(|m| m == "sendPhoto"));
    assert_eq!((chan.send_photo_requests(), chan.messages_posted()), (0, 0));

    // Broken parts name their fix.
    chan.set_mode(ChannelMode::ChatNotFound);
    let mut wrong = vars.clone();
    wrong.insert("X_ACCESS_TOKEN_SECRET".into(), "not-the-secret".into());
    let c = doctor(&build(&wrong).await).await;
    println!("{}\n{}", line(&c, "X"), line(&c, "Telegram channel"));
    let x = line(&c, "X");
    assert!(
        !x.ok && x.detail.contains("401") && x.detail.contains("X_ACCESS_TOKEN"),
        "{x}"
    );
    let ch = line(&c, "Telegram channel");
    assert!(!ch.ok && ch.detail.contains("TELEGRAM_CHANNEL_ID"), "{ch}");
    let mut unreachable = vars.clone();
    unreachable.insert("X_API_URL".into(), "http://127.0.0.1:9".into());
    let c = doctor(&build(&unreachable).await).await;
    println!("{}", line(&c, "X"));
    let x = line(&c, "X");
    assert!(!x.ok && x.detail.contains("X_API_URL"), "{x}");
    assert_eq!(xf.create_requests() + chan.send_photo_requests(), 0);

    for c in &c {
        for secret in [
            CONSUMER_KEY,
            CONSUMER_SECRET,
            ACCESS_TOKEN,
            ACCESS_TOKEN_SECRET,
            TG_TOKEN,
        ] {
            assert!(!c.detail.contains(secret), "{c}");
        }
    }
}

#[tokio::test]
async fn doctor_checks_mastodon_and_bluesky_and_reads_the_instance_limits() {
    // Without credentials both are dry runs that pass and name what to set.
    let env = Env::with(
        Stores::Local,
        &[("POSTONCE_TARGETS", "linkedin,mastodon,bluesky")],
    )
    .await;
    let c = doctor(&env.app).await;
    assert_eq!(target_lines(&c), ["LinkedIn", "Mastodon", "Bluesky"]);
    let m = line(&c, "Mastodon");
    assert!(m.ok, "{c:?}");
    assert_eq!(
        m.detail,
        "dry run: set MASTODON_URL and MASTODON_ACCESS_TOKEN to post to Mastodon for real"
    );
    let b = line(&c, "Bluesky");
    assert!(b.ok, "{c:?}");
    assert_eq!(
        b.detail,
        "dry run: set BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD to post to Bluesky for real"
    );

    // With credentials: verify_credentials and the instance's limits at Mastodon, a session at
    // Bluesky; nothing uploaded, nothing posted.
    let masto = MastodonFake::start().await;
    masto.set_max_characters(1000);
    let sky = BlueskyFake::start().await;
    let mut vars = env.vars.clone();
    for (k, v) in [
        ("POSTONCE_TARGETS", "mastodon,bluesky".to_owned()),
        ("MASTODON_URL", masto.uri()),
        ("MASTODON_ACCESS_TOKEN", MASTODON_TOKEN.to_owned()),
        ("BLUESKY_IDENTIFIER", HANDLE.to_owned()),
        ("BLUESKY_APP_PASSWORD", APP_PASSWORD.to_owned()),
        ("BLUESKY_PDS_URL", sky.uri()),
    ] {
        vars.insert(k.to_owned(), v);
    }
    let app = build(&vars).await;
    let c = doctor(&app).await;
    for c in &c {
        println!("{c}");
    }
    assert_eq!(target_lines(&c), ["Mastodon", "Bluesky"], "{c:?}");
    let m = line(&c, "Mastodon");
    assert!(m.ok, "{m}");
    assert!(
        m.detail.starts_with(&format!("@{MASTODON_USER}@127.0.0.1")),
        "{m}"
    );
    assert!(
        m.detail
            .contains("instance limits: 1000 characters (a URL counts 23)"),
        "{m}"
    );
    assert!(masto.verify_requests() >= 1 && masto.instance_requests() >= 1);
    assert_eq!(
        (
            masto.create_requests(),
            masto.upload_requests(),
            masto.statuses_created()
        ),
        (0, 0, 0)
    );
    let b = line(&c, "Bluesky");
    assert!(b.ok, "{b}");
    assert!(
        b.detail.starts_with(&format!("@{HANDLE} ({DID}) at ")),
        "{b}"
    );
    assert!(sky.create_session_requests() >= 1);
    assert_eq!(
        (
            sky.upload_requests(),
            sky.put_requests(),
            sky.posts_created()
        ),
        (0, 0, 0)
    );

    // Broken parts name their fix.
    let mut wrong = vars.clone();
    wrong.insert(
        "MASTODON_ACCESS_TOKEN".into(),
        "not-the-token-of-this-account".into(),
    );
    wrong.insert("BLUESKY_APP_PASSWORD".into(), "not-the-app-password".into());
    let c = doctor(&build(&wrong).await).await;
    println!("{}\n{}", line(&c, "Mastodon"), line(&c, "Bluesky"));
    let m = line(&c, "Mastodon");
    assert!(
        !m.ok && m.detail.contains("401") && m.detail.contains("MASTODON_ACCESS_TOKEN"),
        "{m}"
    );
    let b = line(&c, "Bluesky");
    assert!(!b.ok && b.detail.contains("BLUESKY_APP_PASSWORD"), "{b}");
    let mut unreachable = vars.clone();
    unreachable.insert("MASTODON_URL".into(), "http://127.0.0.1:9".into());
    unreachable.insert("BLUESKY_PDS_URL".into(), "http://127.0.0.1:9".into());
    let c = doctor(&build(&unreachable).await).await;
    println!("{}\n{}", line(&c, "Mastodon"), line(&c, "Bluesky"));
    let m = line(&c, "Mastodon");
    assert!(!m.ok && m.detail.contains("MASTODON_URL"), "{m}");
    let b = line(&c, "Bluesky");
    assert!(!b.ok && b.detail.contains("BLUESKY_PDS_URL"), "{b}");
    assert_eq!(masto.statuses_created() + sky.records().len(), 0);

    for c in &c {
        for secret in [MASTODON_TOKEN, APP_PASSWORD, TG_TOKEN] {
            assert!(!c.detail.contains(secret), "{c}");
        }
    }
}

/// Discord's doctor line: the bot and the channel found with one read each; with
/// `DISCORD_CROSSPOST=1` the channel must be an announcement channel, and a forum is refused,
/// each naming the variable to change. Instagram's and the Page's lines pass against their
/// fakes. Nothing is posted anywhere.
#[tokio::test]
async fn doctor_checks_discord_channel_kinds_and_the_meta_targets() {
    use postonce::networks::Network;
    let env = Env::with_networks(
        Stores::Local,
        &[],
        &[Network::Discord, Network::Instagram, Network::Facebook],
    )
    .await;
    let c = doctor(&env.app).await;
    let discord = line(&c, "Discord");
    assert!(discord.ok, "{c:?}");
    assert!(discord.detail.contains("can see the channel"), "{discord}");
    assert!(!discord.detail.contains("followers"), "{discord}");
    assert!(line(&c, "Instagram").ok, "{c:?}");
    assert!(line(&c, "Facebook Page").ok, "{c:?}");

    // The channel as Discord describes it (read once per process): text, announcement, forum.
    for (kind, ok, says) in [
        (0, false, "not an announcement channel"),
        (5, true, "published to its followers"),
        (15, false, "forum"),
    ] {
        let crossposting = Env::with_networks(
            Stores::Local,
            &[("DISCORD_CROSSPOST", "1")],
            &[Network::Discord],
        )
        .await;
        crossposting.discord().set_channel_type(kind);
        let d = line(&doctor(&crossposting.app).await, "Discord").clone();
        assert_eq!(d.ok, ok, "{d}");
        assert!(d.detail.contains(says), "{d}");
        let var = if kind == 15 {
            "DISCORD_CHANNEL_ID"
        } else {
            "DISCORD_CROSSPOST"
        };
        assert!(ok || d.detail.contains(var), "{d}");
        assert_eq!(crossposting.discord().messages_posted(), 0);
    }
    assert_eq!(env.discord().messages_posted(), 0);
    assert_eq!(env.facebook().totals().1, 0);
}

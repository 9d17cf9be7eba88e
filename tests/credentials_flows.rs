//! The flows without a browser: `postonce auth bluesky` (handle and app password from standard
//! input, checked with `createSession`), then a real post with the stored credential against
//! the Bluesky fake; a wrong app password is refused and stores nothing.

use crate::support;

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
    for mark in (1..=9).map(|i| format!("SECRET{i}")) {
        assert!(
            !o.contains(&mark) && !e.contains(&mark),
            "a secret shown:\n{o}\n{e}"
        );
    }
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

#[tokio::test]
async fn telegram_auth_checks_the_bot_token_finds_the_owner_and_prints_the_variables() {
    let token = "123456789:AAtelegram-SECRET8-bot";
    let tg = support::telegram::TelegramFake::start(token).await;
    let dir = tempfile::tempdir().expect("dir");
    let api = [("TELEGRAM_API_URL", tg.uri())];

    let bad = postonce(
        dir.path(),
        &api,
        &["auth", "telegram"],
        "123456789:wrong-SECRET9\n\n",
    );
    let (o, e) = texts(&bad);
    assert_eq!(bad.status.code(), Some(2), "{o}\n{e}");
    assert!(e.contains("getMe") && e.contains("401"), "{e}");

    // No /start yet: said so.
    let none = postonce(
        dir.path(),
        &api,
        &["auth", "telegram"],
        &format!("{token}\n\n"),
    );
    let (_, e) = texts(&none);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        e.contains("no /start from a private chat has reached @postonce_test_bot"),
        "{e}"
    );

    tg.set_updates(vec![serde_json::json!({"update_id": 7, "message": {
        "message_id": 1, "from": {"id": 111, "is_bot": false, "first_name": "Ada"},
        "chat": {"id": 111, "type": "private", "first_name": "Ada"}, "date": 1_700_000_000, "text": "/start"}})]);
    let out = postonce(
        dir.path(),
        &api,
        &["auth", "telegram"],
        &format!("{token}\n\n"),
    );
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        o.contains("TELEGRAM_CHAT_ID=111") && o.contains("TELEGRAM_ALLOWED_USERS=111"),
        "{o}"
    );
    assert!(
        !o.contains(token) && !e.contains(token),
        "the token is never printed"
    );

    // A webhook set: what to do.
    tg.set_webhook_url("https://example.com/telegram");
    let hooked = postonce(
        dir.path(),
        &api,
        &["auth", "telegram"],
        &format!("{token}\n\n"),
    );
    let (_, e) = texts(&hooked);
    assert_eq!(hooked.status.code(), Some(2));
    assert!(
        e.contains("a webhook is set") && e.contains("deleteWebhook"),
        "{e}"
    );
}

#[tokio::test]
async fn x_auth_by_pin_stores_the_access_token_and_a_real_post_is_signed_with_it() {
    use support::oauth::{self, OAuthFake};
    use support::x;
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let app = [
        ("X_API_KEY", x::CONSUMER_KEY.to_owned()),
        ("X_API_SECRET", x::CONSUMER_SECRET.to_owned()),
    ];
    let mut vars = app.to_vec();
    vars.push(("X_API_URL", fake.uri()));

    let wrong = postonce(dir.path(), &vars, &["auth", "x"], "1111111\n");
    let (o, e) = texts(&wrong);
    assert_eq!(wrong.status.code(), Some(2), "{o}\n{e}");
    assert!(
        e.contains("Invalid or expired token") && e.contains("nothing stored"),
        "{e}"
    );

    // The test browser opens the printed address and reads the PIN X shows.
    let page = reqwest::get(format!(
        "{}/oauth/authorize?oauth_token={}",
        fake.uri(),
        oauth::X_REQUEST_TOKEN
    ))
    .await
    .expect("page")
    .text()
    .await
    .expect("text");
    assert!(page.contains(oauth::X_PIN));
    let out = postonce(
        dir.path(),
        &vars,
        &["auth", "x"],
        &format!("{}\n", oauth::X_PIN),
    );
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        e.contains(&format!(
            "/oauth/authorize?oauth_token={}",
            oauth::X_REQUEST_TOKEN
        )),
        "{e}"
    );
    assert!(
        o.contains(&format!("@{} ({})", x::USERNAME, x::USER_ID)),
        "{o}"
    );

    let api = x::XFake::start().await;
    let images = ImageHost::start().await;
    let mut post_vars = app.to_vec();
    post_vars.extend([
        ("X_API_URL", api.uri()),
        ("POSTONCE_TARGETS", "x".to_owned()),
        ("POSTONCE_IMAGE_HOSTS", images.uri()),
    ]);
    let post = postonce(
        dir.path(),
        &post_vars,
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "xpost",
            "--caption",
            "Hello, X",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
        "",
    );
    let (o, e) = texts(&post);
    assert_eq!(post.status.code(), Some(0), "{o}\n{e}");
    assert_eq!(api.posts_created(), 1, "{o}");
    assert_eq!(
        api.bad_signatures(),
        0,
        "signed with the stored access token"
    );
}

/// `postonce auth discord`: a wrong token is refused by `GET /users/@me` and nothing is
/// stored; the right one is checked, the channels of the bot's server are listed and the one
/// picked is checked and stored with the token (never printed); `auth status` shows it, and a
/// real post with the stored credential reaches the Discord fake, once, with the cover.
#[tokio::test]
async fn discord_auth_checks_the_token_finds_the_channel_and_a_real_post_uses_it() {
    use support::discord::{self, DiscordFake};
    let fake = DiscordFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let api = [("DISCORD_API_URL", fake.api_url())];

    let wrong = postonce(
        dir.path(),
        &api,
        &["auth", "discord"],
        "MTE4.wrong-token-SECRET7\n1\n",
    );
    let (o, e) = texts(&wrong);
    assert_eq!(wrong.status.code(), Some(2), "{o}\n{e}");
    assert!(
        e.contains("/users/@me") && e.contains("401") && e.contains("nothing stored"),
        "{e}"
    );
    assert!(!dir
        .path()
        .join("secrets")
        .join("secret-credentials")
        .exists());

    let out = postonce(
        dir.path(),
        &api,
        &["auth", "discord"],
        &format!("{}\n1\n", discord::TOKEN),
    );
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        e.contains(&format!("#{} in postonce test", discord::CHANNEL_NAME))
            && !e.contains("#voice"),
        "the text channels are listed: {e}"
    );
    assert!(
        o.contains(&format!("bot {} ({})", discord::BOT_NAME, discord::BOT_ID))
            && o.contains(discord::CHANNEL_ID),
        "{o}"
    );

    let status = postonce(dir.path(), &[], &["auth", "status"], "");
    let (o, _) = texts(&status);
    assert!(o.contains("discord: stored (postonce auth discord)"), "{o}");

    let images = ImageHost::start().await;
    let post = postonce(
        dir.path(),
        &[
            ("DISCORD_API_URL", fake.api_url()),
            ("POSTONCE_TARGETS", "discord".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "disc",
            "--caption",
            "Hello, Discord",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
        "",
    );
    let (o, e) = texts(&post);
    assert_eq!(post.status.code(), Some(0), "{o}\n{e}");
    let v: serde_json::Value = serde_json::from_str(&o).expect("json");
    assert_eq!(v["outcome"], "posted", "{v}");
    assert_eq!(
        fake.messages_posted(),
        1,
        "posted with the stored token: {o}"
    );
    let m = fake.messages().remove(0);
    assert_eq!(m.content, "Hello, Discord");
    assert!(m.image.is_some_and(|i| i.taken()), "the cover is attached");
    assert!(
        v["url"].as_str().is_some_and(|u| u.ends_with(&m.id)),
        "the message's link: {v}"
    );
}

/// `postonce auth nostr --generate`: a new key, its secret stored and never shown (only the
/// npub printed), the relays reached; a real post signs with the stored key. With
/// `NOSTR_SECRET_KEY` set, `auth nostr` checks it and stores nothing; a malformed key or relay
/// list stops `post` with exit 2, naming the variable and never the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostr_auth_generates_a_key_shows_only_its_npub_and_a_real_post_uses_it() {
    use support::nostr::FakeRelay;
    let relay = FakeRelay::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let relays = [("NOSTR_RELAYS", relay.url())];

    let out = postonce(dir.path(), &relays, &["auth", "nostr", "--generate"], "");
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    let npub = o.lines().next().unwrap_or("").trim().to_owned();
    assert!(npub.starts_with("npub1"), "the npub first: {o}");
    assert!(
        !o.contains("nsec") && !e.contains("nsec"),
        "the secret never shown:\n{o}\n{e}"
    );
    assert!(e.contains(&format!("{}: reachable", relay.url())), "{e}");

    let status = postonce(dir.path(), &[], &["auth", "status"], "");
    let (o, _) = texts(&status);
    assert!(o.contains("nostr: stored (postonce auth nostr)"), "{o}");
    assert!(!o.contains("nsec"), "{o}");

    let images = ImageHost::start().await;
    let post = postonce(
        dir.path(),
        &[
            ("NOSTR_RELAYS", relay.url()),
            ("POSTONCE_TARGETS", "nostr".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "nos",
            "--caption",
            "Hello, #Nostr",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
        "",
    );
    let (o, e) = texts(&post);
    assert_eq!(post.status.code(), Some(0), "{o}\n{e}");
    let v: serde_json::Value = serde_json::from_str(&o).expect("json");
    assert_eq!(v["outcome"], "posted", "{v}");
    let notes = relay.notes_with("Hello, #Nostr");
    assert_eq!(notes.len(), 1, "one note");
    let pk = hex::decode(&notes[0].pubkey).expect("hex");
    let signer = postonce::networks::nostr::event::bech32_of("npub", &pk);
    assert_eq!(signer, npub, "signed with the stored key");
    assert_eq!(
        v["urn"].as_str().or(v["id"].as_str()).unwrap_or(""),
        notes[0].id,
        "{v}"
    );

    let set = [
        (
            "NOSTR_SECRET_KEY",
            "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5".to_owned(),
        ),
        ("NOSTR_RELAYS", relay.url()),
    ];
    let check = postonce(dir.path(), &set, &["auth", "nostr"], "");
    let (o, e) = (
        String::from_utf8_lossy(&check.stdout).into_owned(),
        String::from_utf8_lossy(&check.stderr).into_owned(),
    );
    assert_eq!(check.status.code(), Some(0), "{o}\n{e}");
    assert!(
        o.contains("npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"),
        "{o}"
    );
    assert!(
        e.contains("nothing stored") && !o.contains("nsec") && !e.contains("nsec"),
        "{e}"
    );

    let bad_key = [
        ("NOSTR_SECRET_KEY", "nsec1-not-a-key-SECRET8".to_owned()),
        ("NOSTR_RELAYS", relay.url()),
    ];
    let bad_relays = [(
        "NOSTR_RELAYS",
        "https://relay.example, wss://ok.example".to_owned(),
    )];
    for (vars, var) in [
        (&bad_key[..], "NOSTR_SECRET_KEY"),
        (&bad_relays[..], "NOSTR_RELAYS"),
    ] {
        let out = postonce(
            dir.path(),
            vars,
            &[
                "post",
                "--kind",
                "blog",
                "--slug",
                "bad",
                "--caption",
                "x",
                "--image",
                &images.url("/cover.png"),
            ],
            "",
        );
        let (o, e) = texts(&out);
        assert_eq!(out.status.code(), Some(2), "{var}: {o}\n{e}");
        assert!(e.contains(var), "{var} named: {e}");
    }
}

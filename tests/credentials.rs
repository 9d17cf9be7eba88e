//! `postonce auth <network>` from nothing to a first real post, against fakes of the networks'
//! OAuth and token endpoints (tests/support/oauth.rs) and of their APIs: the listener driven by
//! a test "browser" that follows the authorization URL, `--paste` through standard input, the
//! refusals (wrong state, refused consent, a code used twice, a port in use) storing nothing,
//! `auth status`, and no secret in any output.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use support::facebook::{self, FacebookFake};
use support::images::ImageHost;
use support::instagram::{self, InstagramFake};
use support::linkedin::LinkedInFake;
use support::oauth::{self, OAuthFake};
use support::threads::{self, ThreadsFake};

/// A child `postonce` with only `vars` (and PATH) in its environment.
fn postonce(dir: &Path, vars: &[(&str, String)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::piped());
    cmd
}

fn linkedin_app(fake: &OAuthFake) -> Vec<(&'static str, String)> {
    vec![
        ("LINKEDIN_CLIENT_ID", oauth::LINKEDIN_CLIENT_ID.into()),
        (
            "LINKEDIN_CLIENT_SECRET",
            oauth::LINKEDIN_CLIENT_SECRET.into(),
        ),
        ("LINKEDIN_OAUTH_URL", fake.uri()),
        ("LINKEDIN_API_URL", fake.uri()),
    ]
}

fn threads_app(fake: &OAuthFake) -> Vec<(&'static str, String)> {
    vec![
        ("THREADS_APP_ID", oauth::THREADS_APP_ID.into()),
        ("THREADS_APP_SECRET", oauth::THREADS_APP_SECRET.into()),
        ("THREADS_OAUTH_URL", fake.uri()),
        ("THREADS_API_URL", fake.uri()),
    ]
}

fn facebook_app(fake: &OAuthFake) -> Vec<(&'static str, String)> {
    vec![
        ("FACEBOOK_APP_ID", oauth::FACEBOOK_APP_ID.into()),
        ("FACEBOOK_APP_SECRET", oauth::FACEBOOK_APP_SECRET.into()),
        ("FACEBOOK_OAUTH_URL", fake.uri()),
        ("FACEBOOK_API_URL", fake.uri()),
    ]
}

fn instagram_app(fake: &OAuthFake) -> Vec<(&'static str, String)> {
    vec![
        ("INSTAGRAM_APP_ID", oauth::INSTAGRAM_APP_ID.into()),
        ("INSTAGRAM_APP_SECRET", oauth::INSTAGRAM_APP_SECRET.into()),
        ("INSTAGRAM_OAUTH_URL", fake.uri()),
        ("INSTAGRAM_TOKEN_URL", fake.uri()),
        ("INSTAGRAM_API_URL", fake.uri()),
    ]
}

/// A running `auth`: its stderr lines arrive on a channel; the authorization URL is the first
/// line that holds one.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().expect("postonce starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The authorization URL it printed.
    fn url(&mut self) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no authorization URL; stderr so far: {:?}", self.seen));
            self.seen.push(line.clone());
            let t = line.trim();
            if t.starts_with("http") && t.contains('?') {
                return t.to_owned();
            }
        }
    }

    fn paste(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("paste");
    }

    /// Waits for the end: (exit code, stdout, every stderr line).
    fn finish(mut self) -> (i32, String, String) {
        drop(self.child.stdin.take());
        let out = self.child.wait_with_output().expect("postonce ends");
        // Every line the reader thread forwards until the pipe closes, not only those already
        // forwarded when the process ended (the last lines may still be on their way).
        while let Ok(line) = self.lines.recv_timeout(std::time::Duration::from_secs(10)) {
            self.seen.push(line);
        }
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            self.seen.join("\n"),
        )
    }
}

/// The test browser: asks the authorization endpoint and returns where it redirects.
async fn authorize(url: &str) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let answer = client.get(url).send().await.expect("the fake answers");
    assert_eq!(answer.status().as_u16(), 302, "the fake redirects");
    answer.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned()
}

/// The browser follows the redirect to the listener.
async fn follow(location: &str) -> String {
    reqwest::get(location)
        .await
        .expect("the listener answers")
        .text()
        .await
        .expect("page")
}

fn no_secret(what: &str, text: &str) {
    for mark in [
        "SECRET2",
        "SECRET3",
        "SECRET4",
        "SECRET5",
        "SECRET6",
        threads::TOKEN,
        instagram::TOKEN,
        facebook::TOKEN,
    ] {
        assert!(
            !text.contains(mark),
            "{what} shows a secret ({mark}): {text}"
        );
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("postonce runs")
}

fn status_of(dir: &Path, vars: &[(&str, String)]) -> String {
    let out = run(&mut postonce(dir, vars, &["auth", "status"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    no_secret("auth status", &text);
    no_secret(
        "auth status (stderr)",
        &String::from_utf8_lossy(&out.stderr),
    );
    text
}

#[tokio::test]
async fn linkedin_auth_through_the_listener_then_a_real_post_with_the_stored_token() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let mut auth = Running::start(postonce(
        dir.path(),
        &linkedin_app(&fake),
        &["auth", "linkedin", "--no-browser"],
    ));
    let url = auth.url();
    assert!(
        url.contains("scope=openid+profile+w_member_social"),
        "{url}"
    );
    let page = follow(&authorize(&url).await).await;
    assert!(page.contains("received the authorization"), "{page}");
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("urn:li:person:782bbtaQ (Ada Lovelace)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("urn:li:organization:123"),
        "organizations listed: {stderr}"
    );
    no_secret("auth stdout", &stdout);
    no_secret("auth stderr", &stderr);

    let status = status_of(dir.path(), &[]);
    assert!(
        status.contains("linkedin: stored (postonce auth linkedin), account urn:li:person:782bbtaQ (Ada Lovelace), expires in"),
        "{status}"
    );
    assert!(
        status
            .contains("postonce cannot refresh it: run `postonce auth linkedin` before it expires"),
        "{status}"
    );
    // The secret file is the owner's only.
    let file = dir.path().join("secrets").join("secret-credentials");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("stored")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // A first real post, with nothing but the stored credential.
    let li = LinkedInFake::start(oauth::LINKEDIN_TOKEN).await;
    let images = ImageHost::start().await;
    let out = run(&mut postonce(
        dir.path(),
        &[
            ("LINKEDIN_API_URL", li.uri()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "first",
            "--caption",
            "Hello from postonce",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
    ));
    let body = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{body}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(body.contains("\"outcome\":\"posted\""), "{body}");
    assert_eq!(li.posts_created(), 1);
    assert_eq!(li.bad_headers(), 0, "the fake saw the stored token");
    assert_eq!(li.last_create_body()["author"], "urn:li:person:782bbtaQ");
    no_secret("post", &body);
    no_secret("post (stderr)", &String::from_utf8_lossy(&out.stderr));

    // The stored credentials cannot be read: the post refuses, retryable, rather than run
    // LinkedIn as a dry run and answer `posted` for a draft that was never sent.
    let kept = std::fs::read(&file).expect("the stored credentials");
    std::fs::write(&file, b"{ not json").expect("spoil the stored credentials");
    let out = run(&mut postonce(
        dir.path(),
        &[
            ("LINKEDIN_API_URL", li.uri()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "second",
            "--caption",
            "Hello again from postonce",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("the stored credentials cannot be read"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("posted"),
        "no dry run answered for it"
    );
    assert_eq!(li.posts_created(), 1);
    // Readable again: the same command posts it for real.
    std::fs::write(&file, kept).expect("restore");
    let out = run(&mut postonce(
        dir.path(),
        &[
            ("LINKEDIN_API_URL", li.uri()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "second",
            "--caption",
            "Hello again from postonce",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(li.posts_created(), 2);
}

#[tokio::test]
async fn threads_auth_by_paste_exchanges_for_the_long_lived_token_then_posts() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let mut auth = Running::start(postonce(
        dir.path(),
        &threads_app(&fake),
        &["auth", "threads", "--paste"],
    ));
    let url = auth.url();
    assert!(
        url.contains("redirect_uri=https%3A%2F%2F127.0.0.1%3A8080%2Fcallback"),
        "{url}"
    );
    let location = authorize(&url).await;
    assert!(location.ends_with("#_"), "Meta's #_: {location}");
    auth.paste(&location);
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("@{} ({})", threads::USERNAME, threads::USER_ID)),
        "{stdout}"
    );
    no_secret("auth stdout", &stdout);
    no_secret("auth stderr", &stderr);
    let status = status_of(dir.path(), &[]);
    assert!(status.contains("threads: stored"), "{status}");
    assert!(status.contains("postonce refreshes it"), "{status}");

    let api = ThreadsFake::start().await;
    api.set_fetch_images(false);
    let images = ImageHost::start().await;
    let body = post_with_stored(
        dir.path(),
        &[
            ("THREADS_API_URL", api.uri()),
            ("POSTONCE_TARGETS", "threads".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        "Hello, Threads",
        &images.url("/cover.png"),
    );
    assert_eq!(api.posts_created(), 1, "{body}");
    assert_eq!(
        api.bad_tokens(),
        0,
        "the fake saw the stored long-lived token"
    );
    no_secret("post", &body);
}

/// `postonce post` of a new draft (`blog-first`) with nothing but `vars` and the credential
/// stored in `dir`: exit 0; its JSON answer.
fn post_with_stored(dir: &Path, vars: &[(&str, String)], caption: &str, image: &str) -> String {
    let out = run(&mut postonce(
        dir,
        vars,
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "first",
            "--caption",
            caption,
            "--image",
            image,
            "--json",
        ],
    ));
    let body = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{body}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    body
}

/// Each refusal: exit 2, a message naming the cause, nothing stored.
fn refused(code: i32, stdout: &str, stderr: &str, dir: &Path, needle: &str) {
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stderr.contains(needle), "{needle:?} in {stderr}");
    assert!(stderr.contains("nothing stored"), "{stderr}");
    no_secret("refusal", stderr);
    assert!(
        !dir.join("secrets").join("secret-credentials").exists(),
        "nothing stored"
    );
    assert!(status_of(dir, &[]).contains("linkedin: none"));
}

#[tokio::test]
async fn a_wrong_state_a_refused_consent_a_code_used_twice_and_a_port_in_use_store_nothing() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let app = linkedin_app(&fake);

    // A state from another authorization.
    let mut auth = Running::start(postonce(dir.path(), &app, &["auth", "linkedin", "--paste"]));
    let url = auth.url();
    let location = authorize(&url).await;
    let state = url
        .split("state=")
        .nth(1)
        .and_then(|s| s.split('&').next())
        .expect("state");
    auth.paste(&location.replace(state, "forged-state"));
    let (code, out, err) = auth.finish();
    refused(code, &out, &err, dir.path(), "state does not match");
    assert!(fake.used_codes().is_empty(), "the code was never exchanged");

    // Refused consent, through the listener.
    fake.set_refuse(true);
    let mut auth = Running::start(postonce(
        dir.path(),
        &app,
        &["auth", "linkedin", "--no-browser"],
    ));
    let url = auth.url();
    follow(&authorize(&url).await).await;
    let (code, out, err) = auth.finish();
    refused(code, &out, &err, dir.path(), "user_cancelled_authorize");
    fake.set_refuse(false);

    // A code used twice: the first run spends it (and fails later, at a store that refuses
    // nothing: here by pasting it into a run whose token endpoint takes it), the second is refused.
    let mut first = Running::start(postonce(dir.path(), &app, &["auth", "linkedin", "--paste"]));
    let location = authorize(&first.url()).await;
    let code_value = location
        .split("code=")
        .nth(1)
        .and_then(|s| s.split('&').next())
        .expect("code")
        .to_owned();
    first.paste(&location);
    let (c, o, e) = first.finish();
    assert_eq!(c, 0, "{o}\n{e}");
    let other = tempfile::tempdir().expect("dir");
    let mut second = Running::start(postonce(
        other.path(),
        &app,
        &["auth", "linkedin", "--paste"],
    ));
    second.url();
    second.paste(&code_value);
    let (code, out, err) = second.finish();
    refused(code, &out, &err, other.path(), "invalid_grant");

    // A port in use.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = run(&mut postonce(
        other.path(),
        &app,
        &["auth", "linkedin", "--no-browser", "--port", &port],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    refused(
        out.status.code().unwrap_or(-1),
        "",
        &err,
        other.path(),
        &format!("port {port} on 127.0.0.1 is in use"),
    );
}

#[tokio::test]
async fn a_plain_variable_wins_and_auth_refuses_to_store_under_it() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let mut app = linkedin_app(&fake);
    app.push(("LINKEDIN_ACCESS_TOKEN", "plain-SECRET7".into()));
    app.push(("LINKEDIN_AUTHOR", "urn:li:person:plain".into()));
    let out = run(&mut postonce(
        dir.path(),
        &app,
        &["auth", "linkedin", "--no-browser"],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("LINKEDIN_ACCESS_TOKEN is set and would take precedence"),
        "{err}"
    );
    assert!(!err.contains("SECRET7"));
    let status = status_of(dir.path(), &app);
    assert!(
        status.contains("linkedin: variable LINKEDIN_ACCESS_TOKEN"),
        "{status}"
    );
    assert!(!status.contains("SECRET7"), "{status}");
}

/// `auth threads --paste` into `dir`, then the stored token made `age_s` old with `left_s` to
/// go (as if it had been obtained then).
async fn threads_stored_and_aged(fake: &OAuthFake, dir: &Path, age_s: i64, left_s: i64) {
    let mut auth = Running::start(postonce(
        dir,
        &threads_app(fake),
        &["auth", "threads", "--paste"],
    ));
    let location = authorize(&auth.url()).await;
    auth.paste(&location);
    let (code, out, err) = auth.finish();
    assert_eq!(code, 0, "{out}\n{err}");
    age(dir, "threads", age_s, left_s);
}

/// `network`'s stored credential in `dir` made `age_s` old with `left_s` to go.
fn age(dir: &Path, network: &str, age_s: i64, left_s: i64) {
    let file = dir.join("secrets").join("secret-credentials");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("stored")).expect("json");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    v["networks"][network]["obtained_at"] = (now - age_s).into();
    v["networks"][network]["expires_at"] = (now + left_s).into();
    std::fs::write(&file, v.to_string()).expect("aged");
}

/// Processes that each read the Threads account once (doctor's check), with the stored token.
fn doctors(fake: &OAuthFake, dir: &Path, n: usize) -> Vec<Output> {
    let vars = [
        ("THREADS_API_URL", fake.uri()),
        ("POSTONCE_TARGETS", "threads".to_owned()),
    ];
    let children: Vec<Child> = (0..n)
        .map(|_| {
            postonce(dir, &vars, &["doctor"])
                .stdin(Stdio::null())
                .spawn()
                .expect("doctor starts")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("doctor ends"))
        .collect()
}

#[tokio::test]
async fn four_processes_racing_to_refresh_one_threads_token_refresh_it_once_and_all_use_the_new_one(
) {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    // Two days old, ten days left: due (at least a day old, fewer than 30 days left).
    threads_stored_and_aged(&fake, dir.path(), 2 * 86_400, 10 * 86_400).await;
    let outs = doctors(&fake, dir.path(), 4);
    assert_eq!(fake.refresh_calls(), 1, "one refresh for four processes");
    let latest = fake.threads_token();
    assert_ne!(latest, threads::TOKEN);
    let used = fake.limit_tokens();
    assert_eq!(used.len(), 4, "each process read the account once");
    assert!(
        used.iter().all(|t| *t == latest),
        "every process used the new token"
    );
    for out in &outs {
        no_secret("doctor", &String::from_utf8_lossy(&out.stdout));
        no_secret("doctor (stderr)", &String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stdout).contains(&latest));
    }
    let status = status_of(dir.path(), &[]);
    assert!(status.contains("threads: stored"), "{status}");
    assert!(
        status.contains("expires in 59 days"),
        "the refreshed expiry: {status}"
    );
    // Not due any more: the next processes refresh nothing.
    doctors(&fake, dir.path(), 2);
    assert_eq!(fake.refresh_calls(), 1);
}

#[tokio::test]
async fn a_lost_refresh_answer_is_refreshed_again_safely_by_the_next_process() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    threads_stored_and_aged(&fake, dir.path(), 2 * 86_400, 10 * 86_400).await;
    fake.lose_next_refresh();
    doctors(&fake, dir.path(), 1);
    assert_eq!(fake.refresh_calls(), 1);
    assert_eq!(
        fake.limit_tokens(),
        vec![threads::TOKEN.to_owned()],
        "the old token still served"
    );
    // What the store holds: the old token, the failure, no lease left behind.
    let file = dir.path().join("secrets").join("secret-credentials");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("stored")).expect("json");
    assert_eq!(
        v["networks"]["threads"]["secrets"]["THREADS_ACCESS_TOKEN"],
        threads::TOKEN
    );
    let state = &v["state"]["threads"];
    assert!(
        state["refresh_failed"]
            .as_str()
            .is_some_and(|s| s.contains("HTTP 500")),
        "{state}"
    );
    assert!(state["refreshing_until"].is_null(), "{state}");
    doctors(&fake, dir.path(), 1);
    assert_eq!(fake.refresh_calls(), 2, "refreshed again");
    assert_eq!(fake.limit_tokens().last(), Some(&fake.threads_token()));
    let status = status_of(dir.path(), &[("THREADS_API_URL", fake.uri())]);
    assert!(
        status.contains("expires in 59 days") && !status.contains("failed"),
        "{status}"
    );
    assert_eq!(fake.refresh_calls(), 2, "nothing left to refresh");
}

/// A process killed while it refreshes leaves its lease (a minute) behind. The next process on
/// this machine sees that the lease's holder is gone (its process is no longer there) and
/// refreshes at once, rather than waiting 20 s for it and then going on with the old token.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_lease_left_by_a_killed_process_is_taken_over_at_once() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    threads_stored_and_aged(&fake, dir.path(), 2 * 86_400, 10 * 86_400).await;
    fake.slow_next_refresh(std::time::Duration::from_secs(30));
    let vars = [
        ("THREADS_API_URL", fake.uri()),
        ("POSTONCE_TARGETS", "threads".to_owned()),
    ];
    let mut holder = postonce(dir.path(), &vars, &["doctor"])
        .stdin(Stdio::null())
        .spawn()
        .expect("doctor starts");
    let begun = std::time::Instant::now();
    while fake.refresh_calls() == 0 {
        assert!(begun.elapsed().as_secs() < 30, "the refresh never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    holder.kill().expect("kill the refreshing process");
    holder.wait().expect("reaped");
    let file = dir.path().join("secrets").join("secret-credentials");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("stored")).expect("json");
    assert!(
        v["state"]["threads"]["refreshing_until"].is_i64(),
        "the killed process left its lease: {}",
        v["state"]
    );

    let begun = std::time::Instant::now();
    let outs = doctors(&fake, dir.path(), 1);
    let took = begun.elapsed();
    println!("a start after a killed refresher took {took:?}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "not held by the dead lease (up to 20 s): {took:?}"
    );
    assert_eq!(fake.refresh_calls(), 2, "refreshed by the next process");
    let latest = fake.threads_token();
    assert_eq!(fake.limit_tokens().last(), Some(&latest), "and used");
    no_secret("doctor", &String::from_utf8_lossy(&outs[0].stdout));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("stored")).expect("json");
    assert_eq!(
        v["networks"]["threads"]["secrets"]["THREADS_ACCESS_TOKEN"],
        latest
    );
    assert!(
        v["state"]["threads"]["refreshing_until"].is_null(),
        "{}",
        v["state"]
    );
}

#[tokio::test]
async fn mastodon_auth_registers_the_app_authorizes_with_pkce_then_posts() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let instance = [("MASTODON_URL", fake.uri())];
    let mut auth = Running::start(postonce(
        dir.path(),
        &instance,
        &["auth", "mastodon", "--no-browser"],
    ));
    let url = auth.url();
    assert!(
        url.contains("code_challenge_method=S256")
            && url.contains("scope=write%3Astatuses+write%3Amedia+read%3Astatuses+profile"),
        "{url}"
    );
    follow(&authorize(&url).await).await;
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("@postonce on {}", fake.uri())),
        "{stdout}"
    );
    no_secret("auth", &format!("{stdout}{stderr}"));
    let api = support::mastodon::MastodonFake::start().await;
    let images = ImageHost::start().await;
    let out = run(&mut postonce(
        dir.path(),
        &[
            ("MASTODON_URL", api.uri()),
            ("POSTONCE_TARGETS", "mastodon".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        &[
            "post",
            "--kind",
            "blog",
            "--slug",
            "toot",
            "--caption",
            "Hello, Mastodon",
            "--image",
            &images.url("/cover.png"),
            "--json",
        ],
    ));
    let body = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{body}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(api.statuses_created(), 1, "{body}");
    assert_eq!(api.bad_tokens(), 0, "the stored token reached the instance");
}

/// A long-running `serve` keeps up with the stored credentials: started with a LinkedIn token
/// the network refuses, it posts nothing with it; another process (`postonce auth linkedin`)
/// stores a new one; within `serve`'s check interval (a minute; 1 s here,
/// `POSTONCE_CREDENTIALS_CHECK_S`) it reads the store again, rebuilds LinkedIn's lane, and the
/// next trigger posts with the new token, the refused draft included, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_serve_posts_with_the_credential_another_process_stored_after_its_start() {
    use support::env::CI_SECRET;
    use support::serve::ServeProcess;

    let fake = OAuthFake::start().await;
    let li = LinkedInFake::start(oauth::LINKEDIN_TOKEN).await;
    let images = ImageHost::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    std::fs::create_dir_all(dir.path().join("secrets")).expect("dir");
    let old = serde_json::json!({
        "networks": {"linkedin": {
            "account": "urn:li:person:782bbtaQ (Ada Lovelace)",
            "scopes": ["openid", "profile", "w_member_social"],
            "obtained_at": now - 20 * 86_400,
            "expires_at": now + 40 * 86_400,
            "secrets": {"LINKEDIN_ACCESS_TOKEN": "AQV-linkedin-SECRET3-revoked-before"},
            "settings": {"LINKEDIN_AUTHOR": "urn:li:person:782bbtaQ"}
        }},
        "state": {}
    });
    let file = dir.path().join("secrets").join("secret-credentials");
    std::fs::write(&file, old.to_string()).expect("stored");

    let vars: std::collections::HashMap<String, String> = [
        ("POSTONCE_DATA_DIR", dir.path().display().to_string()),
        ("LINKEDIN_API_URL", li.uri()),
        ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ("POSTONCE_WEBHOOK_SECRET", CI_SECRET.to_owned()),
        ("POSTONCE_CREDENTIALS_CHECK_S", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut serve = ServeProcess::start(&vars, true).await;
    let mut said = serve.stderr_lines();
    let ci = |slug: &'static str| {
        serve.ci(serde_json::json!({
            "kind": "blog", "slug": slug,
            "caption": format!("Posted by a long-running serve: {slug}"),
            "image_url": images.url("/cover.png")
        }))
    };

    // The token it started with is refused: nothing posted.
    let (status, body) = ci("before").await;
    assert!(!body.contains("\"posted\""), "{status} {body}");
    assert_eq!(li.posts_created(), 0);

    // Another process stores a new credential.
    let mut auth = Running::start(postonce(
        dir.path(),
        &linkedin_app(&fake),
        &["auth", "linkedin", "--no-browser"],
    ));
    let url = auth.url();
    follow(&authorize(&url).await).await;
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");

    // `serve` notices it at its next check.
    said.wait_for(
        "stored credential changed for LinkedIn",
        std::time::Duration::from_secs(30),
    );
    no_secret("serve's stderr", &said.seen.join("\n"));

    // The next triggers post with the new token, the refused draft included.
    for slug in ["before", "after"] {
        let (status, body) = ci(slug).await;
        assert_eq!(status, 200, "{slug}: {body}");
        assert!(body.contains("\"posted\""), "{slug}: {body}");
    }
    assert_eq!(li.posts_created(), 2, "each draft posted once");
    assert_eq!(li.posts_containing("before").len(), 1);
    let (status, body) = ci("after").await;
    assert!(body.contains("already_posted"), "{status} {body}");
    assert_eq!(li.posts_created(), 2);
}

/// `auth instagram` (Instagram Login) through the listener, then by `--paste`: the code (its
/// short-lived token answered inside `{"data":[…]}`), the long-lived exchange
/// (`ig_exchange_token`), the professional account's id from `/me`'s `user_id`; then a post
/// with nothing but the stored token and id, and a refresh (`ig_refresh_token`) once it is due.
#[tokio::test]
async fn instagram_auth_by_listener_and_by_paste_then_a_post_and_a_refresh() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let mut auth = Running::start(postonce(
        dir.path(),
        &instagram_app(&fake),
        &["auth", "instagram", "--no-browser"],
    ));
    let url = auth.url();
    assert!(
        url.contains("scope=instagram_business_basic%2Cinstagram_business_content_publish")
            && url.contains(oauth::INSTAGRAM_APP_ID),
        "{url}"
    );
    let page = follow(&authorize(&url).await).await;
    assert!(page.contains("received the authorization"), "{page}");
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let who = format!("@{} ({})", instagram::USERNAME, instagram::USER_ID);
    assert!(stdout.contains(&who), "{stdout}");
    no_secret("auth stdout", &stdout);
    no_secret("auth stderr", &stderr);

    // Again by paste (a server without a browser): the https redirect, Meta's `#_` stripped.
    let mut auth = Running::start(postonce(
        dir.path(),
        &instagram_app(&fake),
        &["auth", "instagram", "--paste"],
    ));
    let location = authorize(&auth.url()).await;
    assert!(
        location.starts_with("https://127.0.0.1:8080/callback?code=") && location.ends_with("#_"),
        "{location}"
    );
    auth.paste(&location);
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains(&who), "{stdout}");
    let status = status_of(dir.path(), &[]);
    assert!(
        status.contains("instagram: stored (postonce auth instagram)") && status.contains(&who),
        "{status}"
    );
    assert!(status.contains("postonce refreshes it"), "{status}");

    // A post with the stored token (and the stored INSTAGRAM_USER_ID).
    let api = InstagramFake::start().await;
    let images = ImageHost::start().await;
    let body = post_with_stored(
        dir.path(),
        &[
            ("INSTAGRAM_API_URL", api.uri()),
            ("POSTONCE_TARGETS", "instagram".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        "Hello, Instagram #postonce",
        &images.url("/cover.jpg"),
    );
    assert_eq!(api.posts_created(), 1, "{body}");
    assert_eq!(
        api.bad_tokens(),
        0,
        "the fake saw the stored long-lived token"
    );
    assert!(
        body.contains("https://www.instagram.com/p/"),
        "the permalink: {body}"
    );
    no_secret("post", &body);

    // Two days old with ten to go: due; doctor's process refreshes it and reads with the new one.
    age(dir.path(), "instagram", 2 * 86_400, 10 * 86_400);
    let out = run(&mut postonce(
        dir.path(),
        &[
            ("INSTAGRAM_API_URL", fake.uri()),
            ("POSTONCE_TARGETS", "instagram".into()),
        ],
        &["doctor"],
    ));
    no_secret("doctor", &String::from_utf8_lossy(&out.stdout));
    assert_eq!(fake.refresh_calls(), 1, "refreshed once");
    assert_ne!(fake.instagram_token(), instagram::TOKEN);
    assert_eq!(
        fake.limit_tokens().last(),
        Some(&fake.instagram_token()),
        "read with the new token"
    );
    let status = status_of(dir.path(), &[]);
    assert!(
        status.contains("expires in 59 days"),
        "the refreshed expiry: {status}"
    );
}

/// `auth facebook` (Facebook Login) through the listener with `FACEBOOK_PAGE_ID` naming the
/// Page, then by `--paste` picking it from the two Pages `/me/accounts` lists: the code, the
/// long-lived user token (`fb_exchange_token`), the Page's token stored with its id and no
/// expiry; then a post with nothing but the stored token and id.
#[tokio::test]
async fn facebook_auth_by_listener_and_by_paste_then_a_post() {
    let fake = OAuthFake::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let mut vars = facebook_app(&fake);
    vars.push(("FACEBOOK_PAGE_ID", facebook::PAGE_ID.into()));
    let mut auth = Running::start(postonce(
        dir.path(),
        &vars,
        &["auth", "facebook", "--no-browser"],
    ));
    let url = auth.url();
    assert!(
        url.contains("/v25.0/dialog/oauth?")
            && url.contains("scope=pages_show_list%2Cpages_read_engagement%2Cpages_manage_posts")
            && url.contains(oauth::FACEBOOK_APP_ID),
        "{url}"
    );
    let page = follow(&authorize(&url).await).await;
    assert!(page.contains("received the authorization"), "{page}");
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let who = format!("the Page {} ({})", facebook::PAGE_NAME, facebook::PAGE_ID);
    assert!(stdout.contains(&who), "{stdout}");
    no_secret("auth stdout", &stdout);
    no_secret("auth stderr", &stderr);

    // Again by paste, the Page picked by its number.
    let mut auth = Running::start(postonce(
        dir.path(),
        &facebook_app(&fake),
        &["auth", "facebook", "--paste"],
    ));
    let location = authorize(&auth.url()).await;
    assert!(location.ends_with("#_"), "{location}");
    auth.paste(&location);
    auth.paste("2");
    let (code, stdout, stderr) = auth.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains(&who), "{stdout}");
    assert!(
        stderr.contains("Another Page"),
        "the Pages listed: {stderr}"
    );
    no_secret("auth stderr", &stderr);
    let status = status_of(dir.path(), &[]);
    assert!(
        status.contains("facebook: stored (postonce auth facebook)") && status.contains(&who),
        "{status}"
    );

    // A post with the stored Page token and FACEBOOK_PAGE_ID.
    let api = FacebookFake::start().await;
    let images = ImageHost::start().await;
    let body = post_with_stored(
        dir.path(),
        &[
            ("FACEBOOK_API_URL", api.uri()),
            ("POSTONCE_TARGETS", "facebook".into()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
        ],
        "Hello, Facebook",
        &images.url("/cover.jpg"),
    );
    assert_eq!(api.totals(), (1, 1), "{body}");
    assert!(
        body.contains(&format!("https://www.facebook.com/{}_", facebook::PAGE_ID)),
        "the post's URL: {body}"
    );
    no_secret("post", &body);
}

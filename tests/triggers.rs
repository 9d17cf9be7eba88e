//! The triggers end to end: the CI webhook and the Telegram buttons over HTTP through
//! `postonce serve`'s server, Lambda event fixtures through the Lambda handler, and the reports
//! as the Telegram fake received them.

mod support;

use support::env::sign;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use postonce::budget::Deadline;
use postonce::outcome::OutcomeKind;
use postonce::triggers::Router;
use serde_json::{json, Value};
use support::env::{Env, Stores, CHAT, OWNER, TG_SECRET};
use support::linkedin::Mode;
use support::services::free_port;
use support::telegram::{callback_update, TgMode};

/// Serves the app's routes on a free port, as `postonce serve` does.
async fn serve(env: &Env) -> String {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}").parse().expect("addr");
    let router = Arc::new(Router::new(env.app.clone()));
    tokio::spawn(postonce::serve::serve(router, addr));
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            return base;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("serve did not come up on {base}");
}

fn draft_body(env: &Env, key: &postonce::key::PostKey, caption: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": key.kind(), "slug": key.slug(), "caption": caption,
        "image_url": env.images.url("/cover.png"), "link": "https://example.com/blog/x"
    }))
    .expect("json")
}

async fn post_ci(base: &str, body: Vec<u8>, signature: Option<String>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/ci"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(sig) = signature {
        req = req.header("X-Hub-Signature-256", sig);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn post_telegram(base: &str, update: &Value, secret: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/telegram"))
        .json(update);
    if let Some(s) = secret {
        req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signed_ci_webhook_posts_once_even_twenty_at_a_time() {
    let env = Env::start().await;
    let base = serve(&env).await;
    let key = env.key();
    let body = draft_body(&env, &key, "From CI #release");
    let (status, outcome) = post_ci(&base, body.clone(), Some(sign(&body))).await;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["outcome"], "posted");
    assert_eq!(outcome["key"], key.to_string());
    assert!(outcome["urn"]
        .as_str()
        .is_some_and(|u| u.starts_with("urn:li:share:")));
    assert_eq!(
        env.linkedin.posts()[0].commentary,
        "From CI #release\n\nhttps://example.com/blog/x"
    );
    let (status, again) = post_ci(&base, body.clone(), Some(sign(&body))).await;
    assert_eq!(
        (status, again["outcome"].as_str()),
        (200, Some("already_posted"))
    );

    let key = env.key();
    let body = draft_body(&env, &key, "Twenty at once");
    let sig = sign(&body);
    let mut handles = Vec::new();
    for _ in 0..20 {
        let (b, s, base) = (body.clone(), sig.clone(), base.clone());
        handles.push(tokio::spawn(
            async move { post_ci(&base, b, Some(s)).await },
        ));
    }
    let mut statuses = Vec::new();
    for h in handles {
        statuses.push(h.await.expect("task").0);
    }
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );
    assert_eq!(env.linkedin.create_requests(), 2, "one create-post per key");
    println!("20 identical webhooks: statuses {statuses:?}; create-post requests for the key: 1");
}

#[tokio::test]
async fn bad_ci_requests_are_refused_and_change_nothing() {
    let env = Env::start().await;
    let base = serve(&env).await;
    let key = env.key();
    let body = draft_body(&env, &key, "Forged");
    let good = sign(&body);
    let mut tampered_body = body.clone();
    tampered_body[10] ^= 1;
    let mut tampered_sig = good.clone().into_bytes();
    let last = tampered_sig.len() - 1;
    tampered_sig[last] = if tampered_sig[last] == b'0' {
        b'1'
    } else {
        b'0'
    };
    let tampered_sig = String::from_utf8(tampered_sig).expect("ascii");
    for (b, s) in [
        (tampered_body.clone(), Some(good.clone())),
        (body.clone(), Some(tampered_sig)),
        (body.clone(), None),
        (body.clone(), Some("sha1=abc".into())),
    ] {
        let (status, resp) = post_ci(&base, b, s).await;
        assert_eq!(status, 401, "{resp}");
        assert_eq!(resp["error"], "invalid_signature");
    }
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"{not json".to_vec(), 400, "body"),
        (serde_json::to_vec(&json!({"kind": "Blog", "slug": "x", "caption": "c", "image_url": env.images.url("/cover.png")})).expect("json"), 400, "kind"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x y", "caption": "c", "image_url": env.images.url("/cover.png")})).expect("json"), 400, "slug"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x", "image_url": env.images.url("/cover.png")})).expect("json"), 400, "caption"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x", "caption": "é".repeat(3001), "image_url": env.images.url("/cover.png")})).expect("json"), 400, "caption"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x", "caption": "c", "image_url": "http://169.254.169.254/latest"})).expect("json"), 400, "image_url"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x", "caption": "c", "image_url": "file:///etc/passwd"})).expect("json"), 400, "image_url"),
        (serde_json::to_vec(&json!({"kind": "blog", "slug": "x", "caption": "c", "image_url": env.images.url("/cover.png"), "link": "javascript:alert(1)"})).expect("json"), 400, "link"),
        (serde_json::to_vec(&json!([1, 2])).expect("json"), 400, "body"),
        // Not UTF-8: read as text once, before the JSON.
        (b"{\"kind\": \"\xff\"}".to_vec(), 400, "body: not valid JSON (invalid utf-8"),
    ];
    for (b, want, field) in cases {
        let sig = sign(&b);
        let (status, resp) = post_ci(&base, b, Some(sig)).await;
        assert_eq!(status, want, "{resp}");
        assert!(
            resp["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(field)),
            "{field}: {resp}"
        );
    }
    let huge = vec![b' '; 300 * 1024];
    let sig = sign(&huge);
    let (status, _) = post_ci(&base, huge, Some(sig)).await;
    assert_eq!(status, 413);
    let ping = reqwest::Client::new()
        .post(format!("{base}/ci"))
        .header("X-GitHub-Event", "ping")
        .header("X-Hub-Signature-256", sign(b"{\"zen\":\"hi\"}"))
        .body("{\"zen\":\"hi\"}")
        .send()
        .await
        .expect("ping");
    assert_eq!(ping.status().as_u16(), 200);
    let nowhere = reqwest::get(format!("{base}/nope")).await.expect("404");
    assert_eq!(nowhere.status().as_u16(), 404);

    assert_eq!(env.linkedin.total_requests().await, 0);
    assert_eq!(env.images.total_hits().await, 0);
    let st = env.status(&key).await;
    assert!(
        st.snapshot.draft.is_none() && st.snapshot.record.is_none(),
        "nothing stored"
    );
}

/// Posts a report, then returns its message id (the message the buttons sit under).
async fn failed_report(env: &Env, key: &postonce::key::PostKey) -> i64 {
    env.linkedin.set_create_mode(Mode::Status(429));
    let o = env.post(key, &format!("Tap to retry {key}")).await;
    env.linkedin.set_create_mode(Mode::Normal);
    assert_eq!(o.outcome, OutcomeKind::Failed);
    let sent = env.telegram.requests_for("sendMessage");
    let last = sent.last().expect("a report was sent");
    assert_eq!(
        last["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
        format!("retry:{key}")
    );
    sent.len() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn telegram_buttons_run_once_and_answer_every_callback() {
    let env = Env::start().await;
    let base = serve(&env).await;
    let key = env.key();
    let message = failed_report(&env, &key).await;
    let data = format!("retry:{key}");

    let update = callback_update(1001, OWNER, CHAT, message, &data);
    assert_eq!(post_telegram(&base, &update, None).await.0, 401);
    assert_eq!(post_telegram(&base, &update, Some("wrong")).await.0, 401);

    // A double tap: two updates with the same data at once.
    let (tap1, tap2) = (
        callback_update(1002, OWNER, CHAT, message, &data),
        callback_update(1003, OWNER, CHAT, message, &data),
    );
    let (a, b) = tokio::join!(
        post_telegram(&base, &tap1, Some(TG_SECRET)),
        post_telegram(&base, &tap2, Some(TG_SECRET))
    );
    assert_eq!((a.0, b.0), (200, 200));
    let outcomes = [
        a.1["outcome"]["outcome"].clone(),
        b.1["outcome"]["outcome"].clone(),
    ];
    assert!(outcomes.contains(&json!("posted")), "{outcomes:?}");
    assert_eq!(
        env.linkedin.create_requests(),
        2,
        "the failed attempt and one retry"
    );
    assert_eq!(env.linkedin.posts_created(), 1);

    // The same update redelivered does nothing.
    let (status, resp) = post_telegram(
        &base,
        &callback_update(1002, OWNER, CHAT, message, &data),
        Some(TG_SECRET),
    )
    .await;
    assert_eq!((status, resp["duplicate"].as_bool()), (200, Some(true)));

    // A stranger's press runs nothing, and is told so.
    let (status, _) = post_telegram(
        &base,
        &callback_update(1004, 666, CHAT, message, &data),
        Some(TG_SECRET),
    )
    .await;
    assert_eq!(status, 200);
    let answers = env.telegram.requests_for("answerCallbackQuery");
    assert!(answers.last().expect("answered")["text"]
        .as_str()
        .is_some_and(|t| t.contains("not allowed")));

    // Forged or unknown data is answered and ignored.
    for bad in ["post:blog-x", "retry:Blog-x", "retry:", "x"] {
        let (status, resp) = post_telegram(
            &base,
            &callback_update(1100 + bad.len() as i64, OWNER, CHAT, message, bad),
            Some(TG_SECRET),
        )
        .await;
        assert_eq!(status, 200, "{resp}");
        assert!(resp.get("ignored").is_some(), "{resp}");
    }
    // Non-callback updates and garbage from an authenticated sender: 200, ignored.
    assert_eq!(
        post_telegram(
            &base,
            &json!({"update_id": 1200, "message": {"text": "hi"}}),
            Some(TG_SECRET)
        )
        .await
        .0,
        200
    );
    assert_eq!(
        post_telegram(&base, &json!({"nonsense": true}), Some(TG_SECRET))
            .await
            .0,
        200
    );

    assert_eq!(env.linkedin.create_requests(), 2);
    // Every callback that got past authentication and dedupe was answered.
    assert_eq!(
        env.telegram.requests_for("answerCallbackQuery").len(),
        2 + 1 + 4
    );
    // The report under the button was edited to the new outcome.
    let edits = env.telegram.requests_for("editMessageText");
    assert!(
        edits.iter().any(|e| e["message_id"] == message
            && e["text"].as_str().is_some_and(|t| t.contains("Posted"))),
        "{edits:?}"
    );
}

#[tokio::test]
async fn done_and_force_buttons() {
    let env = Env::with(Stores::Real, &[("POSTONCE_RECONCILE_AFTER_S", "2")]).await;
    let base = serve(&env).await;
    // Unknown, then the owner says it is on LinkedIn: later runs answer already_posted.
    let key = env.key();
    env.linkedin.set_create_mode(Mode::Status(504));
    assert_eq!(
        env.post(&key, "Maybe there").await.outcome,
        OutcomeKind::Unknown
    );
    let unknown_report = env
        .telegram
        .requests_for("sendMessage")
        .last()
        .cloned()
        .expect("report");
    let buttons: Vec<String> = unknown_report["reply_markup"]["inline_keyboard"][0]
        .as_array()
        .expect("buttons")
        .iter()
        .map(|b| b["callback_data"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(buttons, vec![format!("done:{key}"), format!("force:{key}")]);
    env.linkedin.set_create_mode(Mode::Normal);
    let (_, resp) = post_telegram(
        &base,
        &callback_update(2001, OWNER, CHAT, 1, &format!("done:{key}")),
        Some(TG_SECRET),
    )
    .await;
    assert_eq!(resp["outcome"]["outcome"], "already_posted", "{resp}");
    assert_eq!(env.retry(&key).await.outcome, OutcomeKind::AlreadyPosted);
    let record = env.status(&key).await.snapshot.record.expect("record");
    assert_eq!((record.post_id, record.source.as_str()), (None, "owner"));
    assert_eq!(env.linkedin.create_requests(), 1);

    // Unknown, then Post anyway: a fresh create-post.
    let key = env.key();
    assert_eq!(
        env.post_under(Mode::Hang(Duration::from_secs(10)), &key, "Post me anyway")
            .await
            .outcome,
        OutcomeKind::Unknown
    );
    // Pressed at once: the first request may still be in flight, so nothing is sent yet.
    let (_, resp) = post_telegram(
        &base,
        &callback_update(2002, OWNER, CHAT, 1, &format!("force:{key}")),
        Some(TG_SECRET),
    )
    .await;
    assert_eq!(resp["outcome"]["outcome"], "unknown", "{resp}");
    assert_eq!(env.linkedin.create_requests(), 2, "nothing sent");
    // Past the quiet period (an age above 2 s in whole seconds), Post anyway posts.
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    let (_, resp) = post_telegram(
        &base,
        &callback_update(2003, OWNER, CHAT, 1, &format!("force:{key}")),
        Some(TG_SECRET),
    )
    .await;
    assert_eq!(resp["outcome"]["outcome"], "posted", "{resp}");
    assert_eq!(env.linkedin.posts_created(), 1);
}

/// Each outcome's report: text and buttons as the table says, at the fake.
#[tokio::test]
async fn reports_carry_the_outcomes_text_and_buttons() {
    let env = Env::start().await;
    let key = env.key();
    let posted = env.post(&key, "Report me").await;
    let report = env
        .telegram
        .requests_for("sendMessage")
        .last()
        .cloned()
        .expect("report");
    assert_eq!(report["chat_id"], CHAT);
    let text = report["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("Posted") && text.contains(&key.to_string()),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "https://www.linkedin.com/feed/update/{}/",
            posted.post_id.clone().unwrap_or_default()
        )),
        "{text}"
    );
    assert_eq!(report["reply_markup"]["inline_keyboard"], json!([]));

    env.linkedin.set_create_mode(Mode::Status(403));
    let key2 = env.key();
    env.post(&key2, "Refused").await;
    let report = env
        .telegram
        .requests_for("sendMessage")
        .last()
        .cloned()
        .expect("report");
    assert!(
        report["text"]
            .as_str()
            .is_some_and(|t| t.contains("Not posted") && t.contains("403")),
        "{report}"
    );
    assert_eq!(
        report["reply_markup"]["inline_keyboard"][0][0]["text"],
        "Retry"
    );

    // Telegram rate-limits once: the report waits as told and still arrives.
    env.linkedin.set_create_mode(Mode::Normal);
    env.telegram.set_mode(TgMode::TooManyRequests {
        retry_after_s: 1,
        times: 1,
    });
    let before = env.telegram.requests_for("sendMessage").len();
    env.post(&env.key(), "Patient report").await;
    assert_eq!(env.telegram.requests_for("sendMessage").len(), before + 2);

    // Telegram down never changes the outcome.
    env.telegram.set_mode(TgMode::Down);
    let o = env.post(&env.key(), "Nobody hears this").await;
    assert_eq!(o.outcome, OutcomeKind::Posted);
    env.telegram.set_mode(TgMode::Normal);

    // The longest key still fits Telegram's 64-byte callback data.
    let longest =
        postonce::key::PostKey::new("abcdefghijklmnop", &"s".repeat(48 - 17)).expect("key");
    let o = postonce::outcome::Outcome::new(&longest, OutcomeKind::Unknown, "");
    assert!(o.buttons().iter().all(|b| b.data.len() <= 64));
}

fn url_event(method: &str, path: &str, headers: Value, body: &str, base64: bool) -> Value {
    let body = if base64 {
        base64::engine::general_purpose::STANDARD.encode(body)
    } else {
        body.to_owned()
    };
    json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": headers,
        "requestContext": {"accountId": "anonymous", "apiId": "abc", "domainName": "abc.lambda-url.us-east-1.on.aws",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1", "userAgent": "curl"},
            "requestId": "req-1", "routeKey": "$default", "stage": "$default", "time": "03/Dec/2026:06:00:00 +0000", "timeEpoch": 1796277600000u64},
        "body": body, "isBase64Encoded": base64
    })
}

#[tokio::test]
async fn lambda_events_route_and_answer() {
    let env = Env::start().await;
    let router = Router::new(env.app.clone());
    let dl = || Deadline::after(Duration::from_secs(20));
    for base64 in [false, true] {
        let key = env.key();
        let body = String::from_utf8(draft_body(&env, &key, &format!("Lambda base64={base64}")))
            .expect("utf8");
        let headers = json!({"content-type": "application/json", "x-hub-signature-256": sign(body.as_bytes())});
        let event = url_event("POST", "/ci", headers, &body, base64);
        let out = postonce::lambda::handle(&router, event, dl(), "req-a".into())
            .await
            .expect("handled");
        assert_eq!(out["statusCode"], 200, "{out}");
        let inner: Value =
            serde_json::from_str(out["body"].as_str().expect("body")).expect("json body");
        assert_eq!(inner["outcome"], "posted");
        // Tampered base64 payload: the signature is over the decoded bytes.
        let event = url_event(
            "POST",
            "/ci",
            json!({"x-hub-signature-256": sign(b"other")}),
            &body,
            base64,
        );
        let out = postonce::lambda::handle(&router, event, dl(), "req-b".into())
            .await
            .expect("handled");
        assert_eq!(out["statusCode"], 401);
    }
    let out = postonce::lambda::handle(
        &router,
        url_event("GET", "/healthz", json!({}), "", false),
        dl(),
        "r".into(),
    )
    .await
    .expect("ok");
    assert_eq!(out["statusCode"], 200);
    let out = postonce::lambda::handle(
        &router,
        url_event("GET", "/elsewhere", json!({}), "", false),
        dl(),
        "r".into(),
    )
    .await
    .expect("ok");
    assert_eq!(out["statusCode"], 404);

    // Console: a draft, then the same key with no draft fields.
    let key = env.key();
    let console = json!({"kind": key.kind(), "slug": key.slug(), "caption": "From the console", "image_url": env.images.url("/cover.png")});
    let out = postonce::lambda::handle(&router, console, dl(), "req-c".into())
        .await
        .expect("console");
    assert_eq!(out["outcome"], "posted", "{out}");
    let out = postonce::lambda::handle(
        &router,
        json!({"kind": key.kind(), "slug": key.slug()}),
        dl(),
        "req-d".into(),
    )
    .await
    .expect("console");
    assert_eq!(out["outcome"], "already_posted");
    let err = postonce::lambda::handle(
        &router,
        json!({"kind": "Nope", "slug": "x"}),
        dl(),
        "req-e".into(),
    )
    .await
    .expect_err("bad input");
    assert!(err.contains("kind"), "{err}");
    let err = postonce::lambda::handle(&router, json!({"hello": "world"}), dl(), "req-f".into())
        .await
        .expect_err("unknown");
    assert!(err.contains("unrecognised event"), "{err}");
    let err = postonce::lambda::handle(&router, json!([1, 2, 3]), dl(), "req-g".into())
        .await
        .expect_err("unknown");
    assert!(err.contains("unrecognised event"), "{err}");
    let sweep =
        postonce::lambda::handle(&router, json!({"postonce": "sweep"}), dl(), "req-h".into())
            .await
            .expect("sweep");
    assert!(sweep.get("examined").is_some(), "{sweep}");
}

/// Five `unknown` targets make ten buttons: the report keeps one keyboard row per target (and
/// the draft-wide buttons on their own row), so the Bot API, which refuses a row wider than
/// 8 buttons (the fake does too), takes it. In one row it was refused and never arrived.
#[tokio::test]
async fn a_report_of_five_unknown_targets_arrives_one_row_per_target() {
    use postonce::networks::Network;
    use postonce::notify::telegram::{TelegramClient, TelegramNotifier};
    use postonce::notify::Notifier;
    use support::telegram::{TelegramFake, MAX_ROW_BUTTONS};

    let fake = TelegramFake::start(support::env::TG_TOKEN).await;
    let client = Arc::new(TelegramClient::new(
        postonce::app::http_client().expect("client"),
        &fake.uri(),
        postonce::config::Secret::new(support::env::TG_TOKEN),
    ));
    let notifier = TelegramNotifier::new(client, CHAT, Duration::from_secs(5));
    let key = postonce::key::PostKey::new("blog", "five-unknown").expect("key");
    let parts: Vec<_> = Network::ALL
        .into_iter()
        .map(|n| {
            postonce::outcome::Outcome::new(&key.on(n), OutcomeKind::Unknown, "no clear answer")
                .retryable(true)
        })
        .collect();
    let o = postonce::outcome::Outcome::combine(&key, parts);
    assert_eq!(o.buttons().len(), 2 * Network::ALL.len());
    notifier
        .report(&o, None)
        .await
        .expect("the Bot API takes the report");
    let (_, markup) = fake.message(1).expect("the report arrived");
    let rows = markup["inline_keyboard"].as_array().expect("rows").clone();
    assert_eq!(
        rows.len(),
        Network::ALL.len(),
        "one row per target: {markup}"
    );
    for (row, n) in rows.iter().zip(Network::ALL) {
        let data: Vec<&str> = row
            .as_array()
            .expect("row")
            .iter()
            .map(|b| b["callback_data"].as_str().unwrap_or_default())
            .collect();
        assert!(data.len() <= MAX_ROW_BUTTONS);
        assert!(
            data.iter().all(|d| d.ends_with(&format!("@{}", n.as_str()))
                || (n == Network::Linkedin && d.ends_with(&key.to_string()))),
            "{n:?}: {data:?}"
        );
    }

    // A scheduled draft: its Post now / Cancel sit on their own row.
    let scheduled = postonce::outcome::Outcome::combine(
        &key,
        Network::ALL
            .into_iter()
            .map(|n| postonce::outcome::Outcome::new(&key.on(n), OutcomeKind::Scheduled, "later"))
            .collect(),
    );
    let rows = scheduled.button_rows();
    assert_eq!(rows.len(), 1);
    let data: Vec<String> = rows[0].iter().map(|b| b.data.clone()).collect();
    assert_eq!(data, [format!("now:{key}"), format!("cancel:{key}")]);
}

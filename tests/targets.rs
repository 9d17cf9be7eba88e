//! Issue 9's proof: one draft, three targets (LinkedIn, X, a Telegram channel), each exactly
//! once. Real redis-server and DynamoDB Local; LinkedIn, X, the channel and the owner's report
//! chat are wire-format fakes, and every count is taken at the fakes:
//!
//! - race: 50 racing runs of one draft, across 5 sets of clients, make one post per target
//!   with every duplicate check OFF (LinkedIn, X; the channel has none);
//! - partial: X refuses connections, LinkedIn and the channel post → `partial` (HTTP 202,
//!   exit 6) with exactly one button, `retry:<key>@x`; that button, once X is back, posts to X
//!   once, sends nothing to LinkedIn or the channel, and edits the report to show all three;
//! - ambiguous, per network: X accepts then hangs → `unknown`, and after the quiet period the
//!   next run finds the post by reading and records it without a create; X's read refused →
//!   `unknown`, the owner asked, nothing re-sent; the channel accepts then hangs → `unknown` at
//!   once, and neither retries nor the sweeper re-send it (only *Post anyway* does);
//! - text rules at input time through the signed CI route: a caption too long for one target
//!   (X 280 weighted, the channel 1,024 UTF-16 units, LinkedIn 3,000) is a 400 naming the
//!   target and its limit and stores nothing; malformed `captions` / `targets` too;
//! - secrets: X's four credentials never reach the logs, the outcome JSON or the reports.
//!
//! Each test prints its figures.

use crate::support;

use support::env::sign;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postonce::budget::Deadline;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::triggers::{HttpRequest, Router};
use serde_json::{json, Value};
use support::env::{Env, Stores, CHANNEL, CHAT, OWNER, TG_SECRET};
use support::linkedin::DuplicateCheck as LinkedInCheck;
use support::services::free_port;
use support::telegram::callback_update;
use support::tg_channel::ChannelMode;
use support::x::{DuplicateCheck as XCheck, Mode as XMode, Read};

const ALL: [Network; 3] = [Network::Linkedin, Network::X, Network::Telegram];

/// A quiet period of 2 s: above every create budget these tests set (1.5 s for LinkedIn, X and
/// Telegram), so a re-send can never race the request it reconciles.
const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "2");

/// A hang long enough that the 1.5 s budget gives up first, although the post was made.
const HANG: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The three-target environment, every duplicate check off: a second create would be a second
/// post at the fake.
async fn env_with(overrides: &[(&str, &str)]) -> Env {
    let env = Env::with_targets(Stores::Real, overrides).await;
    env.linkedin.set_duplicate_check(LinkedInCheck::Off);
    env.x().set_duplicate_check(XCheck::Off);
    env
}

/// One target's entry in an outcome's `targets`.
fn target(o: &Outcome, n: Network) -> TargetOutcome {
    o.targets
        .as_ref()
        .and_then(|t| t.get(&n))
        .cloned()
        .unwrap_or_else(|| panic!("no {} in the outcome's targets: {o:?}", n.as_str()))
}

fn target_kinds(o: &Outcome) -> BTreeMap<Network, OutcomeKind> {
    o.targets
        .as_ref()
        .map(|t| t.iter().map(|(n, e)| (*n, e.outcome)).collect())
        .unwrap_or_default()
}

fn button_data(o: &Outcome) -> Vec<String> {
    o.buttons().into_iter().map(|b| b.data).collect()
}

/// The callback data of a Bot API `reply_markup`, every row.
fn markup_data(markup: &Value) -> Vec<String> {
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| b["callback_data"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn markup_texts(markup: &Value) -> Vec<String> {
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The newest report about `key` in the owner's chat, as it reads now: (message id, text,
/// reply_markup).
fn report_of(env: &Env, key: &PostKey) -> (i64, String, Value) {
    let sent = i64::try_from(env.telegram.requests_for("sendMessage").len()).expect("count");
    (1..=sent)
        .rev()
        .find_map(|id| {
            let (text, markup) = env.telegram.message(id)?;
            text.contains(&key.to_string())
                .then_some((id, text, markup))
        })
        .unwrap_or_else(|| panic!("no report about {key} in {sent} messages"))
}

/// Waits until a run started now could reconcile an attempt made before now: the pipeline
/// counts whole seconds and re-sends only once the age exceeds the quiet period.
async fn past_the_quiet_period(env: &Env) {
    tokio::time::sleep(env.quiet_period() + Duration::from_millis(1_100)).await;
}

fn http(path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        path: path.into(),
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: bytes::Bytes::from(body),
    }
}

fn dl() -> Deadline {
    Deadline::after(Duration::from_secs(20))
}

/// `POST /ci`, signed, through the router every transport uses.
async fn ci(router: &Router, body: &Value) -> (u16, Value) {
    let raw = serde_json::to_vec(body).expect("json");
    let sig = sign(&raw);
    let resp = router
        .handle(
            http(
                "/ci",
                &[
                    ("content-type", "application/json"),
                    ("x-hub-signature-256", &sig),
                ],
                raw,
            ),
            dl(),
            postonce::pipeline::new_run_id(),
        )
        .await;
    (resp.status, support::answer(&resp))
}

/// The owner presses a button under the report `message_id` (`POST /telegram`).
async fn press(router: &Router, update_id: i64, message_id: i64, data: &str) -> Value {
    let update = callback_update(update_id, OWNER, CHAT, message_id, data);
    let resp = router
        .handle(
            http(
                "/telegram",
                &[("x-telegram-bot-api-secret-token", TG_SECRET)],
                serde_json::to_vec(&update).expect("json"),
            ),
            dl(),
            postonce::pipeline::new_run_id(),
        )
        .await;
    let body = support::answer(&resp);
    assert_eq!(resp.status, 200, "{body}");
    body
}

/// A CI body for `key`.
fn ci_body(env: &Env, key: &PostKey, caption: &str) -> Value {
    json!({
        "kind": key.kind(), "slug": key.slug(), "caption": caption,
        "image_url": env.images.url("/cover.png"),
    })
}

/// The X post whose text carries `needle` (every caption here carries its key).
fn x_posts_with(env: &Env, needle: &str) -> Vec<support::x::Post> {
    env.x()
        .posts()
        .into_iter()
        .filter(|p| p.text.contains(needle))
        .collect()
}

/// `posted:<key>` / `posted:<key>@<network>` as stored now.
async fn record(env: &Env, key: &PostKey, n: Network) -> Option<postonce::record::PostedRecord> {
    env.status(&key.on(n)).await.snapshot.record
}

fn claim(env: &Env, key: &PostKey, n: Network) -> String {
    env.redis().cli(&["GET", &format!("claim:{}", key.on(n))])
}

// ---------------------------------------------------------------------------------------------
// Race.

/// 50 runs of one three-target draft started together across 5 sets of clients (5 Lambda
/// sandboxes): exactly one create per target at the fakes, whose duplicate checks are off.
///
/// Watched red (src patched by hand, not committed), with the X lane's claim taken under the
/// draft's bare key, i.e. LinkedIn's `claim:<key>` (`acquire` and the `ClaimGuard` in
/// src/pipeline/guard.rs): a later run's X lane gets that claim as soon as LinkedIn's lane (fast
/// here) released it, while the first run's X lane is still uploading. Result: "one media
/// upload at X" failed with 9 uploads (rule 1: no upload without the target's claim); the
/// conditional intent, the second lock, still stopped the creates. With the X intent also made
/// unconditional (`update_draft(.., &[], ..)` in src/pipeline/publish.rs), "exactly one run
/// posted to x" failed with 4 and then 11 X posts at the fake (11 creates), LinkedIn and the
/// channel still 1 each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_racing_runs_post_once_per_target() {
    let env = env_with(&[]).await;
    // LinkedIn answers fast and X slowly: while the first run's X lane is still uploading
    // (before its intent exists), its LinkedIn lane is done and most later runs meet
    // LinkedIn's record. So X's own claim is the only thing between a later run and a second
    // X post; the channel sits in between.
    env.linkedin.set_delay(Duration::from_millis(50));
    env.x().set_delay(Duration::from_millis(250));
    let key = env.key();
    let content = env.announcement(&key);
    let mut pool = vec![env.app.clone()];
    for _ in 1..5 {
        pool.push(env.another_app().await);
    }
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..50u64 {
        let app = pool[usize::try_from(i).expect("small") % pool.len()].clone();
        let req = env.request(&key, Some(content.clone()));
        let dl = env.deadline();
        // The first ten start together; the rest arrive every 20 ms over the next 0.8 s, while
        // the first run's lanes are uploading, posting, recording and releasing, so that runs
        // meet each target at every stage (claim held, posted but not yet recorded, recorded).
        let stagger = Duration::from_millis(20 * i.saturating_sub(10));
        handles.push(tokio::spawn(async move {
            tokio::time::sleep(stagger).await;
            app.pipeline.run(req, dl).await
        }));
    }
    let mut outcomes = Vec::new();
    for h in handles {
        outcomes.push(h.await.expect("run task"));
    }
    let took = started.elapsed();

    let mut per_target: BTreeMap<Network, BTreeMap<&'static str, usize>> = BTreeMap::new();
    let mut top: BTreeMap<&'static str, usize> = BTreeMap::new();
    for o in &outcomes {
        *top.entry(o.outcome.as_str()).or_default() += 1;
        let kinds = target_kinds(o);
        assert_eq!(
            kinds.keys().copied().collect::<Vec<_>>(),
            ALL.to_vec(),
            "every run answers for the three targets: {o:?}"
        );
        for (n, k) in kinds {
            *per_target
                .entry(n)
                .or_default()
                .entry(k.as_str())
                .or_default() += 1;
            assert!(
                matches!(
                    k,
                    OutcomeKind::Posted | OutcomeKind::BeingPosted | OutcomeKind::AlreadyPosted
                ),
                "{}: {o:?}",
                n.as_str()
            );
        }
        assert!(
            matches!(
                o.outcome,
                OutcomeKind::Posted
                    | OutcomeKind::AlreadyPosted
                    | OutcomeKind::BeingPosted
                    | OutcomeKind::Partial
            ),
            "{o:?}"
        );
    }
    println!(
        "race, 3 targets, duplicate checks OFF: 50 runs over 5 apps in {took:?}; outcomes {top:?}"
    );
    for (n, counts) in &per_target {
        println!("  {:>8}: {counts:?}", n.as_str());
    }
    let (li, x, ch) = (&env.linkedin, env.x(), env.channel());
    println!(
        "  at the fakes: LinkedIn initializeUpload {} / uploads {} / create-post requests {} / posts {}; X media uploads {} / create requests {} / posts {}; channel sendPhoto requests {} / messages {}",
        li.init_requests(),
        li.uploads(),
        li.create_requests(),
        li.posts_created(),
        x.upload_requests(),
        x.create_requests(),
        x.posts_created(),
        ch.send_photo_requests(),
        ch.messages_posted()
    );
    for n in ALL {
        assert_eq!(
            per_target[&n].get("posted").copied().unwrap_or(0),
            1,
            "exactly one run posted to {}: {:?}",
            n.as_str(),
            per_target[&n]
        );
    }
    // Rule 1 per target: nothing is uploaded without that target's claim, so only the run
    // that holds it uploads.
    assert_eq!(li.init_requests(), 1, "one initializeUpload at LinkedIn");
    assert_eq!(x.upload_requests(), 1, "one media upload at X");
    assert_eq!(li.create_requests(), 1, "one create-post at LinkedIn");
    assert_eq!(li.posts_created(), 1);
    assert_eq!(x.create_requests(), 1, "one create at X");
    assert_eq!(x.posts_created(), 1);
    assert_eq!(ch.send_photo_requests(), 1, "one sendPhoto to the channel");
    assert_eq!(ch.messages_posted(), 1);

    // Every target is recorded with the id its network gave, every claim is released, and one
    // more run touches nothing.
    let ids = [
        (Network::Linkedin, li.posts()[0].urn.clone()),
        (Network::X, x.posts()[0].id.clone()),
        (Network::Telegram, ch.messages()[0].message_id.to_string()),
    ];
    for (n, id) in &ids {
        let r = record(&env, &key, *n)
            .await
            .unwrap_or_else(|| panic!("{} is recorded", n.as_str()));
        assert_eq!(r.post_id.as_deref(), Some(id.as_str()), "{}", n.as_str());
        assert_eq!(
            claim(&env, &key, *n),
            "",
            "{}'s claim is released",
            n.as_str()
        );
    }
    let before = (
        li.total_requests().await,
        x.requests(),
        ch.total_requests().await,
    );
    let again = env.retry(&key).await;
    assert_eq!(again.outcome, OutcomeKind::AlreadyPosted, "{again:?}");
    for (n, id) in &ids {
        let t = target(&again, *n);
        assert_eq!(t.outcome, OutcomeKind::AlreadyPosted, "{}", n.as_str());
        assert_eq!(t.id.as_deref(), Some(id.as_str()), "{}", n.as_str());
    }
    assert_eq!(
        (
            li.total_requests().await,
            x.requests(),
            ch.total_requests().await
        ),
        before,
        "a recorded target is never touched again"
    );
}

// ---------------------------------------------------------------------------------------------
// Partial.

/// X refuses connections (nothing sent); LinkedIn and the channel post. The run is `partial`
/// (HTTP 202 on the CI route, exit 6 from `postonce post`) with one button, `retry:<key>@x`.
/// Pressed once X is reachable, it posts to X once, sends nothing to LinkedIn or the channel,
/// and edits the report to show all three targets on their networks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_unreachable_is_partial_and_its_retry_posts_only_x() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    let env = env_with(&[("X_API_URL", &closed)]).await;
    let router = Router::new(env.app.clone());
    let key = env.key();
    let (caption, link) = support::env::announcement(&key);
    let mut body = ci_body(&env, &key, &caption);
    body["link"] = json!(link);
    let (status, out) = ci(&router, &body).await;
    println!("CI route with X refusing connections: {status} {out}");
    assert_eq!(status, 202, "{out}");
    assert_eq!(out["outcome"], "partial", "{out}");
    assert_eq!(out["key"], key.to_string());
    assert_eq!(out["retryable"], true, "{out}");
    let t = &out["targets"];
    assert_eq!(
        t.as_object().map(|o| o.len()),
        Some(3),
        "three targets: {out}"
    );
    assert_eq!(t["linkedin"]["outcome"], "posted", "{out}");
    let urn = t["linkedin"]["id"].as_str().unwrap_or_default().to_owned();
    assert!(urn.starts_with("urn:li:share:"), "{out}");
    assert!(t["linkedin"]["url"]
        .as_str()
        .is_some_and(|u| u.starts_with("https://www.linkedin.com/feed/update/urn:li:share:")));
    assert_eq!(t["telegram"]["outcome"], "posted", "{out}");
    let message_id = env.channel().messages()[0].message_id;
    assert_eq!(t["telegram"]["id"], message_id.to_string(), "{out}");
    assert_eq!(
        t["telegram"]["url"],
        format!("https://t.me/{CHANNEL}/{message_id}"),
        "{out}"
    );
    assert_eq!(t["x"]["outcome"], "failed", "{out}");
    assert_eq!(t["x"]["retryable"], true, "{out}");
    assert!(t["x"].get("id").is_none(), "{out}");
    assert_eq!(env.x().requests(), 0, "X was never reached");
    assert_eq!(env.linkedin.posts_created(), 1);
    assert_eq!(env.channel().messages_posted(), 1);

    // The report: one block per target, one button.
    let (report, text, markup) = report_of(&env, &key);
    println!("the report ({report}):\n{text}\nbuttons {markup}");
    assert_eq!(markup_data(&markup), vec![format!("retry:{key}@x")]);
    assert_eq!(markup_texts(&markup), vec!["Retry X".to_owned()]);

    // The CLI's exit code for the same situation (another draft, the same configuration).
    let other = env.key();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args([
            "post",
            "--kind",
            other.kind(),
            "--slug",
            other.slug(),
            "--json",
        ])
        .args(["--caption", &format!("Partly out there {other}")])
        .args(["--image", &env.images.url("/cover.png")])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "off")
        .envs(&env.vars)
        .output()
        .expect("run postonce post");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    println!(
        "postonce post with X refusing connections: exit {:?} {json}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(6), "{json}");
    assert_eq!(json["outcome"], "partial", "{json}");
    assert_eq!(json["targets"]["x"]["outcome"], "failed", "{json}");

    // X is back: the owner presses Retry X under the first report, in a process that reaches
    // X. Nothing goes to LinkedIn or the channel.
    let li_before = env.linkedin.total_requests().await;
    let ch_before = env.channel().total_requests().await;
    let img_before = env.images.total_hits().await;
    let back = env.app_with(&[("X_API_URL", &env.x().uri())]).await;
    let resp = press(
        &Router::new(back.clone()),
        5001,
        report,
        &format!("retry:{key}@x"),
    )
    .await;
    println!("Retry X: {resp}");
    assert_eq!(
        resp["outcome"]["targets"]["x"]["outcome"], "posted",
        "{resp}"
    );
    let posts = x_posts_with(&env, &key.to_string());
    assert_eq!(posts.len(), 1, "one X post for the draft");
    assert_eq!(env.x().create_requests(), 1, "X posted once");
    assert_eq!(resp["outcome"]["targets"]["x"]["id"], posts[0].id, "{resp}");
    assert_eq!(
        env.linkedin.total_requests().await - li_before,
        0,
        "no request at LinkedIn during the retry"
    );
    assert_eq!(
        env.channel().total_requests().await - ch_before,
        0,
        "no request at the channel during the retry"
    );
    println!(
        "retry: X creates {}, LinkedIn requests +0, channel requests +0, image fetches +{}",
        env.x().create_requests(),
        env.images.total_hits().await - img_before
    );
    assert_eq!(
        record(&env, &key, Network::X).await.and_then(|r| r.post_id),
        Some(posts[0].id.clone())
    );

    // The report under the button was edited, and shows every target of the draft as done.
    let edits: Vec<Value> = env
        .telegram
        .requests_for("editMessageText")
        .into_iter()
        .filter(|e| e["message_id"] == report)
        .collect();
    assert!(!edits.is_empty(), "the report was edited");
    let (text, markup) = env.telegram.message(report).expect("the report");
    println!("the edited report:\n{text}\nbuttons {markup}");
    for (n, label) in [
        (Network::Linkedin, "LinkedIn"),
        (Network::X, "X"),
        (Network::Telegram, "the Telegram channel"),
    ] {
        assert!(
            text.contains(&format!("Posted to {label}"))
                || text.contains(&format!("Already on {label}")),
            "{} is shown done in:\n{text}",
            n.as_str()
        );
    }
    assert!(text.contains(&urn), "the LinkedIn post: {text}");
    assert!(text.contains(&posts[0].id), "the X post: {text}");
    assert!(
        text.contains(&format!("https://t.me/{CHANNEL}/{message_id}")),
        "the channel post: {text}"
    );
    assert!(
        !text.contains("Partly") && !text.contains("Not posted"),
        "{text}"
    );
    assert!(markup_data(&markup).is_empty(), "no button left: {markup}");

    // Everything is on its network: Retry (all pending targets) sends nothing anywhere.
    let x_before = env.x().requests();
    let li_before = env.linkedin.total_requests().await;
    let again = back
        .pipeline
        .run(env.request(&key, None), env.deadline())
        .await;
    assert_eq!(again.outcome, OutcomeKind::AlreadyPosted, "{again:?}");
    assert_eq!(env.x().requests(), x_before);
    assert_eq!(env.linkedin.total_requests().await, li_before);
    assert_eq!(
        env.channel().send_photo_requests(),
        2,
        "this draft's and the CLI draft's"
    );
}

// ---------------------------------------------------------------------------------------------
// Ambiguous, per network.

/// X accepts a create and answers only after the budget: `unknown`, asking the owner. Inside
/// the quiet period nothing is sent. After it, the next run reads the account's recent posts,
/// finds the exact text, records its id and creates nothing. With the read refused (the API
/// tier), the run stays `unknown`, asks the owner and re-sends nothing; *It's on X* records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_in_doubt_is_found_by_reading_or_left_to_the_owner() {
    let env = env_with(&[QUIET]).await;
    let x = env.x();
    x.set_create_mode(XMode::AcceptThenHang(HANG));
    let found = env.key();
    let refused = env.key();
    let run = |key: &PostKey| {
        let req = env.request_to(key, Some(env.announcement(key)), &[Network::X]);
        env.app.pipeline.run(req, env.deadline())
    };
    let (a, b) = tokio::join!(run(&found), run(&refused));
    for (key, o) in [(&found, &a), (&refused, &b)] {
        println!("X accepts, then hangs past its budget: {key}: {o:?}");
        assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
        assert_eq!(target(o, Network::X).outcome, OutcomeKind::Unknown);
        assert_eq!(
            button_data(o),
            vec![format!("done:{key}@x"), format!("force:{key}@x")]
        );
        let (_, text, markup) = report_of(&env, key);
        assert_eq!(
            markup_data(&markup),
            vec![format!("done:{key}@x"), format!("force:{key}@x")],
            "{text}"
        );
        assert_eq!(markup_texts(&markup)[0], "It's on X");
    }
    assert_eq!(x.create_requests(), 2);
    assert_eq!(x.posts_created(), 2, "both posts exist at X");
    // From here a second create would be a second post.
    x.set_create_mode(XMode::Normal);

    // Inside the quiet period the first request may still be in flight: nothing is sent.
    let early = env
        .app
        .pipeline
        .run(env.request_to(&found, None, &[Network::X]), env.deadline())
        .await;
    assert_eq!(early.outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(x.create_requests(), 2, "no create inside the quiet period");

    past_the_quiet_period(&env).await;
    let reads = x.timeline_requests();
    let o = env
        .app
        .pipeline
        .run(env.request_to(&found, None, &[Network::X]), env.deadline())
        .await;
    let post = x_posts_with(&env, &found.to_string()).remove(0);
    println!(
        "after the quiet period, read back: {o:?}; timeline reads {}",
        x.timeline_requests() - reads
    );
    assert!(
        matches!(o.outcome, OutcomeKind::AlreadyPosted | OutcomeKind::Posted),
        "{o:?}"
    );
    assert_eq!(
        target(&o, Network::X).id.as_deref(),
        Some(post.id.as_str()),
        "{o:?}"
    );
    assert!(
        x.timeline_requests() > reads,
        "the account's posts were read"
    );
    assert_eq!(x.create_requests(), 2, "found by reading: no create sent");
    assert_eq!(x.posts_created(), 2);
    assert_eq!(
        record(&env, &found, Network::X)
            .await
            .and_then(|r| r.post_id),
        Some(post.id.clone())
    );

    // The read is refused: the owner is asked, nothing is re-sent.
    x.set_read_mode(Read::Refused);
    let o = env
        .app
        .pipeline
        .run(
            env.request_to(&refused, None, &[Network::X]),
            env.deadline(),
        )
        .await;
    println!("after the quiet period, read refused: {o:?}");
    assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
    assert_eq!(
        button_data(&o),
        vec![format!("done:{refused}@x"), format!("force:{refused}@x")]
    );
    let (report, text, markup) = report_of(&env, &refused);
    assert_eq!(
        markup_data(&markup),
        vec![format!("done:{refused}@x"), format!("force:{refused}@x")],
        "{text}"
    );
    assert!(text.contains("It's on X"), "the owner is asked: {text}");
    assert_eq!(
        x.create_requests(),
        2,
        "no re-send when the read is refused"
    );
    assert_eq!(x.posts_created(), 2);
    assert!(record(&env, &refused, Network::X).await.is_none());

    // The owner checks X and presses "It's on X": recorded without an id, nothing sent.
    let resp = press(
        &Router::new(env.app.clone()),
        6001,
        report,
        &format!("done:{refused}@x"),
    )
    .await;
    println!("It's on X: {resp}");
    assert_eq!(resp["outcome"]["outcome"], "already_posted", "{resp}");
    let r = record(&env, &refused, Network::X)
        .await
        .expect("recorded by the owner");
    assert_eq!((r.post_id, r.source.as_str()), (None, "owner"));

    // Both are recorded: later runs do not even call X.
    let calls = x.requests();
    for key in [&found, &refused] {
        let o = env.retry(key).await;
        assert_eq!(
            target(&o, Network::X).outcome,
            OutcomeKind::AlreadyPosted,
            "{o:?}"
        );
    }
    assert_eq!(x.requests(), calls, "recorded targets are never touched");
    assert_eq!(x.create_requests(), 2);
    assert_eq!(x.max_posts_per_text(), 1, "no duplicate at X");
}

/// The channel accepts a sendPhoto and answers only after the budget. A bot cannot see what
/// it sent, so the channel target is `unknown` at once, with *It's in the channel* and *Post
/// anyway*; LinkedIn and X post (`partial`). Retries and the sweeper never re-send it, before
/// or after the quiet period. Only the owner's *Post anyway* posts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_in_doubt_is_unknown_at_once_and_never_resent() {
    let env = env_with(&[QUIET]).await;
    let ch = env.channel();
    ch.set_mode(ChannelMode::AcceptThenHang(HANG));
    let key = env.key();
    let first = env
        .post(&key, &format!("To the channel, maybe {key}"))
        .await;
    println!("the channel accepts, then hangs past its budget: {first:?}");
    assert_eq!(first.outcome, OutcomeKind::Partial, "{first:?}");
    assert_eq!(first.http_status(), 202);
    assert_eq!(first.exit_code(), 6);
    assert_eq!(
        target_kinds(&first),
        BTreeMap::from([
            (Network::Linkedin, OutcomeKind::Posted),
            (Network::X, OutcomeKind::Posted),
            (Network::Telegram, OutcomeKind::Unknown),
        ])
    );
    assert_eq!(ch.send_photo_requests(), 1);
    assert_eq!(ch.messages_posted(), 1, "the message exists in the channel");
    let (report, text, markup) = report_of(&env, &key);
    println!("the report ({report}):\n{text}\nbuttons {markup}");
    assert_eq!(
        markup_data(&markup),
        vec![
            format!("done:{key}@telegram"),
            format!("force:{key}@telegram")
        ]
    );
    assert_eq!(
        markup_texts(&markup),
        vec![
            "It's in the channel".to_owned(),
            "Post anyway to the Telegram channel".to_owned()
        ]
    );
    ch.set_mode(ChannelMode::Normal);

    // At once, after the quiet period, and from the sweeper: never re-sent automatically.
    let o = env.retry(&key).await;
    assert_eq!(target(&o, Network::Telegram).outcome, OutcomeKind::Unknown);
    past_the_quiet_period(&env).await;
    let o = env.retry(&key).await;
    assert_eq!(
        target(&o, Network::Telegram).outcome,
        OutcomeKind::Unknown,
        "{o:?}"
    );
    let sweep = env.sweep().await;
    println!(
        "sweep: runs {:?}, reminded {:?}",
        sweep
            .runs
            .iter()
            .map(|o| (o.key.clone(), o.outcome))
            .collect::<Vec<_>>(),
        sweep.reminded
    );
    println!(
        "after 2 retries and a sweep: sendPhoto requests {}, messages {}",
        ch.send_photo_requests(),
        ch.messages_posted()
    );
    assert_eq!(ch.send_photo_requests(), 1, "0 re-sends");
    assert_eq!(ch.messages_posted(), 1);
    assert!(record(&env, &key, Network::Telegram).await.is_none());
    assert_eq!(env.linkedin.create_requests(), 1);
    assert_eq!(env.x().create_requests(), 1);

    // The owner decides: Post anyway. Only the channel is sent to.
    let resp = press(
        &Router::new(env.app.clone()),
        7001,
        report,
        &format!("force:{key}@telegram"),
    )
    .await;
    println!("Post anyway to the channel: {resp}");
    assert_eq!(
        resp["outcome"]["targets"]["telegram"]["outcome"], "posted",
        "{resp}"
    );
    assert_eq!(ch.send_photo_requests(), 2);
    assert_eq!(env.linkedin.create_requests(), 1);
    assert_eq!(env.x().create_requests(), 1);
    let id = ch.messages()[1].message_id.to_string();
    assert_eq!(
        record(&env, &key, Network::Telegram)
            .await
            .and_then(|r| r.post_id),
        Some(id)
    );
}

// ---------------------------------------------------------------------------------------------
// Text rules at input time.

/// Whether an error body names `network` (as a word) and `limit` (digits, thousands
/// separators ignored).
fn names(body: &Value, network: &str, limit: &str) -> bool {
    let text = body.to_string().to_lowercase().replace([',', '\u{a0}'], "");
    let word = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == network);
    word && text.contains(limit)
}

/// Nothing of `key` is stored anywhere: no draft item, no record, no claim, for any target.
async fn nothing_stored(env: &Env, key: &PostKey) {
    for n in ALL {
        let snap = env.status(&key.on(n)).await.snapshot;
        assert!(
            snap.draft.is_none(),
            "draft:{} was stored: {:?}",
            key.on(n),
            snap.draft
        );
        assert!(snap.record.is_none(), "posted:{} exists", key.on(n));
    }
    assert_eq!(
        env.redis().cli(&["KEYS", &format!("*{key}*")]),
        "",
        "no claim or other Redis key"
    );
}

/// A refused CI body: what it shows, the fields it adds to a good body, and the target and
/// limit the answer must name.
type Case = (&'static str, Value, Option<(&'static str, &'static str)>);

/// Over-long captions, counted each network's way, through the signed CI route: 400 naming
/// the target and its limit, nothing stored, nothing sent. Malformed `captions` and `targets`
/// too. At the limits exactly, all three post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caption_too_long_for_any_target_is_refused_and_nothing_is_stored() {
    let env = env_with(&[]).await;
    let router = Router::new(env.app.clone());
    let x281 = "a".repeat(281);
    // 513 emoji: 513 characters, 1,026 UTF-16 units.
    let tg1026 = "😀".repeat(513);
    let li3001 = "a".repeat(3001);
    let cases: Vec<Case> = vec![
        (
            "X, 281 weighted",
            json!({"captions": {"x": x281}}),
            Some(("x", "280")),
        ),
        (
            "the channel, 1,026 UTF-16 units in 513 characters",
            json!({"captions": {"telegram": tg1026}}),
            Some(("telegram", "1024")),
        ),
        (
            "LinkedIn, 3,001 characters",
            json!({"captions": {"linkedin": li3001}}),
            Some(("linkedin", "3000")),
        ),
        (
            "the draft's caption, too long for X only",
            json!({"caption": "b".repeat(281)}),
            Some(("x", "280")),
        ),
        (
            "captions for an unknown network",
            json!({"captions": {"myspace": "hi"}}),
            None,
        ),
        (
            "a caption that is not a string",
            json!({"captions": {"x": 5}}),
            None,
        ),
        (
            "captions that are not an object",
            json!({"captions": "hi"}),
            None,
        ),
        (
            "an unknown target",
            json!({"targets": ["linkedin", "myspace"]}),
            None,
        ),
    ];
    for (what, extra, named) in cases {
        let key = env.key();
        let mut body = ci_body(&env, &key, &format!("Fits everywhere {key}"));
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (status, resp) = ci(&router, &body).await;
        println!("{what}: {status} {resp}");
        assert_eq!(status, 400, "{what}: {resp}");
        if let Some((network, limit)) = named {
            assert!(
                names(&resp, network, limit),
                "{what}: the answer names {network} and {limit}: {resp}"
            );
        }
        nothing_stored(&env, &key).await;
    }
    assert_eq!(env.linkedin.total_requests().await, 0);
    assert_eq!(env.x().requests(), 0);
    assert_eq!(env.channel().total_requests().await, 0);
    assert_eq!(
        env.images.total_hits().await,
        0,
        "not even the image was fetched"
    );
    assert!(env.telegram.requests_for("sendMessage").is_empty());

    // Exactly at each limit, counted each network's way, everything posts. X counts the URL
    // as 23 (the text has 357 characters); the channel counts an emoji as 2 UTF-16 units.
    let key = env.key();
    let x280 = format!("{} https://example.com/{}", "a".repeat(256), "p".repeat(80));
    assert_eq!(postonce::networks::x::weighted_len(&x280), 280);
    let tg1024 = "😀".repeat(512);
    let li3000 = format!("{key} {}", "c".repeat(2999 - key.to_string().len()));
    assert_eq!(li3000.chars().count(), 3000);
    let mut body = ci_body(&env, &key, &format!("At the limits {key}"));
    body["captions"] = json!({"linkedin": li3000, "x": x280, "telegram": tg1024});
    let (status, resp) = ci(&router, &body).await;
    println!("at the limits: {status} {resp}");
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["outcome"], "posted", "{resp}");
    assert_eq!(env.x().posts()[0].text, x280);
    assert_eq!(
        env.channel().messages()[0].caption.encode_utf16().count(),
        1024
    );
    assert_eq!(env.linkedin.posts()[0].commentary.chars().count(), 3000);
}

// ---------------------------------------------------------------------------------------------
// Secrets.

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// X's four credentials (and the suite's other secrets) never appear in the logs, at TRACE
/// for every crate, nor in the outcome JSON or the owner's reports, across X's answers:
/// posted, 401, 429, 5xx in doubt, a refused read after the quiet period, connection refused,
/// and doctor with a wrong secret; and the bot token when the channel's Bot API (whose URLs
/// carry it) cannot be reached. The runtime is single-threaded so that the scoped capture
/// sees every task of the runs.
#[tokio::test]
async fn x_secrets_stay_out_of_logs_outcomes_and_reports() {
    use support::x::{ACCESS_TOKEN, ACCESS_TOKEN_SECRET, CONSUMER_KEY, CONSUMER_SECRET};
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let scope = tracing::subscriber::set_default(subscriber);

    let env = env_with(&[QUIET]).await;
    let x = env.x();
    let mut outcomes = Vec::new();
    outcomes.push(
        env.post(&env.key(), "Posted everywhere, secrets nowhere")
            .await,
    );
    x.set_create_mode(XMode::Status(401));
    outcomes.push(env.post(&env.key(), "X says 401").await);
    x.set_create_mode(XMode::RateLimited { reset_in: 60 });
    outcomes.push(env.post(&env.key(), "X says 429").await);
    x.set_create_mode(XMode::Status(503));
    let in_doubt = env.key();
    outcomes.push(env.post(&in_doubt, "X says 503").await);
    x.set_create_mode(XMode::Normal);
    past_the_quiet_period(&env).await;
    x.set_read_mode(Read::Refused);
    outcomes.push(env.retry(&in_doubt).await);
    let closed = format!("http://127.0.0.1:{}", free_port());
    let unreachable = env.app_with(&[("X_API_URL", &closed)]).await;
    let req = env.request(&env.key(), Some(env.content("X cannot be reached")));
    outcomes.push(unreachable.pipeline.run(req, env.deadline()).await);
    // The Bot API (channel and reports) cannot be reached: its URLs carry the bot token.
    let no_bot_api = env.app_with(&[("TELEGRAM_API_URL", &closed)]).await;
    let req = env.request(&env.key(), Some(env.content("Telegram cannot be reached")));
    outcomes.push(no_bot_api.pipeline.run(req, env.deadline()).await);
    let wrong = env
        .app_with(&[("X_ACCESS_TOKEN_SECRET", "x-wrong-token-secret")])
        .await;
    let doctor: Vec<String> = postonce::doctor::doctor(&wrong)
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    let config = format!("{:?}", env.app.config);
    drop(scope);

    let logs =
        String::from_utf8_lossy(&capture.0.lock().unwrap_or_else(|p| p.into_inner())).to_string();
    let outcome_json: Vec<String> = outcomes
        .iter()
        .map(|o| serde_json::to_string(o).expect("json"))
        .collect();
    let reports: Vec<String> = env
        .telegram
        .requests()
        .iter()
        .map(|(_, b)| b.to_string())
        .collect();
    println!(
        "captured {} bytes of logs; {} outcomes: {:?}; {} report calls; doctor: {doctor:?}; X requests {}",
        logs.len(),
        outcomes.len(),
        outcomes
            .iter()
            .map(|o| (o.outcome, target(o, Network::X).outcome))
            .collect::<Vec<_>>(),
        reports.len(),
        x.requests()
    );
    assert!(logs.len() > 10_000, "the capture saw the runs");
    assert!(
        logs.contains(&in_doubt.to_string()),
        "the capture saw the X runs"
    );
    assert!(x.requests() >= 10, "the runs reached X");
    let places = [
        ("logs", logs),
        ("outcome JSON", outcome_json.join("\n")),
        ("reports", reports.join("\n")),
        ("doctor", doctor.join("\n")),
        ("config Debug", config),
    ];
    for secret in [
        CONSUMER_KEY,
        CONSUMER_SECRET,
        ACCESS_TOKEN,
        ACCESS_TOKEN_SECRET,
        "x-wrong-token-secret",
        "SECRET1",
        "SECRET2",
        "SECRET3",
        "SECRET4",
        "SECRET5",
        "SECRET6",
        "SECRET7",
        "SECRET8",
    ] {
        for (place, text) in &places {
            assert!(!text.contains(secret), "{secret} appeared in the {place}");
        }
    }
}

/// The content guard per network, in both stores: a caption already posted on a network under
/// another key is refused there (offering *Post anyway* for that target), while each network
/// keeps its own index, so the same caption posts freely to a network it is not on yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_content_guard_holds_per_network_in_both_stores() {
    for stores in [Stores::Local, Stores::Real] {
        let env = Env::with_targets(stores, &[]).await;
        env.linkedin.set_duplicate_check(LinkedInCheck::Off);
        env.x().set_duplicate_check(XCheck::Off);
        let caption = format!("Guarded caption {}", env.key().slug());
        let run = |key: &PostKey, targets: &[Network]| {
            let req = env.request_to(key, Some(env.content(&caption)), targets);
            let (app, dl) = (env.app.clone(), env.deadline());
            async move { app.pipeline.run(req, dl).await }
        };
        let first = env.key();
        let o = run(&first, &[Network::X, Network::Telegram]).await;
        assert_eq!(o.outcome, OutcomeKind::Posted, "{stores:?}: {o:?}");
        let second = env.key();
        let o = run(&second, &[Network::X, Network::Telegram]).await;
        assert_eq!(o.outcome, OutcomeKind::Failed, "{stores:?}: {o:?}");
        let data = button_data(&o);
        assert_eq!(
            data,
            vec![
                format!("force:{second}@x"),
                format!("force:{second}@telegram")
            ],
            "{stores:?}"
        );
        // LinkedIn has not seen this caption: its own index lets it through.
        let o = run(&second, &[Network::Linkedin]).await;
        assert_eq!(o.outcome, OutcomeKind::Posted, "{stores:?}: {o:?}");
        println!(
            "content guard per network ({stores:?}): X posts {}, channel messages {}, LinkedIn posts {}",
            env.x().posts_created(),
            env.channel().messages_posted(),
            env.linkedin.posts_created()
        );
        assert_eq!(env.x().posts_created(), 1, "{stores:?}");
        assert_eq!(env.channel().messages_posted(), 1, "{stores:?}");
        assert_eq!(env.linkedin.posts_created(), 1, "{stores:?}");
    }
}

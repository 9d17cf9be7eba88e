//! Issue 10's proof: Mastodon and Bluesky, the networks whose own idempotency makes a retry
//! safe. Real redis-server and DynamoDB Local; every network is a wire-format fake with its
//! real semantics (Mastodon's `Idempotency-Key` memory of an hour, Bluesky's record keys,
//! expiring sessions and collected blobs), on clocks the tests move. Every count is taken at
//! the fakes:
//!
//! - accept-then-hang on create, per network: the run is `unknown`; after the quiet period a
//!   retry replays the kept request (same key / record key): exactly 1 post at the fake, the
//!   target recorded with the network's id and URL, 0 questions to the owner. For Bluesky also
//!   a day later on the fake's clock, and after the blob of a write that never landed was
//!   collected (the replay uploads it again);
//! - Mastodon past the hour: the status is looked up and recorded (0 creates); with the read
//!   refused, the owner is asked (0 creates);
//! - Bluesky: the session expires between the upload and the put, and before a retry →
//!   refreshed, one post; the record keeps the cid the PDS answered (first put and replay),
//!   shown in the outcome and by `postonce status`;
//! - five targets: 30 racing runs, duplicate checks off → 1 post per network; a caption too long
//!   for one network through the signed CI route → 400 naming it and its limit, counted its
//!   way (Bluesky graphemes; Mastodon 500 with every URL as 23), nothing stored.
//!
//! - Discord: a lost answer and a lost request settled by replaying the kept nonce (1 message
//!   per draft); past the nonce's window the channel is read back, paged and paced (0 creates),
//!   or, with the read refused, the owner asked; 16 racing runs with the nonce check off → 1
//!   message; an announcement channel's message published once, also after a lost answer.
//! - A Facebook Page (no key at all; X's way): with the Page taking every post (its duplicate
//!   check off), a lost answer is found by reading the Page back (0 creates), a lost request is
//!   not found and sent again once; with the read refused the owner is told once (0 creates);
//!   16 racing runs → 1 post; a 506 duplicate answer read back (the post named, or in doubt).
//!
//! Each test prints its figures per network.

use crate::support;

use support::env::sign;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use postonce::budget::Deadline;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::triggers::{HttpRequest, Router};
use serde_json::{json, Value};
use support::bluesky::Mode as BskyMode;
use support::discord::{Mode as DiscordMode, Read as DiscordRead};
use support::env::{Env, Stores};
use support::facebook::Mode as FacebookMode;
use support::linkedin::DuplicateCheck as LinkedInCheck;
use support::mastodon::{Mode as MastoMode, Read as MastoRead};
use support::x::DuplicateCheck as XCheck;

const FIVE: [Network; 5] = [
    Network::Linkedin,
    Network::X,
    Network::Telegram,
    Network::Mastodon,
    Network::Bluesky,
];

/// A quiet period of 2 s: above every budget these environments set (1.5 s each).
const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "2");

/// A hang long enough that the 1.5 s budget gives up first, although the post was made.
const HANG: Duration = Duration::from_secs(3);

const DAY: Duration = Duration::from_secs(86_400);

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The five-target environment, LinkedIn's and X's duplicate checks off: a second create there
/// would be a second post.
async fn env_with(overrides: &[(&str, &str)]) -> Env {
    let env = Env::with_five_targets(Stores::Real, overrides).await;
    env.linkedin.set_duplicate_check(LinkedInCheck::Off);
    env.x().set_duplicate_check(XCheck::Off);
    env
}

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

/// Every report about `key` in the owner's chat, as each reads now: (text, reply_markup).
fn reports_of(env: &Env, key: &PostKey) -> Vec<(String, Value)> {
    let sent = i64::try_from(env.telegram.requests_for("sendMessage").len()).expect("count");
    (1..=sent)
        .filter_map(|id| env.telegram.message(id))
        .filter(|(text, _)| text.contains(&key.to_string()))
        .collect()
}

/// Questions to the owner about `key` on `n`: `done:`/`force:` buttons in the outcome and in
/// the newest report about it.
fn questions(env: &Env, key: &PostKey, n: Network, o: &Outcome) -> usize {
    let ask = |d: &String| {
        d == &format!("done:{key}@{}", n.as_str()) || d == &format!("force:{key}@{}", n.as_str())
    };
    let in_outcome = button_data(o).iter().filter(|d| ask(d)).count();
    let in_report = reports_of(env, key)
        .last()
        .map_or(0, |(_, m)| markup_data(m).iter().filter(|d| ask(d)).count());
    in_outcome.max(in_report)
}

async fn record(env: &Env, key: &PostKey, n: Network) -> Option<postonce::record::PostedRecord> {
    env.status(&key.on(n)).await.snapshot.record
}

fn claim(env: &Env, key: &PostKey, n: Network) -> String {
    env.redis().cli(&["GET", &format!("claim:{}", key.on(n))])
}

/// Waits until a run started now could reconcile an attempt made before now.
async fn past_the_quiet_period(env: &Env) {
    tokio::time::sleep(env.quiet_period() + Duration::from_millis(1_100)).await;
}

/// One run of `key` for `n` only, with a fresh draft (`Some`) or the stored one.
async fn run_on(env: &Env, key: &PostKey, content: Option<bool>, n: Network) -> Outcome {
    let content = content.map(|_| env.announcement(key));
    env.app
        .pipeline
        .run(env.request_to(key, content, &[n]), env.deadline())
        .await
}

/// Moves the pipeline's view of `key`'s pending attempt on `n` back by `by`: the intent's
/// `pending_at` in DynamoDB, as if the attempt had been made that much earlier. Together with
/// the fake's clock moved forward, this is an hour passing for both sides.
async fn backdate_attempt(env: &Env, key: &PostKey, n: Network, by: Duration) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let client = env.dynamo_client();
    client
        .update_item()
        .table_name(env.vars["POSTONCE_TABLE"].clone())
        .key("pk", AttributeValue::S(format!("draft:{}", key.on(n))))
        .update_expression("SET pending_at = pending_at - :d")
        .condition_expression("attribute_exists(pending_at)")
        .expression_attribute_values(":d", AttributeValue::N(by.as_secs().to_string()))
        .send()
        .await
        .expect("the pending attempt is back-dated");
}

/// `POST /ci`, signed, through the router every transport uses.
async fn ci(router: &Router, body: &Value) -> (u16, Value) {
    let raw = serde_json::to_vec(body).expect("json");
    let sig = sign(&raw);
    let req = HttpRequest {
        method: "POST".into(),
        path: "/ci".into(),
        headers: [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-hub-signature-256".to_owned(), sig),
        ]
        .into_iter()
        .collect(),
        body: bytes::Bytes::from(raw),
    };
    let resp = router
        .handle(
            req,
            Deadline::after(Duration::from_secs(20)),
            postonce::pipeline::new_run_id(),
        )
        .await;
    (resp.status, support::answer(&resp))
}

/// Asserts the target is settled on its network by the run, without asking the owner.
fn assert_settled(env: &Env, key: &PostKey, n: Network, o: &Outcome) -> TargetOutcome {
    let t = target(o, n);
    assert!(
        matches!(t.outcome, OutcomeKind::Posted | OutcomeKind::AlreadyPosted),
        "{}: {o:?}",
        n.as_str()
    );
    assert_eq!(
        questions(env, key, n, o),
        0,
        "no question to the owner: {o:?}"
    );
    t
}

// ---------------------------------------------------------------------------------------------
// Accept, then hang: Mastodon.

/// Mastodon creates the status and answers only after the budget: `unknown`. After the quiet
/// period the retry replays the identical create with the stored `Idempotency-Key`; the server
/// answers the original status: 1 status, recorded with its id and URL, no question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mastodon_accept_then_hang_is_settled_by_the_replayed_key() {
    let env = env_with(&[QUIET]).await;
    let m = env.mastodon();
    m.set_create_mode(MastoMode::AcceptThenHang(HANG));
    let key = env.key();
    let first = run_on(&env, &key, Some(true), Network::Mastodon).await;
    println!("Mastodon accepts, then hangs past its budget: {first:?}");
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!(m.create_requests(), 1);
    assert_eq!(m.statuses_created(), 1, "the status exists");
    let sent_key = m.last_idempotency_key().expect("the create carried a key");
    m.set_create_mode(MastoMode::Normal);

    // Inside the quiet period nothing is sent.
    let early = run_on(&env, &key, None, Network::Mastodon).await;
    assert_eq!(early.outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(m.create_requests(), 1, "no create inside the quiet period");

    past_the_quiet_period(&env).await;
    let o = run_on(&env, &key, None, Network::Mastodon).await;
    println!("after the quiet period: {o:?}");
    let t = assert_settled(&env, &key, Network::Mastodon, &o);
    let status = m.statuses().remove(0);
    println!(
        "Mastodon figures: create requests {}, key replays {}, statuses {}, questions {}",
        m.create_requests(),
        m.key_replays(),
        m.statuses_created(),
        questions(&env, &key, Network::Mastodon, &o)
    );
    assert_eq!(m.create_requests(), 2, "one replay");
    assert_eq!(
        m.last_idempotency_key().as_deref(),
        Some(sent_key.as_str()),
        "the replay carries the stored key"
    );
    assert_eq!(m.key_replays(), 1, "answered from the key's memory");
    assert_eq!(m.statuses_created(), 1, "exactly 1 status");
    assert_eq!(t.id.as_deref(), Some(status.id.as_str()));
    assert!(
        t.url.as_deref().is_some_and(|u| u.contains(&status.id)),
        "{t:?}"
    );
    let r = record(&env, &key, Network::Mastodon)
        .await
        .expect("recorded");
    assert_eq!(r.post_id.as_deref(), Some(status.id.as_str()));
    assert!(
        r.url.as_deref().is_some_and(|u| u.contains(&status.id)),
        "{r:?}"
    );
    assert_eq!(claim(&env, &key, Network::Mastodon), "", "claim released");

    // Recorded: nothing reaches Mastodon again.
    let calls = m.requests();
    let again = env.retry(&key).await;
    assert_eq!(
        target(&again, Network::Mastodon).outcome,
        OutcomeKind::AlreadyPosted
    );
    assert_eq!(m.requests(), calls);
    assert_eq!(m.max_posts_per_text(), 1);
}

/// Past the hour (the fake's clock moved 61 min, the attempt back-dated by as much): the key
/// is forgotten, so nothing is replayed; the status is looked up among the account's recent
/// statuses and recorded (0 creates). With the read refused the owner is asked (0 creates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mastodon_past_the_hour_looks_the_status_up_or_asks_the_owner() {
    let env = env_with(&[QUIET]).await;
    let m = env.mastodon();
    m.set_create_mode(MastoMode::AcceptThenHang(HANG));
    let found = env.key();
    let refused = env.key();
    let (a, b) = tokio::join!(
        run_on(&env, &found, Some(true), Network::Mastodon),
        run_on(&env, &refused, Some(true), Network::Mastodon)
    );
    for o in [&a, &b] {
        assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
    }
    assert_eq!((m.create_requests(), m.statuses_created()), (2, 2));
    m.set_create_mode(MastoMode::Normal);
    past_the_quiet_period(&env).await;

    // An hour passes for both sides: the server forgets the keys, the pipeline sees the age.
    let hour = Duration::from_secs(61 * 60);
    m.advance(hour);
    for key in [&found, &refused] {
        backdate_attempt(&env, key, Network::Mastodon, hour).await;
    }

    let reads = m.timeline_requests();
    let o = run_on(&env, &found, None, Network::Mastodon).await;
    println!("past the hour, looked up: {o:?}");
    let t = assert_settled(&env, &found, Network::Mastodon, &o);
    let status = m
        .statuses()
        .into_iter()
        .find(|s| s.text.contains(&found.to_string()))
        .expect("the status");
    assert_eq!(t.id.as_deref(), Some(status.id.as_str()));
    assert!(m.timeline_requests() > reads, "the statuses were read");
    assert_eq!(m.create_requests(), 2, "found: 0 creates");
    assert_eq!(
        record(&env, &found, Network::Mastodon)
            .await
            .and_then(|r| r.post_id),
        Some(status.id.clone())
    );

    m.set_read_mode(MastoRead::Refused);
    let o = run_on(&env, &refused, None, Network::Mastodon).await;
    println!("past the hour, read refused: {o:?}");
    assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
    assert_eq!(
        button_data(&o),
        vec![
            format!("done:{refused}@mastodon"),
            format!("force:{refused}@mastodon")
        ]
    );
    let (text, markup) = reports_of(&env, &refused).pop().expect("a report");
    assert_eq!(
        markup_data(&markup),
        vec![
            format!("done:{refused}@mastodon"),
            format!("force:{refused}@mastodon")
        ],
        "{text}"
    );
    assert!(record(&env, &refused, Network::Mastodon).await.is_none());
    // Asked once, the draft stays with the owner: later runs send nothing either.
    let again = run_on(&env, &refused, None, Network::Mastodon).await;
    assert_eq!(again.outcome, OutcomeKind::Unknown, "{again:?}");
    println!(
        "Mastodon figures: create requests {} (2 first attempts, 0 past the hour), statuses {}, key replays {}, timeline reads {}",
        m.create_requests(),
        m.statuses_created(),
        m.key_replays(),
        m.timeline_requests()
    );
    assert_eq!(m.create_requests(), 2, "no blind re-send without the key");
    assert_eq!(m.statuses_created(), 2);
    assert_eq!(m.max_posts_per_text(), 1);
}

// ---------------------------------------------------------------------------------------------
// Accept, then hang: Bluesky.

/// Bluesky writes the record and answers only after the budget: `unknown`. After the quiet
/// period, and (another draft) a day later on the fake's clock, with the session long
/// expired, the retry reads the record at the stored key first (getRecord, issue 20): found,
/// it is recorded with the at-uri and the bsky.app URL, with no upload and no put: 1 post each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_accept_then_hang_is_settled_by_replaying_the_record() {
    let env = env_with(&[QUIET]).await;
    let b = env.bluesky();
    b.set_put_mode(BskyMode::AcceptThenHang(HANG));
    let soon = env.key();
    let later = env.key();
    let (x, y) = tokio::join!(
        run_on(&env, &soon, Some(true), Network::Bluesky),
        run_on(&env, &later, Some(true), Network::Bluesky)
    );
    for o in [&x, &y] {
        println!("Bluesky accepts, then hangs past its budget: {o:?}");
        assert_eq!(o.outcome, OutcomeKind::Unknown, "{o:?}");
    }
    assert_eq!((b.put_requests(), b.posts_created()), (2, 2));
    b.set_put_mode(BskyMode::Normal);

    let early = run_on(&env, &soon, None, Network::Bluesky).await;
    assert_eq!(early.outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(b.put_requests(), 2, "no put inside the quiet period");

    past_the_quiet_period(&env).await;
    for (key, when) in [(&soon, "after the quiet period"), (&later, "a day later")] {
        if when == "a day later" {
            b.advance(DAY);
        }
        let (uploads, puts, noops, gets) = (
            b.upload_requests(),
            b.put_requests(),
            b.noop_puts(),
            b.get_requests(),
        );
        let o = run_on(&env, key, None, Network::Bluesky).await;
        println!("{when}: {o:?}");
        let t = assert_settled(&env, key, Network::Bluesky, &o);
        let rec = b
            .records()
            .into_iter()
            .find(|r| r.text().contains(&key.to_string()))
            .expect("the record");
        println!(
            "Bluesky figures ({when}): upload requests +{}, getRecord +{}, puts +{}, no-op puts +{}, posts {}, refreshes {}",
            b.upload_requests() - uploads,
            b.get_requests() - gets,
            b.put_requests() - puts,
            b.noop_puts() - noops,
            b.posts_created(),
            b.refresh_requests(),
        );
        // Read first: the record is there, so nothing is uploaded or put.
        assert!(b.get_requests() > gets, "the record is read");
        assert_eq!(
            (b.upload_requests() - uploads, b.put_requests() - puts),
            (0, 0),
            "found by reading: no upload, no put"
        );
        assert_eq!(b.noop_puts() - noops, 0);
        assert_eq!(t.id.as_deref(), Some(rec.uri.as_str()));
        assert!(rec.uri.starts_with("at://"), "{}", rec.uri);
        assert!(
            t.url.as_deref().is_some_and(
                |u| u.starts_with("https://bsky.app/profile/") && u.ends_with(&rec.rkey)
            ),
            "{t:?}"
        );
        let r = record(&env, key, Network::Bluesky).await.expect("recorded");
        assert_eq!(r.post_id.as_deref(), Some(rec.uri.as_str()));
        assert!(r.url.is_some());
        assert_eq!(claim(&env, key, Network::Bluesky), "");
    }
    assert_eq!(b.posts_created(), 2, "exactly 1 post per draft");
    assert_eq!(b.edits(), 0);
    assert_eq!(b.max_posts_per_text(), 1);
}

/// The put never landed (the PDS hangs and writes nothing), and a day later the blob nobody
/// references has been collected: the replay uploads it again first, then writes the record:
/// 1 post, recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_replay_after_the_blob_was_collected_uploads_it_again() {
    let env = env_with(&[QUIET]).await;
    let b = env.bluesky();
    b.set_put_mode(BskyMode::Hang(HANG));
    let key = env.key();
    let first = run_on(&env, &key, Some(true), Network::Bluesky).await;
    println!("Bluesky hangs past its budget, nothing written: {first:?}");
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!((b.put_requests(), b.posts_created()), (1, 0));
    let blob = support::bluesky::blob_cid(&support::images::png_bytes());
    assert!(b.has_blob(&blob), "uploaded");
    b.set_put_mode(BskyMode::Normal);
    past_the_quiet_period(&env).await;
    b.advance(DAY);
    assert!(
        !b.has_blob(&blob),
        "a day later the unreferenced blob is collected"
    );

    let (uploads, refused) = (b.upload_requests(), b.token_refusals());
    let o = run_on(&env, &key, None, Network::Bluesky).await;
    println!("a day later: {o:?}");
    let t = assert_settled(&env, &key, Network::Bluesky, &o);
    println!(
        "Bluesky figures: upload requests {} (+{} for the replay, of which +{} refused for the expired token), puts {}, posts {}, refreshes {}, last put error {:?}",
        b.upload_requests(),
        b.upload_requests() - uploads,
        b.token_refusals() - refused,
        b.put_requests(),
        b.posts_created(),
        b.refresh_requests(),
        b.last_put_error()
    );
    assert_eq!(
        (b.upload_requests() - uploads) - (b.token_refusals() - refused),
        1,
        "re-uploaded, once"
    );
    assert!(b.has_blob(&blob));
    assert_eq!(b.posts_created(), 1, "1 post");
    let rec = b.records().remove(0);
    assert_eq!(t.id.as_deref(), Some(rec.uri.as_str()));
    assert_eq!(
        record(&env, &key, Network::Bluesky)
            .await
            .and_then(|r| r.post_id),
        Some(rec.uri)
    );
}

/// The access token expires between the blob upload and the put (and, for another draft,
/// between an ambiguous put and its retry): the adapter refreshes the session and writes
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_session_expiring_mid_run_is_refreshed_and_posts_once() {
    let env = env_with(&[QUIET]).await;
    let b = env.bluesky();
    // The upload is accepted at once and answered after 0.7 s (within the budget); the session
    // expires meanwhile, so the put meets an expired token.
    b.set_upload_mode(BskyMode::AcceptThenHang(Duration::from_millis(700)));
    let key = env.key();
    let run = {
        let app = env.app.clone();
        let req = env.request_to(&key, Some(env.announcement(&key)), &[Network::Bluesky]);
        let dl = env.deadline();
        tokio::spawn(async move { app.pipeline.run(req, dl).await })
    };
    let waited = Instant::now();
    while b.upload_requests() == 0 {
        assert!(waited.elapsed() < Duration::from_secs(10), "no upload");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.expire_sessions();
    let o = run.await.expect("run");
    b.set_upload_mode(BskyMode::Normal);
    println!("session expired between upload and put: {o:?}");
    println!(
        "Bluesky figures: logins {}, refreshes {}, token refusals {}, uploads {}, puts {}, posts {}",
        b.create_session_requests(),
        b.refresh_requests(),
        b.token_refusals(),
        b.upload_requests(),
        b.put_requests(),
        b.posts_created()
    );
    assert_eq!(
        target(&o, Network::Bluesky).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );
    assert!(b.token_refusals() >= 1, "the put met the expired token");
    assert!(b.refresh_requests() >= 1, "refreshed");
    assert_eq!(b.posts_created(), 1, "one post");
    assert!(record(&env, &key, Network::Bluesky).await.is_some());

    // Expired before the retry of an ambiguous put.
    let key2 = env.key();
    b.set_put_mode(BskyMode::AcceptThenHang(HANG));
    let first = run_on(&env, &key2, Some(true), Network::Bluesky).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    b.set_put_mode(BskyMode::Normal);
    b.expire_sessions();
    past_the_quiet_period(&env).await;
    let gets = b.get_requests();
    let o = run_on(&env, &key2, None, Network::Bluesky).await;
    println!("session expired before the retry: {o:?}");
    assert_settled(&env, &key2, Network::Bluesky, &o);
    println!(
        "Bluesky figures: getRecord +{}, posts {}, no-op puts {}",
        b.get_requests() - gets,
        b.posts_created(),
        b.noop_puts()
    );
    // The check reads the record first (getRecord needs no session), and finds it.
    assert!(b.get_requests() > gets, "read before any replay");
    assert_eq!(b.posts_created(), 2, "one post per draft");
    assert_eq!(b.max_posts_per_text(), 1);
}

/// `postonce status --kind K --slug S [--json]` as a process, over this environment's stores.
fn status_cli(env: &Env, key: &PostKey, json: bool) -> String {
    let mut args = vec!["status", "--kind", key.kind(), "--slug", key.slug()];
    if json {
        args.push("--json");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "off")
        .envs(&env.vars)
        .output()
        .expect("postonce status");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The record keeps the cid Bluesky answered, besides the at-uri and the bsky.app URL, in
/// DynamoDB: from a first put, and from the no-op replay of an ambiguous one. The outcome's
/// `targets.bluesky` and `postonce status` (text and JSON) show it; a Retry of the recorded
/// draft answers it from the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_record_keeps_the_cid_the_pds_answered() {
    let env = env_with(&[QUIET]).await;
    let b = env.bluesky();
    let of = |key: &PostKey| {
        b.records()
            .into_iter()
            .find(|r| r.text().contains(&key.to_string()))
            .expect("the record at the fake")
    };

    let key = env.key();
    let o = run_on(&env, &key, Some(true), Network::Bluesky).await;
    let t = target(&o, Network::Bluesky);
    assert_eq!(t.outcome, OutcomeKind::Posted, "{o:?}");
    println!("first attempt: uploadBlob {}", b.upload_requests());
    assert_eq!(b.upload_requests(), 1, "one upload for the first attempt");
    let rec = of(&key);
    let r = record(&env, &key, Network::Bluesky)
        .await
        .expect("recorded");
    println!(
        "Bluesky cid: the PDS answered {}, the record holds {:?}, the outcome {:?}",
        rec.cid, r.cid, t.cid
    );
    assert_eq!(r.cid.as_deref(), Some(rec.cid.as_str()), "{r:?}");
    assert_eq!(r.post_id.as_deref(), Some(rec.uri.as_str()));
    assert_eq!(t.cid.as_deref(), Some(rec.cid.as_str()), "{t:?}");
    let v = serde_json::to_value(&o).expect("outcome json");
    assert_eq!(v["targets"]["bluesky"]["cid"], json!(rec.cid), "{v}");

    let again = run_on(&env, &key, None, Network::Bluesky).await;
    let t = target(&again, Network::Bluesky);
    assert_eq!(t.outcome, OutcomeKind::AlreadyPosted, "{again:?}");
    assert_eq!(t.cid.as_deref(), Some(rec.cid.as_str()), "{t:?}");

    let shown: Value = serde_json::from_str(&status_cli(&env, &key, true)).expect("status json");
    assert_eq!(
        shown["targets"]["bluesky"]["record"]["cid"],
        json!(rec.cid),
        "{shown}"
    );
    let text = status_cli(&env, &key, false);
    assert!(text.contains(&format!("cid:    {}", rec.cid)), "{text}");

    // An ambiguous put (written, answered too late), checked after the quiet period: the
    // record is read at its key, and the cid getRecord answers is recorded.
    let replayed = env.key();
    b.set_put_mode(BskyMode::AcceptThenHang(HANG));
    let first = run_on(&env, &replayed, Some(true), Network::Bluesky).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    b.set_put_mode(BskyMode::Normal);
    past_the_quiet_period(&env).await;
    let puts = b.put_requests();
    let o = run_on(&env, &replayed, None, Network::Bluesky).await;
    assert_settled(&env, &replayed, Network::Bluesky, &o);
    assert_eq!(b.put_requests() - puts, 0, "settled by reading the record");
    let rec = of(&replayed);
    let r = record(&env, &replayed, Network::Bluesky)
        .await
        .expect("recorded");
    println!(
        "Bluesky cid after the check: the PDS answered {}, the record holds {:?}",
        rec.cid, r.cid
    );
    assert_eq!(r.cid.as_deref(), Some(rec.cid.as_str()), "{r:?}");
    assert_eq!(b.posts_created(), 2, "one post per draft");
}

// ---------------------------------------------------------------------------------------------
// Refusals (issue 21).

async fn sweep(env: &Env) -> postonce::pipeline::SweepReport {
    env.sweep().await
}

/// The sweeper's messages that put `target` in front of its owner.
fn told(env: &Env, target: &PostKey) -> usize {
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| {
            t.starts_with(&format!("Reminder: {target} "))
                || t.starts_with(&format!("{target} needs you"))
        })
        .count()
}

/// The put of a first attempt never lands, and meanwhile another client writes a different
/// record at the post's record key. After the quiet period the sweeper's check reads the key
/// (another record: not this post) and replays the record, which the PDS refuses
/// (`InvalidSwap`, nothing overwritten). That answer is a refusal: the target ends `failed`,
/// not retryable, with the detail saying so; the owner is told once; later sweeps send nothing
/// to Bluesky.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_invalid_swap_on_a_replay_is_a_refusal_told_once() {
    let env = env_with(&[QUIET]).await;
    let b = env.bluesky();
    b.set_put_mode(BskyMode::Hang(HANG));
    let key = env.key();
    let target_key = key.on(Network::Bluesky);
    let first = run_on(&env, &key, Some(true), Network::Bluesky).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    assert_eq!((b.put_requests(), b.posts_created()), (1, 0));
    b.set_put_mode(BskyMode::Normal);
    let rkey = b.last_put_body()["rkey"]
        .as_str()
        .expect("the record key")
        .to_owned();
    let foreign = json!({"$type": "app.bsky.feed.post", "text": "Someone else's post", "createdAt": "2026-01-01T00:00:00.000Z"});
    b.write_record(&rkey, foreign.clone());
    past_the_quiet_period(&env).await;

    let messages = env.telegram.requests_for("sendMessage").len();
    let report = sweep(&env).await;
    let o = report
        .runs
        .iter()
        .find(|o| o.key == key.to_string())
        .unwrap_or_else(|| panic!("the sweep ran it: {report:?}"));
    println!("the sweeper's replay: {o:?}");
    println!(
        "Bluesky figures: getRecord {}, uploads {}, puts {}, last put error {:?}",
        b.get_requests(),
        b.upload_requests(),
        b.put_requests(),
        b.last_put_error()
    );
    let t = target(o, Network::Bluesky);
    assert_eq!(
        (t.outcome, t.retryable),
        (OutcomeKind::Failed, false),
        "{o:?}"
    );
    assert!(
        t.detail.contains("InvalidSwap") && t.detail.contains(&rkey),
        "{t:?}"
    );
    assert!(!t.detail.contains("Retry later"), "{t:?}");
    assert_eq!(b.last_put_error().as_deref(), Some("InvalidSwap"));
    assert_eq!(
        b.record(&rkey).expect("the record").value,
        foreign,
        "nothing overwritten"
    );
    let d = env
        .status(&target_key)
        .await
        .snapshot
        .draft
        .expect("the draft");
    assert_eq!(
        (d.status, d.retryable),
        (postonce::record::DraftStatus::Failed, false),
        "{d:?}"
    );

    // Later sweeps: nothing sent to Bluesky; the owner told once.
    let requests = b.requests();
    for _ in 0..3 {
        let r = sweep(&env).await;
        assert!(r.runs.is_empty(), "{r:?}");
    }
    println!(
        "after 3 more sweeps: requests to Bluesky +{}, told {}, messages +{}",
        b.requests() - requests,
        told(&env, &target_key),
        env.telegram.requests_for("sendMessage").len() - messages
    );
    assert_eq!(b.requests(), requests, "never replayed again");
    assert_eq!(told(&env, &target_key), 1, "told once");
    assert_eq!(
        env.telegram.requests_for("sendMessage").len() - messages,
        1,
        "one message about it: the sweeper's"
    );
    assert_eq!(b.posts_created(), 0);
    assert!(record(&env, &key, Network::Bluesky).await.is_none());
}

/// A cover over the PDS's image blob limit (1,000,000 bytes; the PDS refuses it at putRecord,
/// after the uploads) is not sent as it is: Bluesky gets a JPEG rendition within the limit, its
/// `aspectRatio` from the rendition's own size, and the post is made once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_gets_a_rendition_within_the_blob_limit() {
    let env = env_with(&[]).await;
    let b = env.bluesky();
    b.set_max_image_bytes(1_000_000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("big.png");
    let big = support::covers::noise_png(700, 600, 41);
    assert!(big.len() > 1_200_000, "{}", big.len());
    std::fs::write(&path, &big).expect("the image");
    let key = env.key();
    let mut content = env.announcement(&key);
    content.image = path.to_str().expect("a UTF-8 path").to_owned();
    let o = env
        .app
        .pipeline
        .run(
            env.request_to(&key, Some(content), &[Network::Bluesky]),
            env.deadline(),
        )
        .await;
    let t = target(&o, Network::Bluesky);
    assert_eq!(t.outcome, OutcomeKind::Posted, "{o:?}");
    let sent = t.image.clone().expect("the image facts");
    assert_eq!(
        (sent.kind.as_str(), sent.format.as_str()),
        ("rendition", "image/jpeg")
    );
    assert!(sent.bytes <= 1_000_000, "{sent:?}");
    assert_eq!(b.posts_created(), 1);
    let record = b.records().pop().expect("the post");
    let image = &record.value["embed"]["images"][0];
    let cid = image["image"]["ref"]["$link"].as_str().expect("the blob");
    let blob = b.blob(cid).expect("the blob is stored");
    assert_eq!(
        (blob.size, blob.mime_type.as_str()),
        (sent.bytes, "image/jpeg")
    );
    let shape = f64::from(sent.width) / f64::from(sent.height);
    assert!((shape - 700.0 / 600.0).abs() < 0.01, "{sent:?}");
    assert_eq!(
        (
            image["aspectRatio"]["width"].as_u64(),
            image["aspectRatio"]["height"].as_u64()
        ),
        (Some(u64::from(sent.width)), Some(u64::from(sent.height))),
        "aspectRatio is the rendition's size"
    );
}

// ---------------------------------------------------------------------------------------------
// Five targets.

/// 30 runs of one five-target draft started together across 3 sets of clients, every
/// duplicate check that can be turned off off: exactly one post per network.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_racing_runs_post_once_per_network_on_five_targets() {
    let env = env_with(&[]).await;
    env.linkedin.set_delay(Duration::from_millis(50));
    env.x().set_delay(Duration::from_millis(200));
    let key = env.key();
    let content = env.announcement(&key);
    let mut pool = vec![env.app.clone()];
    for _ in 1..3 {
        pool.push(env.another_app().await);
    }
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..30u64 {
        let app = pool[usize::try_from(i).expect("small") % pool.len()].clone();
        let req = env.request(&key, Some(content.clone()));
        let dl = env.deadline();
        let stagger = Duration::from_millis(25 * i.saturating_sub(8));
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
    for o in &outcomes {
        let kinds = target_kinds(o);
        assert_eq!(
            kinds.keys().copied().collect::<Vec<_>>(),
            FIVE.to_vec(),
            "{o:?}"
        );
        for (n, k) in kinds {
            assert!(
                matches!(
                    k,
                    OutcomeKind::Posted | OutcomeKind::BeingPosted | OutcomeKind::AlreadyPosted
                ),
                "{}: {o:?}",
                n.as_str()
            );
            *per_target
                .entry(n)
                .or_default()
                .entry(k.as_str())
                .or_default() += 1;
        }
    }
    let (m, b) = (env.mastodon(), env.bluesky());
    let at_fake: BTreeMap<Network, usize> = BTreeMap::from([
        (Network::Linkedin, env.linkedin.posts_created()),
        (Network::X, env.x().posts_created()),
        (Network::Telegram, env.channel().messages_posted()),
        (Network::Mastodon, m.statuses_created()),
        (
            Network::Bluesky,
            usize::try_from(b.posts_created()).expect("small"),
        ),
    ]);
    println!("race, 5 targets, duplicate checks OFF: 30 runs over 3 apps in {took:?}");
    for n in FIVE {
        println!(
            "  {:>8}: outcomes {:?}; posts at the fake {}",
            n.as_str(),
            per_target[&n],
            at_fake[&n]
        );
    }
    println!(
        "  creates: LinkedIn {}, X {}, channel sendPhoto {}, Mastodon {}, Bluesky puts {}",
        env.linkedin.create_requests(),
        env.x().create_requests(),
        env.channel().send_photo_requests(),
        m.create_requests(),
        b.put_requests()
    );
    for n in FIVE {
        assert_eq!(at_fake[&n], 1, "exactly 1 post on {}", n.as_str());
        assert_eq!(
            per_target[&n].get("posted").copied().unwrap_or(0),
            1,
            "exactly one run posted to {}",
            n.as_str()
        );
        assert!(
            record(&env, &key, n).await.is_some(),
            "{} recorded",
            n.as_str()
        );
        assert_eq!(claim(&env, &key, n), "", "{}'s claim released", n.as_str());
    }
    assert_eq!(m.create_requests(), 1);
    assert_eq!(b.put_requests(), 1);
    let again = env.retry(&key).await;
    assert_eq!(again.outcome, OutcomeKind::AlreadyPosted, "{again:?}");
}

/// Whether an error body names `network` (as a word) and `limit`.
fn names(body: &Value, network: &str, limit: &str) -> bool {
    let text = body.to_string().to_lowercase().replace([',', '\u{a0}'], "");
    let word = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == network);
    word && text.contains(limit)
}

async fn nothing_stored(env: &Env, key: &PostKey) {
    for n in FIVE {
        let snap = env.status(&key.on(n)).await.snapshot;
        assert!(snap.draft.is_none(), "draft:{} was stored", key.on(n));
        assert!(snap.record.is_none(), "posted:{} exists", key.on(n));
    }
    assert_eq!(env.redis().cli(&["KEYS", &format!("*{key}*")]), "");
}

/// A caption too long for one network, counted its way, through the signed CI route: 400
/// naming the network and its limit, nothing stored, nothing sent. Mastodon counts 500 with
/// every URL as 23; Bluesky 300 graphemes (an `e` with a combining accent is one). At the
/// limits exactly, all five post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caption_too_long_for_one_network_is_a_400_naming_it() {
    let env = env_with(&[]).await;
    let router = Router::new(env.app.clone());
    let url = format!("https://example.com/{}", "p".repeat(100));
    let e = "e\u{301}";
    let m501 = format!("{} {url}", "a".repeat(477));
    let b301 = e.repeat(301);
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "X, 281 weighted",
            json!({"captions": {"x": "a".repeat(281)}}),
            "x",
            "280",
        ),
        (
            "the channel, 1,026 UTF-16 units",
            json!({"captions": {"telegram": "😀".repeat(513)}}),
            "telegram",
            "1024",
        ),
        (
            "LinkedIn, 3,001 characters",
            json!({"captions": {"linkedin": "a".repeat(3001)}}),
            "linkedin",
            "3000",
        ),
        (
            "Mastodon, 501 with the URL as 23",
            json!({"captions": {"mastodon": m501}}),
            "mastodon",
            "500",
        ),
        (
            "Mastodon, 501 characters",
            json!({"captions": {"mastodon": "m".repeat(501)}}),
            "mastodon",
            "500",
        ),
        (
            "Bluesky, 301 graphemes in 602 characters",
            json!({"captions": {"bluesky": b301}}),
            "bluesky",
            "300",
        ),
        (
            "the draft's caption to Mastodon and Bluesky, too long for Bluesky only",
            json!({"targets": ["mastodon", "bluesky"], "caption": "b".repeat(301)}),
            "bluesky",
            "300",
        ),
    ];
    for (what, extra, network, limit) in cases {
        let key = env.key();
        let mut body = json!({
            "kind": key.kind(), "slug": key.slug(), "caption": format!("Fits everywhere {key}"),
            "image_url": env.images.url("/cover.png"),
        });
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (status, resp) = ci(&router, &body).await;
        println!("{what}: {status} {resp}");
        assert_eq!(status, 400, "{what}: {resp}");
        assert!(
            names(&resp, network, limit),
            "{what}: the answer names {network} and {limit}: {resp}"
        );
        nothing_stored(&env, &key).await;
    }
    assert_eq!(env.mastodon().create_requests(), 0);
    assert_eq!(env.mastodon().upload_requests(), 0);
    assert_eq!(env.bluesky().put_requests(), 0);
    assert_eq!(env.bluesky().upload_requests(), 0);
    assert_eq!(env.linkedin.total_requests().await, 0);
    assert_eq!(env.x().requests(), 0);
    assert_eq!(
        env.images.total_hits().await,
        0,
        "not even the image was fetched"
    );

    // Exactly at the limits, counted each network's way, every target posts: 500 for
    // Mastodon with a 120-character URL (597 characters), 300 graphemes for Bluesky (600
    // characters).
    let key = env.key();
    let m500 = format!("{} {url}", "a".repeat(476));
    assert_eq!(postonce::networks::mastodon::status_len(&m500, 23), 500);
    assert!(m500.chars().count() > 500);
    let b300 = e.repeat(300);
    assert_eq!(b300.chars().count(), 600);
    let body = json!({
        "kind": key.kind(), "slug": key.slug(), "caption": format!("At the limits {key}"),
        "image_url": env.images.url("/cover.png"),
        "captions": {"mastodon": m500, "bluesky": b300},
    });
    let (status, resp) = ci(&router, &body).await;
    println!("at the limits: {status} {resp}");
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["outcome"], "posted", "{resp}");
    assert_eq!(env.mastodon().statuses()[0].text, m500);
    assert_eq!(env.bluesky().records()[0].text(), b300);
    println!(
        "figures: Mastodon statuses {}, Bluesky posts {}, LinkedIn {}, X {}, channel {}",
        env.mastodon().statuses_created(),
        env.bluesky().posts_created(),
        env.linkedin.posts_created(),
        env.x().posts_created(),
        env.channel().messages_posted()
    );
}

// ---------------------------------------------------------------------------------------------
// A 429 on create: the next try waits for the reset the network named.

/// Each network refuses the create with a 429 whose reset is 90 s ahead (X's
/// `x-rate-limit-reset` in Unix seconds, Mastodon's `X-RateLimit-Reset` in ISO 8601, Bluesky's
/// `RateLimit-Reset`, the Bot API's `parameters.retry_after`): the target fails retryable and
/// its `next_retry_at` is not before the reset (the sweeper's own backoff would have come back
/// 30–60 s later, before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_create_keeps_the_reset_for_the_next_try_on_every_network() {
    use support::tg_channel::ChannelMode;
    let env = Env::with_five_targets(Stores::Local, &[]).await;
    const RESET: u64 = 90;
    env.x()
        .set_create_mode(support::x::Mode::RateLimited { reset_in: RESET });
    env.mastodon()
        .set_create_mode(MastoMode::RateLimited { reset_in: RESET });
    env.bluesky()
        .set_put_mode(BskyMode::RateLimited { reset_in: RESET });
    env.channel().set_mode(ChannelMode::TooManyRequests {
        retry_after_s: RESET,
    });
    for n in [
        Network::X,
        Network::Mastodon,
        Network::Bluesky,
        Network::Telegram,
    ] {
        let key = env.key();
        let before = postonce::record::now_s();
        let o = run_on(&env, &key, Some(true), n).await;
        let t = target(&o, n);
        assert_eq!(t.outcome, OutcomeKind::Failed, "{}: {o:?}", n.as_str());
        assert!(t.retryable, "{}: {o:?}", n.as_str());
        let draft = env
            .status(&key.on(n))
            .await
            .snapshot
            .draft
            .expect("the draft is kept");
        let next = draft.next_retry_at.expect("a retry time");
        println!(
            "{}: 429 resetting in {RESET}s → next try in {}s",
            n.as_str(),
            next - before
        );
        assert!(
            next >= before + i64::try_from(RESET).expect("small") - 1,
            "{}: the next try ({next}) comes before the reset ({}): {draft:?}",
            n.as_str(),
            before + 90
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Mastodon's media wait inside its budget.

/// A slow instance: each image is processed 2.5 s after its upload, and the Mastodon budget is
/// 1.5 s a call. Each try of the upload waits inside its budget; the next try polls the media
/// id the instance already gave (never a second `POST /api/v2/media`), so the run posts with
/// one upload. (Before: a 30 s wait inside a 1.5 s budget, cut every time, and each try
/// uploaded again: three orphan uploads and no post.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mastodon_slow_processing_is_waited_for_with_one_upload() {
    let env = Env::with_five_targets(Stores::Local, &[]).await;
    let m = env.mastodon();
    m.set_processing_time(Some(Duration::from_millis(2500)));
    let key = env.key();
    let started = Instant::now();
    let o = run_on(&env, &key, Some(true), Network::Mastodon).await;
    println!(
        "mastodon, 2.5 s processing, 1.5 s budget: {:?} in {:?}; uploads {}, polls {}, statuses {}",
        o.outcome,
        started.elapsed(),
        m.upload_requests(),
        m.media_polls(),
        m.statuses_created()
    );
    assert_eq!(m.upload_requests(), 1, "one POST /api/v2/media: {o:?}");
    assert_eq!(o.outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(m.statuses_created(), 1);
}

// ---------------------------------------------------------------------------------------------
// Bluesky's session, kept where the records live.

/// Five process-like runs (a new App, so a new adapter, each time) over one store post to
/// Bluesky with one `createSession`: the session is kept in the record store (DynamoDB Local
/// and the local files alike) and reused; when its access token has expired (400
/// `ExpiredToken`) it is refreshed with `refreshSession`, not logged in again; only when the
/// refresh token is refused too does a run log in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluesky_keeps_its_session_across_processes_and_logs_in_once() {
    for stores in [Stores::Real, Stores::Local] {
        let env = Env::with_five_targets(stores, &[]).await;
        let b = env.bluesky();
        const RUNS: usize = 5;
        for i in 0..RUNS {
            if i == 3 {
                b.expire_sessions();
            }
            let app = env.another_app().await;
            let key = env.key();
            let req = env.request_to(&key, Some(env.announcement(&key)), &[Network::Bluesky]);
            let o = app.pipeline.run(req, env.deadline()).await;
            assert_eq!(o.outcome, OutcomeKind::Posted, "{stores:?} run {i}: {o:?}");
            let shown = format!("{o:?}");
            for token in b.issued_tokens() {
                assert!(!shown.contains(&token), "a token in the outcome: {shown}");
            }
        }
        println!(
            "bluesky {stores:?}: {RUNS} processes → createSession {}, refreshSession {}",
            b.create_session_requests(),
            b.refresh_requests()
        );
        assert_eq!(b.create_session_requests(), 1, "{stores:?}: one login");
        assert_eq!(
            b.refresh_requests(),
            1,
            "{stores:?}: refreshed once, after expiry"
        );

        // The refresh token revoked too: the next process logs in (and keeps that session).
        b.expire_sessions();
        b.revoke_refresh_tokens();
        for _ in 0..2 {
            let app = env.another_app().await;
            let key = env.key();
            let req = env.request_to(&key, Some(env.announcement(&key)), &[Network::Bluesky]);
            let o = app.pipeline.run(req, env.deadline()).await;
            assert_eq!(o.outcome, OutcomeKind::Posted, "{stores:?}: {o:?}");
        }
        assert_eq!(b.create_session_requests(), 2, "{stores:?}");

        if let Some(dir) = &env.data_dir {
            let file = dir.path().join("secrets").join("secret-bluesky");
            assert!(
                file.is_file(),
                "the local store keeps it: {}",
                file.display()
            );
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
                assert_eq!(mode & 0o077, 0, "readable by its owner only: {mode:o}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Discord: the message nonce (`enforce_nonce`), and the channel read back past its window.

/// LinkedIn and Discord, a 2 s quiet period.
async fn discord_env(overrides: &[(&str, &str)]) -> Env {
    let mut all = vec![QUIET];
    all.extend_from_slice(overrides);
    Env::with_discord(Stores::Real, &all).await
}

/// The answer is lost (the message made), and, for another draft, the request (nothing made):
/// both `unknown`, nothing sent inside the quiet period. After it, each kept request is
/// replayed with its nonce and the cover fetched again: Discord answers the lost answer's
/// message for its nonce, and makes the lost request's once. One message per draft, each
/// recorded with its id and link, no question to the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_a_lost_answer_and_a_lost_request_are_settled_by_the_replayed_nonce() {
    let env = discord_env(&[]).await;
    let d = env.discord();
    let n = Network::Discord;
    d.set_create_mode(DiscordMode::AcceptThenHang(HANG));
    let answer_lost = env.key();
    let first = run_on(&env, &answer_lost, Some(true), n).await;
    let early = run_on(&env, &answer_lost, None, n).await;
    assert_eq!(target(&early, n).outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(
        d.create_requests(),
        1,
        "nothing sent inside the quiet period"
    );
    d.set_create_mode(DiscordMode::Hang(HANG));
    let request_lost = env.key();
    let second = run_on(&env, &request_lost, Some(true), n).await;
    d.set_create_mode(DiscordMode::Normal);
    for o in [&first, &second] {
        assert_eq!(target(o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    }
    assert_eq!(
        d.messages_posted(),
        1,
        "only the lost answer's message exists"
    );

    past_the_quiet_period(&env).await;
    let (a, b) = tokio::join!(
        run_on(&env, &answer_lost, None, n),
        run_on(&env, &request_lost, None, n)
    );
    println!(
        "Discord figures: create requests {}, nonce replays {}, messages {}",
        d.create_requests(),
        d.nonce_replays(),
        d.messages_posted()
    );
    for (key, o) in [(&answer_lost, &a), (&request_lost, &b)] {
        let t = assert_settled(&env, key, n, o);
        let posts = env.posts_on(key, n);
        assert_eq!(posts.len(), 1, "one message for {key}: {o:?}");
        assert_eq!(t.id.as_deref(), Some(posts[0].as_str()));
        let url = format!(
            "https://discord.com/channels/{}/{}/{}",
            support::discord::GUILD_ID,
            support::discord::CHANNEL_ID,
            posts[0]
        );
        assert_eq!(t.url.as_deref(), Some(url.as_str()), "{t:?}");
        let r = record(&env, key, n).await.expect("recorded");
        assert_eq!(r.post_id.as_deref(), Some(posts[0].as_str()));
    }
    assert_eq!(d.create_requests(), 4, "one replay per draft");
    assert_eq!(
        d.nonce_replays(),
        1,
        "the lost answer's replay was answered from its nonce"
    );
    assert_eq!(d.messages_posted(), 2, "one message per draft");
    for m in d.messages() {
        let image = m.image.clone().expect("the cover is attached");
        assert!(image.bytes > 0 && image.taken(), "{image:?}");
        assert_eq!(m.file_name.as_deref(), Some("cover.png"));
        assert!(m.nonce.as_ref().is_some_and(|n| n.len() <= 25), "{m:?}");
    }
    let calls = d.requests();
    let again = run_on(&env, &answer_lost, None, n).await;
    assert_eq!(target(&again, n).outcome, OutcomeKind::AlreadyPosted);
    assert_eq!(d.requests(), calls, "a recorded draft sends nothing");
}

/// Past the nonce's window (the fake's clock moved 10 minutes, the attempts back-dated by as
/// much), the nonce check off so that only the read-back can tell: the channel is read back,
/// 100 a page over 750 other messages (one of them another member's with the very same text),
/// paced by the rate-limit headers (no 429), and the bot's own message is recorded (0 creates).
/// With the read refused, the owner is asked (0 creates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_past_the_nonce_window_reads_the_channel_back_or_asks_the_owner() {
    let env = discord_env(&[]).await;
    let d = env.discord();
    let n = Network::Discord;
    d.set_nonce_check(false);
    for i in 0..750 {
        d.seed_message(
            "1181234567890777777",
            &format!("chatter {i}"),
            Duration::from_secs(60),
        );
    }
    d.set_create_mode(DiscordMode::AcceptThenHang(HANG));
    let found = env.key();
    let refused = env.key();
    let (a, b) = tokio::join!(
        run_on(&env, &found, Some(true), n),
        run_on(&env, &refused, Some(true), n)
    );
    for o in [&a, &b] {
        assert_eq!(target(o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    }
    d.set_create_mode(DiscordMode::Normal);
    let ours = env.posts_on(&found, n);
    assert_eq!(ours.len(), 1);
    let text = d
        .messages()
        .into_iter()
        .find(|m| m.id == ours[0])
        .map(|m| m.content)
        .expect("the message");
    // Another member posted the very same text, before the bot's message.
    d.seed_message("1181234567890777777", &text, Duration::from_secs(30));
    past_the_quiet_period(&env).await;
    let ten_minutes = Duration::from_secs(600);
    d.advance(ten_minutes);
    for key in [&found, &refused] {
        backdate_attempt(&env, key, n, ten_minutes).await;
    }

    let (reads, creates) = (d.read_requests(), d.create_requests());
    let o = run_on(&env, &found, None, n).await;
    let t = assert_settled(&env, &found, n, &o);
    println!(
        "Discord past the window: reads {}, 429s {}, creates {} (+{})",
        d.read_requests() - reads,
        d.read_429s(),
        d.create_requests(),
        d.create_requests() - creates
    );
    assert_eq!(t.outcome, OutcomeKind::AlreadyPosted, "{t:?}");
    assert_eq!(
        t.id.as_deref(),
        Some(ours[0].as_str()),
        "the bot's own message"
    );
    assert!(d.read_requests() - reads >= 8, "paged through the channel");
    assert_eq!(d.read_429s(), 0, "paced by the rate-limit headers");
    assert_eq!(d.create_requests(), creates, "found: 0 creates");

    d.set_read_mode(DiscordRead::Refused);
    let o = run_on(&env, &refused, None, n).await;
    assert_eq!(target(&o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    assert_eq!(
        button_data(&o),
        vec![
            format!("done:{refused}@discord"),
            format!("force:{refused}@discord")
        ]
    );
    assert_eq!(
        d.create_requests(),
        creates,
        "never re-sent past the window"
    );
    assert_eq!(env.posts_on(&refused, n).len(), 1);
}

/// Sixteen runs of one new draft for `n` over two processes: the draft's key and the runs'
/// outcomes on `n`, counted by kind.
async fn sixteen_racing_runs(env: &Env, n: Network) -> (PostKey, BTreeMap<&'static str, usize>) {
    let key = env.key();
    let content = env.announcement(&key);
    let pool = [env.app.clone(), env.another_app().await];
    let runs: Vec<_> = (0..16)
        .map(|i| {
            let app = pool[i % 2].clone();
            let req = env.request_to(&key, Some(content.clone()), &[n]);
            let dl = env.deadline();
            tokio::spawn(async move { app.pipeline.run(req, dl).await })
        })
        .collect();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for r in runs {
        let o = r.await.expect("run");
        *kinds.entry(target(&o, n).outcome.as_str()).or_default() += 1;
    }
    (key, kinds)
}

/// Sixteen runs of one draft over two processes, Discord's nonce check off: one message.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_racing_runs_post_one_discord_message() {
    let env = discord_env(&[]).await;
    let d = env.discord();
    let n = Network::Discord;
    d.set_nonce_check(false);
    let (key, kinds) = sixteen_racing_runs(&env, n).await;
    println!(
        "Discord, 16 racing runs: {kinds:?}; creates {}, messages {}",
        d.create_requests(),
        d.messages_posted()
    );
    assert_eq!(d.messages_posted(), 1, "one message");
    assert_eq!(kinds.get("posted").copied(), Some(1), "{kinds:?}");
    assert!(record(&env, &key, n).await.is_some());
}

/// An announcement channel with `DISCORD_CROSSPOST=1`: a message is published to its followers
/// once. When the create's answer is lost, the publish waits for the settling: the replayed
/// nonce answers the message (not yet published) and it is published then, once; a later run
/// sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_crossposts_each_message_once() {
    let env = discord_env(&[("DISCORD_CROSSPOST", "1")]).await;
    let d = env.discord();
    let n = Network::Discord;
    d.set_channel_type(5);
    let plain = env.key();
    let o = run_on(&env, &plain, Some(true), n).await;
    assert_eq!(target(&o, n).outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(d.crosspost_requests(), 1);

    d.set_create_mode(DiscordMode::AcceptThenHang(HANG));
    let lost = env.key();
    let o = run_on(&env, &lost, Some(true), n).await;
    d.set_create_mode(DiscordMode::Normal);
    assert_eq!(target(&o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    assert_eq!(
        d.crosspost_requests(),
        1,
        "not published before it is settled"
    );
    past_the_quiet_period(&env).await;
    let o = run_on(&env, &lost, None, n).await;
    assert_settled(&env, &lost, n, &o);
    let again = run_on(&env, &lost, None, n).await;
    assert_eq!(target(&again, n).outcome, OutcomeKind::AlreadyPosted);
    println!(
        "Discord crosspost: creates {}, nonce replays {}, crossposts {}, messages {}",
        d.create_requests(),
        d.nonce_replays(),
        d.crosspost_requests(),
        d.messages_posted()
    );
    assert_eq!(d.crosspost_requests(), 2, "one publish per message");
    assert_eq!(d.messages_posted(), 2);
    assert!(
        d.messages().iter().all(|m| m.flags & 1 == 1),
        "both published"
    );
}

// ---------------------------------------------------------------------------------------------
// A Facebook Page: no idempotency key; settled by reading the Page's published posts back.

/// LinkedIn and the Facebook Page, a 2 s quiet period, the Page taking every post (no
/// duplicate check): a second create would be a second post.
async fn facebook_env() -> Env {
    let env = Env::with_facebook(Stores::Real, &[QUIET]).await;
    env.facebook().set_duplicate_check(false);
    env
}

/// The answer is lost (the post made), and, for another draft, the request (nothing made):
/// both `unknown`, nothing sent inside the quiet period. After it, the Page is read back: the
/// lost answer's post is found and recorded (0 creates), the lost request's is not and the
/// kept request is sent once. One post per draft, no question. A third draft's answer lost with
/// the read refused: the owner is told once, nothing sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facebook_a_lost_answer_and_a_lost_request_are_settled_by_reading_the_page_back() {
    let env = facebook_env().await;
    let f = env.facebook();
    let n = Network::Facebook;
    f.set_create_mode(FacebookMode::AcceptThenHang(HANG));
    let answer_lost = env.key();
    let refused = env.key();
    let (first, third) = tokio::join!(
        run_on(&env, &answer_lost, Some(true), n),
        run_on(&env, &refused, Some(true), n)
    );
    let early = run_on(&env, &answer_lost, None, n).await;
    assert_eq!(target(&early, n).outcome, OutcomeKind::Unknown, "{early:?}");
    assert_eq!(f.totals().0, 2, "nothing sent inside the quiet period");
    f.set_create_mode(FacebookMode::Hang(HANG));
    let request_lost = env.key();
    let second = run_on(&env, &request_lost, Some(true), n).await;
    f.set_create_mode(FacebookMode::Normal);
    for o in [&first, &second, &third] {
        assert_eq!(target(o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    }
    assert_eq!(f.totals().1, 2, "only the lost answers' posts exist");

    past_the_quiet_period(&env).await;
    let (reads, creates) = (f.read_requests(), f.totals().0);
    let a = run_on(&env, &answer_lost, None, n).await;
    assert_eq!(f.totals().0, creates, "found by reading back: 0 creates");
    let b = run_on(&env, &request_lost, None, n).await;
    println!(
        "Facebook figures: reads {}, creates {} (+{}), posts {}",
        f.read_requests() - reads,
        f.totals().0,
        f.totals().0 - creates,
        f.totals().1
    );
    assert_eq!(target(&a, n).outcome, OutcomeKind::AlreadyPosted, "{a:?}");
    for (key, o) in [(&answer_lost, &a), (&request_lost, &b)] {
        let t = assert_settled(&env, key, n, o);
        let posts = env.posts_on(key, n);
        assert_eq!(posts.len(), 1, "one post for {key}: {o:?}");
        assert_eq!(t.id.as_deref(), Some(posts[0].as_str()));
        let url = format!("https://www.facebook.com/{}", posts[0]);
        assert_eq!(t.url.as_deref(), Some(url.as_str()), "{t:?}");
        let r = record(&env, key, n).await.expect("recorded");
        assert_eq!(r.post_id.as_deref(), Some(posts[0].as_str()));
    }
    assert_eq!(f.totals().0, creates + 1, "the lost request sent once more");
    for p in f.posts() {
        let image = p.image.clone().expect("the photo's bytes");
        assert!(image.bytes > 0 && image.taken(), "{image:?}");
    }

    f.set_read_refused(true);
    let creates = f.totals().0;
    let o = run_on(&env, &refused, None, n).await;
    assert_eq!(target(&o, n).outcome, OutcomeKind::Unknown, "{o:?}");
    assert_eq!(
        questions(&env, &refused, n, &o),
        2,
        "done and force, once: {o:?}"
    );
    let again = run_on(&env, &refused, None, n).await;
    assert_eq!(target(&again, n).outcome, OutcomeKind::Unknown, "{again:?}");
    assert_eq!(
        f.totals().0,
        creates,
        "never re-sent when the read cannot tell"
    );
    assert_eq!(env.posts_on(&refused, n).len(), 1);
    let calls = f.requests();
    let done = run_on(&env, &answer_lost, None, n).await;
    assert_eq!(target(&done, n).outcome, OutcomeKind::AlreadyPosted);
    assert_eq!(f.requests(), calls, "a recorded draft sends nothing");
}

/// Sixteen runs of one draft over two processes, the Page taking every post: one post.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_racing_runs_post_one_facebook_post() {
    let env = facebook_env().await;
    let f = env.facebook();
    let n = Network::Facebook;
    let (key, kinds) = sixteen_racing_runs(&env, n).await;
    println!(
        "Facebook, 16 racing runs: {kinds:?}; creates {}, posts {}",
        f.totals().0,
        f.totals().1
    );
    assert_eq!(env.posts_on(&key, n).len(), 1, "one post");
    assert_eq!(kinds.get("posted").copied(), Some(1), "{kinds:?}");
    assert!(record(&env, &key, n).await.is_some());
}

/// Facebook's duplicate answer (506) names no post: the adapter reads the Page back. The
/// caption posted by hand → that post, by its id (for the pipeline to record or refuse); a 506
/// for a caption the Page does not show → in doubt, never taken for a post on its word.
#[tokio::test]
async fn facebook_a_duplicate_answer_is_read_back_never_taken_on_its_word() {
    use postonce::networks::facebook::{wire, FacebookAdapter};
    use postonce::networks::{Media, NetworkAdapter, PostError};
    let f = support::facebook::FacebookFake::start().await;
    let adapter = FacebookAdapter::new(
        reqwest::Client::new(),
        &f.uri(),
        support::facebook::PAGE_ID,
        postonce::vars::Secret::new(support::facebook::TOKEN),
    );
    let media = Media {
        bytes: bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\nnot really"),
        content_type: "image/png",
        alt: None,
    };
    let post = |text: &str| adapter.prepare(text, &wire::media_ref(&media).expect("ref"), "k");
    let by_hand = f.seed_post("Hello from the Page");
    let e = adapter
        .create(&post("Hello from the Page"), &media)
        .await
        .expect_err("a duplicate");
    assert!(
        matches!(&e, PostError::AlreadyExists { existing, .. } if existing.id.as_deref() == Some(by_hand.as_str())),
        "{e:?}"
    );
    f.set_create_mode(FacebookMode::Duplicate);
    let e = adapter
        .create(&post("Never posted"), &media)
        .await
        .expect_err("in doubt");
    println!("Facebook 506: {e}; reads {}", f.read_requests());
    assert!(matches!(e, PostError::InDoubt { .. }), "{e:?}");
    assert_eq!(f.duplicates_refused(), 1);
    assert_eq!(f.read_requests(), 2, "each duplicate read back");
    assert_eq!(f.totals(), (2, 1), "nothing posted");
}

//! Issue 33, item 4: Nostr against **real relays** — the Python `nostr-relay` 1.14 (installed
//! by `scripts/test.sh` into `.tools/`; missing, these tests fail naming the install step), on
//! real redis-server and DynamoDB Local. After every scenario each relay is asked directly how
//! many notes of the draft it holds: **one event id per draft on every relay** that has it,
//! never a second event.
//!
//! - two relays, `NOSTR_MIN_RELAYS=2`: posted, the same event on both; a second run
//!   `already_posted`, nothing sent;
//! - a lost `OK` (a proxy drops it; or closes the connection once the event went through): the
//!   run is `unknown`; after the quiet period a retry reads the id back and records it;
//! - a relay that is down: with one of two enough, posted on the other; with both needed,
//!   `unknown`, then, the relay restarted, the replay of the **same** event completes it; and
//!   the note recorded while the relay was down reaches it by the next sweep (the same event);
//! - a relay that refuses (empty-id `OK`, as the Python relay words refusals), beside one that
//!   takes it: posted, each answer logged;
//! - a replay whose Blossom blob the server dropped meanwhile: the blob is put back first;
//! - 16 racing runs of one draft: one note;
//! - a crash at every step of the run (fail points), then sweeps: one note, recorded.
//!
//! Fail points are process-wide, so the tests take turns.

mod support;

use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::nostr::event::Keys;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind};
use support::env::{Env, Stores, NOSTR_KEY};
use support::nostr_relay::{count_notes, notes, ProxyMode, RealRelay, WsProxy};
use tokio::sync::Mutex;

static TURN: Mutex<()> = Mutex::const_new(());

fn author() -> String {
    Keys::parse(NOSTR_KEY)
        .expect("test key")
        .public_hex()
        .to_owned()
}

/// Nostr alone, on `relays`, needing `min` of them; budgets 1.5 s, quiet period 2 s.
async fn env_on(relays: &[String], min: usize) -> Env {
    env_with(relays, min, &[]).await
}

/// [`env_on`] with `more` variables.
async fn env_with(relays: &[String], min: usize, more: &[(&str, &str)]) -> Env {
    let relays = relays.join(",");
    let min = min.to_string();
    let mut vars = vec![
        ("POSTONCE_TARGETS", "nostr"),
        ("NOSTR_SECRET_KEY", NOSTR_KEY),
        ("NOSTR_RELAYS", relays.as_str()),
        ("NOSTR_MIN_RELAYS", min.as_str()),
        ("POSTONCE_NOSTR_TIMEOUT_MS", "1500"),
        ("POSTONCE_RECONCILE_AFTER_S", "2"),
    ];
    vars.extend_from_slice(more);
    Env::with(Stores::Real, &vars).await
}

fn caption(key: &PostKey) -> String {
    format!("A note for {key} #Postonce #nostr")
}

/// The ids of `key`'s notes on the relay at `url`.
async fn ids_on(url: &str, key: &PostKey) -> Vec<String> {
    notes(url, &author())
        .await
        .into_iter()
        .filter(|e| {
            e["content"]
                .as_str()
                .is_some_and(|c| c.contains(key.slug()))
        })
        .filter_map(|e| e["id"].as_str().map(str::to_owned))
        .collect()
}

fn kind(o: &Outcome) -> OutcomeKind {
    o.outcome
}

async fn record_id(env: &Env, key: &PostKey) -> Option<String> {
    let k = key.on(Network::Nostr);
    env.status(&k).await.snapshot.record.and_then(|r| r.post_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn posted_once_on_two_real_relays_with_its_tags() {
    let _t = TURN.lock().await;
    let (a, b) = (RealRelay::start(), RealRelay::start());
    let env = env_on(&[a.url(), b.url()], 2).await;
    let key = env.key();
    let first = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&first), OutcomeKind::Posted, "{first:?}");
    let again = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&again), OutcomeKind::AlreadyPosted, "{again:?}");
    let (on_a, on_b) = (ids_on(&a.url(), &key).await, ids_on(&b.url(), &key).await);
    assert_eq!(on_a.len(), 1, "one note on relay A: {on_a:?}");
    assert_eq!(on_a, on_b, "the same event on both relays");
    assert_eq!(
        record_id(&env, &key).await.as_deref(),
        Some(on_a[0].as_str())
    );
    let note = notes(&a.url(), &author())
        .await
        .into_iter()
        .find(|e| e["id"] == on_a[0])
        .expect("note");
    let tags = note["tags"].to_string();
    assert!(
        tags.contains(r#"["t","postonce"]"#) && tags.contains(r#"["t","nostr"]"#),
        "lowercase t tags: {tags}"
    );
    assert!(
        tags.contains(r#""imeta","url http://127.0.0.1"#),
        "the cover referenced as it is (no Blossom): {tags}"
    );
    assert!(
        note["content"]
            .as_str()
            .unwrap_or("")
            .contains("/cover.png"),
        "{note}"
    );
    println!(
        "figures: two relays, min 2 → posted, 1 event on each ({})",
        on_a[0]
    );
}

/// A note links its cover for good, so with covers hosted (`POSTONCE_PUBLIC_URL`, for the
/// networks that fetch a cover once) Nostr without a media server still references the draft's
/// own URL, never a hosted copy, which expires within a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_note_links_the_drafts_own_cover_when_covers_are_hosted() {
    let _t = TURN.lock().await;
    let relay = RealRelay::start();
    let covers = tempfile::tempdir().expect("covers dir");
    let dir = covers.path().to_str().expect("utf-8").to_owned();
    let env = env_with(
        &[relay.url()],
        1,
        &[
            ("POSTONCE_PUBLIC_URL", "http://127.0.0.1:9/"),
            ("POSTONCE_COVERS_DIR", &dir),
        ],
    )
    .await;
    let key = env.key();
    let first = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&first), OutcomeKind::Posted, "{first:?}");
    let note = notes(&relay.url(), &author())
        .await
        .into_iter()
        .find(|e| {
            e["content"]
                .as_str()
                .is_some_and(|c| c.contains(key.slug()))
        })
        .expect("the note");
    let text = note.to_string();
    assert!(
        text.contains("/cover.png") && !text.contains("/covers/"),
        "{text}"
    );
    let hosted = std::fs::read_dir(covers.path()).map_or(0, Iterator::count);
    assert_eq!(hosted, 0, "nothing hosted for a note");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_ok_is_settled_by_reading_the_id_back() {
    let _t = TURN.lock().await;
    let relay = RealRelay::start();
    for mode in [ProxyMode::DropOk, ProxyMode::CloseAfterEvent] {
        let proxy = WsProxy::start(relay.url()).await;
        proxy.set_mode(mode);
        let env = env_on(&[proxy.url()], 1).await;
        let key = env.key();
        let first = env.post(&key, &caption(&key)).await;
        assert_eq!(kind(&first), OutcomeKind::Unknown, "{mode:?}: {first:?}");
        assert_eq!(
            count_notes(&relay.url(), &author(), key.slug()).await,
            1,
            "the relay stored it"
        );
        proxy.set_mode(ProxyMode::Forward);
        env.wait_out_quiet_period(&key.on(Network::Nostr)).await;
        let settled = env.retry(&key).await;
        assert_eq!(
            kind(&settled),
            OutcomeKind::AlreadyPosted,
            "{mode:?}: {settled:?}"
        );
        let ids = ids_on(&relay.url(), &key).await;
        assert_eq!(ids.len(), 1, "{mode:?}: one event: {ids:?}");
        assert_eq!(record_id(&env, &key).await, Some(ids[0].clone()));
        println!("figures: {mode:?} → unknown, then read back → already_posted, 1 event");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relay_down_then_restarted_gets_the_same_event() {
    let _t = TURN.lock().await;
    let (a, mut b) = (RealRelay::start(), RealRelay::start());
    // One of two is enough: posted on A while B is down.
    b.kill();
    let env = env_on(&[a.url(), b.url()], 1).await;
    let key = env.key();
    let o = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&o), OutcomeKind::Posted, "{o:?}");
    assert_eq!(ids_on(&a.url(), &key).await.len(), 1);
    // Both needed: A takes it, B is down → in doubt; B back → the replay completes it.
    let env2 = env_on(&[a.url(), b.url()], 2).await;
    let key2 = env2.key();
    let first = env2.post(&key2, &caption(&key2)).await;
    assert_eq!(kind(&first), OutcomeKind::Unknown, "{first:?}");
    b.restart();
    assert_eq!(
        ids_on(&b.url(), &key).await.len(),
        0,
        "B never got the first draft"
    );
    env2.wait_out_quiet_period(&key2.on(Network::Nostr)).await;
    let settled = env2.retry(&key2).await;
    assert!(
        matches!(
            kind(&settled),
            OutcomeKind::AlreadyPosted | OutcomeKind::Posted
        ),
        "{settled:?}"
    );
    let (on_a, on_b) = (ids_on(&a.url(), &key2).await, ids_on(&b.url(), &key2).await);
    assert_eq!(on_a.len(), 1, "{on_a:?}");
    assert_eq!(
        on_a, on_b,
        "the same event on the restarted relay, never a new one"
    );
    assert_eq!(record_id(&env2, &key2).await, Some(on_a[0].clone()));
    // The first draft was recorded while B was down: a sweep (its quiet period long past)
    // sends B the same event; the sweep after it sends nothing more.
    let first_on_a = ids_on(&a.url(), &key).await;
    let target = key.on(Network::Nostr).to_string();
    let report = env.sweep().await;
    let spread = report.spread.iter().find(|s| s.key == target);
    assert!(
        spread.is_some_and(|s| s.complete && s.next.is_none()),
        "the recorded note spread to B: {report:?}"
    );
    assert_eq!(
        ids_on(&b.url(), &key).await,
        first_on_a,
        "B got the recorded event itself, never a new one"
    );
    let after = env.sweep().await;
    assert!(
        !after.spread.iter().any(|s| s.key == target),
        "done spreading: {after:?}"
    );
    assert_eq!(
        ids_on(&a.url(), &key).await,
        first_on_a,
        "still one event on A"
    );
    println!("figures: B down → posted on A (min 1); min 2 → unknown, B restarted → {:?}, 1 event on each; the first draft spread to B by a sweep: {}", kind(&settled), spread.map_or("", |s| s.detail.as_str()));
}

/// A replay days later names a Blossom blob the server may have dropped meanwhile: before the
/// same event goes out again, the blob is looked for (`HEAD`) and uploaded again when it is
/// gone (content-addressed: the same URL the event names). The create right after the
/// attempt's own upload does not ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_puts_back_a_blob_the_media_server_lost() {
    let _t = TURN.lock().await;
    let blossom = support::nostr::BlossomFake::start().await;
    let (a, mut b) = (RealRelay::start(), RealRelay::start());
    b.kill();
    let server = blossom.uri();
    let env = env_with(
        &[a.url(), b.url()],
        2,
        &[("NOSTR_BLOSSOM_URL", server.as_str())],
    )
    .await;
    let key = env.key();
    let first = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&first), OutcomeKind::Unknown, "B is down: {first:?}");
    assert_eq!(
        (blossom.uploads(), blossom.heads()),
        (1, 0),
        "one upload, and the create right after it asks nothing"
    );
    let blobs = blossom.blobs();
    assert_eq!(blobs.len(), 1, "the cover is on the media server");
    let sha = blobs[0].sha256.clone();
    blossom.forget(&sha);
    b.restart();
    env.wait_out_quiet_period(&key.on(Network::Nostr)).await;
    let settled = env.retry(&key).await;
    assert!(
        matches!(
            kind(&settled),
            OutcomeKind::AlreadyPosted | OutcomeKind::Posted
        ),
        "{settled:?}"
    );
    assert_eq!(blossom.heads(), 1, "the replay looked for the blob");
    assert_eq!(blossom.uploads(), 2, "and put it back");
    assert!(
        blossom.blob(&sha).is_some(),
        "the blob the note names is there again"
    );
    let (on_a, on_b) = (ids_on(&a.url(), &key).await, ids_on(&b.url(), &key).await);
    assert_eq!(on_a.len(), 1, "{on_a:?}");
    assert_eq!(on_a, on_b, "the same event on both relays");
    let note = notes(&a.url(), &author())
        .await
        .into_iter()
        .find(|e| e["id"] == on_a[0])
        .expect("note");
    assert!(
        note["tags"].to_string().contains(&format!("x {sha}")),
        "the note names the blob: {note}"
    );
    println!("figures: blob dropped before the replay → 1 HEAD, 2 uploads, 1 event on each relay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusing_relay_beside_one_that_takes_it() {
    let _t = TURN.lock().await;
    let (a, b) = (RealRelay::start(), RealRelay::start());
    let refusing = WsProxy::start(b.url()).await;
    refusing.set_mode(ProxyMode::Refuse);
    let env = env_on(&[a.url(), refusing.url()], 1).await;
    let key = env.key();
    let o = env.post(&key, &caption(&key)).await;
    assert_eq!(kind(&o), OutcomeKind::Posted, "{o:?}");
    assert_eq!(ids_on(&a.url(), &key).await.len(), 1);
    assert_eq!(ids_on(&b.url(), &key).await.len(), 0);
    // Both needed and one refuses: nothing recorded, the event in doubt (it is on A), never a
    // second event.
    let env2 = env_on(&[a.url(), refusing.url()], 2).await;
    let key2 = env2.key();
    let first = env2.post(&key2, &caption(&key2)).await;
    assert_eq!(kind(&first), OutcomeKind::Unknown, "{first:?}");
    assert!(
        first.detail.contains("refused (blocked:"),
        "each relay's answer: {}",
        first.detail
    );
    env2.wait_out_quiet_period(&key2.on(Network::Nostr)).await;
    let again = env2.retry(&key2).await;
    assert_eq!(
        ids_on(&a.url(), &key2).await.len(),
        1,
        "still one event after {again:?}"
    );
    println!(
        "figures: refusing relay + good relay, min 1 → posted; min 2 → unknown, then {:?}, 1 event",
        kind(&again)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_racing_runs_make_one_note() {
    let _t = TURN.lock().await;
    let relay = RealRelay::start();
    let env = env_on(&[relay.url()], 1).await;
    let key = env.key();
    let text = caption(&key);
    let runs = (0..16).map(|_| env.post(&key, &text));
    let outcomes = futures_util::future::join_all(runs).await;
    let posted = outcomes
        .iter()
        .filter(|o| kind(o) == OutcomeKind::Posted)
        .count();
    assert_eq!(posted, 1, "{outcomes:?}");
    assert_eq!(ids_on(&relay.url(), &key).await.len(), 1);
    println!("figures: 16 racing runs → 1 posted, 1 event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_at_every_step_then_sweeps_make_one_note() {
    let _t = TURN.lock().await;
    let relay = RealRelay::start();
    let env = env_on(&[relay.url()], 1).await;
    for step in [
        "after-image",
        "after-upload",
        "after-intent",
        "before-create-post",
        "after-create-post",
    ] {
        let key = env.key();
        fail::cfg(step, "return").expect("fail point");
        let first = env.post(&key, &caption(&key)).await;
        fail::remove(step);
        let mut last = first.clone();
        for _ in 0..3 {
            if record_id(&env, &key).await.is_some() {
                break;
            }
            tokio::time::sleep(env.quiet_period() + Duration::from_secs(1)).await;
            let dl = env.deadline();
            env.app.pipeline.sweep(&dl).await.expect("sweep");
            last = env.retry(&key).await;
        }
        let ids = ids_on(&relay.url(), &key).await;
        assert_eq!(
            ids.len(),
            1,
            "{step}: one event: first {first:?}, last {last:?}"
        );
        assert_eq!(
            record_id(&env, &key).await,
            Some(ids[0].clone()),
            "{step}: recorded"
        );
        println!(
            "figures: crash {step} → {:?}, then sweeps → 1 event, recorded",
            kind(&first)
        );
    }
}

/// The Blossom upload against the Blossom fake (BUD-02's wire format): `201` stored, `200` the
/// same blob again at the same URL (content-addressed: safe to repeat); `401` for a key the
/// server does not take, `413` over its limit (both refusals naming the fix), `409` when the
/// bytes arrived changed (transient: the upload is retried).
#[tokio::test]
async fn blossom_uploads_answer_as_the_protocol_says() {
    use postonce::networks::nostr::blossom::upload;
    use postonce::networks::{Media, PostError};
    use support::nostr::BlossomFake;
    let fake = BlossomFake::start().await;
    let keys = Keys::parse(NOSTR_KEY).expect("key");
    let http = reqwest::Client::new();
    let media = Media {
        bytes: bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\n not really a png, but bytes"),
        content_type: "image/png",
        alt: None,
    };
    let t = Duration::from_secs(5);
    let first = upload(&http, &fake.uri(), &keys, &media, t)
        .await
        .expect("201");
    let again = upload(&http, &fake.uri(), &keys, &media, t)
        .await
        .expect("200");
    assert_eq!(first, again, "the same blob, the same URL");
    assert!(
        first.0["url"]
            .as_str()
            .is_some_and(|u| u.starts_with(&fake.uri())),
        "{first:?}"
    );
    assert_eq!(fake.blobs().len(), 1);

    fake.set_corrupt(true);
    let e = upload(&http, &fake.uri(), &keys, &media, t)
        .await
        .expect_err("409");
    assert!(
        matches!(e, PostError::NotSent { .. }) && e.is_transient(),
        "{e}"
    );
    fake.set_corrupt(false);

    fake.set_max(10);
    let e = upload(&http, &fake.uri(), &keys, &media, t)
        .await
        .expect_err("413");
    assert!(
        matches!(e, PostError::Rejected { status: 413, .. }) && e.to_string().contains("too large"),
        "{e}"
    );
    fake.set_max(1 << 20);

    fake.allow_only(&["00"]);
    let e = upload(&http, &fake.uri(), &keys, &media, t)
        .await
        .expect_err("401");
    assert!(
        matches!(e, PostError::Rejected { status: 401, .. })
            && e.to_string().contains("NOSTR_BLOSSOM_URL"),
        "{e}"
    );
    let statuses: Vec<u16> = fake.refusals().iter().map(|r| r.0).collect();
    assert_eq!(statuses, vec![409, 413, 401]);
}

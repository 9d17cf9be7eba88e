//! Local mode shared by several processes (README "Try it", issue 8 point 4): `serve`, a
//! cron `sweep` and a CLI `post` on one machine share `POSTONCE_DATA_DIR`. Claims are files
//! under an OS lock, and the local store's read-modify-writes run under one too.
//!
//! - real `postonce post` processes race one key against a LinkedIn fake whose duplicate check
//!   is OFF, so a second create-post would be a second post: exactly one create-post per key;
//! - `postonce serve` and CLI processes race one key the same way;
//! - the file claim store keeps Redis's semantics (acquire, release, keep, expiry, sightings) and
//!   one of many racing store instances wins an acquire;
//! - concurrent conditional draft updates from separate store instances lose nothing.
//!
//! Separate store instances in one test process stand for separate processes: each operation
//! opens the lock file afresh, and the kernel treats each open file description as its own
//! lock owner, whichever process holds it.
//!
//! Sizes: `POSTONCE_LOCAL_RACE_ROUNDS` (default 20) rounds of `POSTONCE_LOCAL_RACERS` (default
//! 4) processes. The tests print their figures.

use crate::support;

use support::env::sign;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use postonce::claim::{Acquire, ClaimStore, ClaimValue};
use postonce::key::PostKey;
use postonce::record::{
    DraftContent, DraftStatus, DraftUpdate, PostedRecord, PutPosted, RecordStore,
};
use postonce::stores::local::claims::FileClaims;
use postonce::stores::local::LocalStore;
use serde_json::{json, Value};
use support::env::Env;
use support::linkedin::DuplicateCheck;
use support::serve::ServeProcess;
use support::services::unique;

fn sized(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one `postonce post` process answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    exit: Option<i32>,
    outcome: String,
    detail: String,
}

/// Starts a `postonce post` process for `key` with the environment's variables; the caller
/// waits for it, so every racer of a round is started before any is awaited. Without a caption
/// it posts the stored draft (a Retry's run).
fn spawn_post(env: &Env, key: &PostKey, caption: Option<&str>) -> std::process::Child {
    let image = env.images.url("/cover.png");
    let mut args = vec!["post", "--kind", key.kind(), "--slug", key.slug(), "--json"];
    if let Some(caption) = caption {
        args.extend(["--caption", caption, "--image", &image]);
    }
    Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "off")
        .envs(&env.vars)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postonce post")
}

fn answer(exit: Option<i32>, body: &[u8]) -> Answer {
    let v = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    Answer {
        exit,
        outcome: v["outcome"].as_str().map_or_else(
            || format!("unreadable: {}", String::from_utf8_lossy(body)),
            str::to_owned,
        ),
        detail: v["detail"].as_str().unwrap_or("").to_owned(),
    }
}

/// Waits for a round's processes.
async fn answers_of(children: Vec<std::process::Child>) -> Vec<Answer> {
    tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().expect("postonce post ran");
                answer(out.status.code(), &out.stdout)
            })
            .collect::<Vec<_>>()
    })
    .await
    .expect("waited")
}

/// A round's requests at the LinkedIn fake.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    inits: u64,
    creates: u64,
    posts: usize,
}

impl Counts {
    fn now(env: &Env) -> Self {
        Self {
            inits: env.linkedin.init_requests(),
            creates: env.linkedin.create_requests(),
            posts: env.linkedin.posts_created(),
        }
    }

    fn since(self, before: Self) -> Self {
        Self {
            inits: self.inits - before.inits,
            creates: self.creates - before.creates,
            posts: self.posts - before.posts,
        }
    }
}

/// What is wrong with one round, if anything: exactly one run got past the claim (one
/// initializeUpload: a run that finds the record answers without uploading), it made exactly
/// one create-post and one post at the fake, answered `posted` (exit 0), and every other answer
/// is `being_posted` (exit 3) or `already_posted` (exit 0).
///
/// The upload count is what shows a claim store that let two runs in: the pipeline's
/// conditional intent write (a second lock, in the draft) would still stop the second
/// create-post, so the post count alone cannot see a broken claim.
fn check_round(round: usize, c: Counts, answers: &[Answer]) -> Option<String> {
    let posted = answers.iter().filter(|a| a.outcome == "posted").count();
    let answers_ok = answers.iter().all(|a| match a.outcome.as_str() {
        "posted" | "already_posted" => a.exit == Some(0),
        "being_posted" => a.exit == Some(3),
        _ => false,
    });
    (c.inits != 1 || c.creates != 1 || c.posts != 1 || posted != 1 || !answers_ok).then(|| {
        format!(
            "round {round}: {} runs past the claim, {} create-post requests, {} posts; {answers:?}",
            c.inits, c.creates, c.posts
        )
    })
}

/// Real `postonce post` processes race one key on one data folder, round after round. The fake
/// has no duplicate check, so every create-post it receives is a post: the count of posts at
/// the fake is the proof, not LinkedIn's kindness. Each LinkedIn answer is delayed so the winner
/// holds its claim while the others arrive (they must answer `being_posted`).
///
/// The draft is stored first and the processes post it as stored (as Retry presses do): with a
/// caption each process would first save the draft under the store's lock, which spaces the
/// processes out before they claim, and a broken claim store could pass unseen. This way the
/// claim is each process's first store operation, and the race is on the claim itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_processes_racing_one_key_create_one_post_duplicate_check_off() {
    let rounds = sized("POSTONCE_LOCAL_RACE_ROUNDS", 20);
    let racers = sized("POSTONCE_LOCAL_RACERS", 4);
    let env = Env::local().await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env.linkedin.set_delay(Duration::from_millis(100));
    let data_dir = env.data_dir.as_ref().expect("local env").path();
    let drafts = LocalStore::open(data_dir, false).expect("the shared store");
    let begun = Instant::now();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad_rounds = Vec::new();
    for round in 0..rounds {
        let key = env.key();
        let caption = format!("Local mode race {round} for {key}");
        let before = Counts::now(&env);
        drafts
            .save_draft(&key, &env.content(&caption), "cli", 1)
            .await
            .expect("draft stored");
        let children: Vec<_> = (0..racers).map(|_| spawn_post(&env, &key, None)).collect();
        let answers = answers_of(children).await;
        for a in &answers {
            *tally.entry(a.outcome.clone()).or_default() += 1;
        }
        bad_rounds.extend(check_round(
            round,
            Counts::now(&env).since(before),
            &answers,
        ));
    }
    eprintln!(
        "local CLI race: {rounds} rounds x {racers} processes in {:.1?}: {tally:?}; create-post requests {}, posts created {} (expected {rounds}); bad rounds {}",
        begun.elapsed(),
        env.linkedin.create_requests(),
        env.linkedin.posts_created(),
        bad_rounds.len()
    );
    assert!(bad_rounds.is_empty(), "{bad_rounds:#?}");
    assert_eq!(env.linkedin.create_requests(), rounds as u64);
    assert_eq!(env.linkedin.posts_created(), rounds);
    assert!(
        tally.get("being_posted").copied().unwrap_or(0) > 0,
        "no process ever met a held claim: the rounds did not overlap, so they proved nothing: {tally:?}"
    );
}

/// The documented local setup: `postonce serve` takes CI webhooks while CLI processes post the
/// same key, all on one data folder, duplicate check off. One create-post per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_cli_racing_one_key_create_one_post_duplicate_check_off() {
    let rounds = sized("POSTONCE_LOCAL_RACE_ROUNDS", 20) / 2;
    let env = Env::local().await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env.linkedin.set_delay(Duration::from_millis(100));
    let serve = ServeProcess::start(&env.vars, false).await;
    let client = reqwest::Client::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad_rounds = Vec::new();
    for round in 0..rounds {
        let key = env.key();
        let caption = format!("Served and typed {round} for {key}");
        let before = Counts::now(&env);
        let children: Vec<_> = (0..2)
            .map(|_| spawn_post(&env, &key, Some(&caption)))
            .collect();
        let body = serde_json::to_vec(&json!({
            "kind": key.kind(), "slug": key.slug(), "caption": caption,
            "image_url": env.images.url("/cover.png")
        }))
        .expect("json");
        let webhooks: Vec<_> = (0..2)
            .map(|_| {
                let (client, base, body) = (client.clone(), serve.base.clone(), body.clone());
                tokio::spawn(async move {
                    let resp = client
                        .post(format!("{base}/ci"))
                        .header("X-Hub-Signature-256", sign(&body))
                        .body(body)
                        .send()
                        .await
                        .expect("serve answers");
                    let status = resp.status().as_u16();
                    let body = resp.bytes().await.expect("outcome JSON");
                    // The CI route's status per the outcomes table, as the CLI's exit code.
                    let exit = match status {
                        200 => Some(0),
                        409 => Some(3),
                        s => Some(i32::from(s)),
                    };
                    answer(exit, &body)
                })
            })
            .collect();
        let mut answers = answers_of(children).await;
        for w in webhooks {
            answers.push(w.await.expect("webhook task"));
        }
        for a in &answers {
            *tally.entry(a.outcome.clone()).or_default() += 1;
        }
        bad_rounds.extend(check_round(
            round,
            Counts::now(&env).since(before),
            &answers,
        ));
    }
    eprintln!(
        "local serve + CLI race: {rounds} rounds x (2 CLI + 2 CI webhooks): {tally:?}; create-post requests {}, posts created {} (expected {rounds}); bad rounds {}",
        env.linkedin.create_requests(),
        env.linkedin.posts_created(),
        bad_rounds.len()
    );
    assert!(bad_rounds.is_empty(), "{bad_rounds:#?}");
    assert_eq!(env.linkedin.posts_created(), rounds);
    drop(serve);
}

fn key(slug: &str) -> PostKey {
    PostKey::new("blog", slug).expect("valid key")
}

fn claim_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("claims folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The file store answers as Redis does, across two instances on one folder (two processes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_claims_acquire_release_keep_and_expire_like_redis() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = FileClaims::open(dir.path().join("claims")).expect("open");
    let b = FileClaims::open(dir.path().join("claims")).expect("open");
    let ttl = Duration::from_secs(40);
    let k = key("hello");
    let urn = "urn:li:share:7100000000000000001";

    assert_eq!(
        a.acquire(&k, "run-a", ttl).await.unwrap(),
        Acquire::Acquired
    );
    assert_eq!(
        b.acquire(&k, "run-b", ttl).await.unwrap(),
        Acquire::Held(Some(ClaimValue::Run("run-a".into())))
    );
    // SET NX does not refresh: the holder sees its own token.
    assert_eq!(
        a.acquire(&k, "run-a", ttl).await.unwrap(),
        Acquire::Held(Some(ClaimValue::Run("run-a".into())))
    );
    assert!(!b.release(&k, "run-b").await.unwrap(), "not b's to release");
    let (value, left) = b.inspect(&k).await.unwrap().expect("still held");
    assert_eq!(value, ClaimValue::Run("run-a".into()));
    let left = left.expect("a TTL");
    assert!(
        left <= ttl && left > ttl - Duration::from_secs(5),
        "{left:?}"
    );

    // keep_posted: only the holder rewrites it, to posted:<urn> with the long TTL.
    assert!(!b
        .keep_posted(&k, "run-b", urn, Duration::from_secs(600))
        .await
        .unwrap());
    assert!(a
        .keep_posted(&k, "run-a", urn, Duration::from_secs(600))
        .await
        .unwrap());
    let (value, left) = b.inspect(&k).await.unwrap().expect("kept");
    assert_eq!(value, ClaimValue::Posted(urn.into()));
    assert!(left.expect("a TTL") > Duration::from_secs(590));
    assert_eq!(
        b.acquire(&k, "run-b", ttl).await.unwrap(),
        Acquire::Held(Some(ClaimValue::Posted(urn.into())))
    );
    // Kept twice by another token: refused; the repair releases it by its value.
    assert!(!b
        .keep_posted(&k, "run-b", "urn:li:share:2", Duration::from_secs(600))
        .await
        .unwrap());
    assert!(!a.release(&k, "run-a").await.unwrap());
    assert!(b.release(&k, &format!("posted:{urn}")).await.unwrap());
    assert_eq!(a.inspect(&k).await.unwrap(), None);
    assert!(!a.release(&k, "run-a").await.unwrap(), "nothing to release");

    // Expiry (whole seconds, at least 1, as Redis EX). Four claims and a sighting, one wait.
    let short = Duration::from_millis(200);
    let (k1, k2, k3) = (key("expires"), key("kept-late"), key("kept-lost"));
    assert_eq!(
        a.acquire(&k1, "run-c", short).await.unwrap(),
        Acquire::Acquired
    );
    assert_eq!(
        a.acquire(&k2, "run-e", short).await.unwrap(),
        Acquire::Acquired
    );
    assert_eq!(
        a.acquire(&k3, "run-f", short).await.unwrap(),
        Acquire::Acquired
    );
    assert!(a.first_sighting("tg:update:1001", short).await.unwrap());
    assert!(!b.first_sighting("tg:update:1001", short).await.unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Rounded up to one second, as `EX 0` is not a thing: still held after 600 ms.
    assert!(b.inspect(&k1).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(b.inspect(&k1).await.unwrap(), None, "expired");
    assert_eq!(
        b.acquire(&k1, "run-d", ttl).await.unwrap(),
        Acquire::Acquired
    );
    assert!(
        !a.release(&k1, "run-c").await.unwrap(),
        "a slow run must not delete the claim another run took after expiry"
    );
    assert_eq!(
        a.inspect(&k1).await.unwrap().map(|(v, _)| v),
        Some(ClaimValue::Run("run-d".into()))
    );
    // Expired and free: keep_posted sets it; expired and retaken: refused.
    assert!(a
        .keep_posted(&k2, "run-e", urn, Duration::from_secs(600))
        .await
        .unwrap());
    assert_eq!(
        b.inspect(&k2).await.unwrap().map(|(v, _)| v),
        Some(ClaimValue::Posted(urn.into()))
    );
    assert_eq!(
        b.acquire(&k3, "run-g", ttl).await.unwrap(),
        Acquire::Acquired
    );
    assert!(!a
        .keep_posted(&k3, "run-f", urn, Duration::from_secs(600))
        .await
        .unwrap());
    assert!(b.first_sighting("tg:update:1001", short).await.unwrap());
    a.ping().await.expect("ping");

    // Names map to files inside the folder; nothing temporary is left behind.
    let files = claim_files(a.dir());
    assert!(
        files.contains(&"claim_3ablog-expires.claim".to_owned())
            && files.contains(&"tg_3aupdate_3a1001.claim".to_owned())
            && files.iter().all(|f| f == "lock" || f.ends_with(".claim")),
        "{files:?}"
    );
}

/// Names that are not keys (a future `@network`, Telegram update ids, hostile text) stay
/// distinct claims and inside the folder.
#[tokio::test]
async fn file_claim_names_stay_distinct_and_inside_the_folder() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = FileClaims::open(dir.path().join("claims")).expect("open");
    let names = [
        "claim:blog-hello",
        "claim:blog-hello@mastodon",
        "claim:blog-hello_40mastodon",
        "tg:update:42",
        "../../escape",
        "CLAIM:BLOG-HELLO",
        &"long".repeat(100),
    ];
    for n in names {
        assert!(
            store
                .first_sighting(n, Duration::from_secs(60))
                .await
                .unwrap(),
            "{n}"
        );
    }
    for n in names {
        assert!(
            !store
                .first_sighting(n, Duration::from_secs(60))
                .await
                .unwrap(),
            "{n}"
        );
    }
    let files = claim_files(store.dir());
    assert_eq!(
        files.len(),
        names.len() + 1,
        "one file per name plus the lock: {files:?}"
    );
    let outside: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(outside.len(), 1, "only the claims folder: {outside:?}");
}

/// Many store instances on one folder race to acquire one name, round after round: exactly one
/// wins each round, and every loser is told who holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_claims_racing_instances_one_winner() {
    let rounds = sized("POSTONCE_LOCAL_RACE_ROUNDS", 20) * 2;
    let racers = 8;
    let dir = tempfile::tempdir().expect("temp dir");
    let stores: Vec<Arc<FileClaims>> = (0..racers)
        .map(|_| Arc::new(FileClaims::open(dir.path().join("claims")).expect("open")))
        .collect();
    let mut winners_total = 0;
    let begun = Instant::now();
    for round in 0..rounds {
        let k = key(&unique("race-"));
        let barrier = Arc::new(tokio::sync::Barrier::new(racers));
        let tasks: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let (store, barrier, k) = (store.clone(), barrier.clone(), k.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let token = format!("run-{round}-{i}");
                    let got = store
                        .acquire(&k, &token, Duration::from_secs(60))
                        .await
                        .expect("acquire");
                    (token, got)
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.expect("task"));
        }
        let winners: Vec<_> = results
            .iter()
            .filter(|(_, g)| *g == Acquire::Acquired)
            .map(|(t, _)| t.clone())
            .collect();
        winners_total += winners.len();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (_, got) in &results {
            if *got != Acquire::Acquired {
                assert_eq!(
                    *got,
                    Acquire::Held(Some(ClaimValue::Run(winners[0].clone()))),
                    "round {round}"
                );
            }
        }
    }
    eprintln!(
        "file claims race: {rounds} rounds x {racers} instances, {winners_total} winners, {:.1?} per acquire",
        begun.elapsed() / u32::try_from(rounds * racers).unwrap_or(u32::MAX)
    );
}

fn content() -> DraftContent {
    DraftContent {
        caption: "Local drafts".into(),
        image: "https://cdn.example.com/cover.png".into(),
        link: None,
        alt: None,
        ..Default::default()
    }
}

/// Separate store instances on one folder apply conditional draft updates concurrently: none is
/// lost (each failure counts one attempt), and of racing conditional transitions exactly one
/// applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draft_updates_racing_instances_lose_nothing() {
    let (instances, each) = (8, 10);
    let dir = tempfile::tempdir().expect("temp dir");
    let stores: Vec<Arc<LocalStore>> = (0..instances)
        .map(|_| Arc::new(LocalStore::open(dir.path(), false).expect("open")))
        .collect();
    let k = key("contended");
    stores[0]
        .save_draft(&k, &content(), "cli", 1)
        .await
        .expect("save");

    let barrier = Arc::new(tokio::sync::Barrier::new(instances));
    let tasks: Vec<_> = stores
        .iter()
        .map(|store| {
            let (store, barrier, k) = (store.clone(), barrier.clone(), k.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut applied = 0;
                for n in 0..each {
                    let update = DraftUpdate::Failed {
                        error: format!("attempt {n}"),
                        retryable: true,
                        next_retry_at: None,
                    };
                    if store
                        .update_draft(&k, &update, &[DraftStatus::New, DraftStatus::Failed], 2)
                        .await
                        .expect("update")
                    {
                        applied += 1;
                    }
                }
                applied
            })
        })
        .collect();
    let mut applied = 0;
    for t in tasks {
        applied += t.await.expect("task");
    }
    let draft = stores[1]
        .load(&k, None)
        .await
        .expect("load")
        .draft
        .expect("draft");
    eprintln!(
        "draft race: {instances} instances x {each} updates: {applied} applied, attempts {}",
        draft.attempts
    );
    assert_eq!(applied, instances * each);
    assert_eq!(
        draft.attempts as usize,
        instances * each,
        "every applied update must count"
    );
    assert_eq!(draft.status, DraftStatus::Failed);

    // Racing transitions out of `failed`: one applies, the others find it moved already.
    let barrier = Arc::new(tokio::sync::Barrier::new(instances));
    let tasks: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let (store, barrier, k) = (store.clone(), barrier.clone(), k.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let review = DraftUpdate::NeedsReview {
                    error: format!("given up by instance {i}"),
                };
                store
                    .update_draft(&k, &review, &[DraftStatus::Failed], 3)
                    .await
                    .expect("update")
            })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        won += usize::from(t.await.expect("task"));
    }
    assert_eq!(won, 1, "one conditional transition applies");
    let draft = stores[2]
        .load(&k, None)
        .await
        .expect("load")
        .draft
        .expect("draft");
    assert_eq!(draft.status, DraftStatus::NeedsReview);
    assert_eq!(
        draft.attempts as usize,
        instances * each,
        "and nothing else changed"
    );
}

/// Racing record writes from separate instances: one is created, the others get it back, and
/// it is the one on disk with its draft marked posted; nothing temporary remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_racing_instances_create_once() {
    let instances = 8;
    let dir = tempfile::tempdir().expect("temp dir");
    let stores: Vec<Arc<LocalStore>> = (0..instances)
        .map(|_| Arc::new(LocalStore::open(dir.path(), false).expect("open")))
        .collect();
    let k = key("recorded");
    stores[0]
        .save_draft(&k, &content(), "cli", 1)
        .await
        .expect("save");
    let barrier = Arc::new(tokio::sync::Barrier::new(instances));
    let tasks: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let (store, barrier, k) = (store.clone(), barrier.clone(), k.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let record = PostedRecord {
                    key: k.to_string(),
                    post_id: Some(format!("urn:li:share:{i}")),
                    posted_at: 5,
                    run: format!("run-{i}"),
                    source: "cli".into(),
                    caption_hash: Some("ab12".into()),
                    url: None,
                    cid: None,
                };
                (
                    record.clone(),
                    store.put_posted(&record, 5, 99).await.expect("put"),
                )
            })
        })
        .collect();
    let mut created = Vec::new();
    let mut existing = HashSet::new();
    for t in tasks {
        match t.await.expect("task") {
            (record, PutPosted::Created) => created.push(record),
            (_, PutPosted::Exists(r)) => {
                existing.insert(r.run);
            }
        }
    }
    assert_eq!(created.len(), 1, "{created:?}");
    let snap = stores[3].load(&k, Some("ab12")).await.expect("load");
    assert_eq!(snap.record.as_ref(), Some(&created[0]));
    assert!(
        existing.iter().all(|run| *run == created[0].run),
        "{existing:?}"
    );
    assert_eq!(snap.draft.expect("draft").status, DraftStatus::Posted);
    assert_eq!(snap.caption_owner.as_deref(), Some(k.to_string().as_str()));
    let leftovers = std::fs::read_dir(dir.path().join("tmp"))
        .expect("tmp")
        .count();
    assert_eq!(leftovers, 0);
}

/// A dry run's claims live in the dry-run folder: a claim a dry run holds does not stop a real
/// run, and the real run's claim is not visible to dry runs.
#[tokio::test]
async fn dry_run_claims_live_apart_from_real_claims() {
    let env = Env::local().await;
    let mut dry_vars = env.vars.clone();
    dry_vars.remove("LINKEDIN_ACCESS_TOKEN");
    let dry = support::env::build(&dry_vars).await;
    let k = env.key();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        dry.pipeline
            .claims
            .acquire(&k, "dry-run-token", ttl)
            .await
            .unwrap(),
        Acquire::Acquired
    );
    assert_eq!(env.app.pipeline.claims.inspect(&k).await.unwrap(), None);
    assert_eq!(
        env.app
            .pipeline
            .claims
            .acquire(&k, "real-token", ttl)
            .await
            .unwrap(),
        Acquire::Acquired
    );
    let data_dir = env.data_dir.as_ref().expect("local env").path();
    assert!(data_dir.join("claims").is_dir() && data_dir.join("dry-run/claims").is_dir());
}

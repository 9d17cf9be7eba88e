//! Proof by crashes and by load, through the HTTP routes:
//! - crash chaos: `postonce serve` as a child process is SIGKILLed at random moments while runs
//!   are in flight, restarted, and the triggers repeated until every draft settles;
//! - storm: many keys, each hit by many concurrent triggers mixed across the CI webhook, the
//!   Telegram Retry button and the `postonce post` CLI.
//!
//! Sizes: `POSTONCE_CHAOS_TRIALS` (default 200), `POSTONCE_STORM_KEYS` × `POSTONCE_STORM_TRIGGERS`
//! (default 100 × 100). Both print their figures.

mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use postonce::key::PostKey;
use postonce::triggers::Router;
use serde_json::{json, Value};
use sha2::Sha256;
use support::env::{Env, Stores, CHAT, CI_SECRET, OWNER, TG_SECRET};
use support::services::free_port;
use support::telegram::callback_update;

fn sized(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sign(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(CI_SECRET.as_bytes()).expect("key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn ci_body(env: &Env, key: &PostKey) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": key.kind(), "slug": key.slug(),
        "caption": format!("Chaos and storms for {key}"),
        "image_url": env.images.url("/cover.png")
    }))
    .expect("json")
}

async fn send_ci(client: &reqwest::Client, base: &str, body: Vec<u8>) -> Option<Value> {
    let sig = sign(&body);
    let resp = client
        .post(format!("{base}/ci"))
        .header("X-Hub-Signature-256", sig)
        .body(body)
        .send()
        .await
        .ok()?;
    resp.json().await.ok()
}

struct Server {
    child: Child,
    base: String,
}

impl Server {
    async fn start(vars: &HashMap<String, String>) -> Self {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_postonce"));
        cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start postonce serve");
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let begun = Instant::now();
        while begun.elapsed() < Duration::from_secs(10) {
            if reqwest::get(format!("{}/healthz", server.base))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        server.kill();
        panic!("postonce serve did not come up");
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_chaos_no_duplicates_no_lost_drafts() {
    let trials = sized("POSTONCE_CHAOS_TRIALS", 200);
    let per_kill = 10;
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
            ("POSTONCE_CLAIM_TTL_S", "4"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1500"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1500"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "800"),
        ],
    )
    .await;
    // Each LinkedIn step takes a while, so kills land before, during and after create-post.
    env.linkedin.set_delay(Duration::from_millis(60));
    let client = reqwest::Client::new();
    let mut keys = Vec::new();
    let mut kills = 0;
    let begun = Instant::now();
    while keys.len() < trials {
        let server = Server::start(&env.vars).await;
        let mut round = Vec::new();
        for _ in 0..per_kill.min(trials - keys.len()) {
            let key = env.key();
            round.push(key.clone());
            keys.push(key);
        }
        for key in &round {
            // Two triggers per key: the webhook, and a redelivery of it.
            for _ in 0..2 {
                let (client, base, body) =
                    (client.clone(), server.base.clone(), ci_body(&env, key));
                tokio::spawn(async move { send_ci(&client, &base, body).await });
            }
        }
        let wait = rand::random::<u64>() % 400;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        server.kill();
        kills += 1;
    }

    // Settle: repeat the trigger (as CI redelivery or the Retry button would) until every
    // draft is posted, or in front of its owner.
    let server = Server::start(&env.vars).await;
    let mut settled: HashMap<String, String> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while settled.len() < keys.len() && Instant::now() < deadline {
        for key in &keys {
            if settled.contains_key(&key.to_string()) {
                continue;
            }
            let Some(outcome) = send_ci(&client, &server.base, ci_body(&env, key)).await else {
                continue;
            };
            if let Some(o @ ("posted" | "already_posted")) = outcome["outcome"].as_str() {
                settled.insert(key.to_string(), o.to_owned());
            }
        }
        if settled.len() < keys.len() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    server.kill();

    let posts = env.linkedin.posts();
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for p in &posts {
        *per_key.entry(p.commentary.clone()).or_default() += 1;
    }
    let duplicates = per_key.values().filter(|n| **n > 1).count();
    let mut lost = 0;
    for key in &keys {
        let st = env.status(key).await;
        let posted_once = per_key.get(&format!("Chaos and storms for {key}")) == Some(&1);
        if !(st.snapshot.record.is_some() && posted_once) {
            lost += 1;
        }
    }
    println!(
        "crash chaos: {} trials ({} keys, {kills} SIGKILLs of postonce serve), {} create-post requests, {} posts, duplicates {duplicates}, drafts lost {lost}, settled in {:?}",
        keys.len(),
        keys.len(),
        env.linkedin.create_requests(),
        posts.len(),
        begun.elapsed()
    );
    assert_eq!(duplicates, 0);
    assert_eq!(lost, 0, "every draft ends posted and recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_of_mixed_triggers_posts_each_key_once() {
    let keys_n = sized("POSTONCE_STORM_KEYS", 100);
    let triggers = sized("POSTONCE_STORM_TRIGGERS", 100);
    // Production budgets: the storm is about contention, not about timeouts.
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_FUNCTION_TIMEOUT_S", "60"),
            ("POSTONCE_CLAIM_TTL_S", "120"),
            ("POSTONCE_REDIS_TIMEOUT_MS", "8000"),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "8000"),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "10000"),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", "8000"),
        ],
    )
    .await;
    let port = free_port();
    let router = Arc::new(Router::new(env.app.clone()));
    tokio::spawn(postonce::serve::serve(
        router,
        format!("127.0.0.1:{port}").parse().expect("addr"),
    ));
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let keys: Vec<PostKey> = (0..keys_n).map(|_| env.key()).collect();
    let begun = Instant::now();
    let mut tally: HashMap<String, usize> = HashMap::new();
    let mut update_id = 50_000;
    // Five keys at a time, each with all its triggers at once.
    for wave in keys.chunks(5) {
        let mut handles = Vec::new();
        for key in wave {
            for i in 0..triggers {
                update_id += 1;
                let (client, base) = (client.clone(), base.clone());
                match i % 10 {
                    // CLI: a real `postonce post` process, once per key.
                    0 if i == 0 => {
                        let vars = env.vars.clone();
                        let image = env.images.url("/cover.png");
                        let (kind, slug) = (key.kind().to_owned(), key.slug().to_owned());
                        let caption = format!("Chaos and storms for {key}");
                        handles.push(tokio::task::spawn_blocking(move || {
                            let out = Command::new(env!("CARGO_BIN_EXE_postonce"))
                                .args([
                                    "post",
                                    "--kind",
                                    &kind,
                                    "--slug",
                                    &slug,
                                    "--caption",
                                    &caption,
                                    "--image",
                                    &image,
                                    "--json",
                                ])
                                .env_clear()
                                .env("PATH", std::env::var("PATH").unwrap_or_default())
                                .env("RUST_LOG", "off")
                                .envs(vars)
                                .output()
                                .expect("postonce post");
                            serde_json::from_slice::<Value>(&out.stdout)
                                .ok()
                                .and_then(|v| v["outcome"].as_str().map(str::to_owned))
                        }));
                    }
                    // Telegram Retry presses.
                    1..=3 => {
                        let update =
                            callback_update(update_id, OWNER, CHAT, 1, &format!("retry:{key}"));
                        handles.push(tokio::spawn(async move {
                            let r = client
                                .post(format!("{base}/telegram"))
                                .header("X-Telegram-Bot-Api-Secret-Token", TG_SECRET)
                                .json(&update)
                                .send()
                                .await
                                .ok()?;
                            let v: Value = r.json().await.ok()?;
                            v["outcome"]["outcome"].as_str().map(str::to_owned)
                        }));
                    }
                    // CI webhooks.
                    _ => {
                        let body = ci_body(&env, key);
                        handles.push(tokio::spawn(async move {
                            send_ci(&client, &base, body).await.and_then(|v| {
                                let o = v["outcome"].as_str()?;
                                Some(if o == "failed" {
                                    format!(
                                        "failed: {}",
                                        v["detail"]
                                            .as_str()
                                            .unwrap_or("")
                                            .chars()
                                            .take(50)
                                            .collect::<String>()
                                    )
                                } else {
                                    o.to_owned()
                                })
                            })
                        }));
                    }
                }
            }
        }
        for h in handles {
            let outcome = h.await.ok().flatten().unwrap_or_else(|| "no answer".into());
            *tally.entry(outcome).or_default() += 1;
        }
    }
    // A trigger that lost every race to a Telegram press made before the draft existed is
    // settled by one more webhook, as CI's redelivery would.
    for key in &keys {
        let _ = send_ci(&client, &base, ci_body(&env, key)).await;
    }
    let posts = env.linkedin.posts();
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for p in &posts {
        *per_key.entry(p.commentary.clone()).or_default() += 1;
    }
    println!(
        "storm: {keys_n} keys x {triggers} concurrent triggers (CI webhook, Telegram Retry, postonce post) in {:?}: outcomes {tally:?}; create-post requests {}, posts {}",
        begun.elapsed(),
        env.linkedin.create_requests(),
        posts.len()
    );
    assert_eq!(
        env.linkedin.create_requests(),
        keys_n as u64,
        "exactly one create-post per key"
    );
    assert_eq!(posts.len(), keys_n);
    assert!(per_key.values().all(|n| *n == 1));
}

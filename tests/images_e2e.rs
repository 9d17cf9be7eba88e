//! The images issue (23) through the real pipeline: real redis-server and DynamoDB Local, every
//! network a wire-format fake that holds an image to that network's documented limits and
//! refuses what is over them with the network's own error (tests/fake_limits.rs checks the
//! fakes themselves). Every count and every hash is taken at the fakes:
//!
//! - a 3 MB noise PNG cover, in one run to every network: each network receives an image
//!   within its limits; where the original fits (LinkedIn, X, the channel, Threads' own fetch)
//!   it arrives byte for byte (SHA-256 equal); Mastodon (an instance stating a 2,000,000-byte
//!   limit) and Bluesky (1,000,000) get renditions; the outcome JSON's `targets.<net>.image`
//!   says original or rendition with the format, bytes and pixels that arrived;
//! - a WebP cover, in one run: X, Mastodon and Bluesky get the original, LinkedIn and the
//!   channel a rendition; Threads, which fetches the URL itself and takes no WebP, is refused
//!   before any request to it, and the others go on: `partial`;
//! - a Bluesky put that failed ambiguously, with a cover that needed a rendition, is put again
//!   after the quiet period by another process (`postonce post`), with the identical record and
//!   the same blob CID: one post; one whose answer was lost after the PDS wrote it is found at
//!   its key, with no second write;
//! - bad covers behind a URL (cut short, a decompression bomb, a type that lies): every target
//!   fails before any upload anywhere, `failed` and not retryable (422 on the CI route, exit 1
//!   from `postonce post`), the owner told once, never retried by the sweeper; a corrupt local
//!   file given to `postonce post --image` exits 2 and stores nothing.
//!
//! Each test prints its figures.

use crate::support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use postonce::budget::Deadline;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::triggers::{HttpRequest, Router};
use serde_json::{json, Value};
use support::bluesky::Mode as BskyMode;
use support::covers;
use support::env::{sign, Env, Stores};
use support::received::Received;
use support::{bluesky, instagram, linkedin, tg_channel, threads, x};

/// A quiet period of 2 s: above every network budget of the environment (1.5 s each).
const QUIET: (&str, &str) = ("POSTONCE_RECONCILE_AFTER_S", "2");
/// The image budget (fetch, check, rendition) generous enough for a loaded 2-core machine; the
/// cost itself is measured in `bench/`, not here.
const IMAGE_BUDGET: (&str, &str) = ("POSTONCE_IMAGE_TIMEOUT_MS", "10000");
/// A hang long enough that the 1.5 s budget gives up first.
const HANG: Duration = Duration::from_secs(3);
/// The limit the Mastodon instance of the first test states (`image_size_limit`).
const MASTODON_LIMIT: usize = 2_000_000;

// ---------------------------------------------------------------------------------------------
// Helpers.

async fn env() -> Env {
    Env::with_every_network(Stores::Real, &[QUIET, IMAGE_BUDGET]).await
}

/// [`env`] with a 6 s budget per network call (and a quiet period above it): for a run that
/// sends a 3 MB image to every network at once, which a loaded 2-core machine cannot always do
/// within 1.5 s a call. What is checked is what each network gets, not how fast.
async fn roomy_env() -> Env {
    let budgets: Vec<String> = Network::ALL
        .iter()
        .map(|n| format!("POSTONCE_{}_TIMEOUT_MS", n.as_str().to_ascii_uppercase()))
        .collect();
    let mut overrides: Vec<(&str, &str)> = budgets.iter().map(|v| (v.as_str(), "6000")).collect();
    overrides.extend([("POSTONCE_RECONCILE_AFTER_S", "8"), IMAGE_BUDGET]);
    Env::with_every_network(Stores::Real, &overrides).await
}

fn target(o: &Outcome, n: Network) -> TargetOutcome {
    o.targets
        .as_ref()
        .and_then(|t| t.get(&n))
        .cloned()
        .unwrap_or_else(|| panic!("no {} in the outcome's targets: {o:?}", n.as_str()))
}

/// What one network must be sent: the original (byte for byte), a rendition, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Original,
    Rendition,
    Refused,
}

/// Whether `r` is within `n`'s documented limits (the numbers the fakes enforce); `Err` names
/// the limit it breaks. `mastodon`: the instance's stated byte limit.
fn within(n: Network, r: &Received, mastodon: usize) -> Result<(), String> {
    let (jpeg_png, w, px) = (["image/jpeg", "image/png"], r.width, r.pixels());
    let ok = match n {
        Network::Linkedin => r.is_one_of(&linkedin::FORMATS) && px <= linkedin::MAX_PIXELS,
        Network::X => r.is_one_of(&x::FORMATS) && r.bytes <= x::MAX_IMAGE_BYTES,
        Network::Telegram => {
            r.is_one_of(&jpeg_png)
                && r.bytes <= tg_channel::MAX_PHOTO_BYTES
                && r.width + r.height <= tg_channel::MAX_SIDE_SUM
                && !r.shape_over(tg_channel::MAX_RATIO)
        }
        Network::Mastodon => {
            r.is_one_of(&support::mastodon::IMAGE_MIME_TYPES)
                && r.bytes <= mastodon
                && px <= support::mastodon::IMAGE_MATRIX_LIMIT
        }
        Network::Bluesky => {
            r.format.is_some_and(|f| f.starts_with("image/"))
                && r.bytes as u64 <= bluesky::MAX_IMAGE_BYTES
        }
        Network::Threads => {
            r.is_one_of(&jpeg_png)
                && r.bytes <= threads::MAX_IMAGE_BYTES
                && (threads::MIN_WIDTH..=threads::MAX_WIDTH).contains(&w)
                && !r.shape_over(threads::MAX_RATIO)
        }
        Network::Discord => {
            r.is_one_of(&["image/jpeg", "image/png", "image/gif", "image/webp"])
                && r.bytes <= 10 * 1024 * 1024
        }
        Network::Instagram => {
            r.is_one_of(&["image/jpeg"])
                && r.bytes <= instagram::MAX_IMAGE_BYTES
                && (instagram::MIN_WIDTH..=instagram::MAX_WIDTH).contains(&w)
        }
        Network::Facebook => r.is_one_of(&["image/jpeg", "image/png"]) && r.bytes <= 4_000_000,
        Network::Nostr => {
            r.is_one_of(&["image/jpeg", "image/png", "image/gif", "image/webp"])
                && r.bytes <= support::nostr::BLOSSOM_MAX
        }
    };
    if ok && r.taken() {
        Ok(())
    } else {
        Err(format!("{}: {}", n.label(), r.describe()))
    }
}

/// Checks one run's every target against `want`: posted once with an image within its
/// network's limits, the original byte for byte where it fits, the outcome JSON's
/// `targets.<net>.image` naming what arrived; a refused target failed before any request.
/// Prints a line per network.
fn check_targets(
    env: &Env,
    key: &PostKey,
    o: &Outcome,
    original: &[u8],
    want: &BTreeMap<Network, Want>,
    mastodon: usize,
) {
    let json = serde_json::to_value(o).expect("the outcome JSON");
    let (ow, oh) = covers::size_of(original);
    let hash = covers::sha256(original);
    for (&n, &w) in want {
        let t = target(o, n);
        let shown = &json["targets"][n.as_str()]["image"];
        let got = env.images_on(key, n);
        println!(
            "{:>16}: {:?}, image {shown}; received {:?}",
            n.label(),
            t.outcome,
            got.iter().map(Received::describe).collect::<Vec<_>>()
        );
        if w == Want::Refused {
            assert_eq!(
                (t.outcome, t.retryable),
                (OutcomeKind::Failed, false),
                "{n:?}: {o:?}"
            );
            assert!(got.is_empty(), "{n:?}");
            continue;
        }
        assert_eq!(t.outcome, OutcomeKind::Posted, "{n:?}: {o:?}");
        assert_eq!(env.posts_on(key, n).len(), 1, "{n:?}: one post");
        assert_eq!(got.len(), 1, "{n:?}: one image: {got:?}");
        let r = &got[0];
        within(n, r, mastodon).unwrap_or_else(|e| panic!("over its limits: {e}"));
        // The outcome JSON says what arrived.
        assert_eq!(
            (
                shown["format"].as_str(),
                shown["bytes"].as_u64(),
                shown["width"].as_u64(),
                shown["height"].as_u64()
            ),
            (
                r.format,
                Some(r.bytes as u64),
                Some(u64::from(r.width)),
                Some(u64::from(r.height))
            ),
            "{n:?}: the outcome JSON's image is what the network received: {shown}"
        );
        match w {
            Want::Original => {
                assert_eq!(shown["kind"], "original", "{n:?}: {shown}");
                assert_eq!(r.sha256, hash, "{n:?}: the original, byte for byte");
            }
            Want::Rendition => {
                assert_eq!(shown["kind"], "rendition", "{n:?}: {shown}");
                assert_ne!(r.sha256, hash, "{n:?}");
                // The shape kept, never enlarged.
                assert!(r.width <= ow && r.height <= oh, "{n:?}: {}", r.describe());
                let (a, b) = (
                    f64::from(r.width) / f64::from(r.height),
                    f64::from(ow) / f64::from(oh),
                );
                assert!((a - b).abs() / b < 0.01, "{n:?}: shape {a} for {b}");
            }
            Want::Refused => unreachable!(),
        }
    }
    if let Some(b) = env.bluesky.as_ref() {
        for rec in b.records().iter().filter(|r| r.text().contains(key.slug())) {
            for i in &rec.images {
                assert_eq!(
                    i.aspect_ratio_matches(),
                    Some(true),
                    "Bluesky's aspectRatio is the blob's own size: {i:?}"
                );
            }
        }
    }
}

/// A draft for `key` whose cover is `path` on the image host.
fn draft_with(env: &Env, key: &PostKey, path: &str) -> postonce::record::DraftContent {
    let mut content = env.announcement(key);
    content.image = env.images.url(path);
    content
}

/// `postonce <args>` as its own process, over this environment's stores and fakes.
fn postonce(env: &Env, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "off")
        .envs(&env.vars)
        .output()
        .expect("run postonce");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `POST /ci`, signed, through the router every transport uses.
async fn ci(env: &Env, body: &Value) -> (u16, Value) {
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
    let resp = Router::new(env.app.clone())
        .handle(
            req,
            Deadline::after(Duration::from_secs(20)),
            postonce::pipeline::new_run_id(),
        )
        .await;
    (resp.status, support::answer(&resp))
}

/// Image uploads (or, for Threads, containers, whose image it fetches) and creates at every
/// fake so far, by network.
fn uploads_and_creates(env: &Env) -> BTreeMap<Network, (u64, u64)> {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    Network::ALL
        .into_iter()
        .map(|n| {
            let uploads = match n {
                Network::Linkedin => count(env.linkedin.images().len()),
                Network::X => env.x().upload_requests(),
                Network::Telegram => env.channel().send_photo_requests(),
                Network::Mastodon => env.mastodon().upload_requests(),
                Network::Bluesky => env.bluesky().upload_requests(),
                Network::Threads => env.threads().container_requests(),
                // The bytes travel with the create.
                Network::Discord => env.discord().create_requests(),
                Network::Instagram => env.instagram().container_requests(),
                // The bytes travel with the create.
                Network::Facebook => env.facebook().totals().0,
                Network::Nostr => env.blossom().uploads(),
            };
            (n, (uploads, env.fake_totals(n).0))
        })
        .collect()
}

/// Messages in the owner's chat that mention `key`.
fn told(env: &Env, key: &PostKey) -> usize {
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| t.contains(&key.to_string()))
        .count()
}

// ---------------------------------------------------------------------------------------------
// 1. One run, every network, each within its limits.

/// A 3 MB noise PNG (1000×1000, which no codec compresses) to every network in one run. The
/// Mastodon instance states a 2,000,000-byte `image_size_limit` (read by a process started
/// after it said so).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_3_mb_noise_png_reaches_every_network_within_its_limits_in_one_run() {
    let env = roomy_env().await;
    env.mastodon().set_image_size_limit(MASTODON_LIMIT);
    let app = env.another_app().await;
    let noise = covers::noise_png(1000, 1000, 23);
    println!("the original: PNG {} bytes, 1000×1000", noise.len());
    assert!(noise.len() > MASTODON_LIMIT && noise.len() < x::MAX_IMAGE_BYTES);
    env.images
        .serve("/noise.png", noise.clone(), "image/png")
        .await;

    let key = env.key();
    let o = app
        .pipeline
        .run(
            env.request(&key, Some(draft_with(&env, &key, "/noise.png"))),
            env.deadline(),
        )
        .await;
    println!("one run, every network: {:?} ({})", o.outcome, o.detail);
    // Instagram takes JPEG only and fetches the draft's own URL: a PNG cannot reach it until
    // a rendition can be hosted for it (issue 33, item 5): refused before any request.
    assert_eq!(o.outcome, OutcomeKind::Partial, "{o:?}");
    let want = BTreeMap::from([
        (Network::Linkedin, Want::Original),
        (Network::X, Want::Original),
        (Network::Telegram, Want::Original),
        (Network::Mastodon, Want::Rendition),
        (Network::Bluesky, Want::Rendition),
        (Network::Threads, Want::Original),
        (Network::Discord, Want::Original),
        (Network::Instagram, Want::Refused),
        (Network::Facebook, Want::Original),
    ]);
    check_targets(&env, &key, &o, &noise, &want, MASTODON_LIMIT);
    // Threads was given the draft's own URL, and fetched the original from it.
    let c = env.threads().containers();
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].image_url.as_deref(),
        Some(env.images.url("/noise.png").as_str())
    );
    // No network refused an image: nothing over a limit was ever sent.
    for n in Network::ALL {
        let refused = match n {
            Network::Linkedin => env.linkedin.images(),
            Network::X => env.x().images(),
            Network::Telegram => env.channel().images(),
            Network::Mastodon => env.mastodon().images(),
            Network::Bluesky => env.bluesky().uploads(),
            Network::Threads => env.threads().images(),
            Network::Discord => env
                .discord()
                .messages()
                .into_iter()
                .filter_map(|m| m.image)
                .collect(),
            Network::Instagram => env.instagram().images(),
            Network::Facebook => env
                .facebook()
                .posts()
                .into_iter()
                .filter_map(|p| p.image)
                .collect(),
            Network::Nostr => env.blossom().blobs(),
        }
        .into_iter()
        .filter(|r| !r.taken())
        .count();
        assert_eq!(refused, 0, "{n:?} refused an image");
    }
}

/// A WebP cover (what static-site generators emit) to every network in one run: LinkedIn
/// and the channel, which take no WebP, get renditions; X, Mastodon and Bluesky the original;
/// Threads, which fetches the URL itself and takes JPEG or PNG only, is refused before any
/// request to it, with the reason, and the others go on: `partial`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webp_cover_reaches_every_network_that_can_take_it_and_threads_is_refused_first() {
    let env = env().await;
    let webp = covers::webp(1200, 630);
    println!("the original: WebP {} bytes, 1200×630", webp.len());
    assert!(webp.len() as u64 <= bluesky::MAX_IMAGE_BYTES);
    env.images
        .serve("/cover.webp", webp.clone(), "image/webp")
        .await;
    let key = env.key();
    let o = env
        .app
        .pipeline
        .run(
            env.request(&key, Some(draft_with(&env, &key, "/cover.webp"))),
            env.deadline(),
        )
        .await;
    println!("one run, every network: {:?} ({})", o.outcome, o.detail);
    assert_eq!(o.outcome, OutcomeKind::Partial, "{o:?}");
    assert_eq!((o.http_status(), o.exit_code()), (202, 6));
    let want = BTreeMap::from([
        (Network::Linkedin, Want::Rendition),
        (Network::X, Want::Original),
        (Network::Telegram, Want::Rendition),
        (Network::Mastodon, Want::Original),
        (Network::Bluesky, Want::Original),
        (Network::Threads, Want::Refused),
        (Network::Instagram, Want::Refused),
        // JPEG or PNG only: a WebP gets a rendition, its bytes sent with the post.
        (Network::Facebook, Want::Rendition),
    ]);
    check_targets(
        &env,
        &key,
        &o,
        &webp,
        &want,
        support::mastodon::IMAGE_SIZE_LIMIT,
    );
    let th = target(&o, Network::Threads);
    println!("Threads: {}", th.detail);
    assert!(
        th.detail.contains("WebP") && th.detail.contains("URL"),
        "the reason: {th:?}"
    );
    assert_eq!(env.threads().requests(), 0, "no request to Threads");
}

// ---------------------------------------------------------------------------------------------
// 3. Bluesky: an ambiguous put, replayed with the same blob.

/// The cover needs a rendition for Bluesky (a noise PNG of 1.5 MB). The first put never lands
/// (the PDS hangs past the budget: `unknown`). After the quiet period another process
/// (`postonce post`, the stored draft) fetches and renders the cover again, uploads it, and
/// puts the identical record: the same blob CID, one post. A second draft's put is written
/// and its answer lost: after the quiet period it is found at its record key, one post, no
/// second write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ambiguous_bluesky_put_is_put_again_with_the_same_blob_and_posts_once() {
    let env = env().await;
    let b = env.bluesky();
    let noise = covers::noise_png(700, 700, 5);
    assert!(noise.len() as u64 > bluesky::MAX_IMAGE_BYTES);
    env.images
        .serve("/big.png", noise.clone(), "image/png")
        .await;
    let run = |key: &PostKey, fresh: bool| {
        let content = fresh.then(|| draft_with(&env, key, "/big.png"));
        env.app.pipeline.run(
            env.request_to(key, content, &[Network::Bluesky]),
            env.deadline(),
        )
    };
    let link = |body: &Value| {
        body["record"]["embed"]["images"][0]["image"]["ref"]["$link"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    // The put never lands.
    let key = env.key();
    b.set_put_mode(BskyMode::Hang(HANG));
    let first = run(&key, true).await;
    println!("the put hangs, nothing written: {:?}", first.outcome);
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    let first_put = b.last_put_body();
    let blob = link(&first_put);
    assert_eq!((b.put_requests(), b.posts_created()), (1, 0));
    b.set_put_mode(BskyMode::Normal);
    tokio::time::sleep(env.quiet_period() + Duration::from_millis(1_100)).await;

    let (code, v, err) = postonce(
        &env,
        &[
            "post",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--targets",
            "bluesky",
            "--json",
        ],
    );
    println!("postonce post (another process): exit {code:?} {v}");
    assert_eq!(code, Some(0), "{v} {err}");
    let t = &v["targets"]["bluesky"];
    assert!(
        matches!(t["outcome"].as_str(), Some("posted" | "already_posted")),
        "{v}"
    );
    let again = b.last_put_body();
    let uploads: Vec<String> = b.uploads().into_iter().map(|r| r.sha256).collect();
    println!(
        "Bluesky figures: uploads {} (hashes equal: {}), puts {}, posts {}, blob {blob} then {}",
        uploads.len(),
        uploads.windows(2).all(|w| w[0] == w[1]),
        b.put_requests(),
        b.posts_created(),
        link(&again)
    );
    assert_eq!(b.put_requests(), 2, "put again");
    assert_eq!(link(&again), blob, "the same blob CID");
    assert_eq!(again["record"], first_put["record"], "the identical record");
    assert!(uploads.len() >= 2, "uploaded again for the replay");
    assert!(
        uploads.windows(2).all(|w| w[0] == w[1]),
        "the rendition made in another process is the same bytes"
    );
    assert_eq!(b.posts_created(), 1, "one post");
    let rec = b.records().pop().expect("the post");
    let img = &rec.images[0];
    assert_eq!(img.cid, blob);
    let stored = b.blob(&blob).expect("the blob is stored");
    assert_eq!(
        stored.image.sha256, uploads[0],
        "the blob is the bytes uploaded"
    );
    assert_eq!(img.image.format, Some("image/jpeg"), "a rendition");
    assert!(img.image.bytes as u64 <= bluesky::MAX_IMAGE_BYTES);
    assert_eq!(img.aspect_ratio_matches(), Some(true));
    // What was sent, as the replay's outcome shows it.
    assert_eq!(t["image"]["kind"], "rendition", "{v}");
    assert_eq!(t["image"]["bytes"].as_u64(), Some(img.image.bytes as u64));

    // The put is written, its answer lost.
    let lost = env.key();
    b.set_put_mode(BskyMode::AcceptThenHang(HANG));
    let first = run(&lost, true).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    b.set_put_mode(BskyMode::Normal);
    let (puts, blob) = (b.put_requests(), link(&b.last_put_body()));
    tokio::time::sleep(env.quiet_period() + Duration::from_millis(1_100)).await;
    let o = run(&lost, false).await;
    println!(
        "the answer was lost: {:?}; puts +{}",
        o.outcome,
        b.put_requests() - puts
    );
    assert!(
        matches!(
            target(&o, Network::Bluesky).outcome,
            OutcomeKind::Posted | OutcomeKind::AlreadyPosted
        ),
        "{o:?}"
    );
    assert_eq!(b.put_requests(), puts, "found at its key: no second write");
    assert_eq!(b.posts_created(), 2, "one post per draft");
    assert_eq!(b.max_posts_per_text(), 1);
    let rec = b
        .records()
        .into_iter()
        .find(|r| r.text().contains(lost.slug()))
        .expect("the post");
    assert_eq!(rec.images[0].cid, blob);
}

// ---------------------------------------------------------------------------------------------
// 4. Bad covers.

/// Serves covers that are cut short, a decompression bomb, or lie about their type, and posts a
/// draft with each through the signed CI route (every target): each answers 422, `failed`, not
/// retryable, every target failed naming the cause. Returns the drafts' keys.
async fn post_bad_covers(env: &Env) -> Vec<PostKey> {
    let noise = covers::noise_png(400, 300, 9);
    let bad: [(&str, Vec<u8>, &str); 3] = [
        (
            "/cut.png",
            covers::truncated(&noise, noise.len() - 100),
            "cut short",
        ),
        ("/bomb.png", covers::bomb_png(100_000), "pixels"),
        ("/lying.png", covers::lying_png(), "PNG"),
    ];
    let mut keys = vec![];
    for (p, bytes, cause) in bad {
        env.images.serve(p, bytes, "image/png").await;
        let key = env.key();
        let (caption, _) = support::env::announcement(&key);
        let (status, body) = ci(
            env,
            &json!({"kind": key.kind(), "slug": key.slug(), "caption": caption, "image_url": env.images.url(p)}),
        )
        .await;
        println!("CI route, {p}: {status} {}", body["detail"]);
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            (body["outcome"].as_str(), body["retryable"].as_bool()),
            (Some("failed"), Some(false)),
            "{body}"
        );
        for n in Network::ALL {
            let t = &body["targets"][n.as_str()];
            assert_eq!(
                (t["outcome"].as_str(), t["retryable"].as_bool()),
                (Some("failed"), Some(false)),
                "{n:?}: {body}"
            );
            assert!(
                t["detail"].as_str().is_some_and(|d| d.contains(cause)),
                "{n:?} names the cause ({cause}): {t}"
            );
        }
        keys.push(key);
    }
    keys
}

/// Two sweeps: neither runs any of `keys`' drafts. Returns the messages they sent.
async fn sweep_twice(env: &Env, keys: &[PostKey]) -> Vec<String> {
    let messages = env.telegram.requests_for("sendMessage").len();
    for _ in 0..2 {
        let r = env.sweep().await;
        let ours: Vec<&Outcome> = r
            .runs
            .iter()
            .filter(|o| keys.iter().any(|k| o.key.starts_with(&k.to_string())))
            .collect();
        assert!(ours.is_empty(), "the sweeper ran {ours:?}");
    }
    let said: Vec<String> = env
        .telegram
        .requests_for("sendMessage")
        .iter()
        .skip(messages)
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    println!("the two sweeps sent {} messages", said.len());
    for m in &said {
        println!(
            "  the sweeps said: {}",
            m.lines().next().unwrap_or_default()
        );
    }
    said
}

/// Covers behind a URL that are cut short, a decompression bomb, or lie about their type:
/// every target fails before any upload anywhere; `failed`, not retryable: 422 on the CI route,
/// exit 1 from `postonce post`; the run's report tells the owner, once per run; the sweeper
/// never tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_cover_fails_every_target_before_any_upload_and_is_never_retried() {
    let env = env().await;
    let before = uploads_and_creates(&env);
    let mut keys = post_bad_covers(&env).await;

    // The CLI, with a URL: exit 1.
    let key = env.key();
    let (caption, _) = support::env::announcement(&key);
    let url = env.images.url("/cut.png");
    let (code, v, err) = postonce(
        &env,
        &[
            "post",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--caption",
            &caption,
            "--image",
            &url,
            "--json",
        ],
    );
    println!(
        "postonce post --image <a cut-short URL>: exit {code:?} {}",
        v["detail"]
    );
    assert_eq!(code, Some(1), "{v} {err}");
    assert_eq!(
        (v["outcome"].as_str(), v["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{v}"
    );
    keys.push(key);

    let after = uploads_and_creates(&env);
    println!("uploads and creates at the fakes, before and after: {before:?} / {after:?}");
    assert_eq!(after, before, "no upload and no create anywhere");
    for key in &keys {
        assert_eq!(told(&env, key), 1, "{key}: the run's report, once");
    }
    sweep_twice(&env, &keys).await;
    assert_eq!(uploads_and_creates(&env), before, "never retried");
    for key in &keys {
        for n in Network::ALL {
            let d = env.status(&key.on(n)).await.snapshot.draft;
            let d = d.expect("the draft");
            assert_eq!(
                (d.status, d.retryable, d.next_retry_at),
                (postonce::record::DraftStatus::Failed, false, None),
                "{key} {n:?}: {d:?}"
            );
        }
    }
}

/// The owner hears about a bad cover once: the run's report names every target; the sweeps
/// that follow add nothing (issue 23: "told once, never retried by the sweeper").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_cover_is_told_once_and_not_again_by_the_sweeper() {
    let env = env().await;
    let keys = post_bad_covers(&env).await;
    for key in &keys {
        assert_eq!(told(&env, key), 1, "{key}: the run's report");
    }
    let said = sweep_twice(&env, &keys).await;
    for key in &keys {
        assert_eq!(
            told(&env, key),
            1,
            "{key}: told once; the sweeps added {said:#?}"
        );
    }
}

/// A corrupt local file given to `postonce post --image PATH` exits 2, and nothing is stored
/// or sent: no draft, no record, no request to any network, no report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_local_cover_exits_2_and_stores_nothing() {
    let env = env().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("cover.jpg");
    let jpeg = covers::jpeg(800, 420, 85);
    std::fs::write(&path, covers::truncated(&jpeg, jpeg.len() * 2 / 3)).expect("the file");
    let key = env.key();
    let (caption, _) = support::env::announcement(&key);
    let before = uploads_and_creates(&env);
    let messages = env.telegram.requests_for("sendMessage").len();
    let (code, v, err) = postonce(
        &env,
        &[
            "post",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--caption",
            &caption,
            "--image",
            path.to_str().expect("a UTF-8 path"),
            "--json",
        ],
    );
    println!("postonce post --image <a corrupt file>: exit {code:?}; {v} {err}");
    assert_eq!(code, Some(2), "{v} {err}");
    assert!(
        format!("{v}{err}").contains("cut short"),
        "the cause is named: {v} {err}"
    );
    for n in Network::ALL {
        let s = env.status(&key.on(n)).await.snapshot;
        assert!(
            s.draft.is_none() && s.record.is_none(),
            "{n:?}: nothing stored: {s:?}"
        );
    }
    assert_eq!(uploads_and_creates(&env), before, "nothing sent");
    assert_eq!(
        env.telegram.requests_for("sendMessage").len(),
        messages,
        "no report"
    );
}

//! Covers hosted for the networks that fetch the image themselves (issue 33, item 5): Threads
//! and Instagram as their wire-format fakes, which fetch the URL they are given and keep what
//! they fetched (its SHA-256, format and size); a real `postonce serve` answering
//! `GET /covers/<sha256>.<ext>` (self-hosted, `POSTONCE_PUBLIC_URL`), and a real S3 server, moto
//! (`POSTONCE_COVERS_BUCKET`), handing over presigned URLs.
//!
//! - a local cover goes to Threads byte for byte through the hosted URL, and a rendition (a
//!   cover too wide for Threads, a PNG for Instagram, which takes JPEG only) reaches them the
//!   same way: the fake fetches exactly the bytes whose SHA-256 names the file, never the
//!   draft's own URL;
//! - a replay (a new container after the first expired) stages the same URL;
//! - the route refuses every name that is not strictly `<64 lower-case hex>.<jpg|png|gif|webp>`
//!   (traversal, upper case, another extension, a link planted in the folder) with a 404, and
//!   answers HEAD; other methods get a 405;
//! - in S3: the same through presigned URLs; moto with its authentication on takes the signed
//!   PUT and refuses one signed with a wrong secret, and botocore computes the same presigned
//!   signature as postonce;
//! - without a host, a local cover is still refused for Threads (`threads_pipeline.rs`,
//!   `a_local_file_cover_fails_threads_before_any_request_and_the_run_is_partial`).

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::{Outcome, OutcomeKind, TargetOutcome};
use postonce::record::DraftContent;
use support::covers::{sha256, smooth_png};
use support::env::{Env, Stores};
use support::meta::{Dialect, MetaFake};
use support::moto::MotoServer;
use support::serve::ServeProcess;
use support::services::free_port;
use support::threads::Mode;
use tokio::sync::Mutex;

/// The fakes' clocks and the quiet period are per environment, but the serve processes'
/// ports are not worth racing: one test at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

fn target(o: &Outcome, n: Network) -> TargetOutcome {
    o.targets
        .as_ref()
        .and_then(|t| t.get(&n))
        .cloned()
        .unwrap_or_else(|| panic!("no {} in the outcome's targets: {o:?}", n.as_str()))
}

/// A self-hosted set-up: a covers folder, and `postonce serve` answering it at its public URL.
struct SelfHosted {
    serve: ServeProcess,
    dir: tempfile::TempDir,
    _data: tempfile::TempDir,
    public: String,
}

impl SelfHosted {
    async fn start() -> Self {
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}");
        let dir = tempfile::tempdir().expect("covers dir");
        let data = tempfile::tempdir().expect("data dir");
        let vars: HashMap<String, String> = [
            ("POSTONCE_PUBLIC_URL", public.clone()),
            ("POSTONCE_COVERS_DIR", dir.path().display().to_string()),
            ("POSTONCE_DATA_DIR", data.path().display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let serve = ServeProcess::start_on(port, &vars, false).await;
        Self {
            serve,
            dir,
            _data: data,
            public,
        }
    }

    /// The variables that make an environment host its covers here.
    fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("POSTONCE_PUBLIC_URL", self.public.clone()),
            ("POSTONCE_COVERS_DIR", self.dir.path().display().to_string()),
        ]
    }
}

/// An environment whose drafts go to `n` (`Stores::Local`), with `hosting` applied.
async fn env_for(n: Network, hosting: &[(&'static str, String)]) -> Env {
    // The cover step renders and stages real images (a 2000×1000 PNG made a JPEG, put in the
    // bucket) in a debug build: 1.5 s, the shared environment's image budget, ran out once on a
    // loaded machine. None of these tests is about that budget.
    let mut overrides: Vec<(&str, &str)> = vec![("POSTONCE_IMAGE_TIMEOUT_MS", "6000")];
    overrides.extend(hosting.iter().map(|(k, v)| (*k, v.as_str())));
    match n {
        Network::Threads => Env::with_threads(Stores::Local, &overrides).await,
        Network::Instagram => Env::with_instagram(Stores::Local, &overrides).await,
        other => panic!("{other:?} does not fetch its covers"),
    }
}

/// One run of a fresh draft of `key` with `image` as its cover, to `n` only.
async fn post_to(env: &Env, key: &PostKey, image: &str, n: Network) -> Outcome {
    let mut content: DraftContent = env.announcement(key);
    content.image = image.to_owned();
    env.app
        .pipeline
        .run(env.request_to(key, Some(content), &[n]), env.deadline())
        .await
}

/// A local cover file holding `bytes`, kept for the test.
fn local_cover(bytes: &[u8], ext: &str) -> tempfile::TempPath {
    let f = tempfile::Builder::new()
        .suffix(&format!(".{ext}"))
        .tempfile()
        .expect("temp file");
    std::fs::write(f.path(), bytes).expect("write the cover");
    f.into_temp_path()
}

/// Waits until the fake has fetched the image of every container (it fetches on its own thread).
async fn fetched<D: Dialect>(fake: &MetaFake<D>) -> Vec<support::meta::Container> {
    for _ in 0..400 {
        let all = fake.containers();
        if all.iter().all(|c| c.fetched.is_some()) {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fake never fetched its images: {:?}", fake.containers());
}

/// The one container's image URL and what the fake fetched from it; checks that the file name
/// is the SHA-256 of those very bytes, with the extension of their format.
async fn one_hosted<D: Dialect>(
    fake: &MetaFake<D>,
    prefix: &str,
) -> (String, support::received::Received) {
    let containers = fetched(fake).await;
    assert_eq!(containers.len(), 1, "{containers:?}");
    let c = &containers[0];
    let url = c.image_url.clone().expect("an image URL");
    let got = c.image.clone().expect("the fake fetched an image");
    assert!(got.taken(), "the network took it: {}", got.describe());
    assert!(url.starts_with(prefix), "{url} is hosted under {prefix}");
    let file = url[prefix.len()..].split('?').next().unwrap_or_default();
    let ext = match got.format {
        Some("image/jpeg") => "jpg",
        Some("image/png") => "png",
        other => panic!("unexpected format {other:?}"),
    };
    assert_eq!(
        file,
        format!("{}.{ext}", got.sha256),
        "the name is the SHA-256 of the bytes the network fetched"
    );
    (url, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_hosted_a_local_cover_and_a_rendition_reach_threads_through_serve() {
    let _serial = SERIAL.lock().await;
    let host = SelfHosted::start().await;
    let env = env_for(Network::Threads, &host.vars()).await;
    let t = env.threads();
    let prefix = format!("{}/covers/", host.public);

    // A local file within Threads' limits: the original, byte for byte, from the host.
    let original = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png"))
        .expect("the example cover");
    let file = local_cover(&original, "png");
    let key = env.key();
    let o = post_to(&env, &key, &file.display().to_string(), Network::Threads).await;
    println!("a local cover to Threads, self-hosted: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(th.image.as_ref().map(|i| i.kind.as_str()), Some("original"));
    let (url, got) = one_hosted(t, &prefix).await;
    assert_eq!(got.sha256, sha256(&original), "byte for byte");
    println!("Threads fetched {url}: {}", got.describe());
    assert_eq!(t.posts_created(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_hosted_a_cover_too_wide_for_threads_reaches_it_as_a_rendition() {
    let _serial = SERIAL.lock().await;
    let host = SelfHosted::start().await;
    let env = env_for(Network::Threads, &host.vars()).await;
    let t = env.threads();
    let prefix = format!("{}/covers/", host.public);
    // 2000 px wide: over Threads' 1440. Behind a URL this time.
    let wide = smooth_png(2000, 1000);
    env.images
        .serve("/wide.png", wide.clone(), "image/png")
        .await;
    let key = env.key();
    let o = post_to(&env, &key, &env.images.url("/wide.png"), Network::Threads).await;
    println!("a cover too wide for Threads, self-hosted: {o:?}");
    let th = target(&o, Network::Threads);
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    let sent = th.image.clone().expect("what was sent");
    assert_eq!(sent.kind, "rendition", "{sent:?}");
    let (_, got) = one_hosted(t, &prefix).await;
    assert_ne!(got.sha256, sha256(&wide), "not the original");
    assert!(got.width <= 1440, "{}", got.describe());
    assert_eq!(u64::try_from(got.bytes).ok(), Some(sent.bytes));
    // Only postonce fetched the draft's own URL (once, or again after a fetch that ran out of
    // its budget on a loaded machine: a safe call's retry); Threads fetched the hosted
    // rendition.
    let (by_postonce, by_others) = env.images.hits_by("/wide.png", "postonce/").await;
    assert!(by_postonce >= 1, "postonce fetched the draft's own URL");
    assert_eq!(
        by_others, 0,
        "nothing but postonce fetched the draft's own URL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_hosted_a_local_png_reaches_instagram_as_a_jpeg_rendition() {
    let _serial = SERIAL.lock().await;
    let host = SelfHosted::start().await;
    let env = env_for(Network::Instagram, &host.vars()).await;
    let ig = env.instagram();
    let prefix = format!("{}/covers/", host.public);
    let png = smooth_png(1000, 800);
    let file = local_cover(&png, "png");
    let key = env.key();
    let o = post_to(&env, &key, &file.display().to_string(), Network::Instagram).await;
    println!("a local PNG to Instagram, self-hosted: {o:?}");
    let target_ig = target(&o, Network::Instagram);
    assert_eq!(target_ig.outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(
        target_ig.image.as_ref().map(|i| i.kind.as_str()),
        Some("rendition")
    );
    let (_, got) = one_hosted(ig, &prefix).await;
    assert_eq!(got.format, Some("image/jpeg"), "{}", got.describe());
    assert_eq!((got.width, got.height), (1000, 800));
    assert_eq!(ig.posts_created(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stages_the_same_hosted_url() {
    let _serial = SERIAL.lock().await;
    let host = SelfHosted::start().await;
    let mut hosting = host.vars();
    hosting.push(("POSTONCE_RECONCILE_AFTER_S", "2".to_owned()));
    let env = env_for(Network::Threads, &hosting).await;
    let t = env.threads();
    let file = local_cover(&smooth_png(2000, 1000), "png");
    let key = env.key();
    let image = file.display().to_string();

    // The first attempt's publish gets no answer; its container then expires unpublished, and
    // the retry makes a new container from the same draft: a new stage, the same cover.
    t.set_publish_mode(Mode::Hang(Duration::from_secs(3)));
    let first = post_to(&env, &key, &image, Network::Threads).await;
    assert_eq!(first.outcome, OutcomeKind::Unknown, "{first:?}");
    t.set_publish_mode(Mode::Normal);
    t.advance(Duration::from_secs(25 * 3600));
    env.wait_out_quiet_period(&key.on(Network::Threads)).await;
    let settled = env
        .app
        .pipeline
        .run(
            env.request_to(&key, None, &[Network::Threads]),
            env.deadline(),
        )
        .await;
    assert_eq!(
        target(&settled, Network::Threads).outcome,
        OutcomeKind::Failed,
        "{settled:?}"
    );
    let o = env
        .app
        .pipeline
        .run(
            env.request_to(&key, None, &[Network::Threads]),
            env.deadline(),
        )
        .await;
    println!("the retry after an expired container: {o:?}");
    assert_eq!(
        target(&o, Network::Threads).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );
    let containers = fetched(t).await;
    assert_eq!(containers.len(), 2, "{containers:?}");
    assert_eq!(
        containers[0].image_url, containers[1].image_url,
        "the same bytes, the same name"
    );
    let hashes: Vec<String> = containers
        .iter()
        .map(|c| c.image.clone().expect("fetched").sha256)
        .collect();
    assert_eq!(hashes[0], hashes[1]);
    assert!(containers[0]
        .image_url
        .as_deref()
        .is_some_and(|u| u.ends_with(&format!("/covers/{}.jpg", hashes[0]))));
    assert_eq!(t.posts_created(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_covers_route_answers_only_strict_names() {
    let _serial = SERIAL.lock().await;
    let mut host = SelfHosted::start().await;
    let bytes = smooth_png(400, 300);
    let hash = sha256(&bytes);
    std::fs::write(host.dir.path().join(format!("{hash}.png")), &bytes).expect("write");
    // A link planted in the folder under a good name is never followed.
    let secret = host.dir.path().join("secret.txt");
    std::fs::write(&secret, b"not for the networks").expect("write");
    let linked = sha256(b"linked");
    std::os::unix::fs::symlink(&secret, host.dir.path().join(format!("{linked}.png")))
        .expect("link");
    let base = &host.serve.base;
    let http = reqwest::Client::new();

    let ok = http
        .get(format!("{base}/covers/{hash}.png"))
        .send()
        .await
        .expect("GET");
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(
        ok.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("image/png")
    );
    assert_eq!(ok.bytes().await.expect("body").to_vec(), bytes);
    let head = http
        .head(format!("{base}/covers/{hash}.png"))
        .send()
        .await
        .expect("HEAD");
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(
        head.headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()),
        Some(bytes.len().to_string().as_str())
    );
    let post = http
        .post(format!("{base}/covers/{hash}.png"))
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status().as_u16(), 405);

    let upper = hash.to_uppercase();
    let bad = [
        format!("/covers/{upper}.png"),
        format!("/covers/{hash}.PNG"),
        format!("/covers/{hash}.jpeg"),
        format!("/covers/{hash}.png.png"),
        format!("/covers/{hash}"),
        format!("/covers/{}.png", &hash[1..]),
        format!("/covers/{linked}.png"),
        format!("/covers/{}.png", sha256(b"never written")),
        "/covers/../secret.txt".to_owned(),
        "/covers/%2e%2e/secret.txt".to_owned(),
        "/covers/..%2fsecret.txt".to_owned(),
        "/covers/secret.txt".to_owned(),
        "/covers/".to_owned(),
        format!("/covers/sub/{hash}.png"),
        format!("/covers/{hash}.png%00"),
        format!("/covers/{hash}.png?x=1"),
    ];
    for path in &bad {
        let r = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("an answer");
        let status = r.status().as_u16();
        let body = r.bytes().await.expect("body");
        // `?x=1` is a query on a good name: the name alone decides.
        if path.ends_with("?x=1") {
            assert_eq!(status, 200, "{path}");
            continue;
        }
        assert_eq!(status, 404, "{path}");
        assert!(
            !body.windows(8).any(|w| w == b"not for "),
            "{path} leaked the linked file"
        );
    }
    assert!(host.serve.exited().is_none(), "serve is still up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_s3_a_local_cover_and_a_rendition_reach_threads_and_instagram_by_presigned_url() {
    let _serial = SERIAL.lock().await;
    let moto = MotoServer::start(false);
    let prefix = format!("{}/{}/covers/", moto.endpoint, moto.bucket);

    let env = env_for(Network::Threads, &moto.vars()).await;
    let original = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png"))
        .expect("the example cover");
    let file = local_cover(&original, "png");
    let key = env.key();
    let o = post_to(&env, &key, &file.display().to_string(), Network::Threads).await;
    println!("a local cover to Threads, in S3: {o:?}");
    assert_eq!(
        target(&o, Network::Threads).outcome,
        OutcomeKind::Posted,
        "{o:?}"
    );
    let (url, got) = one_hosted(env.threads(), &prefix).await;
    assert_eq!(got.sha256, sha256(&original), "byte for byte");
    for part in [
        "X-Amz-Algorithm=AWS4-HMAC-SHA256",
        "X-Amz-Expires=3600",
        "X-Amz-Signature=",
    ] {
        assert!(url.contains(part), "{part} in {url}");
    }

    let env = env_for(Network::Instagram, &moto.vars()).await;
    let file = local_cover(&smooth_png(1000, 800), "png");
    let key = env.key();
    let o = post_to(&env, &key, &file.display().to_string(), Network::Instagram).await;
    println!("a local PNG to Instagram, in S3: {o:?}");
    let ig = target(&o, Network::Instagram);
    assert_eq!(ig.outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(
        ig.image.as_ref().map(|i| i.kind.as_str()),
        Some("rendition")
    );
    let (_, got) = one_hosted(env.instagram(), &prefix).await;
    assert_eq!(got.format, Some("image/jpeg"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_checks_the_signatures() {
    use postonce::covers::config::{BucketConfig, StaticCredentials};
    use postonce::covers::{CoverHost, CoverName};
    use postonce::vars::Secret;
    let _serial = SERIAL.lock().await;
    let moto = MotoServer::start(true);
    let host = |secret: &str| {
        postonce::covers::s3::S3Host::new(
            BucketConfig {
                bucket: moto.bucket.clone(),
                region: "us-east-1".into(),
                endpoint: Some(moto.endpoint.clone()),
                credentials: Some(StaticCredentials {
                    access_key_id: moto.access_key_id.clone(),
                    secret_access_key: Secret::new(secret),
                    session_token: None,
                }),
            },
            reqwest::Client::new(),
        )
        .expect("host")
    };
    let bytes = bytes::Bytes::from(smooth_png(400, 300));
    let name = CoverName::of(&bytes, postonce::image::Format::Png);
    let url = host(&moto.secret_access_key)
        .put(&name, &bytes)
        .await
        .expect("moto takes the signed PUT");
    let refused = host("not-the-secret")
        .put(&name, &bytes)
        .await
        .expect_err("a wrong secret is refused");
    println!("signed with a wrong secret: {refused}");
    assert!(
        refused.to_string().contains("SignatureDoesNotMatch"),
        "{refused}"
    );
    assert!(!refused.to_string().contains("not-the-secret"), "{refused}");
    assert!(
        !refused.is_transient() && refused.to_string().contains("POSTONCE_COVERS_BUCKET"),
        "a wrong secret is no failure a retry mends; the fix is named: {refused}"
    );
    // The presigned URL's signature is botocore's for the same request at the same instant.
    let date = url
        .split("X-Amz-Date=")
        .nth(1)
        .and_then(|r| r.split('&').next())
        .expect("X-Amz-Date");
    let ours = url
        .split("X-Amz-Signature=")
        .nth(1)
        .and_then(|r| r.split('&').next())
        .expect("X-Amz-Signature");
    assert_eq!(
        ours,
        moto.botocore_signature(&format!("covers/{name}"), date)
    );
}

/// `postonce preview` with covers hosted: a local PNG for Instagram is shown as the JPEG
/// rendition it would fetch from the host (not refused), and nothing is hosted by a preview.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_shows_a_hosted_rendition_for_instagram_and_hosts_nothing() {
    let _serial = SERIAL.lock().await;
    let covers = tempfile::tempdir().expect("covers dir");
    let hosting = vec![
        (
            "POSTONCE_PUBLIC_URL",
            "https://postonce.example.com".to_owned(),
        ),
        ("POSTONCE_COVERS_DIR", covers.path().display().to_string()),
    ];
    let env = env_for(Network::Instagram, &hosting).await;
    let file = local_cover(&smooth_png(1000, 800), "png");
    let key = env.key();
    let mut content = env.announcement(&key);
    content.image = file.display().to_string();
    let mut req = env.request_to(&key, Some(content), &[Network::Instagram]);
    req.publish_at = Some(postonce::record::now_s() + 86_400);
    let stored = env.app.pipeline.run(req, env.deadline()).await;
    assert_eq!(stored.outcome, OutcomeKind::Scheduled, "{stored:?}");

    let out = tempfile::tempdir().expect("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args([
            "preview",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--json",
            "--out",
        ])
        .arg(out.path().join("p"))
        .current_dir(out.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&env.vars)
        .output()
        .expect("run postonce preview");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let ig = v["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["network"] == "instagram"))
        .cloned()
        .expect("instagram in the preview");
    println!("preview, Instagram with covers hosted: {ig}");
    assert!(ig["image_refused"].is_null(), "{ig}");
    assert_eq!(ig["image"]["kind"], "rendition", "{ig}");
    assert_eq!(ig["image"]["format"], "image/jpeg", "{ig}");
    assert!(
        ig.to_string().contains("hosted by `postonce serve`"),
        "{ig}"
    );
    assert_eq!(
        std::fs::read_dir(covers.path()).map_or(0, Iterator::count),
        0,
        "a preview hosts nothing"
    );
}

/// A dry run hosts nothing (it names the URL the cover would have) and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_hosts_nothing() {
    let _serial = SERIAL.lock().await;
    let covers = tempfile::tempdir().expect("covers dir");
    let hosting = vec![
        (
            "POSTONCE_PUBLIC_URL",
            "https://postonce.example.com".to_owned(),
        ),
        ("POSTONCE_COVERS_DIR", covers.path().display().to_string()),
        ("THREADS_ACCESS_TOKEN", String::new()),
    ];
    let env = env_for(Network::Threads, &hosting).await;
    let file = local_cover(&smooth_png(2000, 1000), "png");
    let key = env.key();
    let o = post_to(&env, &key, &file.display().to_string(), Network::Threads).await;
    println!("a dry run to Threads with covers hosted: {o:?}");
    let th = target(&o, Network::Threads);
    assert!(th.dry_run, "{o:?}");
    assert_eq!(th.outcome, OutcomeKind::Posted, "{o:?}");
    assert_eq!(
        th.image.as_ref().map(|i| i.kind.as_str()),
        Some("rendition")
    );
    assert_eq!(env.threads().requests(), 0, "nothing sent");
    assert_eq!(
        std::fs::read_dir(covers.path()).map_or(0, Iterator::count),
        0,
        "a dry run hosts nothing"
    );
}

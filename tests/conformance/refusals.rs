//! The behaviours about what is refused or held back: a 429, a revoked token, a text over the
//! limit, a dry run.

use std::sync::Arc;
use std::time::Duration;

use postonce::budget::Deadline;
use postonce::outcome::OutcomeKind;
use postonce::record::{now_s, DraftStatus};
use postonce::triggers::{HttpRequest, Router};
use serde_json::{json, Value};

use super::harness::{draft, record, reports_of, run};
use super::networks::{Create, Net, NETWORKS};
use crate::support::env::{announcement, sign, Env};

/// The reset a 429 names, in seconds: well past the sweeper's own first backoff.
pub const RESET: u64 = 90;

/// The create answers 429 (with the reset the network names, if it names one): the target
/// fails retryable, nothing is posted, and the next try is not before the reset.
pub async fn rate_limited(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    net.set_create(&env, Create::RateLimited { reset_in: RESET });
    let key = env.key();
    let before = now_s();
    let t = run(&env, &key, true, n).await;
    net.set_create(&env, Create::Accept);
    assert_eq!(t.outcome, OutcomeKind::Failed, "{t:?}");
    assert!(t.retryable, "paced, not failed for good: {t:?}");
    let d = draft(&env, &key, n).await.expect("the draft is kept");
    assert_eq!(d.status, DraftStatus::Failed, "{d:?}");
    assert!(d.retryable, "{d:?}");
    let next = d.next_retry_at.expect("a time for the next try");
    let figures = if net.names_reset() {
        format!(
            "429 resetting in {RESET}s → {:?}, retryable, next try in {}s",
            t.outcome,
            next - before
        )
    } else {
        format!(
            "429 naming no reset → {:?}, retryable, next try in {}s",
            t.outcome,
            next - before
        )
    };
    let reset = i64::try_from(RESET).expect("small");
    if net.names_reset() {
        assert!(
            next >= before + reset - 1,
            "the next try comes before the reset the network named: {figures}"
        );
    } else {
        assert!(next > before, "a later try: {figures}");
    }
    assert_eq!(net.posts_for(&env, &key), 0, "{figures}");
    ((), figures)
}

/// Whether `text` names `network` as a word (`telegram` for the channel).
fn names_network(text: &str, network: &str) -> bool {
    text.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == network)
}

/// Whether `text` names `network` and `limit` (written with or without thousands separators).
fn names(text: &str, network: &str, limit: usize) -> bool {
    let plain = text.replace([',', '\u{a0}', '\u{202f}'], "");
    names_network(text, network) && plain.contains(&limit.to_string())
}

/// Every call the network allows is refused for the token: the target fails, not retryable,
/// the owner's report gives the reason naming the network and the command that renews it, and
/// the draft waits for a new credential: a sweep with the same credential, in another process,
/// sends nothing.
pub async fn revoked(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    net.set_create(&env, Create::Revoked);
    let key = env.key();
    let t = run(&env, &key, true, n).await;
    let figures = format!(
        "revoked → {:?} (retryable {}): {}",
        t.outcome, t.retryable, t.detail
    );
    assert_eq!(t.outcome, OutcomeKind::Failed, "{t:?}");
    assert!(!t.retryable, "a revoked token is permanent: {t:?}");
    assert!(
        names_network(&t.detail, n.as_str()),
        "the reason names the network: {t:?}"
    );
    assert!(
        t.detail.contains(&format!("postonce auth {}", n.as_str())),
        "the reason names the command that renews the credential: {t:?}"
    );
    let d = draft(&env, &key, n).await.expect("the draft is kept");
    assert!(
        d.last_error
            .as_deref()
            .is_some_and(|e| e.contains("refused credential")),
        "the draft waits for a new credential: {d:?}"
    );
    let (creates, requests) = (net.creates(&env), net.requests(&env).await);
    let startups = net.startup_requests(&env).await;
    let dl = Deadline::after(Duration::from_secs(30));
    // A sweep from another process with the same credential (a fresh app on the same stores):
    // it never saw the refusal, so only the draft's tag holds it back (this process's own
    // memory of the refusal would hold it anyway). Not a request goes out for it, the create
    // or any before it (start-up reads apart: every step's processes make theirs meanwhile).
    let another = env.another_app().await;
    another.pipeline.sweep(&dl).await.expect("sweep");
    assert_eq!(
        net.creates(&env),
        creates,
        "nothing is sent with the refused credential"
    );
    let sent =
        (net.requests(&env).await - requests) - (net.startup_requests(&env).await - startups);
    assert_eq!(
        sent, 0,
        "requests at the fake from a sweep in another process with the refused credential"
    );
    let reports = reports_of(&env, &key);
    let (text, _) = reports.last().expect("the owner is told");
    assert!(
        text.contains(&t.detail),
        "the report gives the reason: {text}"
    );
    assert_eq!(net.posts_for(&env, &key), 0);
    assert!(record(&env, &key, n).await.is_none());
    ((), figures)
}

/// `POST /ci`, signed, through the router every transport uses.
async fn ci(env: &Env, body: &Value) -> (u16, Value) {
    let raw = serde_json::to_vec(body).expect("json");
    let req = HttpRequest {
        method: "POST".into(),
        path: "/ci".into(),
        headers: [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-hub-signature-256".to_owned(), sign(&raw)),
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
    (resp.status, crate::support::answer(&resp))
}

/// `postonce` as a process over this environment's variables, for `net`: every other
/// network's credentials are unset (a dry run there, so that their fakes, which other checks
/// count concurrently, hear nothing from this process), and `net`'s too when `dry`.
async fn cli(env: &Env, net: Net, args: &[&str], dry: bool) -> std::process::Output {
    let unset: Vec<&str> = NETWORKS
        .iter()
        .filter(|other| dry || other.network() != net.network())
        .flat_map(|other| other.credentials().iter().copied())
        .collect();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in &env.vars {
        if !unset.contains(&k.as_str()) {
            cmd.env(k, v);
        }
    }
    cmd.output().await.expect("run postonce")
}

/// A caption one over the network's limit, counted its way, through the signed CI route and
/// the CLI: a 400 and exit 2 naming the network and its limit; no request reached the fake and
/// nothing is stored.
pub async fn too_long(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    let key = env.key();
    let before = net.requests(&env).await;
    let long = net.too_long();
    let body = json!({
        "kind": key.kind(), "slug": key.slug(), "caption": format!("Fits everywhere {key}"),
        "image_url": env.images.url(super::harness::COVER),
        "targets": [n.as_str()], "captions": {n.as_str(): long},
    });
    let (status, resp) = ci(&env, &body).await;
    assert_eq!(status, 400, "the CI route: {resp}");
    assert!(
        names(&resp.to_string(), n.as_str(), net.limit()),
        "the 400 names {} and {}: {resp}",
        n.as_str(),
        net.limit()
    );
    let caption = format!("Fits everywhere {key}");
    let image = env.images.url(super::harness::COVER);
    let caption_for = format!("{}={long}", n.as_str());
    let sent_in_process = net.requests(&env).await - before;
    let started = net.requests(&env).await;
    let out = cli(
        &env,
        net,
        &[
            "post",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--caption",
            &caption,
            "--image",
            &image,
            "--targets",
            n.as_str(),
            "--caption-for",
            &caption_for,
        ],
        false,
    )
    .await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "the CLI: {said}");
    assert!(
        names(&said, n.as_str(), net.limit()),
        "the CLI names {} and {}: {said}",
        n.as_str(),
        net.limit()
    );
    let sent_by_cli = net.requests(&env).await - started;
    assert_eq!(
        sent_in_process, 0,
        "requests at the fake for the CI route's draft"
    );
    assert_eq!(
        sent_by_cli,
        net.startup_reads(),
        "requests at the fake from the CLI process (its start-up reads apart)"
    );
    let snap = env.status(&key.on(n)).await.snapshot;
    assert!(snap.draft.is_none(), "a draft was stored: {:?}", snap.draft);
    assert!(snap.record.is_none(), "a record exists: {:?}", snap.record);
    let figures = format!(
        "{} chars, one over the limit of {} as the network counts → 400 and exit 2; requests at the fake: {sent_in_process} for the CI route, {sent_by_cli} from the CLI process ({} start-up reads)",
        long.chars().count(),
        net.limit(),
        net.startup_reads()
    );
    ((), figures)
}

/// The network's credentials unset: `postonce post` shows the create request it would send
/// (method and URL, the caption) and sends nothing: zero requests at the fake.
pub async fn dry_run(env: Arc<Env>, net: Net) -> ((), String) {
    let n = net.network();
    let key = env.key();
    let before = net.requests(&env).await;
    let (caption, link) = announcement(&key);
    let image = env.images.url(super::harness::COVER);
    let out = cli(
        &env,
        net,
        &[
            "post",
            "--kind",
            key.kind(),
            "--slug",
            key.slug(),
            "--caption",
            &caption,
            "--image",
            &image,
            "--link",
            &link,
            "--targets",
            n.as_str(),
            "--json",
        ],
        true,
    )
    .await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the outcome JSON ({e}): {stdout}\n{stderr}"));
    let sent = net.requests(&env).await - before;
    assert_eq!(v["dry_run"], json!(true), "a dry run: {v}");
    assert_eq!(sent, 0, "requests at the fake: {v}");
    let shown = net.shown_create(&env);
    let block = stderr
        .split(&shown)
        .nth(1)
        .unwrap_or_else(|| panic!("the create request `{shown}` is shown: {stderr}"));
    assert!(
        block.contains(key.slug()),
        "the shown request carries the caption: {stderr}"
    );
    let figures = format!(
        "dry run → {} (exit {:?}), {sent} requests at the fake, shown: {shown}",
        v["outcome"],
        out.status.code()
    );
    ((), figures)
}

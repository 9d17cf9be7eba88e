//! Local covers over MCP (issue 30, finding 4): the real `postonce mcp` as a child process,
//! spoken to by the official SDK's client, against real Redis and DynamoDB Local and the
//! LinkedIn fake. An agent may name a local file only inside a folder of
//! `POSTONCE_MCP_IMAGE_DIRS`, reached without a symbolic link; every other path (outside, a
//! link out, missing, unreadable, a FIFO, too large, `/proc/self/pagemap`) gets the same one
//! message, and nothing is stored or sent. Without the variable no local file is read, and the
//! tool's description says so.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::env::{Env, Stores};
use support::services::unique;

type Client = RunningService<RoleClient, ClientConfig>;

/// The user the server runs as when the tests run as root (root reads a file of mode 000).
const NOBODY: u32 = 65534;

/// A copy of the binary that another user can run: the build folder may sit in root's home
/// (mode 0700), as it does in CI (`~/.cache/postonce/target`). The copy goes with its folder.
fn runnable_by_anyone() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("postonce-mcp-")
        .tempdir()
        .expect("a folder for the binary");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("0755");
    let to = dir.path().join("postonce");
    std::fs::copy(env!("CARGO_BIN_EXE_postonce"), &to).expect("copy the binary");
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).expect("0755");
    (dir, to)
}

/// Starts `postonce mcp` with the environment's variables and `extra`, as `uid` when given.
async fn connect(env: &Env, extra: &[(&str, String)], uid: Option<u32>) -> Client {
    let copy = uid.map(|_| runnable_by_anyone());
    let binary = copy.as_ref().map_or_else(
        || env!("CARGO_BIN_EXE_postonce").into(),
        |(_, to)| to.clone(),
    );
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in &env.vars {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let transport = TokioChildProcess::new(cmd).expect("start postonce mcp");
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("postonce-tests", "1.0.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_06_18)
    .serve(transport)
    .await
    .expect("initialize the MCP session");
    // The server runs the copy now: its file can go (the running process keeps it).
    drop(copy);
    client
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(map) = arguments else {
        panic!("arguments must be an object")
    };
    let map: JsonObject = map;
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
        .await
        .unwrap_or_else(|e| panic!("{tool} must answer a tool result: {e}"))
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn post(slug: &str, image: &Path) -> Value {
    json!({
        "kind": "agent",
        "slug": slug,
        "caption": format!("Notes for {slug}"),
        "image": image.to_str().expect("utf-8"),
    })
}

/// Whether this test process runs as root: a file it makes is owned by its user.
fn running_as_root(dir: &Path) -> bool {
    let probe = dir.join("whoami");
    std::fs::write(&probe, b"").expect("probe");
    let uid = std::fs::metadata(&probe).expect("probe").uid();
    std::fs::remove_file(&probe).expect("probe");
    uid == 0
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_files_inside_the_folders_are_read_and_every_other_path_gets_one_message() {
    let env = Env::with(Stores::Real, &[]).await;
    let root = tempfile::tempdir().expect("dir");
    let allowed = root.path().join("covers");
    std::fs::create_dir(&allowed).expect("covers");
    let png = support::images::png_bytes();
    std::fs::write(allowed.join("cover.png"), &png).expect("cover");
    let outside = root.path().join("outside.png");
    std::fs::write(&outside, &png).expect("outside");
    std::os::unix::fs::symlink(&outside, allowed.join("linked.png")).expect("link out");
    std::os::unix::fs::symlink(root.path(), allowed.join("up")).expect("folder link out");
    let locked = allowed.join("locked.png");
    std::fs::write(&locked, &png).expect("locked");
    chmod(&locked, 0o000);
    let mut big = png.clone();
    big.resize(postonce::image::MAX_IMAGE_BYTES + 1, 0);
    std::fs::write(allowed.join("big.png"), &big).expect("big");
    let fifo = allowed.join("fifo.png");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo failed");
    for dir in [root.path(), allowed.as_path()] {
        chmod(dir, 0o755);
    }
    for file in [
        allowed.join("cover.png"),
        allowed.join("big.png"),
        outside.clone(),
    ] {
        chmod(&file, 0o644);
    }
    // Root reads a file of mode 000: the server then runs as nobody, for whom it is unreadable.
    let uid = running_as_root(root.path()).then_some(NOBODY);
    let dirs = format!("{},/proc/self", allowed.display());
    let client = connect(&env, &[("POSTONCE_MCP_IMAGE_DIRS", dirs)], uid).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let post_tool = tools.iter().find(|t| t.name == "post").expect("post");
    let described = post_tool.input_schema["properties"]["image"]["description"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        described.contains(allowed.to_str().expect("utf-8")),
        "{described}"
    );

    let good = unique("inside-");
    let r = call(&client, "post", post(&good, &allowed.join("cover.png"))).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(
        r.structured_content.as_ref().expect("outcome")["outcome"],
        "posted",
        "{r:?}"
    );
    assert_eq!(env.linkedin.create_requests(), 1);

    let bad = [
        outside.clone(),
        allowed.join("linked.png"),
        allowed.join("up/outside.png"),
        allowed.join("../outside.png"),
        allowed.join("missing.png"),
        locked,
        fifo,
        allowed.join("big.png"),
        allowed.clone(),
        Path::new("/proc/self/pagemap").to_owned(),
        Path::new("/etc/passwd").to_owned(),
    ];
    let mut said = std::collections::BTreeSet::new();
    let mut slugs = Vec::new();
    for (i, path) in bad.iter().enumerate() {
        let slug = unique(&format!("refused-{i}-"));
        let r = call(&client, "post", post(&slug, path)).await;
        assert_eq!(r.is_error, Some(true), "{path:?}: {r:?}");
        let t = text(&r);
        assert!(t.starts_with("bad input: image: "), "{path:?}: {t}");
        said.insert(t);
        slugs.push(slug);
    }
    let p = call(&client, "preview", post(&unique("peek-"), &outside)).await;
    said.insert(text(&p));
    assert_eq!(said.len(), 1, "one message for every path: {said:#?}");
    let one = said.first().expect("a message");
    assert!(one.contains("POSTONCE_MCP_IMAGE_DIRS"), "{one}");
    for leak in [
        "No such file",
        "ermission",
        "bytes",
        "symbolic link loop",
        "outside.png",
    ] {
        assert!(!one.contains(leak), "{one}");
    }

    assert_eq!(env.linkedin.create_requests(), 1, "nothing else was sent");
    assert_eq!(env.linkedin.init_requests(), 1);
    for slug in slugs {
        let s = call(&client, "status", json!({"kind": "agent", "slug": slug})).await;
        let v = s.structured_content.expect("status");
        assert!(
            v["draft"].is_null() && v["record"].is_null(),
            "nothing stored for {slug}: {v}"
        );
    }
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_variable_no_local_file_is_read_and_the_tool_says_so() {
    let env = Env::with(Stores::Real, &[]).await;
    let root = tempfile::tempdir().expect("dir");
    let cover = root.path().join("cover.png");
    std::fs::write(&cover, support::images::png_bytes()).expect("cover");
    let client = connect(&env, &[], None).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let post_tool = tools.iter().find(|t| t.name == "post").expect("post");
    let described = post_tool.input_schema["properties"]["image"]["description"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        described.contains("no local file") && described.contains("POSTONCE_MCP_IMAGE_DIRS"),
        "{described}"
    );
    let slug = unique("nolocal-");
    let r = call(&client, "post", post(&slug, &cover)).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let t = text(&r);
    assert!(
        t.starts_with("bad input: image: ") && t.contains("POSTONCE_MCP_IMAGE_DIRS is not set"),
        "{t}"
    );
    assert_eq!(env.linkedin.total_requests().await, 0);
    let s = call(&client, "status", json!({"kind": "agent", "slug": slug})).await;
    assert!(s.structured_content.expect("status")["draft"].is_null());
    client.cancel().await.expect("close");
}

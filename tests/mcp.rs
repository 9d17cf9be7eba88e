//! `postonce mcp` (issue 24), driven from outside: the real binary as a child process, spoken
//! to by the official MCP SDK's client over stdio, against real Redis and DynamoDB Local (or
//! the local store) and the LinkedIn fake with its duplicate check off, so that every post is
//! counted at the fake and a second post would show.

use crate::support;

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProtocolVersion, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::env::{Env, Stores};
use support::linkedin::{DuplicateCheck, Mode};
use support::services::unique;

type Client = RunningService<RoleClient, ClientConfig>;

/// Starts `postonce mcp` with the environment's variables (and nothing else) and initialises
/// a session asking for `version`.
async fn connect_with(env: &Env, version: ProtocolVersion) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_postonce"));
    cmd.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in &env.vars {
        cmd.env(k, v);
    }
    let transport = TokioChildProcess::new(cmd).expect("start postonce mcp");
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("postonce-tests", "1.0.0"),
    )
    .with_protocol_version(version)
    .serve(transport)
    .await
    .expect("initialize the MCP session")
}

async fn connect(env: &Env) -> Client {
    connect_with(env, ProtocolVersion::V_2025_06_18).await
}

async fn linkedin_env(stores: Stores) -> Env {
    let env = Env::with(stores, &[]).await;
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    env
}

fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool} must answer a tool result, not a protocol error: {e}"))
}

fn structured(r: &CallToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content in {r:?}"))
}

fn outcome(r: &CallToolResult) -> String {
    structured(r)["outcome"]
        .as_str()
        .unwrap_or_else(|| panic!("no outcome in {r:?}"))
        .to_owned()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

/// A post's arguments for `slug`: the commentary carries the slug, so posts can be counted
/// per key at the fake.
fn post_args(env: &Env, slug: &str) -> Value {
    json!({
        "kind": "agent",
        "slug": slug,
        "caption": format!("Release notes for {slug}: what changed and why"),
        "image": env.images.url("/cover.png"),
        "alt": "A gradient",
    })
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_negotiates_2025_06_18_or_later_and_the_tool_schemas_validate() {
    let env = linkedin_env(Stores::Local).await;

    // A client on 2025-06-18 gets it; one on an older version gets the newest this server
    // has with a handshake, never anything before structured results.
    let client = connect(&env).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_06_18);
    assert!(info.capabilities.tools.is_some(), "{info:?}");
    assert_eq!(
        info.server_info
            .as_ref()
            .map(|s| s.name.to_string())
            .as_deref(),
        Some("postonce")
    );
    let old = connect_with(&env, ProtocolVersion::V_2024_11_05).await;
    let answered = old
        .peer_info()
        .expect("server info")
        .protocol_version
        .clone();
    assert!(
        answered.as_str() >= "2025-06-18",
        "an old client must not get a version without structured results: {answered}"
    );
    old.cancel().await.expect("close");

    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel",
            "doctor",
            "post",
            "preview",
            "schedule_list",
            "status"
        ]
    );
    for t in &tools {
        let schema = Value::Object((*t.input_schema).clone());
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!(
                "{}: the input schema is not a valid JSON Schema: {e}",
                t.name
            );
        }
        assert_eq!(schema["type"], "object", "{}", t.name);
        assert_eq!(schema["additionalProperties"], false, "{}", t.name);
        for (name, prop) in schema["properties"].as_object().expect("properties") {
            assert!(
                prop["description"].as_str().is_some_and(|d| d.len() > 10),
                "{}.{name} has no description",
                t.name
            );
        }
        assert!(
            t.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            t.name
        );
        let a = t.annotations.as_ref().expect("annotations");
        if ["status", "schedule_list", "preview", "doctor"].contains(&t.name.as_ref()) {
            assert_eq!(a.read_only_hint, Some(true), "{} is read-only", t.name);
        }
    }

    // post: truthful annotations, destructiveHint false said explicitly.
    let post = tool(&tools, "post");
    let a = post.annotations.as_ref().expect("annotations");
    assert_eq!(a.read_only_hint, Some(false));
    assert_eq!(a.destructive_hint, Some(false));
    assert_eq!(a.idempotent_hint, Some(true));
    assert_eq!(a.open_world_hint, Some(true));
    let description = post.description.as_deref().unwrap_or_default();
    assert!(description.contains("idempotent per key"), "{description}");

    // The schema carries the limits and formats, and checks what it says.
    let schema = Value::Object((*post.input_schema).clone());
    let props = &schema["properties"];
    assert_eq!(props["publish_at"]["format"], "date-time");
    assert!(props["caption"]["description"]
        .as_str()
        .is_some_and(|d| d.contains("linkedin 3000")));
    let check = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("compile the post schema");
    let good = json!({"kind": "agent", "slug": "launch-v2", "caption": "Hi", "image": "https://cdn.example.com/a.png", "publish_at": "2026-12-07T09:00:00+01:00", "targets": ["linkedin"]});
    assert!(check.is_valid(&good), "{good}");
    for bad in [
        json!({"kind": "agent", "slug": "Launch V2"}),
        json!({"kind": "agent"}),
        json!({"kind": "agent", "slug": "a", "publish_at": "2026-12-07T09:00:00"}),
        json!({"kind": "agent", "slug": "a", "image_url": "https://x"}),
        json!({"kind": "agent", "slug": "a", "caption": "x".repeat(3001)}),
        json!({"kind": "agent", "slug": "a", "targets": ["myspace"]}),
    ] {
        assert!(!check.is_valid(&bad), "the schema should refuse {bad}");
    }
    client.cancel().await.expect("close");
}

/// Five concurrent `post` calls for one key, as an agent retrying on its own timeout would
/// send them: exactly one post at a LinkedIn that would happily create five.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_racing_post_calls_for_one_key_make_exactly_one_post() {
    let env = linkedin_env(Stores::Real).await;
    // Every LinkedIn answer takes a while: the runs overlap for certain.
    env.linkedin.set_delay(Duration::from_millis(250));
    let client = connect(&env).await;
    let slug = unique("race-");
    let calls = (0..5).map(|_| call(&client, "post", post_args(&env, &slug)));
    let results = futures_util::future::join_all(calls).await;
    let outcomes: Vec<String> = results.iter().map(outcome).collect();
    assert_eq!(
        env.linkedin.posts_containing(&slug).len(),
        1,
        "exactly one post at the fake; outcomes {outcomes:?}"
    );
    assert_eq!(env.linkedin.posts_created(), 1);
    assert_eq!(
        outcomes.iter().filter(|o| *o == "posted").count(),
        1,
        "{outcomes:?}"
    );
    for (r, o) in results.iter().zip(&outcomes) {
        assert!(
            ["posted", "being_posted", "already_posted"].contains(&o.as_str()),
            "{o}: {r:?}"
        );
        assert!(!is_error(r), "{o} is a plain result, not an error: {r:?}");
        assert!(
            text(r).starts_with(o.as_str()),
            "one-line summary: {}",
            text(r)
        );
    }
    // The outcome JSON of `post --json`, per target.
    let posted = results
        .iter()
        .find(|r| outcome(r) == "posted")
        .expect("posted");
    let s = structured(posted);
    assert_eq!(s["key"], format!("agent-{slug}"));
    assert!(s["targets"]["linkedin"]["url"].is_string(), "{s}");
    assert_eq!(s["retryable"], false);

    // Calls after it answer already_posted with the link, and never post.
    let again = call(&client, "post", post_args(&env, &slug)).await;
    assert_eq!(outcome(&again), "already_posted", "{again:?}");
    assert_eq!(
        structured(&again)["targets"]["linkedin"]["url"],
        s["targets"]["linkedin"]["url"]
    );
    assert_eq!(env.linkedin.posts_created(), 1);
    client.cancel().await.expect("close");
}

/// A call the client abandons (its timeout: the SDK sends `notifications/cancelled`) while
/// create-post is in flight: the run keeps every rule to its end, a call meanwhile answers
/// `being_posted`, a call after answers what is stored; one post in all. `status` shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_an_abandoned_one_answers_what_is_stored_and_status_shows_it() {
    let env = linkedin_env(Stores::Real).await;
    let client = connect(&env).await;
    let slug = unique("abandoned-");
    // LinkedIn creates the post at once and answers 1 s later.
    env.linkedin
        .set_create_mode(Mode::AcceptThenHang(Duration::from_millis(1_000)));
    let abandoned = call(&client, "post", post_args(&env, &slug));
    let create_sent = async {
        while env.linkedin.create_requests() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        r = abandoned => panic!("the call should still be waiting for LinkedIn: {r:?}"),
        () = create_sent => {}
    }
    // The call is dropped here: the client tells the server it gave up.
    let meanwhile = call(&client, "post", post_args(&env, &slug)).await;
    assert_eq!(outcome(&meanwhile), "being_posted", "{meanwhile:?}");
    assert!(!is_error(&meanwhile));
    assert_eq!(structured(&meanwhile)["retryable"], true);

    // The abandoned call's run goes on, records the post and then releases its claim (a
    // status read between the two sees both).
    let key = format!("agent-{slug}");
    let until = Instant::now() + Duration::from_secs(15);
    let status = loop {
        let s = call(&client, "status", json!({"kind": "agent", "slug": slug})).await;
        assert!(!is_error(&s), "{s:?}");
        let st = structured(&s);
        if st["record"].is_object() && st["claim"].is_null() {
            break s;
        }
        assert!(
            Instant::now() < until,
            "the abandoned run never recorded, or kept its claim: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let st = structured(&status);
    assert_eq!(st["key"], key);
    let url = st["record"]["url"]
        .as_str()
        .expect("the post's url")
        .to_owned();
    assert!(text(&status).contains(&url), "{}", text(&status));

    let after = call(&client, "post", post_args(&env, &slug)).await;
    assert_eq!(outcome(&after), "already_posted", "{after:?}");
    assert_eq!(structured(&after)["targets"]["linkedin"]["url"], url);
    assert_eq!(env.linkedin.posts_containing(&slug).len(), 1);
    assert_eq!(env.linkedin.create_requests(), 1);

    // status with no arguments: every draft that waits for a person or a time.
    let all = call(&client, "status", json!({})).await;
    assert!(structured(&all)["waiting"].is_array(), "{all:?}");
    assert!(structured(&all)["scheduled"].is_array(), "{all:?}");
    client.cancel().await.expect("close");
}

/// Scheduling through `post`'s `publish_at`, then `schedule_list`, `status` with no arguments,
/// `cancel`, and a post call after the cancel: nothing is ever sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_draft_is_listed_and_cancelled_without_posting() {
    let env = linkedin_env(Stores::Real).await;
    let client = connect(&env).await;
    let slug = unique("later-");
    let mut a = post_args(&env, &slug);
    a["publish_at"] = json!("2099-01-01T09:00:00+01:00");
    let too_far = call(&client, "post", a.clone()).await;
    assert!(is_error(&too_far), "{too_far:?}");
    assert!(text(&too_far).contains("publish_at"), "{}", text(&too_far));

    let at = time::OffsetDateTime::now_utc() + time::Duration::days(2);
    let at = at
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    a["publish_at"] = json!(at);
    let scheduled = call(&client, "post", a).await;
    assert_eq!(outcome(&scheduled), "scheduled", "{scheduled:?}");
    assert!(!is_error(&scheduled));
    let key = format!("agent-{slug}");

    let list = call(&client, "schedule_list", json!({})).await;
    let listed = structured(&list)["scheduled"]
        .as_array()
        .expect("list")
        .clone();
    assert!(listed.iter().any(|e| e["key"] == key), "{list:?}");
    let all = call(&client, "status", json!({})).await;
    assert!(
        structured(&all)["scheduled"]
            .as_array()
            .is_some_and(|l| l.iter().any(|e| e["key"] == key)),
        "{all:?}"
    );

    let cancelled = call(&client, "cancel", json!({"kind": "agent", "slug": slug})).await;
    assert_eq!(outcome(&cancelled), "cancelled", "{cancelled:?}");
    assert!(!is_error(&cancelled));
    let list = call(&client, "schedule_list", json!({})).await;
    assert!(
        !structured(&list)["scheduled"]
            .as_array()
            .is_some_and(|l| l.iter().any(|e| e["key"] == key)),
        "{list:?}"
    );
    // A post of the stored draft after the cancel: still not posted.
    let stored = call(&client, "post", json!({"kind": "agent", "slug": slug})).await;
    assert_eq!(outcome(&stored), "cancelled", "{stored:?}");
    assert_eq!(env.linkedin.create_requests(), 0);
    client.cancel().await.expect("close");
}

/// Bad arguments: a tool error (isError) naming the field and the fix, never a protocol
/// error, and nothing stored anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_tool_errors_that_name_the_field_and_store_nothing() {
    let env = linkedin_env(Stores::Real).await;
    let client = connect(&env).await;
    let image = env.images.url("/cover.png");
    let cases: Vec<(&'static str, Value, &str)> = vec![
        (
            "post",
            json!({"kind": "agent", "slug": "Launch V2", "caption": "Hi", "image": image}),
            "slug",
        ),
        ("post", json!({"slug": "bad-one"}), "kind"),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-two", "caption": "Hi"}),
            "image",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-three", "caption": "Hi", "image_url": image}),
            "image_url",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-four", "caption": "Hi", "image": image, "publish_at": "2026-12-07T09:00:00"}),
            "publish_at",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-five", "caption": "x".repeat(3001), "image": image}),
            "caption",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-six", "caption": "Hi", "image": image, "targets": ["myspace"]}),
            "targets",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-seven", "caption": "Hi", "image": image, "link": "ftp://x"}),
            "link",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-eight", "caption": "Hi", "image": image, "caption_for": {"x": "Hi X"}}),
            "caption_for.x",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-nine", "caption": "Hi", "image": "/no/such/file.png"}),
            "image",
        ),
        (
            "post",
            json!({"kind": "agent", "slug": "bad-ten", "caption": "Hi", "image": "https://elsewhere.example/a.png"}),
            "image",
        ),
        ("post", json!({"kind": 7, "slug": "bad-eleven"}), "kind"),
        ("status", json!({"kind": "agent"}), "slug"),
        ("cancel", json!({"kind": "agent", "slug": "-"}), "slug"),
        ("schedule_list", json!({"all": true}), "all"),
        (
            "preview",
            json!({"kind": "agent", "slug": "bad-twelve", "caption": "Hi", "image": image, "publish_at": "tomorrow"}),
            "publish_at",
        ),
    ];
    for (tool, arguments, field) in cases {
        let r = call(&client, tool, arguments.clone()).await;
        assert!(
            is_error(&r),
            "{tool} {arguments}: must be a tool error: {r:?}"
        );
        let said = text(&r);
        assert!(
            said.starts_with(&format!("bad input: {field}")),
            "{tool} {arguments}: the error names {field}: {said}"
        );
        assert_eq!(structured(&r)["field"], field, "{said}");
        for secret in [support::env::LI_TOKEN, support::env::TG_TOKEN] {
            assert!(!said.contains(secret), "{said}");
        }
    }
    assert_eq!(env.linkedin.create_requests(), 0);
    assert_eq!(env.linkedin.init_requests(), 0);
    assert_eq!(env.images.hits("/cover.png").await, 0);
    assert_eq!(env.redis().cli(&["DBSIZE"]), "0", "no claim was taken");
    for slug in ["bad-two", "bad-four", "bad-five", "bad-six", "bad-eight"] {
        let s = call(&client, "status", json!({"kind": "agent", "slug": slug})).await;
        assert!(
            structured(&s)["draft"].is_null() && structured(&s)["record"].is_null(),
            "nothing stored for {slug}: {s:?}"
        );
    }
    client.cancel().await.expect("close");
}

/// `preview` shows each target's exact text and counts and the cover it would get (read from
/// the image host, the one request it makes), and sends and stores nothing; `doctor` answers
/// its checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_sends_nothing_and_doctor_answers() {
    let env = linkedin_env(Stores::Local).await;
    let client = connect(&env).await;
    let slug = unique("preview-");
    let mut a = post_args(&env, &slug);
    a["link"] = json!("https://example.com/notes");
    let p = call(&client, "preview", a).await;
    assert!(!is_error(&p), "{p:?}");
    let s = structured(&p);
    assert_eq!(s["sent"], false);
    let li = &s["targets"][0];
    assert_eq!(li["network"], "linkedin");
    let expected =
        format!("Release notes for {slug}: what changed and why\n\nhttps://example.com/notes");
    assert_eq!(li["text"], expected);
    assert_eq!(li["length"], expected.chars().count());
    assert_eq!(li["max"], 3000);
    assert_eq!(s["image"]["kind"], "url");
    // The cover's facts: the example PNG fits LinkedIn's limits, so it goes as it is.
    let png = support::images::png_bytes();
    let (w, h) = postonce::image::dimensions(&png).expect("a PNG header");
    assert_eq!(s["image"]["format"], "image/png");
    assert_eq!(s["image"]["bytes"], png.len());
    assert_eq!(
        li["image"],
        json!({"format": "image/png", "bytes": png.len(), "width": w, "height": h, "kind": "original"})
    );
    assert!(li["image_refused"].is_null(), "{li}");
    assert!(
        text(&p).contains("image: PNG") && !text(&p).contains("not shown yet"),
        "{}",
        text(&p)
    );
    assert_eq!(env.linkedin.total_requests().await, 0);
    assert_eq!(
        env.images.hits("/cover.png").await,
        1,
        "the cover is read once"
    );
    let st = call(&client, "status", json!({"kind": "agent", "slug": slug})).await;
    assert!(structured(&st)["draft"].is_null(), "{st:?}");

    let d = call(&client, "doctor", json!({})).await;
    assert!(structured(&d)["checks"].is_array(), "{d:?}");
    let said = text(&d);
    assert!(!said.contains(support::env::LI_TOKEN), "{said}");
    client.cancel().await.expect("close");
}

/// Over a raw pipe: every line on stdout is a JSON-RPC message, the logs go to stderr, and
/// the server exits 0 once the client closes stdin after a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_carries_only_protocol_messages_and_logs_go_to_stderr() {
    use std::io::Write;
    let env = linkedin_env(Stores::Local).await;
    let slug = unique("pipe-");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(["-v", "mcp"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&env.vars)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start postonce mcp");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "post", "arguments": post_args(&env, &slug)}}),
    ];
    let mut stdin = child.stdin.take().expect("stdin");
    for l in &lines {
        writeln!(stdin, "{l}").expect("write");
    }
    // Wait for the answer to the post before closing stdin.
    let until = Instant::now() + Duration::from_secs(20);
    while env.linkedin.posts_containing(&slug).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let messages: Vec<Value> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("not a JSON-RPC line on stdout ({e}): {l}"))
        })
        .collect();
    assert!(messages.iter().all(|m| m["jsonrpc"] == "2.0"), "{stdout}");
    let answer = messages
        .iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the post: {stdout}"));
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "posted",
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(
        stderr.contains("run ended"),
        "the logs go to stderr: {stderr}"
    );
    assert_eq!(env.linkedin.posts_containing(&slug).len(), 1);
}

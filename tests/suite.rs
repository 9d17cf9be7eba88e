//! Most of the integration tests, in one test binary: each file below is a module of it, so the
//! shared support (tests/support/) is compiled once, not once per file, and one binary is linked
//! instead of 36. The suite runs under cargo-nextest, each test in a process of its own
//! (scripts/test.sh). The files whose tests need a process to themselves even under `cargo test`
//! stay binaries of their own (Cargo.toml `[[test]]`): the fail points' and the global log
//! subscriber's (process-wide), the one that runs `serve` in its own process (its signal handlers
//! are the process's from then on), and the chaos, storm and model-checker proofs.

mod support;

mod adapters;
mod bluesky_adapter;
mod cli_output;
mod conformance;
mod covers;
mod credentials;
mod credentials_ahead;
mod credentials_dynamodb;
mod credentials_flows;
mod credentials_refresh;
mod credentials_revoked;
mod doctor;
mod fake_limits;
mod hosted_covers;
mod hostile;
mod images_e2e;
mod keyed_networks;
mod local_mode;
mod mastodon_adapter;
mod mcp;
mod mcp_covers;
mod pipeline;
mod postgres_e2e;
mod postgres_edges;
mod postgres_faults;
mod preview;
mod redis_reconnect;
mod reliability;
mod secrets;
mod serve_shutdown;
mod store_conformance;
mod targets;
mod telegram_channel_adapter;
mod threads_adapter;
mod told_and_listed;
mod x_adapter;

/// Every file under `tests/` is compiled and run once: Cargo's automatic test targets are off
/// (`autotests = false`), so a new file that is neither a module above nor a `[[test]]` of its
/// own in Cargo.toml would silently never run, and one that is both would run twice.
#[test]
fn every_test_file_is_a_module_here_or_a_binary_of_its_own_once() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let (suite, manifest) = (read("tests/suite.rs"), read("Cargo.toml"));
    let (mut missing, mut twice) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(root.join("tests")).expect("tests/") {
        let path = entry.expect("an entry of tests/").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a file name");
        let module = suite.lines().any(|l| l == format!("mod {stem};"));
        let binary = manifest.contains(&format!("path = \"tests/{stem}.rs\""));
        if !module && !binary {
            missing.push(format!("tests/{stem}.rs"));
        }
        if module && binary {
            twice.push(format!("tests/{stem}.rs"));
        }
    }
    assert!(
        missing.is_empty(),
        "{missing:?} would never run: add `mod <name>;` to tests/suite.rs (or a [[test]] of its \
         own to Cargo.toml when its tests need a process to themselves under plain cargo test)"
    );
    assert!(
        twice.is_empty(),
        "{twice:?} run twice: each is a module of tests/suite.rs and a [[test]] in Cargo.toml; \
         keep one"
    );
}

//! Most of the integration tests, in one test binary: each file below is a module of it, so the
//! shared support (tests/support/) is compiled once, not once per file, and one binary is linked
//! instead of 36. The suite runs under cargo-nextest, each test in a process of its own
//! (scripts/test.sh). The files whose tests need a process to themselves even under `cargo test`
//! stay binaries of their own (Cargo.toml `[[test]]`): the fail points' (process-wide), the
//! global log subscriber's, the chaos, storm and model-checker proofs.

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
mod triggers;
mod x_adapter;

//! Threads' variables: `THREADS_ACCESS_TOKEN` (`_PARAM`), `THREADS_USER_ID` (default `me`),
//! `THREADS_API_URL` (default `https://graph.threads.net`), `POSTONCE_THREADS_TIMEOUT_MS`
//! (10000), read as every Graph network's are ([`crate::networks::graph::config`]). Without a
//! token, Threads is a dry run.

use crate::networks::graph::config;
use crate::networks::Definition;

pub use config::MIN_BUDGET;

/// The variables the shared Graph configuration reads for it.
pub const TOKEN_VAR: &str = "THREADS_ACCESS_TOKEN";
pub const USER_VAR: &str = "THREADS_USER_ID";
pub const API_VAR: &str = "THREADS_API_URL";
pub const TIMEOUT_VAR: &str = "POSTONCE_THREADS_TIMEOUT_MS";

pub const DEFINITION: Definition = Definition {
    label: "Threads",
    confirm_label: "It's on Threads",
    min_gap_var: "POSTONCE_MIN_GAP_S_THREADS",
    secrets: &[("THREADS_ACCESS_TOKEN", "THREADS_ACCESS_TOKEN_PARAM")],
    // A permalink needs the username and the post's shortcode, not its id.
    url_of: None,
    load: config::load::<super::Threads>,
    auth: Some(&super::auth::FLOW),
};

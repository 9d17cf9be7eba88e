//! Instagram's variables: `INSTAGRAM_ACCESS_TOKEN` (`_PARAM`), `INSTAGRAM_USER_ID` (default
//! `me`: the token's own account with Instagram Login; the account's id with
//! `graph.facebook.com`), `INSTAGRAM_API_URL` (default `https://graph.instagram.com`),
//! `POSTONCE_INSTAGRAM_TIMEOUT_MS` (10000), read as every Graph network's are
//! ([`crate::networks::graph::config`]). Without a token, Instagram is a dry run.

use crate::networks::graph::config;
use crate::networks::Definition;

/// The variables the shared Graph configuration reads for it.
pub const TOKEN_VAR: &str = "INSTAGRAM_ACCESS_TOKEN";
pub const USER_VAR: &str = "INSTAGRAM_USER_ID";
pub const API_VAR: &str = "INSTAGRAM_API_URL";
pub const TIMEOUT_VAR: &str = "POSTONCE_INSTAGRAM_TIMEOUT_MS";

pub const DEFINITION: Definition = Definition {
    label: "Instagram",
    confirm_label: "It's on Instagram",
    min_gap_var: "POSTONCE_MIN_GAP_S_INSTAGRAM",
    secrets: &[("INSTAGRAM_ACCESS_TOKEN", "INSTAGRAM_ACCESS_TOKEN_PARAM")],
    // A permalink needs the post's shortcode, not its id.
    url_of: None,
    load: config::load::<super::Instagram>,
    auth: Some(&super::auth::FLOW),
};

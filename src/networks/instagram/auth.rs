//! `postonce auth instagram`: the Instagram API with Instagram Login (Meta's documentation of
//! Instagram and Facebook Pages) with the app's `INSTAGRAM_APP_ID` /
//! `INSTAGRAM_APP_SECRET`: authorize at `INSTAGRAM_OAUTH_URL` (`www.instagram.com`), exchange
//! the code at `INSTAGRAM_TOKEN_URL` (`api.instagram.com`) for the short-lived token, at once
//! for the long-lived one (`ig_exchange_token`, 60 days) at `INSTAGRAM_API_URL`, find the
//! professional account's id with `/v25.0/me?fields=user_id,username`, and store both.
//! postonce refreshes the token (`ig_refresh_token`) once it is a day old and fewer than 30
//! days remain. The flow is Meta's, shared with Threads ([`MetaAuth`]).

use crate::networks::graph::auth::MetaAuth;

/// `INSTAGRAM_OAUTH_URL`'s default: where the browser authorizes.
pub const DEFAULT_OAUTH_URL: &str = "https://www.instagram.com";
/// `INSTAGRAM_TOKEN_URL`'s default: where the code is exchanged.
pub const DEFAULT_TOKEN_URL: &str = "https://api.instagram.com";

/// The flow, as the registry holds it.
pub static FLOW: MetaAuth = MetaAuth {
    name: "Instagram",
    app_id: (
        "INSTAGRAM_APP_ID",
        "the Instagram app ID (App Dashboard → Instagram → API setup with Instagram business login)",
    ),
    app_secret: (
        "INSTAGRAM_APP_SECRET",
        "the Instagram app secret (same page as the Instagram app ID)",
    ),
    app_variables: &[
        ("INSTAGRAM_APP_ID", "INSTAGRAM_APP_ID_PARAM"),
        ("INSTAGRAM_APP_SECRET", "INSTAGRAM_APP_SECRET_PARAM"),
    ],
    oauth: ("INSTAGRAM_OAUTH_URL", DEFAULT_OAUTH_URL),
    code_exchange: Some(("INSTAGRAM_TOKEN_URL", DEFAULT_TOKEN_URL)),
    api: ("INSTAGRAM_API_URL", super::DEFAULT_API_URL),
    version: super::API_VERSION,
    scopes: "instagram_business_basic,instagram_business_content_publish",
    exchange_grant: "ig_exchange_token",
    refresh_grant: "ig_refresh_token",
    // `user_id` is the professional account's id (what publishing names); `id` is app-scoped.
    me_fields: "user_id,username",
    id_fields: &["user_id", "id"],
    token_var: "INSTAGRAM_ACCESS_TOKEN",
    user_var: "INSTAGRAM_USER_ID",
};

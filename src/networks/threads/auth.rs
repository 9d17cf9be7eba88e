//! `postonce auth threads`: Meta's Threads OAuth (README "Getting credentials", Threads) with
//! the app's `THREADS_APP_ID` / `THREADS_APP_SECRET`: authorize at `THREADS_OAUTH_URL`,
//! exchange the code for the short-lived token and at once for the long-lived one (60 days),
//! check it with `/v1.0/me`, and store it with the user id. postonce refreshes it
//! (`th_refresh_token`, no secret needed) once it is a day old and fewer than 30 days remain.
//! The flow is Meta's, shared with Instagram ([`MetaAuth`]); these are Threads' names.

use crate::networks::graph::auth::MetaAuth;

/// `THREADS_OAUTH_URL`'s default: where the browser authorizes.
pub const DEFAULT_OAUTH_URL: &str = "https://threads.net";

/// The flow, as the registry holds it.
pub static FLOW: MetaAuth = MetaAuth {
    name: "Threads",
    app_id: (
        "THREADS_APP_ID",
        "the Threads app ID (App settings of the Threads use case, not the Meta app's)",
    ),
    app_secret: (
        "THREADS_APP_SECRET",
        "the Threads app secret (App settings of the Threads use case)",
    ),
    app_variables: &[
        ("THREADS_APP_ID", "THREADS_APP_ID_PARAM"),
        ("THREADS_APP_SECRET", "THREADS_APP_SECRET_PARAM"),
    ],
    oauth: ("THREADS_OAUTH_URL", DEFAULT_OAUTH_URL),
    // The code is exchanged at the API's own host.
    code_exchange: None,
    api: ("THREADS_API_URL", super::DEFAULT_API_URL),
    version: super::API_VERSION,
    scopes: "threads_basic,threads_content_publish",
    exchange_grant: "th_exchange_token",
    refresh_grant: "th_refresh_token",
    me_fields: "id,username",
    id_fields: &["id"],
    token_var: "THREADS_ACCESS_TOKEN",
    user_var: "THREADS_USER_ID",
};

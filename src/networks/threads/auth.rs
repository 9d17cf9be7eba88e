//! `postonce auth threads`: Meta's Threads OAuth (README "Getting credentials", Threads) with
//! the app's `THREADS_APP_ID` / `THREADS_APP_SECRET`: authorize, exchange the code for the
//! short-lived token and at once for the long-lived one (60 days), check it with `/v1.0/me`,
//! and store it with the user id. postonce refreshes it (`th_refresh_token`, no secret needed)
//! once it is a day old and fewer than 30 days remain.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use crate::networks::auth::RefreshContext;
use crate::networks::oauth::{call, query, text};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: ThreadsAuth = ThreadsAuth;

pub struct ThreadsAuth;

/// `THREADS_OAUTH_URL`'s default: where the browser authorizes.
pub const DEFAULT_OAUTH_URL: &str = "https://threads.net";

const SCOPES: &str = "threads_basic,threads_content_publish";

/// A token can be refreshed once it is a day old (Meta's rule) ...
const REFRESH_AFTER_AGE_S: i64 = 86_400;
/// ... and postonce does so when fewer than 30 days remain.
const REFRESH_BEFORE_S: i64 = 30 * 86_400;

fn api(vars: crate::vars::Vars<'_>) -> String {
    vars.get("THREADS_API_URL").map_or_else(
        || super::DEFAULT_API_URL.to_owned(),
        |v| v.trim_end_matches('/').to_owned(),
    )
}

#[async_trait(?Send)]
impl AuthFlow for ThreadsAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("THREADS_APP_ID", "THREADS_APP_ID_PARAM"),
            ("THREADS_APP_SECRET", "THREADS_APP_SECRET_PARAM"),
        ]
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let app_id = cx.require(
            "THREADS_APP_ID",
            "the Threads app ID (App settings of the Threads use case, not the Meta app's)",
        )?;
        let secret = Secret::new(cx.require(
            "THREADS_APP_SECRET",
            "the Threads app secret (App settings of the Threads use case)",
        )?);
        let oauth = cx.var_or("THREADS_OAUTH_URL", DEFAULT_OAUTH_URL);
        let api = api(cx.vars);
        // Meta accepts only https redirect URIs: a pasted one is https, the listener's http.
        let granted = cx
            .authorize("https", |redirect, state, _| {
                format!(
                    "{oauth}/oauth/authorize?{}",
                    query(&[
                        ("client_id", &app_id),
                        ("redirect_uri", redirect),
                        ("scope", SCOPES),
                        ("response_type", "code"),
                        ("state", state),
                    ])
                )
            })
            .await?;
        let form = [
            ("client_id", app_id.as_str()),
            ("client_secret", secret.expose()),
            ("code", granted.code.as_str()),
            ("grant_type", "authorization_code"),
            ("redirect_uri", granted.redirect_uri.as_str()),
        ];
        let short = call(
            cx.http.post(format!("{api}/oauth/access_token")).form(&form),
            "Threads' token endpoint (the code)",
        )
        .await?;
        let short_token = text(&short, "access_token").ok_or_else(|| {
            AuthError::new("Threads' token answer has no access_token; nothing stored")
        })?;
        let long = call(
            cx.http.get(format!("{api}/access_token")).query(&[
                ("grant_type", "th_exchange_token"),
                ("client_secret", secret.expose()),
                ("access_token", short_token.as_str()),
            ]),
            "Threads' long-lived token exchange",
        )
        .await?;
        let now = crate::record::now_s();
        let mut cred = credential(&long, now).map_err(AuthError::new)?;
        let token = cred.secrets["THREADS_ACCESS_TOKEN"].clone();
        let me = call(
            cx.http
                .get(format!("{api}/v1.0/me"))
                .query(&[("fields", "id,username"), ("access_token", token.expose())]),
            "Threads' /me (who the token is)",
        )
        .await?;
        let user = text(&me, "id")
            .or_else(|| text(&short, "user_id"))
            .ok_or_else(|| AuthError::new("Threads named no user id; nothing stored"))?;
        let username = text(&me, "username").unwrap_or_default();
        cx.say(&format!("Signed in as @{username} (Threads user {user})."));
        cred.account = format!("@{username} ({user})");
        cred.settings.insert("THREADS_USER_ID".into(), user);
        Ok(Some(cred))
    }

    fn can_refresh(&self, cred: &Credential) -> bool {
        cred.expires_at.is_some()
    }

    fn refresh_due(&self, cred: &Credential, now: i64) -> bool {
        cred.obtained_at + REFRESH_AFTER_AGE_S <= now
            && cred
                .expires_at
                .is_some_and(|t| t > now && t - now < REFRESH_BEFORE_S)
    }

    async fn refresh(&self, cred: &Credential, cx: &RefreshContext<'_>) -> Result<Credential, String> {
        let token = cred
            .secrets
            .get("THREADS_ACCESS_TOKEN")
            .ok_or("no token stored")?;
        let answer = call(
            cx.http
                .get(format!("{}/refresh_access_token", api(cx.vars)))
                .query(&[
                    ("grant_type", "th_refresh_token"),
                    ("access_token", token.expose()),
                ]),
            "Threads' token refresh",
        )
        .await
        .map_err(|e| e.0.trim_end_matches("; nothing stored").to_owned())?;
        let mut new = credential(&answer, cx.now)?;
        new.account = cred.account.clone();
        new.settings = cred.settings.clone();
        new.scopes = cred.scopes.clone();
        Ok(new)
    }
}

/// The credential of a long-lived token answer (`access_token`, `expires_in`).
fn credential(answer: &Value, now: i64) -> Result<Credential, String> {
    let token = text(answer, "access_token").ok_or("Threads' answer has no access_token")?;
    Ok(Credential {
        account: String::new(),
        scopes: SCOPES.split(',').map(str::to_owned).collect(),
        obtained_at: now,
        expires_at: answer
            .get("expires_in")
            .and_then(Value::as_i64)
            .map(|s| now.saturating_add(s)),
        refresh_token: None,
        refresh_expires_at: None,
        secrets: [("THREADS_ACCESS_TOKEN".to_owned(), Secret::new(token))].into(),
        settings: BTreeMap::new(),
        kept: BTreeMap::new(),
    })
}

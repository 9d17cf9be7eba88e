//! `postonce auth mastodon`: the app registers itself on the instance (`--instance URL` or
//! `MASTODON_URL`; `POST /api/v1/apps`), the person authorizes it in a browser (authorization
//! code with `state` and PKCE S256), the code buys a token (`POST /oauth/token`), checked with
//! `verify_credentials` (README "Getting credentials", Mastodon). The token does not expire; the
//! app's client id and secret are kept beside it.

use async_trait::async_trait;

use crate::networks::oauth::{call, query, text, CALLBACK_PATH, PASTE_PORT};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: MastodonAuth = MastodonAuth;

pub struct MastodonAuth;

/// As few as posting needs: statuses and media, reading its own statuses back (reconcile), and
/// `profile` to check who signed in.
const SCOPES: &str = "write:statuses write:media read:statuses profile";

#[async_trait(?Send)]
impl AuthFlow for MastodonAuth {
    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let instance = match cx.options.instance.clone().or_else(|| cx.vars.get("MASTODON_URL")) {
            Some(i) => i.trim_end_matches('/').to_owned(),
            None => {
                return Err(AuthError::new(
                    "which instance? give --instance https://mastodon.social (or set MASTODON_URL); nothing stored",
                ))
            }
        };
        if url::Url::parse(&instance).map_or(true, |u| !matches!(u.scheme(), "https" | "http")) {
            return Err(AuthError::new(format!(
                "--instance {instance:?} is not an address like https://mastodon.social; nothing stored"
            )));
        }
        // The redirect URI is registered with the app, so its port is chosen first.
        let port = match (cx.options.port, cx.options.paste) {
            (Some(p), _) => p,
            (None, true) => PASTE_PORT,
            (None, false) => std::net::TcpListener::bind(("127.0.0.1", 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| AuthError::new(format!("cannot find a free port: {e}")))?,
        };
        cx.options.port = Some(port);
        let redirect = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
        let app = call(
            cx.http.post(format!("{instance}/api/v1/apps")).form(&[
                ("client_name", "postonce"),
                ("redirect_uris", redirect.as_str()),
                ("scopes", SCOPES),
                ("website", "https://github.com/postonce"),
            ]),
            "the instance's app registration",
        )
        .await?;
        let (Some(client_id), Some(client_secret)) =
            (text(&app, "client_id"), text(&app, "client_secret"))
        else {
            return Err(AuthError::new("the instance registered no app (no client_id); nothing stored"));
        };
        let granted = cx
            .authorize("http", |redirect, state, challenge| {
                format!(
                    "{instance}/oauth/authorize?{}",
                    query(&[
                        ("response_type", "code"),
                        ("client_id", &client_id),
                        ("redirect_uri", redirect),
                        ("scope", SCOPES),
                        ("state", state),
                        ("code_challenge", challenge),
                        ("code_challenge_method", "S256"),
                    ])
                )
            })
            .await?;
        let token = call(
            cx.http.post(format!("{instance}/oauth/token")).form(&[
                ("grant_type", "authorization_code"),
                ("code", granted.code.as_str()),
                ("client_id", client_id.as_str()),
                ("client_secret", client_secret.as_str()),
                ("redirect_uri", granted.redirect_uri.as_str()),
                ("code_verifier", granted.verifier.as_str()),
            ]),
            "the instance's token endpoint (the code)",
        )
        .await?;
        let access = text(&token, "access_token")
            .ok_or_else(|| AuthError::new("the instance's answer has no access_token; nothing stored"))?;
        let me = call(
            cx.http
                .get(format!("{instance}/api/v1/accounts/verify_credentials"))
                .bearer_auth(&access),
            "the instance's verify_credentials",
        )
        .await?;
        let acct = text(&me, "acct").unwrap_or_default();
        cx.say(&format!("Signed in as @{acct} on {instance}."));
        Ok(Some(Credential {
            account: format!("@{acct} on {instance}"),
            scopes: text(&token, "scope")
                .unwrap_or_else(|| SCOPES.to_owned())
                .split(' ')
                .map(str::to_owned)
                .collect(),
            obtained_at: crate::record::now_s(),
            expires_at: None,
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [("MASTODON_ACCESS_TOKEN".to_owned(), Secret::new(access))].into(),
            settings: [("MASTODON_URL".to_owned(), instance)].into(),
            kept: [
                ("client_id".to_owned(), Secret::new(client_id)),
                ("client_secret".to_owned(), Secret::new(client_secret)),
            ]
            .into(),
        }))
    }
}

//! `postonce auth x`: X's OAuth 1.0a PIN flow (README "Getting credentials", X) with the app's
//! `X_API_KEY` / `X_API_SECRET` (`_PARAM`): a request token (`oauth_callback=oob`), the person
//! approves in a browser and copies the PIN, the PIN buys the access token and its secret, which
//! are stored with the account. They do not expire. Signing is [`super::oauth1`]'s.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use super::oauth1::{base_string, encode, nonce, sign, timestamp};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: XAuth = XAuth;

pub struct XAuth;

/// The `Authorization` header of a PIN-flow call: the consumer's keys, `extra` oauth pairs
/// (`oauth_callback`), and the request token once there is one.
fn header(
    method: &str,
    url: &str,
    consumer: (&str, &str),
    token: Option<(&str, &str)>,
    extra: &[(&str, &str)],
) -> Result<String, AuthError> {
    let mut oauth: Vec<(String, String)> = vec![
        ("oauth_consumer_key".into(), consumer.0.into()),
        ("oauth_nonce".into(), nonce()),
        ("oauth_signature_method".into(), "HMAC-SHA1".into()),
        ("oauth_timestamp".into(), timestamp().to_string()),
        ("oauth_version".into(), "1.0".into()),
    ];
    oauth.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    if let Some((t, _)) = token {
        oauth.push(("oauth_token".into(), t.into()));
    }
    let base = base_string(method, url, &oauth)
        .map_err(|e| AuthError::new(format!("X_API_URL: not a URL ({e})")))?;
    oauth.push((
        "oauth_signature".into(),
        sign(&base, consumer.1, token.map_or("", |(_, s)| s)),
    ));
    oauth.sort();
    let fields: Vec<String> = oauth
        .iter()
        .map(|(k, v)| format!("{}=\"{}\"", encode(k), encode(v)))
        .collect();
    Ok(format!("OAuth {}", fields.join(", ")))
}

/// Sends a signed POST and reads its form-encoded answer.
async fn form_call(
    cx: &AuthContext<'_>,
    url: &str,
    authorization: String,
    what: &str,
) -> Result<HashMap<String, String>, AuthError> {
    let answer = cx
        .http
        .post(url)
        .header("Authorization", authorization)
        .send()
        .await
        .map_err(|e| AuthError::new(format!("{what}: X could not be reached ({}); nothing stored", e.without_url())))?;
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap_or_default();
    if status != 200 {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let why = v
            .pointer("/errors/0/message")
            .and_then(|m| m.as_str())
            .unwrap_or("no reason given");
        return Err(AuthError::new(format!(
            "{what} was refused (HTTP {status}: {why}); check that the app is set to Read and Write and has a callback URL; nothing stored"
        )));
    }
    Ok(url::form_urlencoded::parse(body.as_bytes()).into_owned().collect())
}

#[async_trait(?Send)]
impl AuthFlow for XAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("X_API_KEY", "X_API_KEY_PARAM"),
            ("X_API_SECRET", "X_API_SECRET_PARAM"),
        ]
    }

    fn credential_variable(&self) -> Option<(&'static str, &'static str)> {
        Some(("X_ACCESS_TOKEN", "X_ACCESS_TOKEN_PARAM"))
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let key = cx.require("X_API_KEY", "the app's API Key (Developer Console, Keys and tokens)")?;
        let secret = Secret::new(cx.require("X_API_SECRET", "the app's API Key Secret")?);
        let api = cx.var_or("X_API_URL", super::DEFAULT_API);
        let consumer = (key.as_str(), secret.expose());
        let url = format!("{api}/oauth/request_token");
        let auth = header("POST", &url, consumer, None, &[("oauth_callback", "oob")])?;
        let request = form_call(cx, &url, auth, "X's request_token").await?;
        let (Some(token), Some(token_secret)) = (request.get("oauth_token"), request.get("oauth_token_secret")) else {
            return Err(AuthError::new("X's request_token answer has no token; nothing stored"));
        };
        cx.say(&format!(
            "Open this address in a browser, sign in as the account to post as, approve, and copy the PIN:\n\n  {api}/oauth/authorize?oauth_token={}\n",
            encode(token)
        ));
        let pin = cx.ask("PIN: ")?;
        if pin.is_empty() || !pin.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(AuthError::new("that is not a PIN (the digits X shows after approving); nothing stored"));
        }
        let url = format!("{api}/oauth/access_token?oauth_verifier={}", encode(&pin));
        let auth = header("POST", &url, consumer, Some((token, token_secret)), &[])?;
        let access = form_call(cx, &url, auth, "X's access_token (the PIN)").await?;
        let (Some(t), Some(s)) = (access.get("oauth_token"), access.get("oauth_token_secret")) else {
            return Err(AuthError::new("X's access_token answer has no token; nothing stored"));
        };
        let name = access.get("screen_name").cloned().unwrap_or_default();
        let user = access.get("user_id").cloned().unwrap_or_default();
        cx.say(&format!("Signed in as @{name} ({user})."));
        Ok(Some(Credential {
            account: format!("@{name} ({user})"),
            scopes: vec!["read".into(), "write".into()],
            obtained_at: crate::record::now_s(),
            expires_at: None,
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [
                ("X_ACCESS_TOKEN".to_owned(), Secret::new(t.clone())),
                ("X_ACCESS_TOKEN_SECRET".to_owned(), Secret::new(s.clone())),
                ("X_API_KEY".to_owned(), Secret::new(key.clone())),
                ("X_API_SECRET".to_owned(), secret.clone()),
            ]
            .into(),
            settings: BTreeMap::new(),
            kept: BTreeMap::new(),
        }))
    }
}

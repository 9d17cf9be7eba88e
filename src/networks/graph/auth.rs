//! Meta's long-lived user token flow, shared by `postonce auth threads` and `postonce auth
//! instagram` (README "Getting credentials": Threads; Instagram API with Instagram Login):
//! authorize in the browser, exchange the code for the short-lived token (1 h) and at once for
//! the long-lived one (60 days), find who it is with `/me`, and store it with the user id.
//! postonce refreshes it (no secret needed) once it is a day old (Meta's rule) and fewer than
//! 30 days remain. What differs between the two is a [`MetaAuth`], one per network folder.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential, RefreshContext};
use crate::networks::oauth::{call, query, text};
use crate::vars::{Secret, Vars};

/// A token can be refreshed once it is a day old (Meta's rule) ...
const REFRESH_AFTER_AGE_S: i64 = 86_400;
/// ... and postonce does so when fewer than 30 days remain.
const REFRESH_BEFORE_S: i64 = 30 * 86_400;

/// One network's Meta OAuth: its app, its endpoints and its grant names.
pub struct MetaAuth {
    /// The network's name for people (`Threads`).
    pub name: &'static str,
    /// The app's id and secret variables, with what to tell when one is missing.
    pub app_id: (&'static str, &'static str),
    pub app_secret: (&'static str, &'static str),
    /// Both, each with its `_PARAM` (resolved from SSM before the flow starts).
    pub app_variables: &'static [(&'static str, &'static str)],
    /// Where the browser authorizes (`<oauth>/oauth/authorize`): its variable and default.
    pub oauth: (&'static str, &'static str),
    /// Where the code is exchanged (`<base>/oauth/access_token`): its variable and default
    /// (`None`: the API base).
    pub code_exchange: Option<(&'static str, &'static str)>,
    /// The API base (long-lived exchange, refresh, `/me`): its variable and default.
    pub api: (&'static str, &'static str),
    /// The API version of `/me`.
    pub version: &'static str,
    pub scopes: &'static str,
    /// `th_exchange_token`, `ig_exchange_token`; `th_refresh_token`, `ig_refresh_token`.
    pub exchange_grant: &'static str,
    pub refresh_grant: &'static str,
    /// `/me`'s fields, and the answer's fields that hold the account's id, first found wins.
    pub me_fields: &'static str,
    pub id_fields: &'static [&'static str],
    /// The variables the credential stands for: the token and the account's id.
    pub token_var: &'static str,
    pub user_var: &'static str,
}

impl MetaAuth {
    fn base(vars: Vars<'_>, (var, default): (&'static str, &'static str)) -> String {
        vars.get(var).map_or_else(
            || default.to_owned(),
            |v| v.trim_end_matches('/').to_owned(),
        )
    }

    /// The short-lived token of the code's answer: `{"access_token","user_id"}`, or the same
    /// inside `{"data":[{…}]}` (both seen for Instagram; unconfirmed which is current).
    fn short_token(answer: &Value) -> Option<(String, Option<String>)> {
        let item = answer.pointer("/data/0").unwrap_or(answer);
        let token = text(item, "access_token")?;
        Some((token, text(item, "user_id")))
    }

    /// The credential of a long-lived token answer (`access_token`, `expires_in`).
    fn credential(&self, answer: &Value, now: i64) -> Result<Credential, String> {
        let token = text(answer, "access_token")
            .ok_or_else(|| format!("{}'s answer has no access_token", self.name))?;
        Ok(Credential {
            account: String::new(),
            scopes: self.scopes.split(',').map(str::to_owned).collect(),
            obtained_at: now,
            expires_at: answer
                .get("expires_in")
                .and_then(Value::as_i64)
                .map(|s| now.saturating_add(s)),
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [(self.token_var.to_owned(), Secret::new(token))].into(),
            settings: BTreeMap::new(),
            kept: BTreeMap::new(),
        })
    }

    /// Exchanges the granted code for the short-lived token, then for the long-lived one.
    async fn exchange(
        &self,
        cx: &AuthContext<'_>,
        app_id: &str,
        secret: &Secret,
        granted: &crate::networks::oauth::Granted,
    ) -> Result<(Credential, Option<String>), AuthError> {
        let api = Self::base(cx.vars, self.api);
        let code_base = self
            .code_exchange
            .map_or_else(|| api.clone(), |b| Self::base(cx.vars, b));
        let form = [
            ("client_id", app_id),
            ("client_secret", secret.expose()),
            ("code", granted.code.as_str()),
            ("grant_type", "authorization_code"),
            ("redirect_uri", granted.redirect_uri.as_str()),
        ];
        let short = call(
            cx.http
                .post(format!("{code_base}/oauth/access_token"))
                .form(&form),
            &format!("{}'s token endpoint (the code)", self.name),
        )
        .await?;
        let (short_token, short_user) = Self::short_token(&short).ok_or_else(|| {
            AuthError::new(format!(
                "{}'s token answer has no access_token; nothing stored",
                self.name
            ))
        })?;
        let long = call(
            cx.http.get(format!("{api}/access_token")).query(&[
                ("grant_type", self.exchange_grant),
                ("client_secret", secret.expose()),
                ("access_token", short_token.as_str()),
            ]),
            &format!("{}'s long-lived token exchange", self.name),
        )
        .await?;
        let cred = self
            .credential(&long, crate::record::now_s())
            .map_err(AuthError::new)?;
        Ok((cred, short_user))
    }
}

#[async_trait(?Send)]
impl AuthFlow for MetaAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        self.app_variables
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let app_id = cx.require(self.app_id.0, self.app_id.1)?;
        let secret = Secret::new(cx.require(self.app_secret.0, self.app_secret.1)?);
        let oauth = cx.var_or(self.oauth.0, self.oauth.1);
        // Meta accepts only https redirect URIs: a pasted one is https, the listener's http
        // (which an app may list too; unconfirmed for Instagram).
        let granted = cx
            .authorize("https", |redirect, state, _| {
                format!(
                    "{oauth}/oauth/authorize?{}",
                    query(&[
                        ("client_id", &app_id),
                        ("redirect_uri", redirect),
                        ("scope", self.scopes),
                        ("response_type", "code"),
                        ("state", state),
                    ])
                )
            })
            .await?;
        let (mut cred, short_user) = self.exchange(cx, &app_id, &secret, &granted).await?;
        let api = Self::base(cx.vars, self.api);
        let token = cred.secrets[self.token_var].clone();
        let me = call(
            cx.http
                .get(format!("{api}/{}/me", self.version))
                .query(&[("fields", self.me_fields), ("access_token", token.expose())]),
            &format!("{}'s /me (who the token is)", self.name),
        )
        .await?;
        let user = self
            .id_fields
            .iter()
            .find_map(|f| text(&me, f))
            .or(short_user)
            .ok_or_else(|| {
                AuthError::new(format!("{} named no user id; nothing stored", self.name))
            })?;
        let username = text(&me, "username").unwrap_or_default();
        cx.say(&format!(
            "Signed in as @{username} ({} user {user}).",
            self.name
        ));
        cred.account = format!("@{username} ({user})");
        cred.settings.insert(self.user_var.into(), user);
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

    async fn refresh(
        &self,
        cred: &Credential,
        cx: &RefreshContext<'_>,
    ) -> Result<Credential, String> {
        let token = cred.secrets.get(self.token_var).ok_or("no token stored")?;
        let api = Self::base(cx.vars, self.api);
        let answer = call(
            cx.http.get(format!("{api}/refresh_access_token")).query(&[
                ("grant_type", self.refresh_grant),
                ("access_token", token.expose()),
            ]),
            &format!("{}'s token refresh", self.name),
        )
        .await
        .map_err(|e| e.0.trim_end_matches("; nothing stored").to_owned())?;
        let mut new = self.credential(&answer, cx.now)?;
        new.account = cred.account.clone();
        new.settings = cred.settings.clone();
        new.scopes = cred.scopes.clone();
        Ok(new)
    }
}

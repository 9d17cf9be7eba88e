//! `postonce auth linkedin`: LinkedIn's 3-legged OAuth 2.0 (README "Getting credentials",
//! LinkedIn) with the app's `LINKEDIN_CLIENT_ID` / `LINKEDIN_CLIENT_SECRET`: authorize, exchange
//! the code, find the member (`/v2/userinfo`), list the organizations the member administers,
//! and store the token with its author. A refresh token (approved partners only) is kept and
//! used when fewer than 7 days remain.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use crate::networks::auth::RefreshContext;
use crate::networks::oauth::{call, query, text};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: LinkedInAuth = LinkedInAuth;

pub struct LinkedInAuth;

/// `LINKEDIN_OAUTH_URL`'s default.
pub const DEFAULT_OAUTH_URL: &str = "https://www.linkedin.com/oauth/v2";

/// Posting as the member, and finding who the member is.
const MEMBER_SCOPES: &str = "openid profile w_member_social";
/// Posting for an organization, and listing those the member administers (Community
/// Management API, reviewed).
const ORGANIZATION_SCOPES: &str = "w_organization_social r_organization_admin";

/// A refresh is due when fewer than this many seconds remain.
const REFRESH_BEFORE_S: i64 = 7 * 86_400;

#[async_trait(?Send)]
impl AuthFlow for LinkedInAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("LINKEDIN_CLIENT_ID", "LINKEDIN_CLIENT_ID_PARAM"),
            ("LINKEDIN_CLIENT_SECRET", "LINKEDIN_CLIENT_SECRET_PARAM"),
        ]
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let client_id = cx.require("LINKEDIN_CLIENT_ID", "the Client ID on the app's Auth tab")?;
        let secret = Secret::new(cx.require(
            "LINKEDIN_CLIENT_SECRET",
            "the Primary Client Secret on the app's Auth tab",
        )?);
        let author = cx.options.author.clone();
        if let Some(a) = &author {
            if !(a.starts_with("urn:li:organization:") || a.starts_with("urn:li:person:")) {
                return Err(AuthError::new(format!(
                    "--author {a:?} is not urn:li:person:<id> or urn:li:organization:<id>; nothing stored"
                )));
            }
        }
        let oauth = cx.var_or("LINKEDIN_OAUTH_URL", DEFAULT_OAUTH_URL);
        let api = cx.var_or("LINKEDIN_API_URL", "https://api.linkedin.com");
        let version = cx.var_or("LINKEDIN_VERSION", super::DEFAULT_VERSION);
        let scopes = match &author {
            Some(a) if a.starts_with("urn:li:organization:") => {
                format!("{MEMBER_SCOPES} {ORGANIZATION_SCOPES}")
            }
            _ => MEMBER_SCOPES.to_owned(),
        };
        let granted = cx
            .authorize("http", |redirect, state, _| {
                format!(
                    "{oauth}/authorization?{}",
                    query(&[
                        ("response_type", "code"),
                        ("client_id", &client_id),
                        ("redirect_uri", redirect),
                        ("state", state),
                        ("scope", &scopes),
                    ])
                )
            })
            .await?;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", granted.code.as_str()),
            ("redirect_uri", granted.redirect_uri.as_str()),
            ("client_id", client_id.as_str()),
            ("client_secret", secret.expose()),
        ];
        let token = call(
            cx.http.post(format!("{oauth}/accessToken")).form(&form),
            "LinkedIn's token endpoint (the code)",
        )
        .await?;
        let now = crate::record::now_s();
        let mut cred = credential(&token, now, &client_id, &secret)?;
        let access = cred.secrets["LINKEDIN_ACCESS_TOKEN"].clone();
        let me = call(
            cx.http
                .get(format!("{api}/v2/userinfo"))
                .bearer_auth(access.expose()),
            "LinkedIn's userinfo (who the member is)",
        )
        .await?;
        let sub = text(&me, "sub").ok_or_else(|| {
            AuthError::new("LinkedIn's userinfo named no member (no `sub`); nothing stored")
        })?;
        let member = format!("urn:li:person:{sub}");
        let name = text(&me, "name").unwrap_or_default();
        cx.say(&format!("Signed in as {name} ({member})."));
        let organizations = organizations(cx, &api, &version, &access).await;
        match &organizations {
            Ok(list) if list.is_empty() => cx.say("The member administers no organization."),
            Ok(list) => cx.say(&format!(
                "Organizations the member may post for (choose one with --author): {}",
                list.join(", ")
            )),
            Err(why) => cx.say(&format!("Organizations not listed: {why}")),
        }
        let author = author.unwrap_or_else(|| member.clone());
        if let (Ok(list), true) = (&organizations, author.starts_with("urn:li:organization:")) {
            if !list.contains(&author) {
                return Err(AuthError::new(format!(
                    "--author {author} is not an organization this member administers (listed above); nothing stored"
                )));
            }
        }
        cred.account = if author == member {
            format!("{member} ({name})")
        } else {
            format!("{author} (by {member})")
        };
        cred.settings.insert("LINKEDIN_AUTHOR".into(), author);
        Ok(Some(cred))
    }

    fn can_refresh(&self, cred: &Credential) -> bool {
        cred.refresh_token.is_some()
    }

    fn refresh_due(&self, cred: &Credential, now: i64) -> bool {
        cred.refresh_token.is_some()
            && cred.refresh_expires_at.is_none_or(|t| t > now)
            && cred.expires_at.is_some_and(|t| t - now < REFRESH_BEFORE_S)
    }

    async fn refresh(&self, cred: &Credential, cx: &RefreshContext<'_>) -> Result<Credential, String> {
        let (Some(refresh), Some(id), Some(secret)) = (
            &cred.refresh_token,
            cred.kept.get("client_id"),
            cred.kept.get("client_secret"),
        ) else {
            return Err("no refresh token kept".into());
        };
        let oauth = cx
            .vars
            .get("LINKEDIN_OAUTH_URL")
            .map_or_else(|| DEFAULT_OAUTH_URL.to_owned(), |v| v.trim_end_matches('/').to_owned());
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.expose()),
            ("client_id", id.expose()),
            ("client_secret", secret.expose()),
        ];
        let token = call(
            cx.http.post(format!("{oauth}/accessToken")).form(&form),
            "LinkedIn's token endpoint (refresh)",
        )
        .await
        .map_err(|e| e.0)?;
        let mut new = credential(&token, cx.now, id.expose(), secret).map_err(|e| e.0)?;
        // The refresh token's life counts from the first authorization: keep its expiry.
        new.refresh_token = new.refresh_token.or_else(|| cred.refresh_token.clone());
        new.refresh_expires_at = cred.refresh_expires_at;
        new.account = cred.account.clone();
        new.settings = cred.settings.clone();
        new.obtained_at = cred.obtained_at;
        Ok(new)
    }
}

/// The credential of a token answer (`access_token`, `expires_in`, `scope`, and for partners
/// `refresh_token`, `refresh_token_expires_in`).
fn credential(token: &Value, now: i64, client_id: &str, secret: &Secret) -> Result<Credential, AuthError> {
    let access = text(token, "access_token").ok_or_else(|| {
        AuthError::new("LinkedIn's token answer has no access_token; nothing stored")
    })?;
    let seconds = |f: &str| token.get(f).and_then(Value::as_i64).map(|s| now.saturating_add(s));
    Ok(Credential {
        account: String::new(),
        scopes: text(token, "scope")
            .unwrap_or_default()
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        obtained_at: now,
        expires_at: seconds("expires_in"),
        refresh_token: text(token, "refresh_token").map(Secret::new),
        refresh_expires_at: seconds("refresh_token_expires_in"),
        secrets: [("LINKEDIN_ACCESS_TOKEN".to_owned(), Secret::new(access))].into(),
        settings: BTreeMap::new(),
        kept: [
            ("client_id".to_owned(), Secret::new(client_id)),
            ("client_secret".to_owned(), secret.clone()),
        ]
        .into(),
    })
}

/// The organizations the member administers (`organizationAcls`; older shapes name the
/// organization `organizationalTarget` or `organizationTarget`).
async fn organizations(
    cx: &AuthContext<'_>,
    api: &str,
    version: &str,
    token: &Secret,
) -> Result<Vec<String>, String> {
    let v = call(
        cx.http
            .get(format!(
                "{api}/rest/organizationAcls?q=roleAssignee&role=ADMINISTRATOR&state=APPROVED"
            ))
            .bearer_auth(token.expose())
            .header("LinkedIn-Version", version)
            .header("X-Restli-Protocol-Version", "2.0.0"),
        "LinkedIn's organizationAcls",
    )
    .await
    .map_err(|e| {
        format!(
            "{} (it needs r_organization_admin, from the Community Management API)",
            e.0.trim_end_matches("; nothing stored")
        )
    })?;
    Ok(v.get("elements")
        .and_then(Value::as_array)
        .map(|els| {
            els.iter()
                .filter_map(|e| {
                    ["organization", "organizationalTarget", "organizationTarget"]
                        .iter()
                        .find_map(|f| text(e, f))
                })
                .collect()
        })
        .unwrap_or_default())
}

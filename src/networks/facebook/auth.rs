//! `postonce auth facebook`: Facebook Login (Meta's documentation of Facebook Pages) with the
//! app's `FACEBOOK_APP_ID` / `FACEBOOK_APP_SECRET`: authorize at `FACEBOOK_OAUTH_URL`
//! (`https://www.facebook.com/v25.0/dialog/oauth`), exchange the code at `FACEBOOK_API_URL`
//! (`/v25.0/oauth/access_token`) for the short-lived user token, at once for the long-lived one
//! (`fb_exchange_token`, about 60 days), then list the Pages it manages
//! (`/v25.0/me/accounts?fields=id,name,access_token,tasks`) and store the chosen Page's token
//! with its id. A Page token obtained with a long-lived user token does not expire: nothing to
//! refresh; it dies on a password change, the loss of the Page role or the app's removal, and
//! then a post answers 190 and this command is run again.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use super::page::{parse_page_id, PAGE_VAR, TOKEN_VAR};
use super::{API_VERSION, DEFAULT_API_URL};
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::networks::oauth::{call, query, text};
use crate::vars::Secret;

/// `FACEBOOK_OAUTH_URL`'s default: where the browser authorizes.
pub const DEFAULT_OAUTH_URL: &str = "https://www.facebook.com";
/// What the Page token must be allowed to do.
pub const SCOPES: &str = "pages_show_list,pages_read_engagement,pages_manage_posts";

/// The flow, as the registry holds it.
pub static FLOW: FacebookAuth = FacebookAuth;

pub struct FacebookAuth;

/// A Page the user manages, as `/me/accounts` lists it.
struct Page {
    id: String,
    name: String,
    token: Option<String>,
    tasks: Vec<String>,
}

fn pages(answer: &Value) -> Vec<Page> {
    answer
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(Page {
                id: text(p, "id")?,
                name: text(p, "name").unwrap_or_default(),
                token: text(p, "access_token"),
                tasks: p
                    .get("tasks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

/// The Page: the one `FACEBOOK_PAGE_ID` names, the only one, or one the person picks.
fn pick(cx: &mut AuthContext<'_>, mut found: Vec<Page>) -> Result<Page, AuthError> {
    if found.is_empty() {
        return Err(AuthError::new(
            "the user manages no Page this app may reach (grant the Page in the login dialog, with pages_show_list); nothing stored",
        ));
    }
    let wanted = match cx.vars.get(PAGE_VAR) {
        Some(id) => Some(id.trim().to_owned()),
        None if found.len() == 1 => Some(found[0].id.clone()),
        None => {
            cx.say("The Pages this login manages:");
            for (i, p) in found.iter().enumerate() {
                cx.say(&format!("  {}. {}: {}", i + 1, p.name, p.id));
            }
            let answer = cx.ask("Page to post to (its number or id): ")?;
            let n = answer.parse::<usize>().ok().filter(|n| (1..=found.len()).contains(n));
            Some(n.map_or(answer, |n| found[n - 1].id.clone()))
        }
    };
    let wanted = wanted.unwrap_or_default();
    let at = found.iter().position(|p| p.id == wanted).ok_or_else(|| {
        AuthError::new(format!(
            "{wanted:?} is not among the Pages this login manages; nothing stored"
        ))
    })?;
    Ok(found.swap_remove(at))
}

#[async_trait(?Send)]
impl AuthFlow for FacebookAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("FACEBOOK_APP_ID", "FACEBOOK_APP_ID_PARAM"),
            ("FACEBOOK_APP_SECRET", "FACEBOOK_APP_SECRET_PARAM"),
        ]
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        let app_id = cx.require("FACEBOOK_APP_ID", "the Meta app's ID (App Dashboard → App settings → Basic), an app with Facebook Login for Business")?;
        let secret = Secret::new(cx.require("FACEBOOK_APP_SECRET", "the Meta app's secret (same page as the app ID)")?);
        let oauth = cx.var_or("FACEBOOK_OAUTH_URL", DEFAULT_OAUTH_URL);
        let api = format!("{}/{API_VERSION}", cx.var_or("FACEBOOK_API_URL", DEFAULT_API_URL));
        let granted = cx
            .authorize("https", |redirect, state, _| {
                format!(
                    "{oauth}/{API_VERSION}/dialog/oauth?{}",
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
        let token_url = format!("{api}/oauth/access_token");
        let short = call(
            cx.http.get(&token_url).query(&[
                ("client_id", app_id.as_str()),
                ("client_secret", secret.expose()),
                ("redirect_uri", granted.redirect_uri.as_str()),
                ("code", granted.code.as_str()),
            ]),
            "Facebook's token endpoint (the code)",
        )
        .await?;
        let short = text(&short, "access_token")
            .ok_or_else(|| AuthError::new("Facebook's token answer has no access_token; nothing stored"))?;
        let long = call(
            cx.http.get(&token_url).query(&[
                ("grant_type", "fb_exchange_token"),
                ("client_id", app_id.as_str()),
                ("client_secret", secret.expose()),
                ("fb_exchange_token", short.as_str()),
            ]),
            "Facebook's long-lived token exchange",
        )
        .await?;
        let user_token = text(&long, "access_token")
            .ok_or_else(|| AuthError::new("Facebook's long-lived answer has no access_token; nothing stored"))?;
        let accounts = call(
            cx.http.get(format!("{api}/me/accounts")).query(&[
                ("fields", "id,name,access_token,tasks"),
                ("access_token", user_token.as_str()),
            ]),
            "Facebook's /me/accounts (the Pages the user manages)",
        )
        .await?;
        let page = pick(cx, pages(&accounts))?;
        parse_page_id(&page.id).map_err(|e| AuthError::new(format!("{e}; nothing stored")))?;
        let token = page.token.ok_or_else(|| {
            AuthError::new(format!("Facebook listed the Page {} without its token (the user lacks a task on it); nothing stored", page.id))
        })?;
        if !page.tasks.iter().any(|t| t == "CREATE_CONTENT") {
            cx.say(&format!("Warning: the user's tasks on {} are {:?}; posting needs CREATE_CONTENT.", page.name, page.tasks));
        }
        cx.say(&format!("The Page {} ({}) is chosen; its token does not expire.", page.name, page.id));
        Ok(Some(Credential {
            account: format!("the Page {} ({})", page.name, page.id),
            scopes: SCOPES.split(',').map(str::to_owned).collect(),
            obtained_at: crate::record::now_s(),
            expires_at: None,
            refresh_token: None,
            refresh_expires_at: None,
            secrets: [(TOKEN_VAR.to_owned(), Secret::new(token))].into(),
            settings: [(PAGE_VAR.to_owned(), page.id)].into(),
            kept: BTreeMap::new(),
        }))
    }
}

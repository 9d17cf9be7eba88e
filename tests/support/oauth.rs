//! Fakes of LinkedIn's and Threads' OAuth and token endpoints, speaking the networks' documented wire format
//! "Credentials" (one server serves both: the tests point `LINKEDIN_OAUTH_URL`,
//! `LINKEDIN_API_URL`, `THREADS_OAUTH_URL` and `THREADS_API_URL` at it while `auth` runs):
//!
//! - LinkedIn: `GET /authorization` (approves: 302 to `redirect_uri?code&state`; refuses: 302
//!   with `error=user_cancelled_authorize`), `POST /accessToken` (form `grant_type`, `code`,
//!   `redirect_uri`, `client_id`, `client_secret`; a code is single use: a second use answers
//!   `400 invalid_grant`), `GET /v2/userinfo` (Bearer), `GET /rest/organizationAcls`.
//! - Threads: `GET /oauth/authorize` (the redirect gets Meta's `#_`), `POST /oauth/access_token`
//!   (short-lived token and a numeric `user_id`), `GET /access_token?grant_type=th_exchange_token`
//!   (the long-lived token), `GET /v1.0/me`, `GET /refresh_access_token?grant_type=th_refresh_token`.
//!
//! - Instagram (Instagram Login): the same `GET /oauth/authorize`, `POST /oauth/access_token`
//!   for its app id (the short-lived token inside `{"data":[{…}]}`, the reading some write-ups
//!   show), `GET /access_token?grant_type=ig_exchange_token`, `GET /v25.0/me?fields=user_id,username`,
//!   `GET /refresh_access_token?grant_type=ig_refresh_token`, the publishing limit (doctor).
//!
//! The app secrets and issued tokens carry `SECRET<n>` marks so that the suite's log check
//! finds any that leak.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const LINKEDIN_CLIENT_ID: &str = "86li7client";
pub const LINKEDIN_CLIENT_SECRET: &str = "WPL_AP1.app-SECRET2-linkedin";
pub const LINKEDIN_TOKEN: &str = "AQV-linkedin-SECRET3-issued-by-auth";
pub const LINKEDIN_SUB: &str = "782bbtaQ";
/// The refresh token of an approved partner's LinkedIn app (README "Getting credentials").
pub const LINKEDIN_REFRESH: &str = "AQX-linkedin-refresh-SECRET6";
/// The access token LinkedIn's refresh issues.
pub const LINKEDIN_REFRESHED: &str = "AQV-linkedin-SECRET7-refreshed";
pub const THREADS_APP_ID: &str = "1234567890123456";
pub const THREADS_APP_SECRET: &str = "threads-app-SECRET4-abcdef";
pub const THREADS_SHORT: &str = "THQVJ-short-SECRET5";
pub const INSTAGRAM_APP_ID: &str = "990011223344556";
pub const INSTAGRAM_APP_SECRET: &str = "instagram-app-SECRET4-fedcba";
pub const INSTAGRAM_SHORT: &str = "IGQVJ-short-SECRET5";
pub const FACEBOOK_APP_ID: &str = "771122334455667";
pub const FACEBOOK_APP_SECRET: &str = "facebook-app-SECRET4-0a1b2c";
pub const FACEBOOK_SHORT: &str = "EAAshort-user-SECRET5";
/// The long-lived user token (`fb_exchange_token`); the Page token comes from `/me/accounts`.
pub const FACEBOOK_USER_TOKEN: &str = "EAAlong-user-SECRET6";

pub const MASTODON_CLIENT_ID: &str = "TWhM-tNSuncnqN7DBJmoyeLnk6K3iJJ71KKXxgL1hPM";
pub const MASTODON_CLIENT_SECRET: &str = "ZEaFUFmF0umgBX1qKJDjaU99Q31lDkOU8NutzTOoliw-SECRET2";
pub const X_REQUEST_TOKEN: &str = "NPcudxy0yU5T3tBzho7iCotZ3cnetKwcTIRlX0iwRl0";
pub const X_REQUEST_SECRET: &str = "veNRnAWe6inFuo8o2u8SLLZLjolYDmDP7SzL0YfYI-SECRET4";
pub const X_PIN: &str = "4829153";

/// The oauth parameters of a request signed with `consumer_secret` and `token_secret`
/// (HMAC-SHA1 over the method, the URL its Host header names, the oauth pairs and the query),
/// or `None` when the signature does not verify.
fn oauth1_verified(req: &Request, token_secret: &str) -> Option<Vec<(String, String)>> {
    use super::x::{oauth_params, pct};
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let header = |n: &str| {
        req.headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let params = oauth_params(header("authorization"))?;
    let signature = params
        .iter()
        .find(|(k, _)| k == "oauth_signature")?
        .1
        .clone();
    let mut signed: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| k != "oauth_signature")
        .map(|(k, v)| (pct(k), pct(v)))
        .chain(req.url.query_pairs().map(|(k, v)| (pct(&k), pct(&v))))
        .collect();
    signed.sort();
    let normalized: Vec<String> = signed.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let url = format!("http://{}{}", header("host"), req.url.path());
    let base = format!(
        "{}&{}&{}",
        req.method.as_str(),
        pct(&url),
        pct(&normalized.join("&"))
    );
    let key = format!("{}&{}", pct(super::x::CONSUMER_SECRET), pct(token_secret));
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(base.as_bytes());
    let given = base64::engine::general_purpose::STANDARD
        .decode(signature)
        .ok()?;
    mac.verify_slice(&given).ok()?;
    Some(params)
}

#[derive(Default)]
struct State {
    refuse: bool,
    /// code → (redirect_uri, client_id); removed when used.
    codes: HashMap<String, (String, String)>,
    used: Vec<String>,
    seq: u64,
    token_calls: u64,
    refresh_calls: u64,
    /// LinkedIn `grant_type=refresh_token` calls that were answered with a new token.
    linkedin_refreshes: u64,
    /// The Threads long-lived token the exchange issues (the latest refresh's).
    threads_token: String,
    /// Every Threads token issued and not expired (a refresh does not end the old one).
    threads_valid: Vec<String>,
    /// The next Threads refresh is done but answered only after this long (its caller may
    /// die meanwhile).
    slow_next_refresh: Option<std::time::Duration>,
    /// The Instagram long-lived token the exchange issues (the latest refresh's), and every
    /// one issued.
    instagram_token: String,
    instagram_valid: Vec<String>,
    /// The next refresh is done but its answer is lost (a 500).
    lose_next_refresh: bool,
    /// The tokens the publishing-limit reads (doctor's check) came with.
    limit_tokens: Vec<String>,
    /// X's request token has bought its access token (a PIN is single use).
    x_pin_used: bool,
    /// Mastodon: the redirect URI the app registered, and each code's PKCE challenge.
    mastodon_redirect: String,
    challenges: HashMap<String, String>,
}

#[derive(Clone)]
struct Api(Arc<Mutex<State>>);

fn query(req: &Request) -> HashMap<String, String> {
    req.url.query_pairs().into_owned().collect()
}

fn form(req: &Request) -> HashMap<String, String> {
    url::form_urlencoded::parse(&req.body)
        .into_owned()
        .collect()
}

fn redirect(to: String) -> ResponseTemplate {
    ResponseTemplate::new(302).insert_header("Location", to.as_str())
}

fn oauth_error(error: &str, description: &str) -> ResponseTemplate {
    ResponseTemplate::new(400)
        .set_body_json(json!({"error": error, "error_description": description}))
}

impl Api {
    fn authorize(&self, req: &Request, meta: bool) -> ResponseTemplate {
        let q = query(req);
        let (Some(uri), Some(client)) = (q.get("redirect_uri"), q.get("client_id")) else {
            return oauth_error("invalid_request", "redirect_uri and client_id are required");
        };
        let state = q.get("state").cloned().unwrap_or_default();
        let tail = if meta { "#_" } else { "" };
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if s.refuse {
            return redirect(format!(
                "{uri}?error=user_cancelled_authorize&error_description=The+user+cancelled&state={state}{tail}"
            ));
        }
        s.seq += 1;
        let code = format!("AQT-code-{}", s.seq);
        s.codes.insert(code.clone(), (uri.clone(), client.clone()));
        redirect(format!("{uri}?code={code}&state={state}{tail}"))
    }

    /// Checks and spends a code: `None` when it may be exchanged, else the refusal.
    fn spend(
        &self,
        f: &HashMap<String, String>,
        id: &str,
        secret: &str,
    ) -> Option<ResponseTemplate> {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.token_calls += 1;
        if f.get("client_id").map(String::as_str) != Some(id)
            || f.get("client_secret").map(String::as_str) != Some(secret)
        {
            return Some(ResponseTemplate::new(401).set_body_json(
                json!({"error":"invalid_client","error_description":"Client authentication failed"}),
            ));
        }
        let code = f.get("code").cloned().unwrap_or_default();
        match s.codes.remove(&code) {
            Some((uri, _)) if Some(&uri) == f.get("redirect_uri") => {
                s.used.push(code);
                None
            }
            Some(_) => Some(oauth_error("invalid_redirect_uri", "Unable to retrieve access token: appid/redirect uri/code verifier does not match authorization code")),
            None => Some(oauth_error("invalid_grant", "The provided authorization grant is invalid, expired or revoked")),
        }
    }

    fn linkedin(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        let bearer = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            == Some(format!("Bearer {LINKEDIN_TOKEN}").as_str());
        let unauthorized = || {
            ResponseTemplate::new(401).set_body_json(
                json!({"serviceErrorCode":65600,"message":"Invalid access token","status":401}),
            )
        };
        Some(match (req.method.as_str(), path) {
            ("GET", "/authorization") => self.authorize(req, false),
            ("POST", "/accessToken") => {
                let f = form(req);
                // An approved partner's refresh (README "Getting credentials", LinkedIn): a new
                // 60-day access token; the refresh token's own life is not reset.
                if f.get("grant_type").map(String::as_str) == Some("refresh_token") {
                    let ok = f.get("refresh_token").map(String::as_str) == Some(LINKEDIN_REFRESH)
                        && f.get("client_id").map(String::as_str) == Some(LINKEDIN_CLIENT_ID)
                        && f.get("client_secret").map(String::as_str) == Some(LINKEDIN_CLIENT_SECRET);
                    if !ok {
                        return Some(oauth_error("invalid_grant", "The provided authorization grant is invalid, expired or revoked"));
                    }
                    self.0.lock().unwrap_or_else(|p| p.into_inner()).linkedin_refreshes += 1;
                    return Some(ResponseTemplate::new(200).set_body_json(json!({
                        "access_token": LINKEDIN_REFRESHED, "expires_in": 5_184_000,
                        "refresh_token": LINKEDIN_REFRESH, "refresh_token_expires_in": 20_000_000,
                        "scope": "openid,profile,w_member_social", "token_type": "Bearer"
                    })));
                }
                if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
                    return Some(oauth_error("unsupported_grant_type", "refresh tokens are for partners"));
                }
                match self.spend(&f, LINKEDIN_CLIENT_ID, LINKEDIN_CLIENT_SECRET) {
                    Some(r) => r,
                    None => ResponseTemplate::new(200).set_body_json(json!({
                        "access_token": LINKEDIN_TOKEN, "expires_in": 5_184_000,
                        "scope": "email,openid,profile,w_member_social", "token_type": "Bearer",
                        "id_token": "eyJ.fake.idtoken"
                    })),
                }
            }
            ("GET", "/v2/userinfo") if bearer => ResponseTemplate::new(200).set_body_json(json!({
                "sub": LINKEDIN_SUB, "name": "Ada Lovelace", "given_name": "Ada",
                "family_name": "Lovelace", "email_verified": true
            })),
            ("GET", "/rest/organizationAcls") if bearer => ResponseTemplate::new(200).set_body_json(json!({
                "paging": {"start": 0, "count": 10},
                "elements": [{"roleAssignee": format!("urn:li:person:{LINKEDIN_SUB}"), "role": "ADMINISTRATOR",
                              "state": "APPROVED", "organization": "urn:li:organization:123"}]
            })),
            ("GET", "/v2/userinfo" | "/rest/organizationAcls") => unauthorized(),
            _ => return None,
        })
    }

    fn threads(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        let q = query(req);
        let (token, valid) = {
            let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
            (s.threads_token.clone(), s.threads_valid.clone())
        };
        let given = q.get("access_token").cloned().unwrap_or_default();
        let known = valid.contains(&given);
        let graph_error = || {
            ResponseTemplate::new(400).set_body_json(json!({"error":{"message":"Error validating access token: Session has expired","type":"OAuthException","code":190,"error_subcode":463,"fbtrace_id":"Afake"}}))
        };
        Some(match (req.method.as_str(), path) {
            ("GET", "/oauth/authorize") => self.authorize(req, true),
            ("POST", "/oauth/access_token") => match self.spend(
                &form(req),
                THREADS_APP_ID,
                THREADS_APP_SECRET,
            ) {
                Some(r) => r,
                None => ResponseTemplate::new(200).set_body_json(
                    json!({"access_token": THREADS_SHORT, "user_id": 25_876_043_578_412_345_u64}),
                ),
            },
            ("GET", "/access_token")
                if q.get("grant_type").map(String::as_str) == Some("th_exchange_token")
                    && q.get("client_secret").map(String::as_str) == Some(THREADS_APP_SECRET)
                    && q.get("access_token").map(String::as_str) == Some(THREADS_SHORT) =>
            {
                ResponseTemplate::new(200).set_body_json(
                    json!({"access_token": token, "token_type": "bearer", "expires_in": 5_183_944}),
                )
            }
            ("GET", p) if p.ends_with("/threads_publishing_limit") && known => {
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .limit_tokens
                    .push(given);
                ResponseTemplate::new(200).set_body_json(json!({"data":[{"quota_usage":0,"config":{"quota_total":250,"quota_duration":86400}}]}))
            }
            ("GET", "/v1.0/me") if known => ResponseTemplate::new(200).set_body_json(
                json!({"id": super::threads::USER_ID, "username": super::threads::USERNAME}),
            ),
            ("GET", "/refresh_access_token")
                if q.get("grant_type").map(String::as_str) == Some("th_refresh_token") && known =>
            {
                let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                s.refresh_calls += 1;
                let new = format!("THAA-refreshed-SECRET6-{}", s.refresh_calls);
                s.threads_token = new.clone();
                s.threads_valid.push(new.clone());
                if std::mem::take(&mut s.lose_next_refresh) {
                    return Some(ResponseTemplate::new(500).set_body_json(json!({"error":{"message":"An unknown error has occurred.","type":"OAuthException","code":1,"fbtrace_id":"Afake"}})));
                }
                let answer = ResponseTemplate::new(200).set_body_json(
                    json!({"access_token": new, "token_type": "bearer", "expires_in": 5_183_944}),
                );
                match s.slow_next_refresh.take() {
                    Some(after) => answer.set_delay(after),
                    None => answer,
                }
            }
            ("GET", "/access_token" | "/v1.0/me" | "/refresh_access_token") => graph_error(),
            ("GET", p) if p.ends_with("/threads_publishing_limit") => graph_error(),
            _ => return None,
        })
    }
}

impl Api {
    /// Instagram Login's calls: those of its app id, its `ig_*` grants and its `/v25.0` paths.
    fn instagram(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        let q = query(req);
        let grant = q.get("grant_type").map_or("", String::as_str);
        let given = q.get("access_token").cloned().unwrap_or_default();
        let known = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .instagram_valid
            .contains(&given);
        let dead = || {
            ResponseTemplate::new(400).set_body_json(json!({"error":{"message":"Error validating access token: Session has expired","type":"OAuthException","code":190,"error_subcode":463,"fbtrace_id":"Afake"}}))
        };
        let ok = |v: serde_json::Value| ResponseTemplate::new(200).set_body_json(v);
        Some(match (req.method.as_str(), path) {
            ("POST", "/oauth/access_token")
                if form(req).get("client_id").map(String::as_str) == Some(INSTAGRAM_APP_ID) =>
            {
                match self.spend(&form(req), INSTAGRAM_APP_ID, INSTAGRAM_APP_SECRET) {
                    Some(r) => r,
                    None => ok(json!({"data": [{
                        "access_token": INSTAGRAM_SHORT,
                        "user_id": super::instagram::USER_ID,
                        "permissions": "instagram_business_basic,instagram_business_content_publish"
                    }]})),
                }
            }
            ("GET", "/access_token") if grant == "ig_exchange_token" => {
                if q.get("client_secret").map(String::as_str) != Some(INSTAGRAM_APP_SECRET)
                    || given != INSTAGRAM_SHORT
                {
                    return Some(dead());
                }
                let token = self
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .instagram_token
                    .clone();
                ok(json!({"access_token": token, "token_type": "bearer", "expires_in": 5_183_944}))
            }
            ("GET", "/refresh_access_token") if grant == "ig_refresh_token" && known => {
                let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                s.refresh_calls += 1;
                let new = format!("IGAA-refreshed-SECRET6-{}", s.refresh_calls);
                s.instagram_token = new.clone();
                s.instagram_valid.push(new.clone());
                ok(json!({"access_token": new, "token_type": "bearer", "expires_in": 5_183_944}))
            }
            ("GET", "/refresh_access_token") if grant == "ig_refresh_token" => dead(),
            ("GET", "/v25.0/me") if known => ok(json!({
                "user_id": super::instagram::USER_ID,
                "username": super::instagram::USERNAME,
                "id": "27163548123456789"
            })),
            ("GET", p) if p.ends_with("/content_publishing_limit") && known => {
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .limit_tokens
                    .push(given);
                ok(
                    json!({"data":[{"quota_usage":0,"config":{"quota_total":50,"quota_duration":86400}}]}),
                )
            }
            ("GET", p) if p.starts_with("/v25.0/") => dead(),
            _ => return None,
        })
    }

    /// X's PIN flow: `POST /oauth/request_token` (signed by the consumer alone, with
    /// `oauth_callback="oob"`), the browser's `GET /oauth/authorize?oauth_token=…` page showing
    /// the PIN, `POST /oauth/access_token?oauth_verifier=<PIN>` signed with the request token.
    fn x(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        // Threads' code exchange shares the path; X's calls are the OAuth-signed ones.
        let signed = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("OAuth "));
        if path == "/oauth/access_token" && !signed {
            return None;
        }
        let invalid = || {
            ResponseTemplate::new(401).set_body_json(
                json!({"errors":[{"code":89,"message":"Invalid or expired token."}]}),
            )
        };
        let get = |p: &[(String, String)], k: &str| {
            p.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        Some(match (req.method.as_str(), path) {
            ("POST", "/oauth/request_token") => match oauth1_verified(req, "") {
                Some(p) if get(&p, "oauth_callback") == "oob"
                    && get(&p, "oauth_consumer_key") == super::x::CONSUMER_KEY =>
                {
                    ResponseTemplate::new(200).set_body_string(format!(
                        "oauth_token={X_REQUEST_TOKEN}&oauth_token_secret={X_REQUEST_SECRET}&oauth_callback_confirmed=true"
                    ))
                }
                _ => invalid(),
            },
            ("GET", "/oauth/authorize") if query(req).contains_key("oauth_token") => ResponseTemplate::new(200)
                .set_body_string(format!("<html>Authorize postonce? Your PIN: <code>{X_PIN}</code></html>")),
            ("POST", "/oauth/access_token") => {
                let verifier = query(req).get("oauth_verifier").cloned().unwrap_or_default();
                let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                match oauth1_verified(req, X_REQUEST_SECRET) {
                    Some(p) if get(&p, "oauth_token") == X_REQUEST_TOKEN
                        && verifier == X_PIN
                        && !s.x_pin_used =>
                    {
                        s.x_pin_used = true;
                        ResponseTemplate::new(200).set_body_string(format!(
                            "oauth_token={}&oauth_token_secret={}&user_id={}&screen_name={}",
                            super::x::ACCESS_TOKEN,
                            super::x::ACCESS_TOKEN_SECRET,
                            super::x::USER_ID,
                            super::x::USERNAME
                        ))
                    }
                    _ => invalid(),
                }
            }
            _ => return None,
        })
    }
}

impl Api {
    /// A Mastodon instance's app registration, authorization (PKCE S256 required, the redirect
    /// URI must be the registered one), token and `verify_credentials`.
    fn mastodon(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        use base64::Engine;
        use sha2::Digest;
        let q = query(req);
        Some(match (req.method.as_str(), path) {
            ("POST", "/api/v1/apps") => {
                let f = form(req);
                let uri = f.get("redirect_uris").cloned().unwrap_or_default();
                if !uri.starts_with("http") && uri != "urn:ietf:wg:oauth:2.0:oob" {
                    return Some(ResponseTemplate::new(422).set_body_json(
                        json!({"error":"Validation failed: Redirect URI must be an absolute URI."}),
                    ));
                }
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .mastodon_redirect = uri.clone();
                ResponseTemplate::new(200).set_body_json(json!({
                    "id": "563419", "name": "postonce", "website": f.get("website"),
                    "scopes": f.get("scopes").map(|s| s.split(' ').collect::<Vec<_>>()),
                    "redirect_uri": uri, "redirect_uris": [uri],
                    "client_id": MASTODON_CLIENT_ID, "client_secret": MASTODON_CLIENT_SECRET,
                    "client_secret_expires_at": 0
                }))
            }
            ("GET", "/oauth/authorize")
                if q.get("client_id").map(String::as_str) == Some(MASTODON_CLIENT_ID) =>
            {
                let registered = self
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .mastodon_redirect
                    .clone();
                if q.get("redirect_uri") != Some(&registered)
                    || q.get("code_challenge_method").map(String::as_str) != Some("S256")
                {
                    return Some(
                        ResponseTemplate::new(400)
                            .set_body_string("The redirect uri included is not valid."),
                    );
                }
                let answer = self.authorize(req, false);
                let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                let code = format!("AQT-code-{}", s.seq);
                s.challenges
                    .insert(code, q.get("code_challenge").cloned().unwrap_or_default());
                answer
            }
            ("POST", "/oauth/token") => {
                let f = form(req);
                let code = f.get("code").cloned().unwrap_or_default();
                let want = self
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .challenges
                    .get(&code)
                    .cloned();
                let got = f.get("code_verifier").map(|v| {
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .encode(sha2::Sha256::digest(v.as_bytes()))
                });
                if want.is_some() && want != got {
                    return Some(oauth_error("invalid_grant", "The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client."));
                }
                match self.spend(&f, MASTODON_CLIENT_ID, MASTODON_CLIENT_SECRET) {
                    Some(r) => r,
                    None => ResponseTemplate::new(200).set_body_json(json!({
                        "access_token": super::mastodon::TOKEN, "token_type": "Bearer",
                        "scope": "write:statuses write:media read:statuses profile", "created_at": 1_573_979_017
                    })),
                }
            }
            ("GET", "/api/v1/accounts/verify_credentials") => {
                let ok = req
                    .headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    == Some(format!("Bearer {}", super::mastodon::TOKEN).as_str());
                if ok {
                    ResponseTemplate::new(200).set_body_json(
                        json!({"id": "109", "username": "postonce", "acct": "postonce"}),
                    )
                } else {
                    ResponseTemplate::new(401)
                        .set_body_json(json!({"error": "The access token is invalid"}))
                }
            }
            _ => return None,
        })
    }
}

impl Api {
    /// Facebook Login: the dialog (`/v25.0/dialog/oauth`, Meta's `#_` appended), the code and
    /// the long-lived exchanges (both `GET /v25.0/oauth/access_token`), and `/me/accounts`
    /// listing two Pages, the fake Page second.
    fn facebook(&self, req: &Request, path: &str) -> Option<ResponseTemplate> {
        let q = query(req);
        let ok = |v: serde_json::Value| ResponseTemplate::new(200).set_body_json(v);
        let dead = || {
            ResponseTemplate::new(400).set_body_json(json!({"error":{"message":"Invalid OAuth access token.","type":"OAuthException","code":190,"fbtrace_id":"Afake"}}))
        };
        Some(match (req.method.as_str(), path) {
            ("GET", "/v25.0/dialog/oauth")
                if q.get("client_id").map(String::as_str) == Some(FACEBOOK_APP_ID) =>
            {
                self.authorize(req, true)
            }
            ("GET", "/v25.0/oauth/access_token") if q.contains_key("code") => {
                match self.spend(&q, FACEBOOK_APP_ID, FACEBOOK_APP_SECRET) {
                    Some(r) => r,
                    None => ok(
                        json!({"access_token": FACEBOOK_SHORT, "token_type": "bearer", "expires_in": 5_183_944}),
                    ),
                }
            }
            ("GET", "/v25.0/oauth/access_token") => {
                let right = q.get("grant_type").map(String::as_str) == Some("fb_exchange_token")
                    && q.get("client_secret").map(String::as_str) == Some(FACEBOOK_APP_SECRET)
                    && q.get("fb_exchange_token").map(String::as_str) == Some(FACEBOOK_SHORT);
                if !right {
                    return Some(dead());
                }
                ok(
                    json!({"access_token": FACEBOOK_USER_TOKEN, "token_type": "bearer", "expires_in": 5_183_944}),
                )
            }
            ("GET", "/v25.0/me/accounts") => {
                if q.get("access_token").map(String::as_str) != Some(FACEBOOK_USER_TOKEN) {
                    return Some(dead());
                }
                ok(json!({"data": [
                    {"access_token": "EAApage-other-SECRET7", "id": "200000000000001", "name": "Another Page", "tasks": ["ANALYZE"]},
                    {"access_token": super::facebook::TOKEN, "id": super::facebook::PAGE_ID, "name": super::facebook::PAGE_NAME, "tasks": ["ADVERTISE", "ANALYZE", "CREATE_CONTENT", "MESSAGING", "MODERATE", "MANAGE"]}
                ], "paging": {"cursors": {"before": "QVFI", "after": "QVFI"}}}))
            }
            _ => return None,
        })
    }
}

impl Respond for Api {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path().to_owned();
        self.mastodon(req, &path)
            .or_else(|| self.linkedin(req, &path))
            .or_else(|| self.x(req, &path))
            // Before Instagram's, which refuses every other `/v25.0/` path as a dead token.
            .or_else(|| self.facebook(req, &path))
            .or_else(|| self.instagram(req, &path))
            .or_else(|| self.threads(req, &path))
            .unwrap_or_else(|| ResponseTemplate::new(404))
    }
}

/// The OAuth fake.
pub struct OAuthFake {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl OAuthFake {
    pub async fn start() -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            threads_token: super::threads::TOKEN.to_owned(),
            threads_valid: vec![super::threads::TOKEN.to_owned()],
            instagram_token: super::instagram::TOKEN.to_owned(),
            instagram_valid: vec![super::instagram::TOKEN.to_owned()],
            ..State::default()
        }));
        Mock::given(any())
            .respond_with(Api(state.clone()))
            .mount(&server)
            .await;
        Self { server, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// The person refuses consent from now on.
    pub fn set_refuse(&self, on: bool) {
        self.with(|s| s.refuse = on);
    }

    /// Codes exchanged so far.
    pub fn used_codes(&self) -> Vec<String> {
        self.with(|s| s.used.clone())
    }

    pub fn token_calls(&self) -> u64 {
        self.with(|s| s.token_calls)
    }

    /// LinkedIn refreshes answered with a new token.
    #[allow(dead_code)]
    pub fn linkedin_refreshes(&self) -> u64 {
        self.with(|s| s.linkedin_refreshes)
    }

    pub fn refresh_calls(&self) -> u64 {
        self.with(|s| s.refresh_calls)
    }

    /// The next refresh is made but answered only `after` this long.
    pub fn slow_next_refresh(&self, after: std::time::Duration) {
        self.with(|s| s.slow_next_refresh = Some(after));
    }

    /// The next refresh is made but its answer is lost.
    pub fn lose_next_refresh(&self) {
        self.with(|s| s.lose_next_refresh = true);
    }

    /// The tokens doctor's publishing-limit reads came with, in order.
    pub fn limit_tokens(&self) -> Vec<String> {
        self.with(|s| s.limit_tokens.clone())
    }

    /// The Instagram token the fake issued last.
    pub fn instagram_token(&self) -> String {
        self.with(|s| s.instagram_token.clone())
    }

    /// The Threads token the fake issued last.
    pub fn threads_token(&self) -> String {
        self.with(|s| s.threads_token.clone())
    }
}

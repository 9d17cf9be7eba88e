//! `postonce doctor` and `postonce telegram set-webhook`: operator checks of every part the
//! configuration would use, one line each with ✓/✗ and the fix. Each check has its own timeout.

use std::time::Duration;

use serde_json::{json, Value};

use crate::app::App;
use crate::key::PostKey;
use crate::networks::{dry_run_note, Context, Network, PostError};

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            if self.ok { "✓" } else { "✗" },
            self.name,
            self.detail
        )
    }
}

const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::time::timeout(CHECK_TIMEOUT, fut).await.ok()
}

fn check(name: &'static str, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check {
            name,
            ok: true,
            detail,
        },
        Err(detail) => Check {
            name,
            ok: false,
            detail,
        },
    }
}

/// Runs every check.
pub async fn doctor(app: &App) -> Vec<Check> {
    let c = &app.config;
    let mut checks = vec![Check {
        name: "configuration",
        ok: true,
        detail: "loaded and valid".into(),
    }];

    // The claim store's line is named after the store the registry chose.
    let claims = c.stores.claims_doctor();
    checks.push(check(claims.name, claims_check(app).await));
    checks.push(check("records", records(app).await));
    for (name, result) in app.shared.checks(CHECK_TIMEOUT).await {
        checks.push(check(name, result));
    }
    // One harmless read per configured target (POSTONCE_TARGETS), through its adapter.
    for network in &c.targets {
        checks.push(check(target_name(*network), target(app, *network).await));
    }
    checks.push(check("Telegram", telegram(app).await));
    checks.push(check("credentials", credentials(app).await));
    if let Some(covers) = covers(app).await {
        checks.push(check("covers", covers));
    }
    checks.push(Check {
        name: "image hosts",
        ok: true,
        detail: match std::env::var("POSTONCE_IMAGE_HOSTS") {
            Ok(list) if !list.trim().is_empty() => format!("allowed origins: {list}"),
            _ => "any public https host (set POSTONCE_IMAGE_HOSTS to narrow it)".into(),
        },
    });
    if c.webhook_secret.is_none() {
        checks.push(Check {
            name: "CI route",
            ok: true,
            detail: "disabled: POSTONCE_WEBHOOK_SECRET is not set".into(),
        });
    }
    checks
}

/// Where the covers of the networks that fetch them are hosted: the host's own check (the
/// folder writable, the bucket taking and answering an object). `None` when no target fetches
/// its cover and none is hosted.
async fn covers(app: &App) -> Option<Result<String, String>> {
    let fetching: Vec<&str> = app
        .config
        .targets
        .iter()
        .filter(|n| {
            app.adapters
                .get(n)
                .is_some_and(|a| a.capabilities().fetches_image)
        })
        .map(|n| n.label())
        .collect();
    match &app.covers {
        Some(host) => Some(
            bounded(host.check())
                .await
                .unwrap_or_else(|| Err(format!("the cover host did not answer within {CHECK_TIMEOUT:?}"))),
        ),
        None if fetching.is_empty() => None,
        None => Some(Ok(format!(
            "not hosted: {} fetch the draft's own URL, so a local cover or a rendition cannot go to them (set POSTONCE_PUBLIC_URL with `postonce serve` running there, or POSTONCE_COVERS_BUCKET in AWS)",
            fetching.join(" and ")
        ))),
    }
}

/// Each target's credential: where it comes from, the account, the expiry, whether postonce
/// can refresh it (`postonce auth status` shows every network). Fails for an expired stored one.
async fn credentials(app: &App) -> Result<String, String> {
    let env = |name: &str| std::env::var(name).ok();
    let lacks = crate::credentials::some_network_lacks(crate::vars::Vars::new(&env));
    let stored = if lacks {
        let records = crate::app::record_store(&app.config).await?;
        bounded(crate::credentials::load(&*records))
            .await
            .ok_or_else(|| format!("the store did not answer within {CHECK_TIMEOUT:?}"))?
            .map_err(|e| format!("the stored credentials cannot be read: {e}"))?
    } else {
        crate::credentials::Stored::default()
    };
    let vars = crate::vars::Vars::new(&env);
    let now = crate::record::now_s();
    let rows = crate::credentials::status::rows(vars, &stored, now);
    let mine: Vec<_> = rows
        .iter()
        .filter(|r| app.config.targets.iter().any(|t| t.as_str() == r.network))
        .collect();
    let line = mine
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let expired = app.config.targets.iter().find(|t| {
        stored
            .get(**t)
            .is_some_and(|c| c.expires_at.is_some_and(|at| at <= now))
            && crate::credentials::Source::of(**t, vars, &stored)
                == crate::credentials::Source::Stored
    });
    match expired {
        Some(t) => Err(format!("{line}; renew it: postonce auth {}", t.as_str())),
        None => Ok(line),
    }
}

/// A claim taken and released in the claim store, whichever it is.
async fn claims_check(app: &App) -> Result<String, String> {
    let claims = &app.pipeline.claims;
    let said = app.config.stores.claims_doctor();
    let fix = said.fix;
    match bounded(claims.ping()).await {
        None => return Err(format!("no answer to PING within {CHECK_TIMEOUT:?}; {fix}")),
        Some(Err(e)) => return Err(format!("{e}; {fix}")),
        Some(Ok(())) => {}
    }
    let key = PostKey::new("doctor", &format!("check-{:08x}", rand::random::<u32>()))
        .map_err(|e| e.to_string())?;
    let token = format!("doctor-{:016x}", rand::random::<u64>());
    let round_trip = async {
        let got = claims
            .acquire(&key, &token, Duration::from_secs(30))
            .await?;
        let released = claims.release(&key, &token).await?;
        Ok::<_, crate::claim::ClaimError>((got, released))
    };
    match bounded(round_trip).await {
        Some(Ok((crate::claim::Acquire::Acquired, true))) => Ok(said.ok.into()),
        Some(Ok(other)) => Err(format!("claim round trip did not behave: {other:?}")),
        Some(Err(e)) => Err(format!("{e}; {fix}")),
        None => Err(format!(
            "claim round trip took longer than {CHECK_TIMEOUT:?}"
        )),
    }
}

async fn records(app: &App) -> Result<String, String> {
    match bounded(app.pipeline.records.check()).await {
        Some(Ok(detail)) => Ok(detail),
        Some(Err(e)) => Err(app.config.stores.records_fix(&e.to_string())),
        None => Err(format!(
            "no answer within {CHECK_TIMEOUT:?}; {}",
            app.config.stores.records_silent_fix()
        )),
    }
}

/// A target's line name: its label without an article (the report bot keeps "Telegram").
fn target_name(network: Network) -> &'static str {
    let label = network.label();
    label.strip_prefix("the ").unwrap_or(label)
}

/// `adapter.check()` of one target: a dry run passes and names the variables to set.
async fn target(app: &App, network: Network) -> Result<String, String> {
    let (Some(adapter), Some(config)) = (
        app.adapters.get(&network),
        app.config.networks.get(&network),
    ) else {
        return Err(format!(
            "{} is not supported by this version: remove it from POSTONCE_TARGETS",
            network.as_str()
        ));
    };
    if adapter.is_dry_run() {
        return Ok(dry_run_note(network, &config.missing()));
    }
    let api = config.api_var();
    match bounded(adapter.check()).await {
        Some(Ok(detail)) => {
            // Adapters may start their line with their own name ("Mastodon: @…"); the check's
            // name already says it.
            let detail = detail
                .strip_prefix(&format!("{}: ", target_name(network)))
                .map_or_else(|| detail.clone(), str::to_owned);
            let context = Context {
                http: &app.http,
                sessions: None,
                sessions_budget: app.config.timeouts.records,
            };
            Ok(config.checked(&context, detail).await)
        }
        Some(Err(e)) => Err(match (config.explain(&e), &e) {
            (Some(fix), _) => fix,
            (None, PostError::NotSent { .. } | PostError::InDoubt { .. }) => {
                format!("{e}; check {api} and the network")
            }
            (None, _) => e.to_string(),
        }),
        None => Err(format!(
            "no answer within {CHECK_TIMEOUT:?}; check {api} and the network"
        )),
    }
}

async fn telegram(app: &App) -> Result<String, String> {
    let Some(tg) = &app.telegram else {
        return Ok("TELEGRAM_BOT_TOKEN not set: reports go to the log".into());
    };
    let me = match bounded(tg.call("getMe", &json!({}))).await {
        Some(Ok(me)) => me,
        Some(Err(e)) => return Err(format!("getMe: {e}; check TELEGRAM_BOT_TOKEN")),
        None => return Err(format!("getMe: no answer within {CHECK_TIMEOUT:?}")),
    };
    let name = me
        .get("username")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    let info = match bounded(tg.call("getWebhookInfo", &json!({}))).await {
        Some(Ok(info)) => info,
        Some(Err(e)) => return Err(format!("bot @{name}; getWebhookInfo: {e}")),
        None => {
            return Err(format!(
                "bot @{name}; getWebhookInfo: no answer within {CHECK_TIMEOUT:?}"
            ))
        }
    };
    let url = info.get("url").and_then(Value::as_str).unwrap_or("");
    let mut detail = format!(
        "bot @{name}; webhook {}",
        if url.is_empty() {
            "not set (postonce telegram set-webhook --url …)"
        } else {
            url
        }
    );
    if let Some(err) = info.get("last_error_message").and_then(Value::as_str) {
        detail.push_str(&format!("; last delivery error: {err}"));
    }
    if app.config.telegram_webhook_secret.is_none() || app.config.telegram_allowed_users.is_none() {
        return Err(format!("{detail}; the /telegram route needs TELEGRAM_WEBHOOK_SECRET and TELEGRAM_ALLOWED_USERS"));
    }
    Ok(detail)
}

/// Registers the webhook with the secret token and only callback queries, then returns
/// getWebhookInfo.
///
/// # Errors
/// A message naming the missing variable or Telegram's answer.
pub async fn set_webhook(app: &App, url: &str) -> Result<Value, String> {
    let tg = app
        .telegram
        .as_ref()
        .ok_or("TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID must be set")?;
    let secret = app
        .config
        .telegram_webhook_secret
        .as_ref()
        .ok_or("TELEGRAM_WEBHOOK_SECRET must be set: Telegram sends it back in X-Telegram-Bot-Api-Secret-Token")?;
    let parsed = url::Url::parse(url).map_err(|e| format!("--url: {e}"))?;
    if parsed.scheme() != "https" {
        return Err("--url: Telegram only delivers to https URLs".into());
    }
    let body = json!({
        "url": url,
        "secret_token": secret.expose(),
        "allowed_updates": ["callback_query"],
    });
    bounded(tg.call("setWebhook", &body))
        .await
        .ok_or("setWebhook: no answer")?
        .map_err(|e| format!("setWebhook: {e}"))?;
    bounded(tg.call("getWebhookInfo", &json!({})))
        .await
        .ok_or("getWebhookInfo: no answer")?
        .map_err(|e| format!("getWebhookInfo: {e}"))
}

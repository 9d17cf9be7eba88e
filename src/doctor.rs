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

    // Without REDIS_URL the claims live in PostgreSQL (DATABASE_URL) or are files (local
    // mode): the line says which, not "Redis".
    let claims = if c.redis_url.is_some() {
        "Redis"
    } else if c.database_url.is_some() {
        "claims (PostgreSQL)"
    } else {
        "claims (files)"
    };
    checks.push(check(claims, redis(app).await));
    checks.push(check("records", records(app).await));
    #[cfg(feature = "postgres")]
    if app.database.is_some() {
        checks.push(check("PostgreSQL", postgres(app).await));
    }
    // One harmless read per configured target (POSTONCE_TARGETS), through its adapter.
    for network in &c.targets {
        checks.push(check(target_name(*network), target(app, *network).await));
    }
    checks.push(check("Telegram", telegram(app).await));
    checks.push(check("credentials", credentials(app).await));
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

async fn redis(app: &App) -> Result<String, String> {
    let claims = &app.pipeline.claims;
    let in_database = app.config.redis_url.is_none() && app.config.database_url.is_some();
    let fix = if in_database {
        "REDIS_URL is not set, so claims live in PostgreSQL (DATABASE_URL): check that it is reachable and migrated (postonce db migrate)"
    } else if app.config.redis_url.is_none() {
        "REDIS_URL is not set, so claims are files under POSTONCE_DATA_DIR (local mode, shared by every postonce process on this machine): check that the folder is writable and on a local disk"
    } else {
        "check REDIS_URL (redis:// or rediss:// for TLS) and that this function can reach it"
    };
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
        Some(Ok((crate::claim::Acquire::Acquired, true))) => Ok(if in_database {
            "claims in PostgreSQL (REDIS_URL unset): claim taken and released".into()
        } else if app.config.redis_url.is_none() {
            "file claims under POSTONCE_DATA_DIR (local mode): claim taken and released".into()
        } else {
            "PING ok; claim taken and released".into()
        }),
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
        Some(Err(e)) => Err(match &app.config.table {
            Some(t) => format!("{e}; create it with the SAM template, or `postonce table create` for a local server (table {t})"),
            None if app.config.database_url.is_some() => format!("{e}; check DATABASE_URL, and run `postonce db migrate`"),
            None => format!("{e}; check POSTONCE_DATA_DIR"),
        }),
        None => Err(format!("no answer within {CHECK_TIMEOUT:?}; check AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB and credentials")),
    }
}

/// The connection, the schema version and the clock skew between this host and the database
/// (claims expire by the database's clock; the due times and pacing use the host's).
#[cfg(feature = "postgres")]
async fn postgres(app: &App) -> Result<String, String> {
    let Some(db) = &app.database else {
        return Err("DATABASE_URL is not set".into());
    };
    let version = match bounded(db.check_schema()).await {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(e.to_string()),
        None => {
            return Err(format!(
                "no answer within {CHECK_TIMEOUT:?}; check DATABASE_URL"
            ))
        }
    };
    let before = crate::record::now_ms();
    let theirs = match bounded(db.clock_ms()).await {
        Some(Ok(ms)) => ms,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err(format!("no answer within {CHECK_TIMEOUT:?}")),
    };
    let after = crate::record::now_ms();
    let skew = theirs - (before + after) / 2;
    let detail = format!(
        "connected; schema version {version}; clock skew {skew} ms (database minus host, round trip {} ms)",
        after - before
    );
    if skew.abs() > 5_000 {
        return Err(format!(
            "{detail}: more than 5 s apart; run NTP (chrony or systemd-timesyncd) on both"
        ));
    }
    Ok(detail)
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
                sessions_budget: app.config.timeouts.dynamodb,
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

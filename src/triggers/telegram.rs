//! `POST /telegram`: the owner's buttons. The secret header is compared in constant time;
//! redelivered updates are dropped by `update_id`; only allowed users may press; the callback
//! data is validated; every callback is answered at once; the run edits the original report.
//! Every authenticated update gets a 200 so Telegram does not redeliver it.

use std::time::Duration;

use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::{HttpRequest, HttpResponse};
use crate::app::App;
use crate::budget::Deadline;
use crate::key::PostKey;
use crate::networks::Network;
use crate::notify::MessageRef;
use crate::pipeline::{Action, PostRequest, Source};

/// How long an `update_id` is remembered (Telegram keeps updates for 24 h).
const UPDATE_MEMORY: Duration = Duration::from_secs(24 * 3600);

/// A parsed button press.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    pub update_id: i64,
    pub query_id: String,
    pub from: i64,
    pub message: Option<MessageRef>,
    pub data: Option<String>,
}

/// What a callback's data asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Press {
    pub action: Action,
    pub key: PostKey,
    /// The targets pressed for: `retry:<key>` is every pending one (empty); `…:<key>@<network>`
    /// is that one; `done:<key>` and `force:<key>` are the first network's.
    pub targets: Vec<Network>,
}

/// Parses `retry:<key>`, `done:<key>`, `force:<key>`, each optionally `@<network>`, and
/// `now:<key>`, `cancel:<key>` (the draft's schedule: every target) (at most 64 bytes).
///
/// # Errors
/// A short reason for the answer shown to the user.
pub fn parse_data(data: &str) -> Result<Press, String> {
    if data.len() > 64 {
        return Err("button data too long".into());
    }
    let (verb, key) = data.split_once(':').ok_or("unknown button")?;
    let action = match verb {
        "retry" => Action::Post,
        "done" => Action::Done,
        "force" => Action::Force,
        "now" => Action::Now,
        "cancel" => Action::Cancel,
        _ => return Err("unknown button".into()),
    };
    let (key, network) = match key.split_once('@') {
        Some((key, n)) => (
            key,
            Some(Network::parse(n).ok_or_else(|| "unknown target in button".to_owned())?),
        ),
        None => (key, None),
    };
    let key = PostKey::parse(key).map_err(|_| "invalid draft key in button".to_owned())?;
    let targets = match (action, network) {
        (Action::Now | Action::Cancel, Some(_)) => {
            return Err("a schedule is the whole draft's: this button takes no target".into())
        }
        (_, Some(n)) => vec![n],
        (Action::Post | Action::Now | Action::Cancel, None) => vec![],
        (_, None) => vec![Network::default()],
    };
    Ok(Press {
        action,
        key,
        targets,
    })
}

/// What kind of update arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    Callback(Callback),
    /// Anything else (messages, edits): acknowledged and ignored.
    Other {
        update_id: i64,
    },
}

/// Reads the parts of a Bot API `Update` that matter here.
///
/// # Errors
/// When the JSON is not an update at all.
pub fn parse_update(body: &[u8]) -> Result<Update, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let update_id = v
        .get("update_id")
        .and_then(Value::as_i64)
        .ok_or("no numeric update_id")?;
    let Some(cq) = v.get("callback_query") else {
        return Ok(Update::Other { update_id });
    };
    let query_id = cq
        .get("id")
        .and_then(Value::as_str)
        .ok_or("callback_query without id")?;
    let from = cq
        .pointer("/from/id")
        .and_then(Value::as_i64)
        .ok_or("callback_query without from.id")?;
    let message = match (
        cq.pointer("/message/chat/id").and_then(Value::as_i64),
        cq.pointer("/message/message_id").and_then(Value::as_i64),
    ) {
        (Some(chat_id), Some(message_id)) => Some(MessageRef {
            chat_id,
            message_id,
        }),
        _ => None,
    };
    Ok(Update::Callback(Callback {
        update_id,
        query_id: query_id.to_owned(),
        from,
        message,
        data: cq.get("data").and_then(Value::as_str).map(str::to_owned),
    }))
}

fn ok(extra: Value) -> HttpResponse {
    let mut body = json!({"ok": true});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    HttpResponse::json(200, body)
}

async fn answer(app: &App, dl: &Deadline, query_id: &str, text: &str) {
    let Some(tg) = &app.telegram else {
        tracing::warn!("TELEGRAM_BOT_TOKEN is not set: cannot answer the callback");
        return;
    };
    let body = json!({"callback_query_id": query_id, "text": text});
    let budget = app.config.timeouts.telegram;
    match dl
        .finish(
            budget,
            tg.call_patiently("answerCallbackQuery", &body, budget),
        )
        .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "answerCallbackQuery failed"),
        Err(e) => tracing::warn!(error = %e, "answerCallbackQuery failed"),
    }
}

/// Handles the Telegram route.
pub async fn handle(app: &App, req: &HttpRequest, dl: Deadline, run_id: String) -> HttpResponse {
    let (Some(secret), Some(allowed)) = (
        &app.config.telegram_webhook_secret,
        &app.config.telegram_allowed_users,
    ) else {
        return HttpResponse::error(
            503,
            "not_configured",
            "TELEGRAM_WEBHOOK_SECRET and TELEGRAM_ALLOWED_USERS must be set for the /telegram route",
        );
    };
    let given = req
        .header("x-telegram-bot-api-secret-token")
        .unwrap_or_default();
    if !bool::from(given.as_bytes().ct_eq(secret.expose().as_bytes())) {
        tracing::warn!("Telegram update with a missing or wrong secret token refused");
        return HttpResponse::error(
            401,
            "invalid_secret",
            "X-Telegram-Bot-Api-Secret-Token does not match",
        );
    }
    let update = match parse_update(&req.body) {
        Ok(u) => u,
        Err(e) => {
            // Authenticated but unusable: acknowledge so Telegram stops redelivering it.
            tracing::warn!(error = %e, "ignoring an update that could not be read");
            return ok(json!({"ignored": e}));
        }
    };
    let cb = match update {
        Update::Other { update_id } => {
            return ok(json!({"ignored": format!("update {update_id} is not a button press")}))
        }
        Update::Callback(cb) => cb,
    };

    let seen_name = format!("tg:update:{}", cb.update_id);
    let first = dl
        .work(
            app.config.timeouts.claims,
            app.pipeline
                .claims
                .first_sighting(&seen_name, UPDATE_MEMORY),
        )
        .await;
    match first {
        Ok(Ok(false)) => return ok(json!({"duplicate": true})),
        Ok(Ok(true)) => {}
        // Without the dedupe memory the run itself still cannot post twice.
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not remember the update id; handling it anyway")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not remember the update id; handling it anyway")
        }
    }

    if !allowed.contains(&cb.from) {
        tracing::warn!(
            user = cb.from,
            "button pressed by a user who is not in TELEGRAM_ALLOWED_USERS"
        );
        answer(
            app,
            &dl,
            &cb.query_id,
            "You are not allowed to use these buttons.",
        )
        .await;
        return ok(json!({"ignored": "user not allowed"}));
    }
    let press = match cb.data.as_deref().map(parse_data) {
        Some(Ok(p)) => p,
        Some(Err(why)) => {
            answer(app, &dl, &cb.query_id, &format!("Ignored: {why}.")).await;
            return ok(json!({"ignored": why}));
        }
        None => {
            answer(
                app,
                &dl,
                &cb.query_id,
                "Ignored: this button carries no data.",
            )
            .await;
            return ok(json!({"ignored": "no data"}));
        }
    };
    let on = press
        .targets
        .first()
        .map_or("every pending target", |n| n.label());
    let saying = match press.action {
        Action::Post => format!("Retrying {} ({on})…", press.key),
        Action::Done => format!("Recording {} as on {on}…", press.key),
        Action::Force => format!("Posting {} anyway to {on}…", press.key),
        Action::Now => format!("Posting {} now…", press.key),
        Action::Cancel => format!("Cancelling {}…", press.key),
    };
    answer(app, &dl, &cb.query_id, &saying).await;

    let request = PostRequest {
        key: press.key,
        content: None,
        action: press.action,
        source: Source::Telegram,
        run_id,
        reply_to: cb.message,
        targets: press.targets,
        publish_at: None,
    };
    let outcome = app.pipeline.run(request, dl).await;
    ok(json!({"outcome": outcome}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_data_is_validated() {
        assert_eq!(parse_data("retry:blog-x").unwrap().action, Action::Post);
        assert_eq!(parse_data("done:blog-x").unwrap().action, Action::Done);
        assert_eq!(
            parse_data("force:blog-x").unwrap().key.to_string(),
            "blog-x"
        );
        for bad in [
            "",
            "retry",
            "retry:",
            "post:blog-x",
            "retry:Blog-x",
            "retry:blog",
            "retry:blog-x;rm",
            "retry:blog-x@myspace",
            "retry:blog-x@",
            "done:blog-x@x@x",
            &format!("retry:blog-{}", "a".repeat(60)),
        ] {
            assert!(parse_data(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn buttons_name_their_targets() {
        let t = |d: &str| parse_data(d).unwrap().targets;
        assert_eq!(t("retry:blog-x"), vec![]);
        assert_eq!(t("retry:blog-x@x"), vec![Network::X]);
        assert_eq!(t("retry:blog-x@linkedin"), vec![Network::Linkedin]);
        assert_eq!(t("done:blog-x"), vec![Network::Linkedin]);
        assert_eq!(t("force:blog-x@telegram"), vec![Network::Telegram]);
        assert_eq!(
            parse_data("done:blog-x@x").unwrap().key.to_string(),
            "blog-x"
        );
    }

    #[test]
    fn updates_parse_and_garbage_does_not_panic() {
        let body = br#"{"update_id":7,"callback_query":{"id":"q1","from":{"id":42,"is_bot":false,"first_name":"A"},"message":{"message_id":5,"date":1,"chat":{"id":99,"type":"private"}},"chat_instance":"c","data":"retry:blog-x"}}"#;
        let Update::Callback(cb) = parse_update(body).unwrap() else {
            panic!("not a callback")
        };
        assert_eq!(
            (cb.update_id, cb.from, cb.data.as_deref()),
            (7, 42, Some("retry:blog-x"))
        );
        assert_eq!(
            cb.message,
            Some(MessageRef {
                chat_id: 99,
                message_id: 5
            })
        );
        assert_eq!(
            parse_update(br#"{"update_id":8,"message":{}}"#).unwrap(),
            Update::Other { update_id: 8 }
        );
        for garbage in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"update_id\":\"x\"}",
            b"{\"update_id\":1,\"callback_query\":{}}",
        ] {
            assert!(parse_update(garbage).is_err());
        }
    }
}

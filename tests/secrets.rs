//! Secrets by reference: `<NAME>_PARAM` is read from SSM Parameter Store at start-up (a fake of
//! SSM's JSON protocol stands in for AWS); a plain variable wins and needs no AWS call.

use std::collections::HashMap;

use serde_json::{json, Value};
use wiremock::matchers::{header, method};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

struct Ssm;

impl Respond for Ssm {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let store = HashMap::from([
            ("/postonce/linkedin-token", "AQV-from-ssm"),
            ("/postonce/webhook", "hmac-from-ssm-0123456789"),
            ("/postonce/x-api-key", "x-key-from-ssm"),
            ("/postonce/x-api-secret", "x-secret-from-ssm"),
            ("/postonce/x-access-token", "x-token-from-ssm"),
            ("/postonce/x-access-token-secret", "x-token-secret-from-ssm"),
        ]);
        let mut found = vec![];
        let mut invalid = vec![];
        for name in body["Names"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            match store.get(name) {
                Some(v) if body["WithDecryption"] == json!(true) => found
                    .push(json!({"Name": name, "Type": "SecureString", "Value": v, "Version": 1})),
                _ => invalid.push(json!(name)),
            }
        }
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/x-amz-json-1.1")
            .set_body_json(json!({"Parameters": found, "InvalidParameters": invalid}))
    }
}

fn lookup(map: HashMap<&'static str, String>) -> impl Fn(&str) -> Option<String> {
    move |k| map.get(k).cloned()
}

#[tokio::test]
async fn parameters_are_read_once_and_plain_variables_win() {
    let ssm = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("x-amz-target", "AmazonSSM.GetParameters"))
        .respond_with(Ssm)
        .mount(&ssm)
        .await;
    let base = HashMap::from([
        ("AWS_ENDPOINT_URL_SSM", ssm.uri()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
    ]);

    let mut vars = base.clone();
    vars.insert(
        "LINKEDIN_ACCESS_TOKEN_PARAM",
        "/postonce/linkedin-token".into(),
    );
    vars.insert("POSTONCE_WEBHOOK_SECRET_PARAM", "/postonce/webhook".into());
    let got = postonce::secrets::resolve(lookup(vars))
        .await
        .expect("resolved");
    assert_eq!(
        got.get("LINKEDIN_ACCESS_TOKEN").map(String::as_str),
        Some("AQV-from-ssm")
    );
    assert_eq!(
        got.get("POSTONCE_WEBHOOK_SECRET").map(String::as_str),
        Some("hmac-from-ssm-0123456789")
    );
    assert_eq!(
        ssm.received_requests().await.map_or(0, |r| r.len()),
        1,
        "one GetParameters call"
    );

    let mut vars = base.clone();
    vars.insert("LINKEDIN_ACCESS_TOKEN", "plain-wins".into());
    vars.insert(
        "LINKEDIN_ACCESS_TOKEN_PARAM",
        "/postonce/linkedin-token".into(),
    );
    assert!(postonce::secrets::resolve(lookup(vars))
        .await
        .expect("resolved")
        .is_empty());
    assert_eq!(
        ssm.received_requests().await.map_or(0, |r| r.len()),
        1,
        "no call when the plain variable is set"
    );

    let mut vars = base;
    vars.insert("TELEGRAM_BOT_TOKEN_PARAM", "/postonce/missing".into());
    let err = postonce::secrets::resolve(lookup(vars))
        .await
        .expect_err("missing parameter");
    assert_eq!(err.var, "TELEGRAM_BOT_TOKEN_PARAM");
    assert!(err.to_string().contains("/postonce/missing"), "{err}");
}

#[tokio::test]
async fn the_x_credentials_resolve_by_reference_into_the_configuration() {
    let ssm = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("x-amz-target", "AmazonSSM.GetParameters"))
        .respond_with(Ssm)
        .mount(&ssm)
        .await;
    let vars = HashMap::from([
        ("AWS_ENDPOINT_URL_SSM", ssm.uri()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("X_API_KEY_PARAM", "/postonce/x-api-key".to_owned()),
        ("X_API_SECRET_PARAM", "/postonce/x-api-secret".to_owned()),
        (
            "X_ACCESS_TOKEN_PARAM",
            "/postonce/x-access-token".to_owned(),
        ),
        (
            "X_ACCESS_TOKEN_SECRET_PARAM",
            "/postonce/x-access-token-secret".to_owned(),
        ),
    ]);
    let got = postonce::secrets::resolve(lookup(vars.clone()))
        .await
        .expect("resolved");
    assert_eq!(
        ssm.received_requests().await.map_or(0, |r| r.len()),
        1,
        "the four X parameters in one GetParameters call"
    );
    let config = postonce::config::Config::from_lookup(|k| {
        got.get(k).cloned().or_else(|| vars.get(k).cloned())
    })
    .expect("valid configuration");
    let x = config
        .network::<postonce::networks::x::config::XConfig>(postonce::networks::Network::X)
        .and_then(|x| x.credentials.as_ref())
        .expect("X credentials");
    assert_eq!(x.consumer_key.expose(), "x-key-from-ssm");
    assert_eq!(x.consumer_secret.expose(), "x-secret-from-ssm");
    assert_eq!(x.token.expose(), "x-token-from-ssm");
    assert_eq!(x.token_secret.expose(), "x-token-secret-from-ssm");
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("from-ssm"),
        "a secret leaked in Debug: {shown}"
    );
}

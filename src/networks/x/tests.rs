//! X's configuration, read through the whole configuration as the process reads it.

use std::time::Duration;

use super::config::XConfig;
use crate::config::tests::load;
use crate::networks::Network;

#[test]
fn x_credentials_are_all_four_or_none() {
    let all = [
        ("X_API_KEY", "k"),
        ("X_API_SECRET", "s"),
        ("X_ACCESS_TOKEN", "t"),
        ("X_ACCESS_TOKEN_SECRET", "ts"),
    ];
    let c = load(&all).unwrap();
    let x = c
        .network::<XConfig>(Network::X)
        .and_then(|x| x.credentials.clone())
        .expect("credentials");
    assert_eq!(
        [
            x.consumer_key.expose(),
            x.consumer_secret.expose(),
            x.token.expose(),
            x.token_secret.expose()
        ],
        ["k", "s", "t", "ts"]
    );
    assert!(!load(&[]).unwrap().networks[&Network::X].is_real());
    // Any partial set is refused, naming every missing variable.
    for mask in 1..15u8 {
        let given: Vec<(&str, &str)> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, p)| *p)
            .collect();
        let missing: Vec<&str> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) == 0)
            .map(|(_, (k, _))| *k)
            .collect();
        let err = load(&given).unwrap_err();
        assert_eq!(err.var, missing[0], "{given:?}");
        let msg = err.to_string();
        let verb = if missing.len() == 1 { "is" } else { "are" };
        assert!(
            msg.contains(&format!("{} {verb} missing", missing.join(", "))),
            "{msg}"
        );
    }
}

#[test]
fn x_api_url_and_timeout_have_defaults_and_are_validated() {
    let c = load(&[]).unwrap();
    let x = c.network::<XConfig>(Network::X).unwrap();
    assert_eq!(x.api_url, "https://api.x.com");
    assert_eq!(x.budget, Duration::from_millis(10_000));
    let c = load(&[
        ("X_API_URL", "http://127.0.0.1:9999/"),
        ("POSTONCE_X_TIMEOUT_MS", "2500"),
    ])
    .unwrap();
    let x = c.network::<XConfig>(Network::X).unwrap();
    assert_eq!(x.api_url, "http://127.0.0.1:9999");
    assert_eq!(x.budget, Duration::from_millis(2500));
    assert_eq!(
        load(&[("X_API_URL", "ftp://api.x.com")]).unwrap_err().var,
        "X_API_URL"
    );
}

#[test]
fn errors_name_the_variable() {
    crate::config::tests::assert_refused_naming(&[
        (vec![("X_API_URL", "api.x.com")], "X_API_URL"),
        (vec![("X_API_SECRET", "s")], "X_API_KEY"),
        (
            vec![("POSTONCE_X_TIMEOUT_MS", "60000")],
            "POSTONCE_X_TIMEOUT_MS",
        ),
        (
            vec![("POSTONCE_X_TIMEOUT_MS", "ten")],
            "POSTONCE_X_TIMEOUT_MS",
        ),
    ]);
}

//! The core configuration's rules, and what every network's configuration shares through it.
//! Each network's own configuration tests live in its folder (`networks/<network>/tests.rs`),
//! reading the whole configuration through [`load`].

use super::*;
use std::collections::HashMap;
use std::path::PathBuf;

pub(crate) fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

/// Each configuration is refused, naming the variable given beside it, first in its message.
pub(crate) fn assert_refused_naming(cases: &[(Vec<(&str, &str)>, &str)]) {
    for (pairs, var) in cases {
        let err = load(pairs).unwrap_err();
        assert_eq!(err.var, *var, "{pairs:?}: {err}");
        assert!(err.to_string().starts_with(var));
    }
}

#[test]
fn defaults_are_local_and_safe() {
    let c = load(&[]).unwrap();
    assert!(c.stores.dynamodb.table.is_none() && c.stores.redis.url.is_none());
    assert!(c.networks.values().all(|n| !n.is_real()));
    assert_eq!(c.claim_ttl, Duration::from_secs(120));
    assert_eq!(c.function_timeout, Duration::from_secs(60));
    assert_eq!(c.timeouts, Timeouts::default());
    assert_eq!(c.stores.local.data_dir, PathBuf::from(".postonce"));
}

#[test]
fn the_quiet_period_outlasts_the_linkedin_budget_and_fits_the_window() {
    let c = load(&[]).unwrap();
    assert_eq!(c.reconcile_after, Duration::from_secs(300));
    let (_, linkedin) = c.networks[&Network::Linkedin].budget();
    assert!(c.reconcile_after > linkedin && c.reconcile_after < c.reconcile_window);
    let err = load(&[("POSTONCE_RECONCILE_AFTER_S", "10")]).unwrap_err();
    assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S");
    assert!(
        err.to_string().contains("POSTONCE_LINKEDIN_TIMEOUT_MS"),
        "{err}"
    );
    let short = [
        ("POSTONCE_RECONCILE_AFTER_S", "3"),
        ("POSTONCE_LINKEDIN_TIMEOUT_MS", "2500"),
        ("POSTONCE_X_TIMEOUT_MS", "2500"),
        ("POSTONCE_TELEGRAM_TIMEOUT_MS", "2500"),
    ];
    let ok = load(&short).unwrap();
    assert_eq!(ok.reconcile_after, Duration::from_secs(3));
    // Every network posted to counts: the X and the channel's (Telegram) budgets too,
    // whatever POSTONCE_TARGETS says, since a draft may name its own targets.
    for var in ["POSTONCE_X_TIMEOUT_MS", "POSTONCE_TELEGRAM_TIMEOUT_MS"] {
        let mut pairs = short.to_vec();
        pairs.retain(|(k, _)| *k != var);
        pairs.push((var, "3000"));
        let err = load(&pairs).unwrap_err();
        assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S", "{var}");
        let msg = err.to_string();
        for named in [
            "POSTONCE_LINKEDIN_TIMEOUT_MS",
            "POSTONCE_X_TIMEOUT_MS",
            "POSTONCE_TELEGRAM_TIMEOUT_MS",
        ] {
            assert!(msg.contains(named), "{msg}");
        }
        assert!(msg.contains(&format!("{var} 3000ms")), "{msg}");
    }
    let err = load(&[
        ("POSTONCE_RECONCILE_AFTER_S", "600"),
        ("POSTONCE_RECONCILE_WINDOW_S", "600"),
    ])
    .unwrap_err();
    assert_eq!(err.var, "POSTONCE_RECONCILE_AFTER_S");
    assert!(
        err.to_string().contains("POSTONCE_RECONCILE_WINDOW_S"),
        "{err}"
    );
}

#[test]
fn claim_ttl_must_exceed_function_timeout() {
    let err = load(&[
        ("POSTONCE_CLAIM_TTL_S", "60"),
        ("POSTONCE_FUNCTION_TIMEOUT_S", "60"),
    ])
    .unwrap_err();
    assert_eq!(err.var, "POSTONCE_CLAIM_TTL_S");
    assert!(
        err.to_string().contains("60s") && err.to_string().contains("POSTONCE_FUNCTION_TIMEOUT_S"),
        "{err}"
    );
    assert!(load(&[
        ("POSTONCE_CLAIM_TTL_S", "61"),
        ("POSTONCE_FUNCTION_TIMEOUT_S", "60")
    ])
    .is_ok());
}

#[test]
fn errors_name_the_variable() {
    assert_refused_naming(&[
        (vec![("TELEGRAM_BOT_TOKEN", "1:x")], "TELEGRAM_CHAT_ID"),
        (
            vec![("TELEGRAM_BOT_TOKEN", "1:x"), ("TELEGRAM_CHAT_ID", "me")],
            "TELEGRAM_CHAT_ID",
        ),
        (
            vec![("TELEGRAM_WEBHOOK_SECRET", "a b")],
            "TELEGRAM_WEBHOOK_SECRET",
        ),
        (
            vec![("TELEGRAM_ALLOWED_USERS", "1,x")],
            "TELEGRAM_ALLOWED_USERS",
        ),
        (
            vec![("POSTONCE_IMAGE_HOSTS", "ftp://x")],
            "POSTONCE_IMAGE_HOSTS",
        ),
        (
            vec![("POSTONCE_MCP_IMAGE_DIRS", "covers")],
            "POSTONCE_MCP_IMAGE_DIRS",
        ),
        (
            vec![("POSTONCE_TARGETS", "linkedin,myspace")],
            "POSTONCE_TARGETS",
        ),
        (vec![("POSTONCE_TARGETS", " , ")], "POSTONCE_TARGETS"),
    ]);
}

#[test]
fn secrets_never_print() {
    let c = load(&[
        ("LINKEDIN_ACCESS_TOKEN", "AQX-very-secret-token"),
        ("LINKEDIN_AUTHOR", "urn:li:person:abc"),
        ("TELEGRAM_BOT_TOKEN", "123:tg-secret-token"),
        ("TELEGRAM_CHAT_ID", "42"),
        ("POSTONCE_WEBHOOK_SECRET", "hmac-secret-0123456789"),
        ("REDIS_URL", "rediss://default:redis-password@host:6379"),
        ("X_API_KEY", "x-consumer-key-value"),
        ("X_API_SECRET", "x-consumer-secret-value"),
        ("X_ACCESS_TOKEN", "x-access-token-value"),
        ("X_ACCESS_TOKEN_SECRET", "x-token-secret-value"),
    ])
    .unwrap();
    assert!(c.networks[&Network::X].is_real());
    let shown = format!("{c:?}");
    for secret in [
        "AQX-very-secret-token",
        "tg-secret-token",
        "hmac-secret-0123456789",
        "redis-password",
        "x-consumer-key-value",
        "x-consumer-secret-value",
        "x-access-token-value",
        "x-token-secret-value",
    ] {
        assert!(!shown.contains(secret), "{secret} leaked in Debug");
    }
}

#[test]
fn targets_default_to_linkedin_and_keep_their_order_without_duplicates() {
    assert_eq!(load(&[]).unwrap().targets, vec![Network::Linkedin]);
    // An empty value is unset, as for every variable.
    assert_eq!(
        load(&[("POSTONCE_TARGETS", "  ")]).unwrap().targets,
        vec![Network::Linkedin]
    );
    assert_eq!(
        load(&[("POSTONCE_TARGETS", " telegram , x,telegram,, linkedin,x ")])
            .unwrap()
            .targets,
        vec![Network::Telegram, Network::X, Network::Linkedin]
    );
    assert_eq!(
        load(&[("POSTONCE_TARGETS", "x")]).unwrap().targets,
        vec![Network::X]
    );
}

#[test]
fn target_errors_name_the_variable_and_the_valid_names() {
    let err = load(&[("POSTONCE_TARGETS", "linkedin,myspace")]).unwrap_err();
    assert_eq!(err.var, "POSTONCE_TARGETS");
    let msg = err.to_string();
    assert!(
        msg.contains("\"myspace\"") && msg.contains("linkedin, x, telegram"),
        "{msg}"
    );
    // Case-sensitive, with a hint.
    let msg = load(&[("POSTONCE_TARGETS", "LinkedIn")])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("lower case: linkedin"), "{msg}");
    // Known networks this version cannot post to yet.
    assert_eq!(
        load(&[("POSTONCE_TARGETS", "linkedin,mastodon,bluesky")])
            .unwrap()
            .targets,
        vec![Network::Linkedin, Network::Mastodon, Network::Bluesky]
    );
    let err = load(&[("POSTONCE_TARGETS", ",,")]).unwrap_err();
    assert_eq!(err.var, "POSTONCE_TARGETS");
    assert!(err.to_string().contains("names no target"), "{err}");
    assert_eq!(parse_target("x"), Ok(Network::X));
    assert!(parse_target("X").is_err());
}

#[test]
fn pacing_gaps_are_seconds_per_network_with_a_default() {
    let c = load(&[]).unwrap();
    assert!(c.min_gap.values().all(|g| g.is_zero()));
    let c = load(&[
        ("POSTONCE_MIN_GAP_S", "90"),
        ("POSTONCE_MIN_GAP_S_X", "0.5"),
    ])
    .unwrap();
    assert_eq!(c.min_gap[&Network::Linkedin], Duration::from_secs(90));
    assert_eq!(c.min_gap[&Network::X], Duration::from_millis(500));
    for (var, bad) in [
        ("POSTONCE_MIN_GAP_S", "soon"),
        ("POSTONCE_MIN_GAP_S", "-1"),
        ("POSTONCE_MIN_GAP_S_BLUESKY", "86401"),
        ("POSTONCE_MIN_GAP_S_TELEGRAM", "NaN"),
    ] {
        let err = load(&[(var, bad)]).unwrap_err();
        assert_eq!(err.var, var, "{bad}");
    }
}

pub(crate) async fn adapters(
    c: &Config,
) -> std::collections::BTreeMap<Network, std::sync::Arc<dyn crate::networks::NetworkAdapter>> {
    let http = reqwest::Client::new();
    let context = crate::networks::Context {
        http: &http,
        sessions: None,
        sessions_budget: Duration::from_secs(1),
    };
    networks::build(&c.networks, &context).await.unwrap()
}

pub(crate) const X_VARS: [(&str, &str); 4] = [
    ("X_API_KEY", "k"),
    ("X_API_SECRET", "s"),
    ("X_ACCESS_TOKEN", "t"),
    ("X_ACCESS_TOKEN_SECRET", "ts"),
];

pub(crate) fn note(c: &Config, n: Network) -> String {
    networks::dry_run_note(n, &c.networks[&n].missing())
}

#[tokio::test]
async fn every_network_of_the_registry_gets_an_adapter_dry_without_credentials() {
    let c = load(&[]).unwrap();
    let a = adapters(&c).await;
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), Network::ALL.to_vec());
    for (network, adapter) in &a {
        assert_eq!(adapter.network(), *network);
        assert!(adapter.is_dry_run(), "{network:?}");
        // What the pipeline reads before any call agrees with what the adapter counts.
        assert_eq!(adapter.capabilities().text.max, adapter.max_text());
        assert!(adapter.max_text() > 0, "{network:?}");
    }
    assert_eq!(
        note(&c, Network::X),
        "dry run: set X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET to post to X for real"
    );
    assert_eq!(
        note(&c, Network::Telegram),
        "dry run: set TELEGRAM_BOT_TOKEN, TELEGRAM_CHAT_ID and TELEGRAM_CHANNEL_ID to post to the Telegram channel for real"
    );
}

#[tokio::test]
async fn configured_networks_post_for_real() {
    let mut pairs = X_VARS.to_vec();
    pairs.extend([
        ("TELEGRAM_BOT_TOKEN", "123:abc"),
        ("TELEGRAM_CHAT_ID", "42"),
        ("TELEGRAM_CHANNEL_ID", "@postonce_chan"),
    ]);
    let c = load(&pairs).unwrap();
    let a = adapters(&c).await;
    assert!(!a[&Network::X].is_dry_run());
    assert!(!a[&Network::Telegram].is_dry_run());
    assert!(c.networks[&Network::X].missing().is_empty());
    assert!(c.networks[&Network::Telegram].missing().is_empty());
    assert!(a[&Network::Linkedin].is_dry_run());
    assert_eq!(
        c.networks[&Network::Linkedin].missing(),
        ["LINKEDIN_ACCESS_TOKEN", "LINKEDIN_AUTHOR"]
    );
}

#[test]
fn every_network_names_its_own_pacing_and_secret_variables() {
    for n in Network::ALL {
        let d = n.definition();
        assert!(d.min_gap_var.starts_with("POSTONCE_MIN_GAP_S_"), "{n:?}");
        for (var, param) in d.secrets {
            assert_eq!(*param, format!("{var}_PARAM"));
        }
    }
}

#[test]
fn mcp_covers_come_from_no_folder_unless_named_and_the_folders_are_resolved_at_start() {
    let c = load(&[]).unwrap();
    assert_eq!(c.mcp_covers, LocalCovers::none());
    assert_eq!(c.local_covers, LocalCovers::Anywhere);
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let list = format!("{}, /tmp", link.display());
    let mut c = load(&[("POSTONCE_MCP_IMAGE_DIRS", &list)]).unwrap();
    assert_eq!(
        c.mcp_covers,
        LocalCovers::none(),
        "resolved by the MCP server only"
    );
    c.resolve_mcp_covers().unwrap();
    let LocalCovers::Beneath(dirs) = &c.mcp_covers else {
        panic!("{:?}", c.mcp_covers)
    };
    assert_eq!(dirs.len(), 2);
    assert_eq!(dirs[0].canonical(), std::fs::canonicalize(&real).unwrap());
}

#[test]
fn a_missing_mcp_folder_stops_only_the_mcp_server() {
    // Every other command (serve, sweep, post) shares the environment and loads as usual.
    let mut c = load(&[("POSTONCE_MCP_IMAGE_DIRS", "/no/such/postonce/folder")]).unwrap();
    let e = c.resolve_mcp_covers().unwrap_err().to_string();
    assert!(e.contains("POSTONCE_MCP_IMAGE_DIRS"), "{e}");
    assert!(e.contains("/no/such/postonce/folder"), "{e}");
}

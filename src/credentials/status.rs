//! `postonce auth status` and doctor's credential lines: per network, where its credential
//! comes from, the account, the expiry and whether postonce can refresh it. Never a secret.

use super::{until, Source, Stored};
use crate::networks::Network;
use crate::vars::Vars;

/// One network's line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    pub network: &'static str,
    /// `variable LINKEDIN_ACCESS_TOKEN`, `SSM parameter (…_PARAM)`, `stored`, `none`.
    pub source: String,
    pub account: Option<String>,
    /// `in 23 days`, `does not expire`, `unknown`.
    pub expiry: String,
    pub refresh: String,
    /// The command that (re)obtains it, for a network that has one.
    pub renew: Option<String>,
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.network, self.source)?;
        if let Some(a) = &self.account {
            write!(f, ", account {a}")?;
        }
        write!(f, ", expires {}, {}", self.expiry, self.refresh)
    }
}

/// Every network's line, from the environment and the stored credentials.
pub fn rows(vars: Vars<'_>, stored: &Stored, now: i64) -> Vec<Row> {
    Network::ALL
        .iter()
        .map(|n| row(*n, vars, stored, now))
        .collect()
}

fn row(network: Network, vars: Vars<'_>, stored: &Stored, now: i64) -> Row {
    let flow = network.definition().auth;
    let renew = flow.map(|_| format!("postonce auth {}", network.as_str()));
    let shadowed = stored.get(network).is_some();
    let by_hand = |source: String| Row {
        network: network.as_str(),
        source: if shadowed {
            format!("{source} (a stored credential is set aside: the variable wins)")
        } else {
            source
        },
        account: None,
        expiry: "unknown (set by hand)".into(),
        refresh: "postonce cannot refresh it: renew it by hand and update the variable".into(),
        renew: renew.clone(),
    };
    match Source::of(network, vars, stored) {
        Source::Variable(var) => by_hand(format!("variable {var}")),
        Source::Parameter(param) => by_hand(format!("SSM parameter ({param})")),
        Source::None => Row {
            network: network.as_str(),
            source: "none (a dry run)".into(),
            account: None,
            expiry: "-".into(),
            refresh: match &renew {
                Some(cmd) => format!("run `{cmd}`"),
                None => "set its variables (README)".into(),
            },
            renew,
        },
        Source::Stored => {
            let cred = stored
                .get(network)
                .cloned()
                .unwrap_or_else(unreachable_cred);
            let can = flow.is_some_and(|f| f.can_refresh(&cred));
            let failed = stored
                .state
                .get(network.as_str())
                .and_then(|s| s.refresh_failed.clone());
            let refresh = match (can, failed) {
                (true, None) => "postonce refreshes it".to_owned(),
                (true, Some(why)) => {
                    format!("postonce refreshes it, but the last refresh failed ({why})")
                }
                (false, _) => match (&renew, cred.expires_at) {
                    (_, None) => "no refresh needed".to_owned(),
                    (Some(cmd), Some(_)) => {
                        format!("postonce cannot refresh it: run `{cmd}` before it expires")
                    }
                    (None, Some(_)) => "postonce cannot refresh it".to_owned(),
                },
            };
            Row {
                network: network.as_str(),
                source: format!("stored ({})", renew.as_deref().unwrap_or("postonce auth")),
                account: Some(cred.account.clone()),
                expiry: cred
                    .expires_at
                    .map_or_else(|| "never".to_owned(), |at| until(at, now)),
                refresh,
                renew,
            }
        }
    }
}

/// `Source::Stored` means the credential is there; this is never reached.
fn unreachable_cred() -> super::Credential {
    super::Credential {
        account: String::new(),
        scopes: Vec::new(),
        obtained_at: 0,
        expires_at: None,
        refresh_token: None,
        refresh_expires_at: None,
        secrets: Default::default(),
        settings: Default::default(),
        kept: Default::default(),
    }
}

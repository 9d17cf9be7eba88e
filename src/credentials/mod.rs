//! Credentials: obtaining them (`postonce auth <network>`: the shared OAuth parts are here, each
//! network's own flow lives in its folder as `auth.rs`), storing them where the records live,
//! using them (precedence: a plain variable, then its `_PARAM`, then the stored credential) and
//! telling what they are (`postonce auth status`, doctor).
//!
//! Every stored credential lives in one kept secret, `credentials` (the record store's secret
//! role: an item, a row or a 0600 file, as each store in `src/stores/` keeps it), so that a start reads all of them in one request, and every change to it is one
//! conditional write ([`crate::record::RecordStore::swap_secret`]): a process that lost a race
//! reads again and re-applies its change, and nothing newer is ever overwritten.

pub mod flow;
mod holder;
pub mod status;
pub mod tell;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::networks::Network;
use crate::record::{RecordStore, StoreError};
use crate::vars::{Secret, Vars};

pub use crate::networks::auth::{
    AuthContext, AuthError, AuthFlow, AuthOptions, Credential, RefreshContext,
};

/// The kept secret that holds every stored credential.
pub const SECRET_NAME: &str = "credentials";

/// How many times a change is re-applied after losing a race to another writer.
const SWAP_TRIES: usize = 16;

/// Every stored credential, by network name, and what postonce did with them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stored {
    #[serde(default)]
    pub networks: BTreeMap<String, Credential>,
    /// Bookkeeping per network (refresh leases, steps told): not the credential itself, so that
    /// a new `auth` replaces it.
    #[serde(default)]
    pub state: BTreeMap<String, CredentialState>,
}

/// What postonce keeps about a stored credential's upkeep.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CredentialState {
    /// A process refreshing it until this time (Unix seconds), and which one.
    #[serde(default)]
    pub refreshing_until: Option<i64>,
    #[serde(default)]
    pub refreshing_by: Option<String>,
    /// Why the last refresh failed.
    #[serde(default)]
    pub refresh_failed: Option<String>,
    /// The last step of the expiry the owner was told of (days left: 14, 3; 0: expired).
    #[serde(default)]
    pub told_step: Option<u8>,
    /// The fingerprint ([`crate::networks::auth::fingerprint`], never the credential) of the
    /// credential its network refused (expired or revoked) and whose refusal the owner was
    /// told of: marked in one conditional write before the message goes out, so that however
    /// many drafts and processes meet the refusal, one tells it, once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Stored {
    pub fn get(&self, network: Network) -> Option<&Credential> {
        self.networks.get(network.as_str())
    }

    fn parse(raw: Option<&Secret>) -> Result<Self, StoreError> {
        match raw {
            None => Ok(Self::default()),
            Some(s) => serde_json::from_str(s.expose()).map_err(|e| {
                StoreError(format!(
                    "the stored credentials cannot be read ({}); run `postonce auth <network>` again",
                    e.classify_as_str()
                ))
            }),
        }
    }
}

trait Classify {
    fn classify_as_str(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    /// The kind of JSON error only: its message may quote the secret it failed on.
    fn classify_as_str(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "an I/O error",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "an unexpected shape",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// Reads every stored credential (one request).
///
/// # Errors
/// The store's error, or a stored value that is not a credential list.
pub async fn load(records: &dyn RecordStore) -> Result<Stored, StoreError> {
    Stored::parse(records.load_secret(SECRET_NAME).await?.as_ref())
}

/// Applies `change` to the stored credentials in one conditional write, re-reading and
/// re-applying it when another process wrote first. `change` returns `None` to write nothing;
/// its answer is returned with the credentials as written (or as read, when nothing was).
///
/// # Errors
/// The store's error, or too many lost races.
pub async fn update<T>(
    records: &dyn RecordStore,
    mut change: impl FnMut(&mut Stored) -> Option<T>,
) -> Result<(Option<T>, Stored), StoreError> {
    for _ in 0..SWAP_TRIES {
        let raw = records.load_secret(SECRET_NAME).await?;
        let mut stored = Stored::parse(raw.as_ref())?;
        let Some(answer) = change(&mut stored) else {
            return Ok((None, stored));
        };
        let json = serde_json::to_string(&stored)
            .map_err(|_| StoreError("the credentials cannot be serialized".into()))?;
        if records
            .swap_secret(SECRET_NAME, raw.as_ref(), &Secret::new(json))
            .await?
        {
            return Ok((Some(answer), stored));
        }
    }
    Err(StoreError(format!(
        "the stored credentials changed {SWAP_TRIES} times while this process wrote them; try again"
    )))
}

/// Marks `network`'s credential with `fingerprint` refused in the bookkeeping
/// ([`CredentialState::refused`]), in one conditional write: `true` for the one caller that
/// marked it (and so tells its owner), `false` when it was marked already, however many
/// processes race.
///
/// # Errors
/// The store's error, or too many lost races.
pub async fn mark_refused(
    records: &dyn RecordStore,
    network: Network,
    fingerprint: &str,
) -> Result<bool, StoreError> {
    let name = network.as_str();
    let (won, _) = update(records, |stored| {
        let state = stored.state.entry(name.to_owned()).or_default();
        if state.refused.as_deref() == Some(fingerprint) {
            return None;
        }
        state.refused = Some(fingerprint.to_owned());
        Some(())
    })
    .await?;
    Ok(won.is_some())
}

/// The variable that says whether `network` has a credential of its own (its first secret),
/// with its `_PARAM` variable; `None` for a network with no secret of its own.
pub fn primary(network: Network) -> Option<(&'static str, &'static str)> {
    let definition = network.definition();
    definition
        .auth
        .and_then(|f| f.credential_variable())
        .or_else(|| definition.secrets.first().copied())
}

/// Where a network's credential comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Variable(&'static str),
    Parameter(&'static str),
    Stored,
    None,
}

impl Source {
    /// Where `network`'s credential comes from, given the environment and what is stored.
    pub fn of(network: Network, vars: Vars<'_>, stored: &Stored) -> Self {
        match primary(network) {
            Some((var, _)) if vars.get(var).is_some() => Self::Variable(var),
            Some((_, param)) if vars.get(param).is_some() => Self::Parameter(param),
            _ if stored.get(network).is_some() => Self::Stored,
            _ => Self::None,
        }
    }
}

/// Whether some network of the registry with an `auth` flow has neither its plain variable nor
/// its `_PARAM`: only then is a stored credential worth a request.
pub fn some_network_lacks(vars: Vars<'_>) -> bool {
    Network::ALL.iter().any(|n| {
        n.definition().auth.is_some()
            && primary(*n)
                .is_some_and(|(var, param)| vars.get(var).is_none() && vars.get(param).is_none())
    })
}

/// The variables the stored credentials stand for, each only where the network has neither its
/// plain variable nor its `_PARAM`, and only for a variable that is unset.
pub fn variables(vars: Vars<'_>, stored: &Stored) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for network in Network::ALL {
        let Some(cred) = stored.get(network) else {
            continue;
        };
        if Source::of(network, vars, stored) != Source::Stored {
            continue;
        }
        let secrets = cred.secrets.iter().map(|(k, v)| (k, v.expose()));
        let settings = cred.settings.iter().map(|(k, v)| (k, v.as_str()));
        for (name, value) in secrets.chain(settings) {
            if vars.get(name).is_none() {
                out.insert(name.clone(), value.to_owned());
            }
        }
    }
    out
}

/// Whether `var` is one of the core's variables, which name the store (and the rest of the
/// core's settings) without any network's: a configuration read from these alone says where
/// the stored credentials are.
pub fn names_the_store(var: &str) -> bool {
    var.starts_with("POSTONCE_") || var.starts_with("AWS_") || crate::stores::names_a_store(var)
}

/// Set once a start took some network's credential from the store: only then does the
/// sweeper read the stored credentials to tell of a coming expiry (a process using none pays
/// no request for it).
static IN_USE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes that this process took some network's credential from the store at its start.
pub fn mark_in_use() {
    IN_USE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process took a credential from the store at its start.
pub fn in_use() -> bool {
    IN_USE.load(std::sync::atomic::Ordering::Relaxed)
}

/// `in 23 days`, `in 5 hours`, `expired 2 days ago`: how long until `at` (Unix seconds).
pub fn until(at: i64, now: i64) -> String {
    let d = at - now;
    let span = |s: i64| {
        let s = s.abs();
        if s >= 2 * 86_400 {
            format!("{} days", s / 86_400)
        } else if s >= 2 * 3_600 {
            format!("{} hours", s / 3_600)
        } else {
            format!("{} minutes", (s / 60).max(1))
        }
    };
    if d > 0 {
        format!("in {}", span(d))
    } else {
        format!("expired {} ago", span(d))
    }
}

/// The store as the credentials code takes it.
pub type Records = Arc<dyn RecordStore>;

#[cfg(test)]
mod tests {
    use super::*;

    fn cred() -> Credential {
        Credential {
            account: "urn:li:person:abc".into(),
            scopes: vec!["w_member_social".into()],
            obtained_at: 1,
            expires_at: Some(100),
            refresh_token: Some(Secret::new("REFRESHSECRET1")),
            refresh_expires_at: None,
            secrets: [(
                "LINKEDIN_ACCESS_TOKEN".to_owned(),
                Secret::new("TOKENSECRET1"),
            )]
            .into(),
            settings: [("LINKEDIN_AUTHOR".to_owned(), "urn:li:person:abc".to_owned())].into(),
            kept: BTreeMap::new(),
        }
    }

    #[test]
    fn debug_shows_no_secret_and_the_store_keeps_them() {
        let c = cred();
        let shown = format!("{c:?}");
        assert!(!shown.contains("SECRET1"), "{shown}");
        assert!(shown.contains("LINKEDIN_ACCESS_TOKEN"));
        let json = serde_json::to_string(&c).expect("json");
        let back: Credential = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, c);
    }

    #[test]
    fn a_variable_then_its_param_then_the_stored_credential() {
        let stored = Stored {
            networks: [("linkedin".to_owned(), cred())].into(),
            ..Stored::default()
        };
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let none = env(&[]);
        let got = variables(Vars::new(&none), &stored);
        assert_eq!(got["LINKEDIN_ACCESS_TOKEN"], "TOKENSECRET1");
        assert_eq!(got["LINKEDIN_AUTHOR"], "urn:li:person:abc");
        let author = env(&[("LINKEDIN_AUTHOR", "urn:li:organization:9")]);
        let got = variables(Vars::new(&author), &stored);
        assert!(!got.contains_key("LINKEDIN_AUTHOR"), "a set variable wins");
        let plain = env(&[("LINKEDIN_ACCESS_TOKEN", "t")]);
        assert!(variables(Vars::new(&plain), &stored).is_empty());
        assert_eq!(
            Source::of(Network::Linkedin, Vars::new(&plain), &stored),
            Source::Variable("LINKEDIN_ACCESS_TOKEN")
        );
        let param = env(&[("LINKEDIN_ACCESS_TOKEN_PARAM", "/p")]);
        assert!(variables(Vars::new(&param), &stored).is_empty());
        assert_eq!(
            Source::of(Network::Linkedin, Vars::new(&param), &stored),
            Source::Parameter("LINKEDIN_ACCESS_TOKEN_PARAM")
        );
    }

    #[test]
    fn until_reads_as_words() {
        assert_eq!(until(23 * 86_400 + 50, 0), "in 23 days");
        assert_eq!(until(5 * 3_600, 0), "in 5 hours");
        assert_eq!(until(0, 2 * 86_400), "expired 2 days ago");
    }
}

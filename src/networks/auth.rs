//! A network's side of `postonce auth <network>`: the flow it implements ([`AuthFlow`], in its
//! folder's `auth.rs`), what the flow works with, and the credential it obtains. Storing,
//! refreshing and telling about credentials is [`crate::credentials`]'s part; the shared OAuth
//! steps are in [`super::oauth`].

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, Write};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use super::oauth::{AuthError, AuthOptions};
use crate::vars::{Secret, Vars};

/// What tells one credential of `network` from another without showing it: a hash of the
/// values it is made of (`values`, in the order the network's folder lists its secrets), 16 hex
/// digits of SHA-256 under a label of its own. A refused credential is remembered by it (in the
/// stored credentials' bookkeeping and on the drafts that wait for a new one), so the token
/// itself is never kept twice, nor shown. Any change of any value (a new `auth`, a refresh, a
/// changed variable) gives another fingerprint.
pub fn fingerprint(network: super::Network, values: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"postonce credential fingerprint\0");
    h.update(network.as_str().as_bytes());
    for v in values {
        h.update(b"\0");
        h.update(v.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

/// One network's stored credential. `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Credential {
    /// Who it posts as, for people (`urn:li:person:abc (Ada Lovelace)`); never a secret.
    pub account: String,
    pub scopes: Vec<String>,
    /// Unix seconds.
    pub obtained_at: i64,
    /// Unix seconds; `None`: it does not expire.
    pub expires_at: Option<i64>,
    #[serde(default, with = "opt_secret")]
    pub refresh_token: Option<Secret>,
    #[serde(default)]
    pub refresh_expires_at: Option<i64>,
    /// The secret variables it stands for (`LINKEDIN_ACCESS_TOKEN` → the token).
    #[serde(with = "secret_map")]
    pub secrets: BTreeMap<String, Secret>,
    /// The plain variables it stands for (`LINKEDIN_AUTHOR` → the URN).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// What the app kept beside it (a Mastodon app's client id and secret), never variables.
    #[serde(default, with = "secret_map")]
    pub kept: BTreeMap<String, Secret>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("account", &self.account)
            .field("scopes", &self.scopes)
            .field("obtained_at", &self.obtained_at)
            .field("expires_at", &self.expires_at)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "***"))
            .field("refresh_expires_at", &self.refresh_expires_at)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What a flow works with: the HTTP client, the variables (app credentials, API bases), the
/// options, and the terminal (prompts go to standard error, answers come from standard input).
pub struct AuthContext<'a> {
    pub http: &'a reqwest::Client,
    pub vars: Vars<'a>,
    pub options: AuthOptions,
    pub input: &'a mut dyn BufRead,
}

impl AuthContext<'_> {
    /// A variable the flow needs, or a refusal naming it and what to set.
    ///
    /// # Errors
    /// `var` is unset.
    pub fn require(&self, var: &str, what: &str) -> Result<String, AuthError> {
        self.vars.get(var).ok_or_else(|| {
            AuthError::new(format!(
                "{var} is not set: {what} (or {var}_PARAM naming an SSM parameter holding it)"
            ))
        })
    }

    /// A variable, or `default`.
    pub fn var_or(&self, var: &str, default: &str) -> String {
        self.vars.get(var).map_or_else(
            || default.to_owned(),
            |v| v.trim_end_matches('/').to_owned(),
        )
    }

    /// Tells the person something (standard error: standard output is for the result).
    pub fn say(&self, line: &str) {
        eprintln!("{line}");
    }

    /// Asks for one line (shown as typed).
    ///
    /// # Errors
    /// Standard input ended or could not be read.
    pub fn ask(&mut self, prompt: &str) -> Result<String, AuthError> {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        read_line(self.input)
    }

    /// Asks for a secret without echo when standard input is a terminal; otherwise reads a
    /// line from it (scripts, tests).
    ///
    /// # Errors
    /// Standard input ended or could not be read.
    pub fn ask_secret(&mut self, prompt: &str) -> Result<Secret, AuthError> {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() {
            return rpassword::prompt_password(prompt)
                .map(|s| Secret::new(s.trim().to_owned()))
                .map_err(|e| AuthError::new(format!("cannot read from the terminal: {e}")));
        }
        eprint!("{prompt}");
        read_line(self.input).map(Secret::new)
    }

    /// The browser part of an OAuth authorization-code flow (see [`super::oauth::authorize`]).
    ///
    /// # Errors
    /// A refused consent, a `state` that does not match, a port in use, a bad paste.
    pub async fn authorize(
        &mut self,
        scheme: &str,
        url: impl Fn(&str, &str, &str) -> String,
    ) -> Result<super::oauth::Granted, AuthError> {
        let options = self.options.clone();
        super::oauth::authorize(&options, scheme, url, self.input).await
    }
}

fn read_line(input: &mut dyn BufRead) -> Result<String, AuthError> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) => Err(AuthError::new(
            "standard input ended before an answer was given: nothing stored",
        )),
        Ok(_) => Ok(line.trim().to_owned()),
        Err(e) => Err(AuthError::new(format!("cannot read standard input: {e}"))),
    }
}

/// Where a refresh happens: the HTTP client and the variables (app credentials, API bases).
pub struct RefreshContext<'a> {
    pub http: &'a reqwest::Client,
    pub vars: Vars<'a>,
    pub now: i64,
}

/// A network's `postonce auth <network>`: from nothing to a stored credential, and its upkeep.
#[async_trait(?Send)]
pub trait AuthFlow: Sync {
    /// The app's own variables the flow reads, each with its `_PARAM` (resolved from SSM
    /// before the flow starts).
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The variable (with its `_PARAM`) whose presence means the network's credential is set
    /// by hand; default: the network's first secret.
    fn credential_variable(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// Whether the flow also runs when the credential is set by hand (its variable), to check
    /// it and store nothing (what it posts as, and where); otherwise `auth` refuses.
    fn checks_set_credential(&self) -> bool {
        false
    }

    /// Obtains a credential: asks, authorizes, checks it with one harmless read. `None`: the
    /// flow found what to set and printed it, and there is nothing to store.
    ///
    /// # Errors
    /// A refusal naming its cause and fix; nothing is stored.
    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError>;

    /// Whether postonce can ever refresh `cred` (a refresh token, a refreshable token).
    fn can_refresh(&self, cred: &Credential) -> bool {
        let _ = cred;
        false
    }

    /// Whether `cred` should be refreshed now.
    fn refresh_due(&self, cred: &Credential, now: i64) -> bool {
        let _ = (cred, now);
        false
    }

    /// The refreshed credential.
    ///
    /// # Errors
    /// Why the network refused it or could not be reached (no secret in it).
    async fn refresh(
        &self,
        cred: &Credential,
        cx: &RefreshContext<'_>,
    ) -> Result<Credential, String> {
        let _ = (cred, cx);
        Err("this network's credentials cannot be refreshed".into())
    }
}

/// (De)serializes an optional [`Secret`] as its value (for the store only).
mod opt_secret {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::vars::Secret;

    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(v: &Option<Secret>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(secret) => s.serialize_some(secret.expose()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(Secret::new))
    }
}

/// (De)serializes a map of [`Secret`]s as their values (for the store only).
mod secret_map {
    use std::collections::BTreeMap;

    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::vars::Secret;

    pub fn serialize<S: Serializer>(v: &BTreeMap<String, Secret>, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(v.len()))?;
        for (k, secret) in v {
            map.serialize_entry(k, secret.expose())?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Secret>, D::Error> {
        Ok(BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect())
    }
}

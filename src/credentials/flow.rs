//! What every network's `auth` flow is given and gives back ([`AuthFlow`], registered in its
//! folder's [`crate::networks::Definition`]), and the refresh of stored credentials before they
//! expire, under a lease kept in the credentials themselves so that racing processes refresh
//! once ([`refresh_due`]).

use std::io::{BufRead, Write};
use std::time::Duration;

use async_trait::async_trait;

use super::{oauth, update, Credential, CredentialState, Source, Stored};
use crate::networks::Network;
use crate::record::{RecordStore, StoreError};
use crate::vars::{Secret, Vars};

/// A refusal of `auth`: the message names the cause and the fix; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

impl AuthError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// What the command line asked of a flow.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// Read the redirected address (or the bare code) from standard input.
    pub paste: bool,
    /// Never open a browser.
    pub no_browser: bool,
    /// The listener's (and the redirect URI's) fixed port.
    pub port: Option<u16>,
    /// LinkedIn: post as this author (`urn:li:organization:…`) instead of the member.
    pub author: Option<String>,
    /// Mastodon: the instance.
    pub instance: Option<String>,
}

/// What a flow works with: the HTTP client, the variables (app credentials, API bases), the
/// options, and the terminal (prompts go to standard error, answers come from standard input).
pub struct AuthContext<'a> {
    pub http: &'a reqwest::Client,
    pub vars: Vars<'a>,
    pub options: AuthOptions,
    pub input: &'a mut dyn BufRead,
    pub network: Network,
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

    /// The browser part of an OAuth authorization-code flow (see [`oauth::authorize`]).
    ///
    /// # Errors
    /// A refused consent, a `state` that does not match, a port in use, a bad paste.
    pub async fn authorize(
        &mut self,
        scheme: &str,
        url: impl Fn(&str, &str, &str) -> String,
    ) -> Result<oauth::Granted, AuthError> {
        let options = self.options.clone();
        oauth::authorize(&options, scheme, url, self.input).await
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

/// How long one process may hold the refresh of a credential before another may take it over.
const LEASE_S: i64 = 60;

/// How long a process waits for another's refresh before going on with the credential it has
/// (still valid: a refresh happens well before the expiry).
const WAIT_FOR_OTHER: Duration = Duration::from_secs(20);

/// Refreshes every stored credential that is in use (no plain variable or `_PARAM` shadows it)
/// and due, each under a lease taken with a conditional write: one process refreshes, the others
/// wait for its result; the refreshed credential replaces the one it was made from only if that
/// one is still stored (never a newer one). Returns the credentials as stored afterwards.
///
/// # Errors
/// The store cannot be read.
pub async fn refresh_due(
    records: &dyn RecordStore,
    vars: Vars<'_>,
    http: &reqwest::Client,
    now: i64,
) -> Result<Stored, StoreError> {
    let mut stored = super::load(records).await?;
    for network in Network::ALL {
        let (Some(flow), Some(cred)) = (network.definition().auth, stored.get(network).cloned())
        else {
            continue;
        };
        if Source::of(network, vars, &stored) != Source::Stored || !flow.refresh_due(&cred, now) {
            continue;
        }
        let cx = RefreshContext { http, vars, now };
        stored = refresh_one(records, network, flow, &cred, &cx).await?;
    }
    Ok(stored)
}

async fn refresh_one(
    records: &dyn RecordStore,
    network: Network,
    flow: &dyn AuthFlow,
    cred: &Credential,
    cx: &RefreshContext<'_>,
) -> Result<Stored, StoreError> {
    let name = network.as_str().to_owned();
    let me = format!("{:016x}", rand::random::<u64>());
    let now = cx.now;
    let (lease, _) = update(records, |s| {
        if s.networks.get(&name) != Some(cred) {
            return None; // someone else already changed it
        }
        let st = s.state.entry(name.clone()).or_default();
        if st.refreshing_until.is_some_and(|t| t > now) {
            return None;
        }
        st.refreshing_until = Some(now + LEASE_S);
        st.refreshing_by = Some(me.clone());
        Some(())
    })
    .await?;
    if lease.is_none() {
        return wait_for_other(records, &name, cred).await;
    }
    let result = flow.refresh(cred, cx).await;
    let (_, stored) = update(records, |s| {
        let ours = s.state.get(&name).and_then(|st| st.refreshing_by.as_ref()) == Some(&me);
        let same = s.networks.get(&name) == Some(cred);
        match &result {
            Ok(new) if same => {
                s.networks.insert(name.clone(), new.clone());
                s.state.insert(name.clone(), CredentialState::default());
                Some(())
            }
            Err(why) if ours => {
                let st = s.state.entry(name.clone()).or_default();
                st.refreshing_until = None;
                st.refreshing_by = None;
                st.refresh_failed = Some(why.clone());
                Some(())
            }
            _ if ours => {
                let st = s.state.entry(name.clone()).or_default();
                st.refreshing_until = None;
                st.refreshing_by = None;
                Some(())
            }
            _ => None,
        }
    })
    .await?;
    match &result {
        Ok(_) => tracing::info!(network = %name, "the stored credential was refreshed"),
        Err(why) => {
            tracing::warn!(network = %name, error = %why, "the stored credential could not be refreshed")
        }
    }
    Ok(stored)
}

/// Waits (bounded) until another process's refresh of `name` has ended, then reads what it left.
async fn wait_for_other(
    records: &dyn RecordStore,
    name: &str,
    cred: &Credential,
) -> Result<Stored, StoreError> {
    let until = tokio::time::Instant::now() + WAIT_FOR_OTHER;
    loop {
        let stored = super::load(records).await?;
        let changed = stored.networks.get(name) != Some(cred);
        let leased = stored
            .state
            .get(name)
            .is_some_and(|st| st.refreshing_until.is_some());
        if changed || !leased || tokio::time::Instant::now() >= until {
            return Ok(stored);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

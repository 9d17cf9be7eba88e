//! The refresh of stored credentials before they expire, under a lease kept in the credentials
//! themselves so that racing processes refresh once ([`refresh_due`]). What a network's `auth`
//! flow is given and gives back is [`crate::networks::auth`].

use std::time::Duration;

use super::{update, AuthFlow, Credential, CredentialState, RefreshContext, Source, Stored};
use crate::networks::Network;
use crate::record::{RecordStore, StoreError};
use crate::vars::Vars;

/// How long one process may hold the refresh of a credential before another may take it over.
const LEASE_S: i64 = 60;

/// How long a process waits for another's refresh before going on with the credential it has
/// (still valid: a refresh happens well before the expiry). A holder known to be gone
/// ([`super::holder`]) is not waited for: its lease is taken over.
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
    let me = super::holder::new_id();
    let now = cx.now;
    // A lease whose holder is known to be gone is taken over at once; one whose holder dies
    // while this process waits, once more after the wait.
    for _ in 0..2 {
        let (lease, _) = update(records, |s| {
            if s.networks.get(&name) != Some(cred) {
                return None; // someone else already changed it
            }
            let st = s.state.entry(name.clone()).or_default();
            if st.refreshing_until.is_some_and(|t| t > now)
                && !super::holder::gone(st.refreshing_by.as_deref())
            {
                return None;
            }
            st.refreshing_until = Some(now + LEASE_S);
            st.refreshing_by = Some(me.clone());
            Some(())
        })
        .await?;
        if lease.is_some() {
            return refresh_leased(records, &name, flow, cred, cx, &me).await;
        }
        if let Waited::Ended(stored) = wait_for_other(records, &name, cred).await? {
            return Ok(stored);
        }
    }
    super::load(records).await
}

/// Refreshes `cred` under the lease `me` holds, and writes the result.
async fn refresh_leased(
    records: &dyn RecordStore,
    name: &str,
    flow: &dyn AuthFlow,
    cred: &Credential,
    cx: &RefreshContext<'_>,
    me: &str,
) -> Result<Stored, StoreError> {
    let name = name.to_owned();
    let result = flow.refresh(cred, cx).await;
    let (_, stored) = update(records, |s| {
        let ours = s
            .state
            .get(&name)
            .and_then(|st| st.refreshing_by.as_deref())
            == Some(me);
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

/// How a wait for another process's refresh ended.
enum Waited {
    /// Its refresh ended (or the wait did): what the store holds now.
    Ended(Stored),
    /// Its holder is gone: the lease may be taken over.
    HolderGone,
}

/// Waits (bounded) until another process's refresh of `name` has ended, then reads what it left.
async fn wait_for_other(
    records: &dyn RecordStore,
    name: &str,
    cred: &Credential,
) -> Result<Waited, StoreError> {
    let until = tokio::time::Instant::now() + WAIT_FOR_OTHER;
    loop {
        let stored = super::load(records).await?;
        let changed = stored.networks.get(name) != Some(cred);
        let state = stored.state.get(name);
        let leased = state.is_some_and(|st| st.refreshing_until.is_some());
        if changed || !leased || tokio::time::Instant::now() >= until {
            return Ok(Waited::Ended(stored));
        }
        if super::holder::gone(state.and_then(|st| st.refreshing_by.as_deref())) {
            return Ok(Waited::HolderGone);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

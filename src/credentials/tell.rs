//! Told ahead, once per step: a stored credential that postonce cannot refresh (or whose last
//! refresh failed) is announced to the owner when 14 days or fewer remain, again at 3 days, and
//! when it has expired, with the command that renews it. Each step is marked told in the
//! credentials with a conditional write before the message goes out, so that however many
//! sweeps in however many processes see it, one wins and tells it once. A new credential (a new
//! `auth`, a refresh) starts with nothing told.

use super::{until, update, Source, Stored};
use crate::networks::Network;
use crate::notify::Notifier;
use crate::record::{rfc3339, RecordStore, StoreError};
use crate::vars::Vars;

const DAY: i64 = 86_400;

/// The step an expiry at `at` has reached at `now`: 14 or 3 days left, or 0 (expired).
pub fn step(at: i64, now: i64) -> Option<u8> {
    if at <= now {
        Some(0)
    } else if at - now <= 3 * DAY {
        Some(3)
    } else if at - now <= 14 * DAY {
        Some(14)
    } else {
        None
    }
}

/// A credential the owner must renew by hand soon (or now): the network, the step reached,
/// and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lapsing {
    pub network: Network,
    pub step: u8,
    pub message: String,
}

/// Every stored credential in use that postonce will not keep alive by itself and that has
/// reached a step (for `status --all`, and for the sweeper to tell).
pub fn lapsing(vars: Vars<'_>, stored: &Stored, now: i64) -> Vec<Lapsing> {
    let mut out = Vec::new();
    for network in Network::ALL {
        let Some(cred) = stored.get(network) else {
            continue;
        };
        if Source::of(network, vars, stored) != Source::Stored {
            continue;
        }
        let failed = stored
            .state
            .get(network.as_str())
            .and_then(|s| s.refresh_failed.clone());
        let refreshes = network
            .definition()
            .auth
            .is_some_and(|f| f.can_refresh(cred));
        if refreshes && failed.is_none() {
            continue;
        }
        let Some(at) = cred.expires_at else {
            continue;
        };
        let Some(step) = step(at, now) else {
            continue;
        };
        let label = network.label();
        let command = format!("postonce auth {}", network.as_str());
        let why = match &failed {
            Some(why) => format!("postonce could not refresh it ({why})"),
            None => "postonce cannot refresh it".to_owned(),
        };
        let message = if step == 0 {
            format!(
                "The {label} credential ({}) has expired ({}): posts to {label} fail until you run `{command}`.",
                cred.account,
                rfc3339(at)
            )
        } else {
            format!(
                "The {label} credential ({}) expires {} ({}) and {why}: run `{command}` to renew it.",
                cred.account,
                until(at, now),
                rfc3339(at)
            )
        };
        out.push(Lapsing {
            network,
            step,
            message,
        });
    }
    out
}

/// The sweeper's part: tells each lapsing credential's step not yet told, once across every
/// process (the step is marked with a conditional write first; the winner sends). Returns the
/// networks told about.
///
/// # Errors
/// The store cannot be read or written.
pub async fn tell_ahead(
    records: &dyn RecordStore,
    notifier: &dyn Notifier,
    now: i64,
) -> Result<Vec<Network>, StoreError> {
    let stored = super::load(records).await?;
    let due: Vec<Lapsing> = {
        let env = |name: &str| std::env::var(name).ok();
        lapsing(Vars::new(&env), &stored, now)
    };
    let mut told = Vec::new();
    for lapse in due {
        let name = lapse.network.as_str().to_owned();
        let cred = stored.networks.get(&name).cloned();
        let (won, _) = update(records, |s| {
            if s.networks.get(&name) != cred.as_ref() {
                return None; // renewed meanwhile
            }
            let st = s.state.entry(name.clone()).or_default();
            // Steps only go down (14, 3, 0): one told at or below this one is not told again.
            if st.told_step.is_some_and(|t| t <= lapse.step) {
                return None;
            }
            st.told_step = Some(lapse.step);
            Some(())
        })
        .await?;
        if won.is_some() {
            match notifier.say(&lapse.message).await {
                Ok(()) => told.push(lapse.network),
                Err(e) => {
                    tracing::warn!(network = %name, error = %e, "the credential's expiry could not be told")
                }
            }
        }
    }
    Ok(told)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_at_14_and_3_days_and_at_the_expiry() {
        assert_eq!(step(20 * DAY, 0), None);
        assert_eq!(step(14 * DAY, 0), Some(14));
        assert_eq!(step(6 * DAY, 0), Some(14));
        assert_eq!(step(3 * DAY, 0), Some(3));
        assert_eq!(step(0, 0), Some(0));
    }
}

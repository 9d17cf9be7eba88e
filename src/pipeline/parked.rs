//! Drafts of a network whose credentials were removed. Its lane is a dry run now, and a dry run
//! never touches the real stores, so no run can take these drafts up: they wait for the
//! credentials. They are listed with that reason (`status --all`, `schedule list`, every
//! sweep's `waiting`) and the sweeper tells the owner once. They are never run, so nothing goes
//! out as a dry run by accident; once the credentials are back, the sweeper takes them up.

use super::sweep_report::Waiting;
use super::*;

/// A draft in the real stores whose network's lane is a dry run.
pub(super) struct Parked {
    pub lane: Arc<Lane>,
    pub draft: Draft,
    /// The store it was listed from (the real one, not the lane's).
    pub store: Arc<dyn RecordStore>,
}

impl Lane {
    /// Why this network's drafts in the real stores wait, when it has no credentials now.
    pub(super) fn unconfigured(&self) -> Option<String> {
        if !self.adapter.is_dry_run() || self.missing.is_empty() {
            return None;
        }
        let n = self.network.as_str();
        let names = match self.missing.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        Some(format!(
            "waits: {n} has no credentials configured ({names} unset); nothing is sent to {n} until they are set, then the sweeper takes it up"
        ))
    }
}

impl Pipeline {
    /// Whether some network has no credentials, so that real drafts may wait for them.
    pub(super) fn any_unconfigured(&self) -> bool {
        self.lanes.values().any(|l| l.unconfigured().is_some())
    }

    /// The parked drafts as `status --all` lists them.
    pub(super) fn parked_waiting(parked: &[Parked]) -> Vec<Waiting> {
        parked
            .iter()
            .filter_map(|p| {
                Some(Waiting {
                    key: p.draft.key.clone(),
                    status: p.draft.status.as_str(),
                    reason: p.lane.unconfigured()?,
                    last_error: p.draft.last_error.clone(),
                    owner_told: p.draft.reminded,
                    since: p.draft.updated_at,
                })
            })
            .collect()
    }

    /// Tells the owner, once, of each parked draft not told yet; marks it told (in the store it
    /// is in) only once the message was delivered. The message has no buttons: a Retry could
    /// not post it either.
    pub(super) async fn tell_parked(
        &self,
        dl: &Deadline,
        parked: &mut [Parked],
        report: &mut SweepReport,
    ) {
        for p in parked.iter_mut().filter(|p| !p.draft.reminded) {
            let (Some(reason), Ok(key)) = (p.lane.unconfigured(), PostKey::parse(&p.draft.key))
            else {
                continue;
            };
            let mut outcome = failed(&key, false, reason.clone());
            outcome.misconfigured = true;
            if !self.tell(&format!("{key} {reason}."), &outcome, dl).await {
                report.undelivered.push(key.to_string());
                continue;
            }
            report.reminded.push(key.to_string());
            let t = self.settings.timeouts;
            let update = DraftUpdate::Reminded;
            let noted = dl
                .finish(
                    t.records,
                    p.store
                        .update_draft(&key, &update, &[p.draft.status], now_s()),
                )
                .await;
            match flatten(noted) {
                None => p.draft.reminded = true,
                Some(e) => {
                    tracing::warn!(error = %e, "could not note that the owner was told of a draft that waits for credentials; they may be told again")
                }
            }
        }
    }
}

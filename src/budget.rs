//! The run's deadline and the time each outbound call may take (rule 4 in `pipeline/mod.rs`).
//!
//! A run has one deadline (the Lambda invocation's, or `POSTONCE_FUNCTION_TIMEOUT_S` from
//! its start). Work calls (image, the network, claim, record check) get their own budget clipped to
//! the deadline *minus a reserve*, so that recording the result, releasing the claim and reporting
//! always have time left. Finishing calls (record write, release, report) may use the reserve.
//! A call with no time left is not started at all.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Why a bounded call did not produce its own result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The deadline (less the reserve) had passed: the call was not started.
    #[error("no time left before the run's deadline; the call was not started")]
    NoTimeLeft,
    /// The call did not finish within its budget and was abandoned.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

/// Largest share of the run kept back for recording and reporting.
const MAX_RESERVE: Duration = Duration::from_secs(15);

/// A run's deadline.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    reserve: Duration,
}

impl Deadline {
    /// A deadline `total` from now; a quarter of it (at most 15 s) is reserved for finishing.
    pub fn after(total: Duration) -> Self {
        Self::at(Instant::now() + total, total)
    }

    /// A deadline at `at` for a run of length about `total` (used to size the reserve).
    pub fn at(at: Instant, total: Duration) -> Self {
        Self {
            at,
            reserve: (total / 4).min(MAX_RESERVE),
        }
    }

    /// Time until the deadline.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// The budget a work call gets: its own, clipped to the deadline minus the reserve.
    pub fn for_work(&self, budget: Duration) -> Option<Duration> {
        let left = self.remaining().checked_sub(self.reserve)?;
        (!left.is_zero()).then(|| budget.min(left))
    }

    /// The budget a finishing call gets: its own, clipped to the deadline.
    pub fn for_finish(&self, budget: Duration) -> Option<Duration> {
        let left = self.remaining();
        (!left.is_zero()).then(|| budget.min(left))
    }

    /// Runs a work call within its clipped budget.
    ///
    /// # Errors
    /// [`BudgetError`] when there was no time to start or the call overran.
    pub async fn work<T>(
        &self,
        budget: Duration,
        call: impl Future<Output = T>,
    ) -> Result<T, BudgetError> {
        bounded(self.for_work(budget), call).await
    }

    /// Runs a finishing call within its clipped budget.
    ///
    /// # Errors
    /// [`BudgetError`] when there was no time to start or the call overran.
    pub async fn finish<T>(
        &self,
        budget: Duration,
        call: impl Future<Output = T>,
    ) -> Result<T, BudgetError> {
        bounded(self.for_finish(budget), call).await
    }
}

async fn bounded<T>(
    budget: Option<Duration>,
    call: impl Future<Output = T>,
) -> Result<T, BudgetError> {
    let budget = budget.ok_or(BudgetError::NoTimeLeft)?;
    tokio::time::timeout(budget, call)
        .await
        .map_err(|_| BudgetError::TimedOut(budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_calls_are_clipped_to_the_deadline_minus_the_reserve() {
        let d = Deadline::after(Duration::from_secs(60));
        assert_eq!(
            d.for_work(Duration::from_secs(10)),
            Some(Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(40)).await;
        // 20 s left, 15 s reserved: a 10 s budget shrinks to 5 s.
        assert_eq!(
            d.for_work(Duration::from_secs(10)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            d.for_finish(Duration::from_secs(10)),
            Some(Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(d.for_work(Duration::from_secs(10)), None);
        assert_eq!(
            d.for_finish(Duration::from_secs(30)),
            Some(Duration::from_secs(14))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_with_no_time_left_is_not_started() {
        let d = Deadline::after(Duration::from_secs(4));
        tokio::time::advance(Duration::from_secs(3)).await;
        let mut started = false;
        let r = d
            .work(Duration::from_secs(1), async { started = true })
            .await;
        assert_eq!(r, Err(BudgetError::NoTimeLeft));
        assert!(!started);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_ends_at_its_budget() {
        let d = Deadline::after(Duration::from_secs(60));
        let begun = Instant::now();
        let r = d
            .work(
                Duration::from_millis(500),
                tokio::time::sleep(Duration::from_secs(3600)),
            )
            .await;
        assert_eq!(r, Err(BudgetError::TimedOut(Duration::from_millis(500))));
        assert_eq!(begun.elapsed(), Duration::from_millis(500));
    }
}

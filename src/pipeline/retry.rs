//! Bounded retries of calls that are safe to repeat (rule 8 in `mod.rs`).

use super::*;

/// Why a bounded, possibly retried call gave up.
pub(super) enum Gave<E> {
    Error(E),
    Budget(BudgetError),
}

/// Capped exponential backoff with full jitter: a random delay in `[0, min(cap, base·2^n)]`.
pub fn backoff(base: Duration, attempt: u32, cap: Duration) -> Duration {
    let ceiling = base
        .saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(cap);
    ceiling.mul_f64(rand::random::<f64>())
}

/// Repeats `call` until it succeeds, pausing with capped exponential backoff and jitter
/// (50 ms doubling, at most 1 s) between tries; `last` holds the latest error. It never gives
/// up by itself: the caller bounds it with a budget (`Deadline::work`), so every try fits in
/// one budget. Only for calls that are safe to repeat.
pub(super) async fn retry_within<T, E, F, Fut>(mut call: F, last: &mut Option<String>) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(attempt, error = %e, "call failed; trying again within its budget");
                *last = Some(e.to_string());
                tokio::time::sleep(backoff(
                    Duration::from_millis(50),
                    attempt,
                    Duration::from_secs(1),
                ))
                .await;
                attempt += 1;
            }
        }
    }
}

impl Lane {
    /// Runs a call that is safe to repeat, retrying transient failures with capped exponential
    /// backoff and full jitter while the deadline allows (rule 8).
    pub(super) async fn with_retries<T, E, F, Fut>(
        &self,
        dl: &Deadline,
        budget: Duration,
        mut call: F,
        transient: impl Fn(&E) -> bool,
        wait_hint: impl Fn(&E) -> Option<Duration>,
    ) -> Result<T, Gave<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        let tries = self.settings.call_tries.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (gave, hint) = match dl.work(budget, call()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if transient(&e) && attempt < tries => {
                    let hint = wait_hint(&e);
                    tracing::warn!(attempt, error = %e, "transient failure; retrying");
                    (Gave::Error(e), hint)
                }
                Ok(Err(e)) => return Err(Gave::Error(e)),
                Err(BudgetError::TimedOut(b)) if attempt < tries => {
                    tracing::warn!(attempt, budget = ?b, "call timed out; retrying");
                    (Gave::Budget(BudgetError::TimedOut(b)), None)
                }
                Err(b) => return Err(Gave::Budget(b)),
            };
            let pause = hint.unwrap_or_else(|| {
                backoff(
                    Duration::from_millis(200),
                    attempt - 1,
                    Duration::from_secs(2),
                )
            });
            // Only wait if a further try still fits before the reserve.
            if dl
                .for_work(pause + Duration::from_millis(100))
                .is_none_or(|left| left < pause + Duration::from_millis(100))
            {
                return Err(gave);
            }
            tokio::time::sleep(pause).await;
        }
    }
}

pub(super) fn rate_limit_wait(e: &PostError) -> Option<Duration> {
    match e {
        PostError::RateLimited { retry_after, .. } => *retry_after,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        for attempt in 0..30 {
            let d = backoff(Duration::from_secs(60), attempt, Duration::from_secs(3600));
            assert!(d <= Duration::from_secs(3600));
        }
    }
}

//! The chaos and the storm of tests/chaos.rs with only `DATABASE_URL` set (no Redis, no
//! DynamoDB): records, drafts and claims in one PostgreSQL server of the test's own, and
//! nothing durable in POSTONCE_DATA_DIR. The proofs themselves live in
//! [`support::chaos`]; PostgreSQL's own faults (killed, paused, a connection dropped after the
//! commit) are in tests/postgres_faults.rs.
//!
//! Sizes: `POSTONCE_PG_CHAOS_TRIALS` (default 60), `POSTONCE_PG_STORM_KEYS` ×
//! `POSTONCE_PG_STORM_TRIGGERS` (default 30 × 40), smaller than on DynamoDB so that each proof
//! stays under a minute on two cores.

mod support;

use support::chaos::{
    crash_chaos_settling_by_linkedins_duplicate_answer, sized, storm_of_mixed_triggers,
};
use support::env::Stores;

/// `postonce serve` processes SIGKILLed at random moments while runs are in flight, then the
/// webhooks repeated past the quiet period: every draft posted exactly once and recorded, which
/// **relies on LinkedIn's duplicate answer** (the realistic fake) for drafts whose run died
/// after its create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_chaos_on_postgres_settles_every_draft_relying_on_linkedins_duplicate_answer() {
    crash_chaos_settling_by_linkedins_duplicate_answer(
        Stores::Postgres,
        sized("POSTONCE_PG_CHAOS_TRIALS", 60),
    )
    .await;
}

/// The storm of mixed triggers (CI webhook, Telegram Retry, `postonce post` processes), each
/// draft to five targets, LinkedIn's and X's duplicate checks off: every key posted exactly
/// once per target, one create per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_on_postgres_posts_each_key_once_per_target() {
    storm_of_mixed_triggers(
        Stores::Postgres,
        sized("POSTONCE_PG_STORM_KEYS", 30),
        sized("POSTONCE_PG_STORM_TRIGGERS", 40),
    )
    .await;
}

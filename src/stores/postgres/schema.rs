//! The schema's version, checked where the statements run.
//!
//! Start-up checks the version, but a database that cannot be reached then is not checked
//! there, and a process that keeps running (`serve`) outlives the version it checked: someone
//! may migrate the database to a newer postonce's schema under it. So the statements check too
//! ([`super::Database::with`]): the first one to reach the database asks for the version before
//! it runs, and so does every statement until a check has passed; a passed check holds for
//! [`RECHECK`], and a statement that fails because a table, column or function is not what it
//! expects (see [`undefined`]) drops it at once and asks again, so that the answer names the
//! version rather than the missing column.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a passed check holds before a statement checks again.
pub const RECHECK: Duration = Duration::from_secs(60);

/// Why the schema is not usable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    #[error("the database schema is at version {have}, this postonce needs version {want}: run `postonce db migrate` (with the same DATABASE_URL) first")]
    Behind { have: i32, want: i32 },
    #[error("the database schema is at version {have}, newer than this postonce knows ({want}): upgrade postonce")]
    Ahead { have: i32, want: i32 },
    #[error("{0}")]
    Unreachable(super::DbError),
}

/// `have` against the version this binary needs.
///
/// # Errors
/// Behind or ahead.
pub fn verdict(have: i32) -> Result<i32, SchemaError> {
    let want = super::versions::LATEST;
    if have < want {
        return Err(SchemaError::Behind { have, want });
    }
    if have > want {
        return Err(SchemaError::Ahead { have, want });
    }
    Ok(have)
}

/// The version the database is at, asked on `client` (0: never migrated).
///
/// # Errors
/// When the database cannot be asked.
pub(super) async fn version_on(
    client: &tokio_postgres::Client,
) -> Result<i32, tokio_postgres::Error> {
    match client
        .query_one("SELECT coalesce(max(version), 0) FROM postonce_schema", &[])
        .await
    {
        Ok(row) => row.try_get::<_, i32>(0),
        // 42P01: undefined_table (never migrated).
        Err(e) if e.code().is_some_and(|c| c.code() == "42P01") => Ok(0),
        Err(e) => Err(e),
    }
}

/// Whether a statement failed because the schema is not the one it was written for:
/// undefined table, column, function or object.
pub(super) fn undefined(code: Option<&str>) -> bool {
    matches!(code, Some("42P01" | "42703" | "42883" | "42704"))
}

/// When the last check passed.
#[derive(Debug, Default)]
pub(super) struct SchemaCheck {
    passed_at: Mutex<Option<Instant>>,
}

impl SchemaCheck {
    /// Whether the next statement must check first.
    pub(super) fn due(&self) -> bool {
        due(*self.lock(), Instant::now())
    }

    pub(super) fn passed(&self) {
        *self.lock() = Some(Instant::now());
    }

    pub(super) fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.passed_at.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn due(passed_at: Option<Instant>, now: Instant) -> bool {
    passed_at.is_none_or(|t| now.saturating_duration_since(t) >= RECHECK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_is_due_until_one_passed_and_again_after_recheck() {
        let now = Instant::now();
        assert!(due(None, now), "never passed: check");
        assert!(!due(Some(now), now), "just passed: go on");
        let later = now + RECHECK - Duration::from_millis(1);
        assert!(!due(Some(now), later));
        assert!(
            due(Some(now), now + RECHECK),
            "passed too long ago: check again"
        );
        let check = SchemaCheck::default();
        assert!(check.due());
        check.passed();
        assert!(!check.due());
        check.forget();
        assert!(
            check.due(),
            "a statement that met an undefined column asks again"
        );
    }

    #[test]
    fn versions_behind_and_ahead_name_both_and_what_to_do() {
        let want = super::super::versions::LATEST;
        assert_eq!(verdict(want).expect("the same"), want);
        let behind = verdict(want - 1).expect_err("behind").to_string();
        assert!(behind.contains("postonce db migrate"), "{behind}");
        let ahead = verdict(want + 1).expect_err("ahead").to_string();
        assert!(
            ahead.contains(&format!("version {}", want + 1))
                && ahead.contains(&format!("({want})"))
                && ahead.contains("upgrade postonce"),
            "{ahead}"
        );
    }
}

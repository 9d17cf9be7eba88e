//! PostgreSQL's doctor line: the connection, the schema version and the clock skew between
//! this host and the database (claims expire by the database's clock; the due times and
//! pacing use the host's).

use std::time::Duration;

use super::Database;
use crate::record::now_ms;

/// The line's name.
pub const NAME: &str = "PostgreSQL";

/// Checks `db`, each call bounded by `limit`.
///
/// # Errors
/// What failed, with the fix.
pub async fn check(db: &Database, limit: Duration) -> Result<String, String> {
    let version = match tokio::time::timeout(limit, db.check_schema()).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer within {limit:?}; check DATABASE_URL")),
    };
    let before = now_ms();
    let theirs = match tokio::time::timeout(limit, db.clock_ms()).await {
        Ok(Ok(ms)) => ms,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer within {limit:?}")),
    };
    let after = now_ms();
    let skew = theirs - (before + after) / 2;
    let detail = format!(
        "connected; schema version {version}; clock skew {skew} ms (database minus host, round trip {} ms)",
        after - before
    );
    if skew.abs() > 5_000 {
        return Err(format!(
            "{detail}: more than 5 s apart; run NTP (chrony or systemd-timesyncd) on both"
        ));
    }
    Ok(detail)
}

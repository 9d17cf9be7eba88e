//! The schema's versioned migrations, compiled into the binary. `postonce db migrate` applies
//! the missing ones, each in its own transaction, under an advisory lock so that two at once
//! are safe; start-up and the statements only check the version ([`super::schema`]). A
//! migration waits for a table's lock at most half the statement budget (`lock_timeout`), and
//! a schema newer than this binary's is refused, not taken for "nothing to do".

use std::time::Duration;

use super::database::MIGRATE_LOCK;
use super::{Database, DbError};

pub use super::versions::{LATEST, MIGRATIONS};

/// Why `postonce db migrate` did not migrate.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MigrateError {
    /// The database is at a version this binary does not know: nothing was done.
    #[error("the database schema is at version {have}, newer than this postonce knows ({want}): nothing was migrated; upgrade postonce")]
    Ahead { have: i32, want: i32 },
    /// The database refused or could not be reached; a migration that failed left nothing of
    /// itself behind.
    #[error("{0}")]
    Failed(DbError),
}

/// How long a migration waits for each lock it needs (a table another session holds: a long
/// transaction, a running postonce): half the statement budget, so that the statements that
/// queue behind the migration's lock request still answer within theirs.
fn lock_timeout(budget: Duration) -> Duration {
    (budget / 2).max(Duration::from_millis(100))
}

impl Database {
    /// Applies the missing migrations; returns what was done.
    ///
    /// # Errors
    /// A schema newer than this binary's (nothing done); the database refused or cannot be
    /// reached, or a lock was not granted within [`lock_timeout`] (a failed migration leaves
    /// nothing of itself behind: it runs in one transaction).
    pub async fn migrate(&self) -> Result<String, MigrateError> {
        let mut client = self
            .pool_client("migrate")
            .await
            .map_err(MigrateError::Failed)?;
        let locks = lock_timeout(self.budget);
        let run = async {
            // Migrations may take longer than one statement's budget, and so may waiting for a
            // concurrent migrate to finish; waiting for a table's lock may not (every statement
            // on that table would queue behind the migration meanwhile).
            client.batch_execute("SET statement_timeout = 0").await?;
            client
                .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
                .await?;
            let result = match client
                .batch_execute(&format!("SET lock_timeout = {}", locks.as_millis()))
                .await
            {
                Ok(()) => apply(&mut client).await,
                Err(e) => Err(Failed::Pg(e)),
            };
            let unlock = client
                .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
                .await;
            let reset = client
                .batch_execute("RESET statement_timeout; RESET lock_timeout")
                .await;
            let done = result?;
            unlock?;
            reset?;
            Ok(done)
        };
        run.await.map_err(|e: Failed| match e {
            Failed::Ahead { have } => MigrateError::Ahead { have, want: LATEST },
            Failed::Lock { version, name } => MigrateError::Failed(DbError::new(
                "migrate",
                format!(
                    "migration {version} ({name}) waited {} ms for a table another session holds (a long transaction, or a running postonce) and was not applied: run `postonce db migrate` again, or stop `postonce serve` and the sweeps first",
                    locks.as_millis()
                ),
                false,
            )),
            Failed::Pg(e) => MigrateError::Failed(DbError::from_pg("migrate", &e)),
        })
    }

    async fn pool_client(&self, what: &str) -> Result<deadpool_postgres::Object, DbError> {
        tokio::time::timeout(self.budget, self.pool.get())
            .await
            .map_err(|_| DbError::new(what, "no connection within the budget", false))?
            .map_err(|e| DbError::new(what, format!("no connection ({e})"), false))
    }
}

/// What stopped [`apply`].
enum Failed {
    Ahead {
        have: i32,
    },
    /// A lock not granted within the lock timeout (SQLSTATE 55P03), in this migration.
    Lock {
        version: i32,
        name: &'static str,
    },
    Pg(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

async fn apply(client: &mut deadpool_postgres::Object) -> Result<String, Failed> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS postonce_schema (
                version    integer     PRIMARY KEY,
                name       text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM postonce_schema", &[])
        .await?;
    let have: i32 = row.try_get(0)?;
    if have > LATEST {
        return Err(Failed::Ahead { have });
    }
    let mut applied = Vec::new();
    for (version, name, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > have) {
        let one = async {
            let tx = client.transaction().await?;
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO postonce_schema (version, name) VALUES ($1, $2)",
                &[version, name],
            )
            .await?;
            tx.commit().await
        };
        match one.await {
            Ok(()) => applied.push(format!("{version} ({name})")),
            // 55P03: lock_not_available (lock_timeout fired).
            Err(e) if e.code().is_some_and(|c| c.code() == "55P03") => {
                return Err(Failed::Lock {
                    version: *version,
                    name,
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(if applied.is_empty() {
        format!("schema already at version {have}: nothing to do")
    } else {
        format!(
            "schema migrated from version {have} to {LATEST}: applied {}",
            applied.join(", ")
        )
    })
}

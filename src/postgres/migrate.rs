//! The schema's versioned migrations, compiled into the binary. `postonce db migrate` applies
//! the missing ones, each in its own transaction, under an advisory lock so that two at once
//! are safe; start-up only checks the version ([`super::Database::check_schema`]).

use super::{Database, DbError, MIGRATE_LOCK};

/// Every migration, in order: (version, what it does, SQL). Add one by appending a line.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "records, drafts and the due index, captions, pacing, claims, secrets",
        include_str!("migrations/0001_init.sql"),
    ),
    (
        2,
        "a draft's started mark (a run that died counts as an attempt)",
        include_str!("migrations/0002_started.sql"),
    ),
];

/// The version this binary needs.
pub const LATEST: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

impl Database {
    /// Applies the missing migrations; returns what was done.
    ///
    /// # Errors
    /// When the database refuses or cannot be reached (a failed migration leaves nothing of
    /// itself behind: it runs in one transaction).
    pub async fn migrate(&self) -> Result<String, DbError> {
        let mut client = self.pool_client("migrate").await?;
        let run = async {
            // Migrations may take longer than one statement's budget, and so may waiting for a
            // concurrent migrate to finish.
            client.batch_execute("SET statement_timeout = 0").await?;
            client
                .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
                .await?;
            let result = apply(&mut client).await;
            let unlock = client
                .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
                .await;
            let reset = client.batch_execute("RESET statement_timeout").await;
            let done = result?;
            unlock?;
            reset?;
            Ok(done)
        };
        run.await
            .map_err(|e: tokio_postgres::Error| DbError::from_pg("migrate", &e))
    }

    async fn pool_client(&self, what: &str) -> Result<deadpool_postgres::Object, DbError> {
        tokio::time::timeout(self.budget, self.pool.get())
            .await
            .map_err(|_| DbError::new(what, "no connection within the budget", false))?
            .map_err(|e| DbError::new(what, format!("no connection ({e})"), false))
    }
}

async fn apply(client: &mut deadpool_postgres::Object) -> Result<String, tokio_postgres::Error> {
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
    let mut applied = Vec::new();
    for (version, name, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > have) {
        let tx = client.transaction().await?;
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO postonce_schema (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await?;
        tx.commit().await?;
        applied.push(format!("{version} ({name})"));
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

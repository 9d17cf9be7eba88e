//! `postonce db migrate`: the PostgreSQL schema (feature `postgres`).

use crate::config::Config;

use super::bad_input;

/// `postonce db migrate`.
#[cfg(feature = "postgres")]
pub(super) async fn db_migrate(config: &Config) -> i32 {
    let db = match config.stores.postgres.database() {
        Ok(Some(db)) => db,
        Ok(None) => {
            return bad_input(
                "DATABASE_URL is not set: name the PostgreSQL database to migrate (postgres://user:password@host:5432/database)",
            )
        }
        Err(e) => return bad_input(e),
    };
    match db.migrate().await {
        Ok(said) => {
            println!("{said}");
            0
        }
        // A schema newer than this binary's: the same answer (exit 2) as at start-up.
        Err(e @ crate::stores::postgres::migrate::MigrateError::Ahead { .. }) => {
            bad_input(format!("DATABASE_URL: {e}"))
        }
        Err(e) => {
            eprintln!("postonce: {e}");
            1
        }
    }
}

#[cfg(not(feature = "postgres"))]
pub(super) async fn db_migrate(_config: &Config) -> i32 {
    bad_input("this build has no PostgreSQL support: build it with `cargo build --release --features postgres`")
}

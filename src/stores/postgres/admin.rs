//! `postonce db migrate`: the PostgreSQL schema (feature `cli`; the store itself needs the
//! `postgres` feature, and a build without it says so).

use clap::Subcommand;

use crate::stores::StoreConfig;

/// PostgreSQL schema management (DATABASE_URL).
#[derive(Subcommand, Debug)]
pub enum DbAction {
    /// Apply the schema migrations this version needs (idempotent; safe to run twice at once).
    Migrate,
}

fn bad_input(message: impl std::fmt::Display) -> i32 {
    eprintln!("postonce: {message}");
    crate::EXIT_BAD_INPUT
}

/// Runs `db <action>`; returns the exit code.
#[cfg(feature = "postgres")]
pub async fn run(action: &DbAction, config: &StoreConfig) -> i32 {
    let DbAction::Migrate = action;
    let db = match config.postgres.database() {
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
        Err(e @ super::migrate::MigrateError::Ahead { .. }) => {
            bad_input(format!("DATABASE_URL: {e}"))
        }
        Err(e) => {
            eprintln!("postonce: {e}");
            1
        }
    }
}

/// Without the store, `db migrate` says how to build it.
#[cfg(not(feature = "postgres"))]
pub async fn run(action: &DbAction, _config: &StoreConfig) -> i32 {
    let DbAction::Migrate = action;
    bad_input("this build has no PostgreSQL support: build it with `cargo build --release --features postgres`")
}

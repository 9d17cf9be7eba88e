//! The stores' own commands on the command line (feature `cli`): each store folder offers its
//! commands in its `admin.rs`, and this enum is their one registry line each. They run with the
//! configuration alone, before anything else is opened (a table or a schema that does not
//! exist yet is what they make).

use clap::Subcommand;

use super::StoreConfig;
use super::{dynamodb, postgres};

/// A store's command.
#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// DynamoDB table management.
    Table {
        #[command(subcommand)]
        action: dynamodb::admin::TableAction,
    },
    /// PostgreSQL schema management (DATABASE_URL).
    Db {
        #[command(subcommand)]
        action: postgres::admin::DbAction,
    },
}

impl StoreCommand {
    /// Runs the command; returns the process exit code.
    pub async fn run(&self, config: &StoreConfig) -> i32 {
        match self {
            Self::Table { action } => dynamodb::admin::run(action, config).await,
            Self::Db { action } => postgres::admin::run(action, config).await,
        }
    }
}

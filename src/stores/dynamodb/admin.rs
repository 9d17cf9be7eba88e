//! `postonce table create`: the table's schema, made on a local server (feature `cli`).

use clap::Subcommand;

use super::DynamoStore;
use crate::stores::StoreConfig;

/// DynamoDB table management.
#[derive(Subcommand, Debug)]
pub enum TableAction {
    /// Create the table POSTONCE_TABLE with the expected schema (for local servers).
    Create,
}

/// Runs `table <action>`; returns the exit code.
pub async fn run(action: &TableAction, config: &StoreConfig) -> i32 {
    match action {
        TableAction::Create => {
            let Some(table) = &config.dynamodb.table else {
                eprintln!("postonce: POSTONCE_TABLE is not set: name the table to create (and AWS_ENDPOINT_URL_DYNAMODB for a local server)");
                return crate::EXIT_BAD_INPUT;
            };
            let store = DynamoStore::connect(config, table, false).await;
            match store.create_table().await {
                Ok(said) => {
                    println!("{said}");
                    0
                }
                Err(e) => {
                    eprintln!("postonce: {e}");
                    1
                }
            }
        }
    }
}

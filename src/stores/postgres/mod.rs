//! PostgreSQL: records, drafts, pacing and kept secrets ([`records`]), claims ([`claims`]),
//! the connection pool they share ([`Database`]), the schema's versioned migrations
//! ([`migrate`]), and its configuration ([`config`]: `DATABASE_URL`, the pool size, the
//! statement budget) and doctor check ([`doctor`]).
//!
//! The store itself needs the `postgres` feature; without it only the configuration is
//! compiled, which refuses `DATABASE_URL` with a clear message.

#[cfg(feature = "cli")]
pub mod admin;
#[cfg(feature = "postgres")]
pub mod claims;
pub mod config;
#[cfg(feature = "postgres")]
mod database;
#[cfg(feature = "postgres")]
pub mod doctor;
#[cfg(feature = "postgres")]
pub mod migrate;
#[cfg(feature = "postgres")]
mod pool;
#[cfg(feature = "postgres")]
pub mod records;
#[cfg(feature = "postgres")]
pub mod schema;
#[cfg(feature = "postgres")]
pub mod tls;
#[cfg(feature = "postgres")]
mod versions;

#[cfg(feature = "postgres")]
pub use database::{ConnectOptions, Database, DbError};
#[cfg(feature = "postgres")]
pub use schema::SchemaError;

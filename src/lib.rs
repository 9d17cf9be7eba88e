//! postonce: publish a draft's caption and cover image to each of its networks exactly once,
//! however many times it is triggered, and report what happened to its owner in Telegram.
//!
//! [`pipeline`] owns every rule; the ports ([`claim`], [`record`], [`networks`], [`notify`])
//! carry them out against real services ([`stores`] holds the claim and record stores);
//! [`triggers`] turn events into runs; [`lambda`], `serve` and `cli` are transports. README
//! ("How it decides") and RELIABILITY.md say why.
//!
//! Features: `cli` (the command line, `serve` and `preview` with it) and `mcp` (`postonce mcp`)
//! are in the default build and left out of the Lambda build, which runs neither
//! (`[package.metadata.lambda.build]` in Cargo.toml); a store's feature (Cargo.toml) adds
//! that store ([`stores`]).

pub mod app;
pub mod aws_http;
pub mod budget;
pub mod claim;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod covers;
pub mod credentials;
pub mod doctor;
pub mod image;
pub mod key;
pub mod lambda;
pub mod log_line;
pub mod networks;
pub mod notify;
pub mod outcome;
pub mod pipeline;
pub mod record;
pub mod secrets;
#[cfg(feature = "cli")]
pub mod serve;
pub mod startup;
pub mod stores;
pub mod tls;
pub mod triggers;
pub mod vars;

/// Exit code for bad input or configuration.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Nothing was posted; the same command may succeed later (the outcomes' `failed`, retryable).
pub const EXIT_RETRY: i32 = 4;

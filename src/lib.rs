//! postonce: publish a draft's caption and cover image to each of its networks exactly once,
//! however many times it is triggered, and report what happened to its owner in Telegram.
//!
//! [`pipeline`] owns every rule; the ports ([`claim`], [`record`], [`networks`], [`notify`])
//! carry them out against real services; [`triggers`] turn events into runs; [`lambda`],
//! [`serve`] and [`cli`] are transports. README ("How it decides") and RELIABILITY.md say why.

pub mod app;
pub mod budget;
pub mod claim;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod doctor;
pub mod image;
pub mod key;
pub mod lambda;
pub mod networks;
pub mod notify;
pub mod outcome;
pub mod pipeline;
pub mod record;
pub mod secrets;
pub mod serve;
pub mod startup;
pub mod stores;
pub mod triggers;
pub mod vars;

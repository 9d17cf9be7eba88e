//! postonce: publish a draft's caption and cover image to LinkedIn exactly once, however many
//! times it is triggered, and report what happened to its owner in Telegram.
//!
//! [`pipeline`] owns every rule; the ports ([`claim`], [`record`], [`publish`], [`notify`]) carry
//! them out against real services; [`triggers`] turn events into runs; [`lambda`], [`serve`] and
//! [`cli`] are transports. See DESIGN.md for the why.

pub mod adapters;
pub mod app;
pub mod budget;
pub mod claim;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod image;
pub mod key;
pub mod lambda;
// Phase 1 hook (branch `threads`): dropped when the registry lands.
pub mod networks {
    pub mod threads;
}
pub mod notify;
pub mod outcome;
pub mod pipeline;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod publish;
pub mod record;
pub mod secrets;
pub mod serve;
pub mod triggers;

//! Test support shared by the integration tests: real services, wire-format fakes, and an
//! environment that wires them to the library. Not every test binary uses every part.
#![allow(dead_code)]

pub mod bluesky;
pub mod chaos;
pub mod covers;
pub mod discord;
pub mod env;
pub mod facebook;
pub mod fake_counts;
pub mod images;
pub mod instagram;
pub mod linkedin;
pub mod mastodon;
pub mod meta;
pub mod moto;
pub mod nostr;
pub mod nostr_relay;
pub mod oauth;
pub mod pg_proxy;
pub mod received;
pub mod serve;
pub mod services;
pub mod telegram;
pub mod tg_channel;
pub mod threads;
pub mod x;

/// A router response's JSON, checked against the bytes `serve` and Lambda send: the value the
/// tests read (`body()`) must be what `to_bytes()` writes (the outcome is serialized straight
/// into bytes, not through the value).
pub fn answer(resp: &postonce::triggers::HttpResponse) -> serde_json::Value {
    let sent: serde_json::Value =
        serde_json::from_slice(&resp.to_bytes()).expect("the response's bytes are JSON");
    assert_eq!(sent, resp.body(), "the bytes sent differ from the body");
    sent
}

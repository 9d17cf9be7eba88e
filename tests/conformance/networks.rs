//! The networks the suite runs over, each through a small adapter onto its wire-format fake in
//! `tests/support/`, and the one list of them: [`NETWORKS`]. A new network joins the suite
//! by adding its fake to the environment and one line to that list.
//!
//! The adapters switch modes and count; they hold no expectation of their own except the two
//! per network: how it settles an ambiguous create ([`Ambiguous`], README "Targets", the table
//! of ambiguous answers) and whether its 429 names the time to come back.

use std::time::Duration;

use async_trait::async_trait;
use postonce::key::PostKey;
use postonce::networks::Network;

use crate::support::env::Env;
use crate::support::meta::{Dialect, MetaFake};
use crate::support::{
    bluesky, discord, facebook, instagram, linkedin, mastodon, nostr, tg_channel, threads, x,
};

/// A hang long enough that the 1.5 s budget of every network in the environment gives up
/// first, although the post was made.
pub const HANG: Duration = Duration::from_secs(3);

/// How a fake answers the create (publish) call of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Posts, and answers at once.
    Accept,
    /// Posts, then answers only after [`HANG`]: the run's budget gives up first, so the
    /// answer is lost although the post exists.
    LoseAnswer,
    /// 429 in the network's own format, naming a reset `reset_in` seconds ahead where the
    /// network names one; nothing is posted.
    RateLimited { reset_in: u64 },
    /// A 5xx in the network's own format; nothing is posted.
    ServerError,
    /// The credentials were revoked: every authenticated call is refused as the network
    /// refuses a dead token (401; Bluesky: sessions gone and the app password refused).
    Revoked,
}

/// What a network does with an ambiguous create (timeout or 5xx after the request was sent),
/// as README "Targets" states it for that network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ambiguous {
    /// The network offers a way to settle it (LinkedIn's duplicate answer, X's read-back,
    /// Mastodon's `Idempotency-Key`, Bluesky's record key): after the quiet period a run
    /// settles it with exactly one post, and asks no one.
    Settles,
    /// "at-most-once: `unknown` at once, never re-sent automatically; the owner confirms or
    /// posts anyway" (the Telegram channel: a bot cannot read what it sent).
    AsksTheOwner,
}

/// One network's fake, as the suite drives it.
#[async_trait]
pub trait ConformanceFake: Send + Sync {
    fn network(&self) -> Network;

    /// How the create call answers from now on ([`Create::Accept`] also undoes every other
    /// mode this adapter set, except a revoked Bluesky app password, which stays revoked).
    fn set_create(&self, env: &Env, mode: Create);

    /// `false`: the fake's own protection against a repeated create is off, so a second
    /// create would be a second post. `true`: as the real network has it. (A no-op where the
    /// network has none: the channel; Bluesky, whose record key is chosen per attempt.)
    fn set_duplicate_check(&self, env: &Env, on: bool);

    /// Posts at the fake that belong to `key`'s draft (every caption carries the key).
    fn posts_for(&self, env: &Env, key: &PostKey) -> usize {
        env.posts_on(key, self.network()).len()
    }

    /// Create (publish) requests that reached the fake.
    fn creates(&self, env: &Env) -> u64 {
        env.fake_totals(self.network()).0
    }

    /// Every request that reached the fake, of any kind.
    async fn requests(&self, env: &Env) -> u64;

    /// Requests a process configured for the network sends it at start-up, whatever it is
    /// asked to do (Mastodon reads the instance's limits once).
    fn startup_reads(&self) -> u64 {
        0
    }

    /// The start-up reads that reached the fake so far, from any process (counted apart from
    /// what a run sends: processes start beside a check).
    async fn startup_requests(&self, _env: &Env) -> u64 {
        0
    }

    /// The variables that give the network its credentials: without them it is a dry run.
    fn credentials(&self) -> &'static [&'static str];

    /// The first line of the create request as its dry run shows it: method and URL.
    fn shown_create(&self, env: &Env) -> String;

    /// The network's text limit, as a 400 names it.
    fn limit(&self) -> usize;

    /// A text one over the limit, counted the network's way.
    fn too_long(&self) -> String;

    /// Whether the network's 429 names when to come back.
    fn names_reset(&self) -> bool;

    /// README "Targets": how an ambiguous create is settled.
    fn ambiguous(&self) -> Ambiguous {
        Ambiguous::Settles
    }

    /// What the network makes for `key`'s draft before the create and then publishes
    /// (Threads' containers), counted at the fake; `None` where it makes nothing such. A draft
    /// of one attempt has exactly one: README "Targets", Threads' "never a second container while
    /// the first could still publish".
    fn staged(&self, _env: &Env, _key: &PostKey) -> Option<usize> {
        None
    }
}

/// A network of the list.
pub type Net = &'static dyn ConformanceFake;

/// Every network the suite runs over. A new network: its fake in the environment, one line
/// here.
pub static NETWORKS: &[Net] = &[
    &LinkedIn, &X, &Channel, &Mastodon, &Bluesky, &THREADS, &Discord, &INSTAGRAM, &Facebook, &Nostr,
];

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------

pub struct LinkedIn;

#[async_trait]
impl ConformanceFake for LinkedIn {
    fn network(&self) -> Network {
        Network::Linkedin
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use linkedin::Mode;
        let f = &env.linkedin;
        f.set_init_mode(Mode::Normal);
        f.set_upload_mode(Mode::Normal);
        match mode {
            Create::Accept => f.set_create_mode(Mode::Normal),
            Create::LoseAnswer => f.set_create_mode(Mode::AcceptThenHang(HANG)),
            // Daily quotas reset at midnight UTC; the answer names no time.
            Create::RateLimited { .. } => f.set_create_mode(Mode::Status(429)),
            Create::ServerError => f.set_create_mode(Mode::Status(500)),
            Create::Revoked => {
                f.set_init_mode(Mode::Status(401));
                f.set_upload_mode(Mode::Status(401));
                f.set_create_mode(Mode::Status(401));
            }
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        use linkedin::DuplicateCheck;
        env.linkedin.set_duplicate_check(if on {
            // A post takes a moment to become visible to the check; the window is unknown.
            DuplicateCheck::Racy {
                processing: Duration::from_millis(200),
                window: Some(Duration::from_secs(3600)),
            }
        } else {
            DuplicateCheck::Off
        });
    }

    async fn requests(&self, env: &Env) -> u64 {
        count(env.linkedin.total_requests().await)
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["LINKEDIN_ACCESS_TOKEN"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!("POST {}/rest/posts", env.linkedin.uri())
    }

    fn limit(&self) -> usize {
        3000
    }

    fn too_long(&self) -> String {
        "a".repeat(3001)
    }

    fn names_reset(&self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------

pub struct X;

#[async_trait]
impl ConformanceFake for X {
    fn network(&self) -> Network {
        Network::X
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use x::{Mode, Read};
        let f = env.x();
        f.set_upload_mode(Mode::Normal);
        f.set_read_mode(Read::Normal);
        match mode {
            Create::Accept => f.set_create_mode(Mode::Normal),
            Create::LoseAnswer => f.set_create_mode(Mode::AcceptThenHang(HANG)),
            Create::RateLimited { reset_in } => f.set_create_mode(Mode::RateLimited { reset_in }),
            Create::ServerError => f.set_create_mode(Mode::Status(503)),
            Create::Revoked => {
                f.set_upload_mode(Mode::Status(401));
                f.set_read_mode(Read::Status(401));
                f.set_create_mode(Mode::Status(401));
            }
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        use x::DuplicateCheck;
        env.x().set_duplicate_check(if on {
            DuplicateCheck::Racy {
                processing: Duration::from_millis(200),
                window: None,
            }
        } else {
            DuplicateCheck::Off
        });
    }

    async fn requests(&self, env: &Env) -> u64 {
        env.x().requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &[
            "X_API_KEY",
            "X_API_SECRET",
            "X_ACCESS_TOKEN",
            "X_ACCESS_TOKEN_SECRET",
        ]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!("POST {}/2/tweets", env.x().uri())
    }

    fn limit(&self) -> usize {
        280
    }

    fn too_long(&self) -> String {
        // 141 weighted 2 each: 282.
        "😀".repeat(141)
    }

    fn names_reset(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// The Telegram channel. Its fake shares the Bot API server with the owner's report chat;
/// a revoked token here refuses the channel's methods only, so the report still arrives
/// (with one real bot token for both, the report would fail too and go to the log).
pub struct Channel;

#[async_trait]
impl ConformanceFake for Channel {
    fn network(&self) -> Network {
        Network::Telegram
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use tg_channel::ChannelMode;
        env.channel().set_mode(match mode {
            Create::Accept => ChannelMode::Normal,
            Create::LoseAnswer => ChannelMode::AcceptThenHang(HANG),
            Create::RateLimited { reset_in } => ChannelMode::TooManyRequests {
                retry_after_s: reset_in,
            },
            Create::ServerError => ChannelMode::ServerError,
            Create::Revoked => ChannelMode::Revoked,
        });
    }

    fn set_duplicate_check(&self, _env: &Env, _on: bool) {
        // The Bot API has none: every sendPhoto is a new message.
    }

    async fn requests(&self, env: &Env) -> u64 {
        count(env.channel().total_requests().await)
    }

    fn credentials(&self) -> &'static [&'static str] {
        // The bot token and the chat stay: they carry the owner's reports.
        &["TELEGRAM_CHANNEL_ID"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!(
            "POST {}/bot<TELEGRAM_BOT_TOKEN>/sendPhoto",
            env.channel().uri()
        )
    }

    fn limit(&self) -> usize {
        1024
    }

    fn too_long(&self) -> String {
        // 513 emoji, 1,026 UTF-16 units.
        "😀".repeat(513)
    }

    fn names_reset(&self) -> bool {
        true
    }

    fn ambiguous(&self) -> Ambiguous {
        Ambiguous::AsksTheOwner
    }
}

// ---------------------------------------------------------------------------------------------

pub struct Mastodon;

#[async_trait]
impl ConformanceFake for Mastodon {
    fn network(&self) -> Network {
        Network::Mastodon
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use mastodon::Mode;
        let f = env.mastodon();
        f.set_upload_mode(Mode::Normal);
        match mode {
            Create::Accept => f.set_create_mode(Mode::Normal),
            Create::LoseAnswer => f.set_create_mode(Mode::AcceptThenHang(HANG)),
            Create::RateLimited { reset_in } => f.set_create_mode(Mode::RateLimited { reset_in }),
            Create::ServerError => f.set_create_mode(Mode::Status(500)),
            Create::Revoked => {
                f.set_upload_mode(Mode::Status(401));
                f.set_create_mode(Mode::Status(401));
            }
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        // Off: a server that ignores Idempotency-Key (GoToSocial).
        env.mastodon().set_idempotency_keys(on);
    }

    async fn requests(&self, env: &Env) -> u64 {
        env.mastodon().requests()
    }

    fn startup_reads(&self) -> u64 {
        // GET /api/v2/instance: `configuration.statuses.max_characters`, read per instance.
        1
    }

    async fn startup_requests(&self, env: &Env) -> u64 {
        env.mastodon().instance_requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["MASTODON_ACCESS_TOKEN"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!("POST {}/api/v1/statuses", env.mastodon().uri())
    }

    fn limit(&self) -> usize {
        mastodon::MAX_CHARACTERS
    }

    fn too_long(&self) -> String {
        "m".repeat(mastodon::MAX_CHARACTERS + 1)
    }

    fn names_reset(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------------------------------------

pub struct Bluesky;

#[async_trait]
impl ConformanceFake for Bluesky {
    fn network(&self) -> Network {
        Network::Bluesky
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use bluesky::Mode;
        let f = env.bluesky();
        match mode {
            Create::Accept => f.set_put_mode(Mode::Normal),
            Create::LoseAnswer => f.set_put_mode(Mode::AcceptThenHang(HANG)),
            Create::RateLimited { reset_in } => f.set_put_mode(Mode::RateLimited { reset_in }),
            Create::ServerError => f.set_put_mode(Mode::Status(502)),
            Create::Revoked => f.revoke_app_password(),
        }
    }

    fn set_duplicate_check(&self, _env: &Env, _on: bool) {
        // None to turn off: each attempt chooses its own record key, so a second run's put
        // would be a second post.
    }

    async fn requests(&self, env: &Env) -> u64 {
        env.bluesky().requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["BLUESKY_IDENTIFIER", "BLUESKY_APP_PASSWORD"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!(
            "POST {}/xrpc/com.atproto.repo.putRecord",
            env.bluesky().uri()
        )
    }

    fn limit(&self) -> usize {
        300
    }

    fn too_long(&self) -> String {
        // 301 graphemes in 602 characters: an `e` with a combining accent is one.
        "e\u{301}".repeat(301)
    }

    fn names_reset(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// Threads and Instagram: the create is the publish of the container the intent keeps (the
/// container is made before the intent, by the stage). The fake fetches the draft's image
/// itself, from the environment's image host, which `POSTONCE_IMAGE_HOSTS` allows. One adapter
/// for both, as one fake speaks both (`support/meta.rs`).
pub struct Graph<D: Dialect> {
    network: Network,
    fake: fn(&Env) -> &MetaFake<D>,
    credentials: &'static [&'static str],
    limit: usize,
    too_long: fn() -> String,
}

pub static THREADS: Graph<threads::Threads> = Graph {
    network: Network::Threads,
    fake: Env::threads,
    credentials: &["THREADS_ACCESS_TOKEN"],
    limit: threads::MAX_TEXT,
    // 501 when an emoji counts its UTF-8 bytes (Meta's words), 126 as characters: one over on
    // the safe reading only.
    too_long: || format!("{}a", "😀".repeat(125)),
};

pub static INSTAGRAM: Graph<instagram::Instagram> = Graph {
    network: Network::Instagram,
    fake: Env::instagram,
    credentials: &["INSTAGRAM_ACCESS_TOKEN"],
    limit: instagram::MAX_TEXT,
    // 2,201 UTF-16 units, 1,101 characters: one over on the larger reading only.
    too_long: || format!("{}a", "😀".repeat(1100)),
};

#[async_trait]
impl<D: Dialect> ConformanceFake for Graph<D> {
    fn network(&self) -> Network {
        self.network
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use crate::support::meta::Mode;
        let f = (self.fake)(env);
        f.set_container_mode(Mode::Normal);
        f.set_read_mode(Mode::Normal);
        f.set_revoked(false);
        match mode {
            Create::Accept => f.set_publish_mode(Mode::Normal),
            Create::LoseAnswer => f.set_publish_mode(Mode::AcceptThenHang(HANG)),
            // HTTP 429 with Graph code 613; Meta names no time to come back.
            Create::RateLimited { .. } => f.set_publish_mode(Mode::TooMany),
            // Graph code 2, `is_transient`.
            Create::ServerError => f.set_publish_mode(Mode::Status(500)),
            // Every call answers code 190 (subcode 460: the session was invalidated).
            Create::Revoked => f.set_revoked(true),
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        // Neither network has a duplicate check: two containers made from one draft both
        // publish. Off, even the container's own "at most once" goes: a published container
        // publishes again, so only postonce stands between a draft and a second post.
        (self.fake)(env).set_republish(!on);
    }

    async fn requests(&self, env: &Env) -> u64 {
        (self.fake)(env).requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        self.credentials
    }

    fn shown_create(&self, env: &Env) -> String {
        // The container, which carries the text (the publish carries only its id).
        let d = D::DIALECT;
        format!(
            "POST {}/{}/me/{}",
            (self.fake)(env).uri(),
            d.version,
            d.container
        )
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn too_long(&self) -> String {
        (self.too_long)()
    }

    fn names_reset(&self) -> bool {
        false
    }

    fn staged(&self, env: &Env, key: &PostKey) -> Option<usize> {
        let made = (self.fake)(env)
            .containers()
            .into_iter()
            .filter(|c| c.text.contains(key.slug()))
            .count();
        Some(made)
    }
}

// ---------------------------------------------------------------------------------------------

/// Discord: a bot posting to a channel, the create carrying the cover as `files[0]`. Its
/// protection against a repeated create is the message nonce (`enforce_nonce`), which the
/// fake remembers for a few minutes; off, every create is a new message.
pub struct Discord;

#[async_trait]
impl ConformanceFake for Discord {
    fn network(&self) -> Network {
        Network::Discord
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use discord::Mode;
        let f = env.discord();
        f.set_revoked(false);
        match mode {
            Create::Accept => f.set_create_mode(Mode::Normal),
            Create::LoseAnswer => f.set_create_mode(Mode::AcceptThenHang(HANG)),
            Create::RateLimited { reset_in } => f.set_create_mode(Mode::RateLimited { reset_in }),
            // "502 gateway unavailable, retry": nothing made.
            Create::ServerError => f.set_create_mode(Mode::Status(502)),
            Create::Revoked => f.set_revoked(true),
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        env.discord().set_nonce_check(on);
    }

    async fn requests(&self, env: &Env) -> u64 {
        env.discord().requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["DISCORD_BOT_TOKEN"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!(
            "POST {}/channels/{}/messages",
            env.discord().api_url(),
            discord::CHANNEL_ID
        )
    }

    fn limit(&self) -> usize {
        2000
    }

    fn too_long(&self) -> String {
        // 2,001 UTF-16 units in 1,001 characters: one over on the safe reading (Discord does
        // not say how it counts).
        format!("{}a", "😀".repeat(1000))
    }

    fn names_reset(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// A Facebook Page: no idempotency key; a repeat of the Page's latest caption is refused 506
/// without its id (the check off: the Page takes every post); settled by reading the Page back.
pub struct Facebook;

#[async_trait]
impl ConformanceFake for Facebook {
    fn network(&self) -> Network {
        Network::Facebook
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use facebook::Mode;
        let f = env.facebook();
        f.set_revoked(false);
        match mode {
            Create::Accept => f.set_create_mode(Mode::Normal),
            Create::LoseAnswer => f.set_create_mode(Mode::AcceptThenHang(HANG)),
            // Code 32 names no time.
            Create::RateLimited { .. } => f.set_create_mode(Mode::RateLimited),
            Create::ServerError => f.set_create_mode(Mode::Status(500)),
            Create::Revoked => f.set_revoked(true),
        }
    }

    fn set_duplicate_check(&self, env: &Env, on: bool) {
        env.facebook().set_duplicate_check(on);
    }

    async fn requests(&self, env: &Env) -> u64 {
        env.facebook().requests()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["FACEBOOK_PAGE_TOKEN"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!(
            "POST {}/v25.0/{}/photos",
            env.facebook().uri(),
            facebook::PAGE_ID
        )
    }

    fn limit(&self) -> usize {
        // Facebook's own 63,206 is beyond postonce's input limit.
        3000
    }

    fn too_long(&self) -> String {
        "a".repeat(3001)
    }

    fn names_reset(&self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------

/// Nostr: a signed note sent to one relay (the fake), its cover on the Blossom fake. The event
/// id is the hash of the event, so its protection against a repeated create is the event
/// itself: the same event is stored once, and a different one (re-signed) would be a second
/// note. There is nothing to switch off. A 5xx's counterpart is a relay that drops the
/// connection on the event (nothing stored, nothing answered); a revoked token's is every
/// relay refusing the key (`restricted:`).
pub struct Nostr;

#[async_trait]
impl ConformanceFake for Nostr {
    fn network(&self) -> Network {
        Network::Nostr
    }

    fn set_create(&self, env: &Env, mode: Create) {
        use nostr::Mode;
        env.relay().set_mode(match mode {
            Create::Accept => Mode::Normal,
            Create::LoseAnswer => Mode::AcceptThenHang(HANG),
            Create::RateLimited { .. } => Mode::RateLimited,
            Create::ServerError => Mode::CloseWithoutAnswer,
            Create::Revoked => Mode::Restricted,
        });
    }

    fn set_duplicate_check(&self, _env: &Env, _on: bool) {}

    async fn requests(&self, env: &Env) -> u64 {
        env.relay().requests() + env.blossom().uploads()
    }

    fn credentials(&self) -> &'static [&'static str] {
        &["NOSTR_SECRET_KEY"]
    }

    fn shown_create(&self, env: &Env) -> String {
        format!("EVENT {}", env.relay().url())
    }

    fn limit(&self) -> usize {
        3000
    }

    fn too_long(&self) -> String {
        "a".repeat(3001)
    }

    fn names_reset(&self) -> bool {
        false
    }
}

//! A complete test environment: real Redis and DynamoDB Local (or the local store and
//! in-process claims), the LinkedIn, Telegram and image host fakes, and an [`App`] wired to them
//! through the same configuration variables a user sets. [`Env::with_targets`] adds the X fake
//! and the Telegram channel fake, for drafts that go to several networks (README "Targets");
//! [`Env::with_five_targets`] Mastodon and Bluesky too, [`Env::with_threads`] Threads alone,
//! [`Env::with_discord`] Discord alone, [`Env::with_instagram`] Instagram alone,
//! [`Env::with_facebook`] the Facebook Page alone, and
//! [`Env::with_every_network`] every network of the registry. Which fakes start and the
//! variables that point each network at its fake are written once, in `build_env`.

use std::collections::HashMap;
use std::sync::Arc;

use postonce::app::App;
use postonce::budget::Deadline;
use postonce::config::Config;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::Outcome;
use postonce::pipeline::{new_run_id, Action, PostRequest, Source};
use postonce::record::DraftContent;

use super::bluesky::BlueskyFake;
use super::discord::DiscordFake;
use super::facebook::FacebookFake;
use super::images::ImageHost;
use super::instagram::InstagramFake;
use super::linkedin::LinkedInFake;
use super::mastodon::MastodonFake;
use super::nostr::{BlossomFake, FakeRelay};
use super::services::{dynamodb_endpoint, unique, PostgresServer, RedisServer};
use super::telegram::TelegramFake;
use super::tg_channel::TgChannelFake;
use super::threads::ThreadsFake;
use super::x::XFake;

pub const LI_TOKEN: &str = "AQV-test-linkedin-token-SECRET1";
pub const TG_TOKEN: &str = "123456:tg-test-bot-token-SECRET2";
pub const TG_SECRET: &str = "tg-webhook-SECRET3";
pub const CI_SECRET: &str = "ci-hmac-webhook-SECRET4-0123456789";
pub const OWNER: i64 = 4242;
pub const CHAT: i64 = 777;
/// The channel [`Env::with_targets`] posts to: `TELEGRAM_CHANNEL_ID=@postonce_chan`.
pub const CHANNEL: &str = "postonce_chan";
/// The networks whose fakes an environment starts besides LinkedIn (always there, with the
/// owner's chat and the image host); `POSTONCE_TARGETS` is LinkedIn and these, in the
/// registry's order.
const LINKEDIN_ONLY: &[Network] = &[];
/// [`Env::with_targets`].
const THREE: &[Network] = &[Network::X, Network::Telegram];
/// [`Env::with_five_targets`].
const FIVE: &[Network] = &[
    Network::X,
    Network::Telegram,
    Network::Mastodon,
    Network::Bluesky,
];
/// [`Env::with_threads`].
const THREADS: &[Network] = &[Network::Threads];
/// [`Env::with_discord`].
const DISCORD: &[Network] = &[Network::Discord];
/// [`Env::with_instagram`].
const INSTAGRAM: &[Network] = &[Network::Instagram];
/// [`Env::with_facebook`].
const FACEBOOK: &[Network] = &[Network::Facebook];
/// [`Env::with_nostr`].
const NOSTR: &[Network] = &[Network::Nostr];
/// The Nostr key of every environment (hex; its npub is the test's author).
pub const NOSTR_KEY: &str = "5c0c523f52a5b6fad39ed2403092df8cebc36318b39383bca6c00808626fab3a";

/// Which stores back the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stores {
    /// redis-server and DynamoDB Local.
    Real,
    /// The local file store and in-process claims.
    Local,
    /// Only `DATABASE_URL`: a PostgreSQL server of the test's own (records and claims), migrated.
    Postgres,
}

pub struct Env {
    pub redis: Option<RedisServer>,
    pub postgres: Option<PostgresServer>,
    pub linkedin: LinkedInFake,
    pub images: ImageHost,
    pub telegram: TelegramFake,
    /// The X fake ([`Env::with_targets`], [`Env::with_five_targets`], [`Env::with_every_network`]).
    pub x: Option<XFake>,
    /// The Telegram channel fake, on the Telegram fake's server (as the X fake).
    pub channel: Option<TgChannelFake>,
    /// The Mastodon fake ([`Env::with_five_targets`], [`Env::with_every_network`]).
    pub mastodon: Option<MastodonFake>,
    /// The Bluesky PDS fake (as the Mastodon fake).
    pub bluesky: Option<BlueskyFake>,
    /// The Threads fake ([`Env::with_threads`], [`Env::with_every_network`]).
    pub threads: Option<ThreadsFake>,
    /// The Discord fake ([`Env::with_discord`], [`Env::with_every_network`]).
    pub discord: Option<DiscordFake>,
    /// The Nostr relay and Blossom fakes ([`Env::with_nostr`], [`Env::with_every_network`]).
    pub nostr: Option<(FakeRelay, BlossomFake)>,
    /// The Instagram fake ([`Env::with_instagram`], [`Env::with_every_network`]).
    pub instagram: Option<InstagramFake>,
    /// The Facebook Page fake ([`Env::with_facebook`], [`Env::with_every_network`]).
    pub facebook: Option<FacebookFake>,
    pub vars: HashMap<String, String>,
    pub app: Arc<App>,
    pub data_dir: Option<tempfile::TempDir>,
}

impl Env {
    pub async fn start() -> Self {
        Self::with(Stores::Real, &[]).await
    }

    pub async fn local() -> Self {
        Self::with(Stores::Local, &[]).await
    }

    /// An environment with `overrides` applied to the variables (an empty value removes one).
    pub async fn with(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, LINKEDIN_ONLY).await
    }

    /// An environment whose drafts go to three targets (`POSTONCE_TARGETS=linkedin,x,telegram`):
    /// LinkedIn, the X fake (`X_API_URL`, the four OAuth 1.0a variables with the fake's
    /// credentials; `POSTONCE_X_TIMEOUT_MS` is 1.5 s like LinkedIn's in every environment) and the Telegram channel
    /// fake `@postonce_chan` (`TELEGRAM_CHANNEL_ID`), which answers `sendPhoto` and `getChat`
    /// at the same `TELEGRAM_API_URL` and for the same bot token as the owner's reports.
    /// `overrides` are applied last (an empty value removes a variable).
    pub async fn with_targets(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, THREE).await
    }

    /// [`Env::with_targets`] plus Mastodon and Bluesky, all five as `POSTONCE_TARGETS`
    /// (`linkedin,x,telegram,mastodon,bluesky`): the Mastodon fake through `MASTODON_URL` and
    /// `MASTODON_ACCESS_TOKEN`, the Bluesky PDS fake through `BLUESKY_PDS_URL`,
    /// `BLUESKY_IDENTIFIER` (its handle) and `BLUESKY_APP_PASSWORD`; both budgets
    /// (`POSTONCE_MASTODON_TIMEOUT_MS`, `POSTONCE_BLUESKY_TIMEOUT_MS`) are 1.5 s like the
    /// others'. `overrides` are applied last (an empty value removes a variable).
    pub async fn with_five_targets(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, FIVE).await
    }

    /// LinkedIn and Threads (`POSTONCE_TARGETS=linkedin,threads`): the Threads fake through
    /// `THREADS_API_URL` and `THREADS_ACCESS_TOKEN` (`THREADS_USER_ID` left at `me`), its
    /// budget (`POSTONCE_THREADS_TIMEOUT_MS`) 1.5 s like the others'. The fake fetches the
    /// draft's image from the image host itself, as Threads does. `overrides` are applied last
    /// (an empty value removes a variable).
    pub async fn with_threads(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, THREADS).await
    }

    /// LinkedIn and Discord (`POSTONCE_TARGETS=linkedin,discord`): the Discord fake through
    /// `DISCORD_API_URL`, `DISCORD_BOT_TOKEN` and `DISCORD_CHANNEL_ID`, its budget
    /// (`POSTONCE_DISCORD_TIMEOUT_MS`) 1.5 s like the others'. `overrides` are applied last (an
    /// empty value removes a variable).
    pub async fn with_discord(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, DISCORD).await
    }

    /// LinkedIn and Instagram (`POSTONCE_TARGETS=linkedin,instagram`): the Instagram fake
    /// through `INSTAGRAM_API_URL` and `INSTAGRAM_ACCESS_TOKEN` (`INSTAGRAM_USER_ID` left at
    /// `me`), its budget 1.5 s like the others'. The fake fetches the draft's image itself.
    pub async fn with_instagram(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, INSTAGRAM).await
    }

    /// LinkedIn and the Facebook Page (`POSTONCE_TARGETS=linkedin,facebook`): the Facebook
    /// fake through `FACEBOOK_API_URL`, `FACEBOOK_PAGE_TOKEN` and `FACEBOOK_PAGE_ID`, its
    /// budget 1.5 s like the others'.
    pub async fn with_facebook(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, FACEBOOK).await
    }

    /// LinkedIn and Nostr (`POSTONCE_TARGETS=linkedin,nostr`): the fake relay through
    /// `NOSTR_RELAYS` (one relay), the Blossom fake through `NOSTR_BLOSSOM_URL`, the key
    /// [`NOSTR_KEY`], its budget 1.5 s like the others'.
    pub async fn with_nostr(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, NOSTR).await
    }

    /// Every network of the registry, each through its fake as [`Env::with_five_targets`],
    /// [`Env::with_threads`], [`Env::with_discord`] and [`Env::with_instagram`] wire them, all
    /// of them as `POSTONCE_TARGETS`. `overrides` are applied last (an
    /// empty value removes a variable).
    pub async fn with_every_network(stores: Stores, overrides: &[(&str, &str)]) -> Self {
        Self::build_env(stores, overrides, &Network::ALL).await
    }

    /// LinkedIn and `networks`, each through its fake as the constructors above wire them, all
    /// of them as `POSTONCE_TARGETS`. `overrides` are applied last.
    pub async fn with_networks(
        stores: Stores,
        overrides: &[(&str, &str)],
        networks: &[Network],
    ) -> Self {
        Self::build_env(stores, overrides, networks).await
    }

    async fn build_env(stores: Stores, overrides: &[(&str, &str)], fakes: &[Network]) -> Self {
        capture_logs();
        let linkedin = LinkedInFake::start(LI_TOKEN).await;
        let images = ImageHost::start().await;
        let telegram = TelegramFake::start(TG_TOKEN).await;
        let on = |n: Network| fakes.contains(&n);
        let x = if on(Network::X) {
            Some(XFake::start().await)
        } else {
            None
        };
        let channel = if on(Network::Telegram) {
            Some(TgChannelFake::mount_on(telegram.server(), TG_TOKEN, CHANNEL).await)
        } else {
            None
        };
        let mastodon = if on(Network::Mastodon) {
            Some(MastodonFake::start().await)
        } else {
            None
        };
        let bluesky = if on(Network::Bluesky) {
            Some(BlueskyFake::start().await)
        } else {
            None
        };
        let threads = if on(Network::Threads) {
            Some(ThreadsFake::start().await)
        } else {
            None
        };
        let discord = if on(Network::Discord) {
            Some(DiscordFake::start().await)
        } else {
            None
        };
        let instagram = if on(Network::Instagram) {
            Some(InstagramFake::start().await)
        } else {
            None
        };
        let facebook = if on(Network::Facebook) {
            Some(FacebookFake::start().await)
        } else {
            None
        };
        let nostr = if on(Network::Nostr) {
            Some((FakeRelay::start().await, BlossomFake::start().await))
        } else {
            None
        };
        let targets: Vec<&str> = Network::ALL
            .into_iter()
            .filter(|&n| n == Network::Linkedin || on(n))
            .map(Network::as_str)
            .collect();
        let mut vars: HashMap<String, String> = [
            ("LINKEDIN_ACCESS_TOKEN", LI_TOKEN.to_owned()),
            ("LINKEDIN_AUTHOR", "urn:li:person:tester1".to_owned()),
            ("LINKEDIN_VERSION", "202610".to_owned()),
            ("LINKEDIN_API_URL", linkedin.uri()),
            ("TELEGRAM_BOT_TOKEN", TG_TOKEN.to_owned()),
            ("TELEGRAM_CHAT_ID", CHAT.to_string()),
            ("TELEGRAM_API_URL", telegram.uri()),
            ("TELEGRAM_WEBHOOK_SECRET", TG_SECRET.to_owned()),
            ("TELEGRAM_ALLOWED_USERS", format!("{OWNER},99")),
            ("POSTONCE_WEBHOOK_SECRET", CI_SECRET.to_owned()),
            ("POSTONCE_IMAGE_HOSTS", images.uri()),
            ("POSTONCE_FUNCTION_TIMEOUT_S", "20".to_owned()),
            ("POSTONCE_CLAIM_TTL_S", "40".to_owned()),
            ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1500".to_owned()),
            ("POSTONCE_IMAGE_TIMEOUT_MS", "1500".to_owned()),
            ("POSTONCE_REDIS_TIMEOUT_MS", "1000".to_owned()),
            ("POSTONCE_DYNAMODB_TIMEOUT_MS", "2000".to_owned()),
            ("POSTONCE_TELEGRAM_TIMEOUT_MS", "1500".to_owned()),
            ("POSTONCE_X_TIMEOUT_MS", "1500".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if !fakes.is_empty() {
            vars.insert("POSTONCE_TARGETS".into(), targets.join(","));
        }
        // Each network's own variables, pointing at its fake (budgets 1.5 s like LinkedIn's).
        let mut set = |pairs: &[(&str, String)]| {
            for (k, v) in pairs {
                vars.insert((*k).to_owned(), v.clone());
            }
        };
        if let Some(x) = &x {
            use super::x::{ACCESS_TOKEN, ACCESS_TOKEN_SECRET, CONSUMER_KEY, CONSUMER_SECRET};
            set(&[
                ("X_API_KEY", CONSUMER_KEY.to_owned()),
                ("X_API_SECRET", CONSUMER_SECRET.to_owned()),
                ("X_ACCESS_TOKEN", ACCESS_TOKEN.to_owned()),
                ("X_ACCESS_TOKEN_SECRET", ACCESS_TOKEN_SECRET.to_owned()),
                ("X_API_URL", x.uri()),
            ]);
        }
        if channel.is_some() {
            set(&[("TELEGRAM_CHANNEL_ID", format!("@{CHANNEL}"))]);
        }
        if let Some(m) = &mastodon {
            set(&[
                ("MASTODON_URL", m.uri()),
                ("MASTODON_ACCESS_TOKEN", super::mastodon::TOKEN.to_owned()),
                ("POSTONCE_MASTODON_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some(b) = &bluesky {
            set(&[
                ("BLUESKY_PDS_URL", b.uri()),
                ("BLUESKY_IDENTIFIER", super::bluesky::HANDLE.to_owned()),
                (
                    "BLUESKY_APP_PASSWORD",
                    super::bluesky::APP_PASSWORD.to_owned(),
                ),
                ("POSTONCE_BLUESKY_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some(t) = &threads {
            set(&[
                ("THREADS_API_URL", t.uri()),
                ("THREADS_ACCESS_TOKEN", super::threads::TOKEN.to_owned()),
                ("POSTONCE_THREADS_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some(d) = &discord {
            set(&[
                ("DISCORD_API_URL", d.api_url()),
                ("DISCORD_BOT_TOKEN", super::discord::TOKEN.to_owned()),
                ("DISCORD_CHANNEL_ID", super::discord::CHANNEL_ID.to_owned()),
                ("POSTONCE_DISCORD_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some(i) = &instagram {
            set(&[
                ("INSTAGRAM_API_URL", i.uri()),
                ("INSTAGRAM_ACCESS_TOKEN", super::instagram::TOKEN.to_owned()),
                ("POSTONCE_INSTAGRAM_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some(f) = &facebook {
            set(&[
                ("FACEBOOK_API_URL", f.uri()),
                ("FACEBOOK_PAGE_TOKEN", super::facebook::TOKEN.to_owned()),
                ("FACEBOOK_PAGE_ID", super::facebook::PAGE_ID.to_owned()),
                ("POSTONCE_FACEBOOK_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        if let Some((relay, blossom)) = &nostr {
            set(&[
                ("NOSTR_SECRET_KEY", NOSTR_KEY.to_owned()),
                ("NOSTR_RELAYS", relay.url()),
                ("NOSTR_BLOSSOM_URL", blossom.uri()),
                ("POSTONCE_NOSTR_TIMEOUT_MS", "1500".to_owned()),
            ]);
        }
        let mut redis = None;
        let mut postgres = None;
        let mut data_dir = None;
        match stores {
            Stores::Real => {
                let r = RedisServer::start();
                vars.insert("REDIS_URL".into(), r.url());
                redis = Some(r);
                vars.insert("POSTONCE_TABLE".into(), unique("postonce-test-"));
                vars.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), dynamodb_endpoint());
                vars.insert("AWS_REGION".into(), "us-east-1".into());
                vars.insert("AWS_ACCESS_KEY_ID".into(), "test".into());
                vars.insert("AWS_SECRET_ACCESS_KEY".into(), "test".into());
            }
            Stores::Local => {
                let dir = tempfile::tempdir().expect("temp dir");
                vars.insert("POSTONCE_DATA_DIR".into(), dir.path().display().to_string());
                data_dir = Some(dir);
            }
            Stores::Postgres => {
                let pg = PostgresServer::start();
                vars.insert("DATABASE_URL".into(), pg.url());
                vars.insert("POSTONCE_DATABASE_TIMEOUT_MS".into(), "2000".into());
                // Nothing durable may land here: a folder that does not exist and cannot be made.
                vars.insert(
                    "POSTONCE_DATA_DIR".into(),
                    "/proc/postonce-nothing-durable-here".into(),
                );
                migrate(&pg.url()).await;
                postgres = Some(pg);
            }
        }
        apply(&mut vars, overrides);
        let app = Arc::new(build(&vars).await);
        if let Some(dynamo) = &app.stores.dynamo {
            dynamo
                .create_table()
                .await
                .expect("create the test table in DynamoDB Local");
        }
        Self {
            redis,
            postgres,
            linkedin,
            images,
            telegram,
            x,
            channel,
            mastodon,
            bluesky,
            threads,
            discord,
            nostr,
            instagram,
            facebook,
            vars,
            app,
            data_dir,
        }
    }

    /// The X fake of an environment from [`Env::with_targets`].
    pub fn x(&self) -> &XFake {
        self.x
            .as_ref()
            .expect("an environment from Env::with_targets has the X fake")
    }

    /// The Telegram channel fake of an environment from [`Env::with_targets`].
    pub fn channel(&self) -> &TgChannelFake {
        self.channel
            .as_ref()
            .expect("an environment from Env::with_targets has the channel fake")
    }

    /// The Mastodon fake of an environment from [`Env::with_five_targets`].
    pub fn mastodon(&self) -> &MastodonFake {
        self.mastodon
            .as_ref()
            .expect("an environment from Env::with_five_targets has the Mastodon fake")
    }

    /// The Bluesky PDS fake of an environment from [`Env::with_five_targets`].
    pub fn bluesky(&self) -> &BlueskyFake {
        self.bluesky
            .as_ref()
            .expect("an environment from Env::with_five_targets has the Bluesky fake")
    }

    /// The Threads fake of an environment from [`Env::with_threads`].
    pub fn threads(&self) -> &ThreadsFake {
        self.threads
            .as_ref()
            .expect("an environment from Env::with_threads has the Threads fake")
    }

    /// The Nostr relay fake of an environment from [`Env::with_nostr`].
    pub fn relay(&self) -> &FakeRelay {
        &self
            .nostr
            .as_ref()
            .expect("an environment from Env::with_nostr has the Nostr fakes")
            .0
    }

    /// The Blossom fake of an environment from [`Env::with_nostr`].
    pub fn blossom(&self) -> &BlossomFake {
        &self
            .nostr
            .as_ref()
            .expect("an environment from Env::with_nostr has the Nostr fakes")
            .1
    }

    /// The Discord fake of an environment from [`Env::with_discord`].
    pub fn discord(&self) -> &DiscordFake {
        self.discord
            .as_ref()
            .expect("an environment from Env::with_discord has the Discord fake")
    }

    /// The Instagram fake of an environment from [`Env::with_instagram`].
    pub fn instagram(&self) -> &InstagramFake {
        self.instagram
            .as_ref()
            .expect("an environment from Env::with_instagram has the Instagram fake")
    }

    /// The Facebook Page fake of an environment from [`Env::with_facebook`].
    pub fn facebook(&self) -> &FacebookFake {
        self.facebook
            .as_ref()
            .expect("an environment from Env::with_facebook has the Facebook fake")
    }

    /// An App over the same stores and fakes with `overrides` applied to this environment's
    /// variables (an empty value removes one): another process configured differently.
    pub async fn app_with(&self, overrides: &[(&str, &str)]) -> Arc<App> {
        let mut vars = self.vars.clone();
        apply(&mut vars, overrides);
        Arc::new(build(&vars).await)
    }

    /// Another process's worth of clients over the same services (a second Lambda sandbox).
    pub async fn another_app(&self) -> Arc<App> {
        Arc::new(build(&self.vars).await)
    }

    pub fn redis(&self) -> &RedisServer {
        self.redis
            .as_ref()
            .expect("this environment has a redis-server")
    }

    pub fn key(&self) -> PostKey {
        PostKey::new("blog", &unique("post-")).expect("valid key")
    }

    /// A plain DynamoDB client on this environment's DynamoDB Local, for writing or removing
    /// items behind postonce's back (an expired draft, a bulk of old drafts).
    #[allow(dead_code)]
    pub fn dynamo_client(&self) -> aws_sdk_dynamodb::Client {
        use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .http_client(postonce::aws_http::client())
                .region(Region::new("us-east-1"))
                .endpoint_url(self.vars["AWS_ENDPOINT_URL_DYNAMODB"].clone())
                .credentials_provider(Credentials::new("test", "test", None, None, "test"))
                .build(),
        )
    }

    pub fn content(&self, caption: &str) -> DraftContent {
        DraftContent {
            caption: caption.to_owned(),
            image: self.images.url("/cover.png"),
            link: None,
            alt: Some("A gradient".into()),
            ..Default::default()
        }
    }

    /// A draft the way CI sends one in real use: a caption with hashtags, some little-text
    /// reserved characters and the key's own title, and a link with a tracking parameter. Each
    /// key gets its own text (the content guard refuses one caption under two keys), and every
    /// commentary carries the key's slug, so posts can be counted per key at the fake
    /// ([`super::linkedin::LinkedInFake::posts_containing`]).
    pub fn announcement(&self, key: &PostKey) -> DraftContent {
        let (caption, link) = announcement(key);
        DraftContent {
            caption,
            image: self.images.url("/cover.png"),
            link: Some(link),
            alt: Some("Cover: a gradient with the post's title".into()),
            ..Default::default()
        }
    }

    /// How long the pipeline leaves an ambiguous attempt alone (`POSTONCE_RECONCILE_AFTER_S`).
    pub fn quiet_period(&self) -> std::time::Duration {
        self.app.config.reconcile_after
    }

    /// Waits until `key`'s pending attempt is at least `age` old as the pipeline measures it
    /// (whole seconds since the intent was written), so that a run may reconcile it (`age` =
    /// the quiet period) or must ask the owner (`age` = past the window). Panics if the draft
    /// has no pending attempt.
    pub async fn wait_until_attempt_is(&self, key: &PostKey, age: std::time::Duration) {
        let at = self
            .status(key)
            .await
            .snapshot
            .draft
            .and_then(|d| d.pending)
            .map(|p| p.at)
            .unwrap_or_else(|| panic!("{key} has no pending attempt to wait for"));
        let age = i64::try_from(age.as_secs()).expect("age in seconds");
        while postonce::record::now_s() - at < age {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Waits out `key`'s quiet period: from now on a run may re-send its pending attempt. (The
    /// pipeline counts whole seconds and re-sends only once the age *exceeds* the period.)
    pub async fn wait_out_quiet_period(&self, key: &PostKey) {
        self.wait_until_attempt_is(key, self.quiet_period() + std::time::Duration::from_secs(1))
            .await;
    }

    /// A run of `key` for `targets` only (`retry:<key>@x`, `targets` in the CI body).
    pub fn request_to(
        &self,
        key: &PostKey,
        content: Option<DraftContent>,
        targets: &[postonce::networks::Network],
    ) -> PostRequest {
        PostRequest {
            targets: targets.to_vec(),
            ..self.request(key, content)
        }
    }

    pub fn request(&self, key: &PostKey, content: Option<DraftContent>) -> PostRequest {
        PostRequest {
            key: key.clone(),
            content,
            action: Action::Post,
            source: Source::Cli,
            run_id: new_run_id(),
            reply_to: None,
            targets: Vec::new(),
            publish_at: None,
        }
    }

    pub fn deadline(&self) -> Deadline {
        Deadline::after(self.app.config.function_timeout)
    }

    /// One sweep, within a run's deadline.
    pub async fn sweep(&self) -> postonce::pipeline::SweepReport {
        self.app
            .pipeline
            .sweep(&self.deadline())
            .await
            .expect("sweep")
    }

    /// One run with a fresh draft for `key`.
    pub async fn post(&self, key: &PostKey, caption: &str) -> Outcome {
        let req = self.request(key, Some(self.content(caption)));
        self.app.pipeline.run(req, self.deadline()).await
    }

    /// One run with a fresh draft whose cover image is `image`.
    pub async fn post_image(&self, key: &PostKey, caption: &str, image: &str) -> Outcome {
        let mut content = self.content(caption);
        content.image = image.to_owned();
        self.app
            .pipeline
            .run(self.request(key, Some(content)), self.deadline())
            .await
    }

    /// One run with create-post answering in `mode`; the fake is back to normal afterwards.
    pub async fn post_under(
        &self,
        mode: super::linkedin::Mode,
        key: &PostKey,
        caption: &str,
    ) -> Outcome {
        self.linkedin.set_create_mode(mode);
        let outcome = self.post(key, caption).await;
        self.linkedin.set_create_mode(super::linkedin::Mode::Normal);
        outcome
    }

    /// One run of the stored draft (a Retry).
    pub async fn retry(&self, key: &PostKey) -> Outcome {
        self.app
            .pipeline
            .run(self.request(key, None), self.deadline())
            .await
    }

    /// The key's status as stored. A read that meets the store's budget (a machine loaded by
    /// other builds) is read again: it is the test's check, not the behaviour under test.
    pub async fn status(&self, key: &PostKey) -> postonce::pipeline::Status {
        let mut tries = 0;
        loop {
            match self.app.pipeline.status(key, &self.deadline()).await {
                Ok(status) => return status,
                Err(e) if tries < 4 => {
                    tries += 1;
                    eprintln!("status of {key} not read ({e}); reading again");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(e) => panic!("status readable: {e:?}"),
            }
        }
    }
}

/// The caption and link of a real-use draft for `key` (see [`Env::announcement`]).
pub fn announcement(key: &PostKey) -> (String, String) {
    let title = key.slug().replace('-', " ");
    let caption = format!(
        "New on the blog: \"{title}\" (notes from shipping it, part 2) #rust #serverless\n\nWhat broke, what held, and the one thing we'd do again -> {key}"
    );
    let link = format!(
        "https://blog.example.com/{}/{}?utm_source=ci&utm_medium=linkedin",
        key.kind(),
        key.slug()
    );
    (caption, link)
}

/// The CI route's signature of `body` under the environments' `POSTONCE_WEBHOOK_SECRET`
/// (GitHub's `X-Hub-Signature-256`: `sha256=<hex HMAC-SHA256>`).
pub fn sign(body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(CI_SECRET.as_bytes()).expect("key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Sends every test process's logs to `target/tmp/postonce-test-logs/`, where scripts/test.sh
/// searches them for the test secrets after the suite (the whole suite runs with recognisable
/// secret values).
pub fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("postonce-test-logs");
        let _ = std::fs::create_dir_all(&dir);
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "test".into());
        let path = dir.join(format!("{exe}-{}.log", std::process::id()));
        // Appended to: a process id can come back within a run (a test is a process of its own).
        if let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new("info,postonce=trace"))
                .with_writer(std::sync::Mutex::new(file))
                .with_ansi(false)
                .try_init();
        }
    });
}

/// Applies `overrides` to `vars`; an empty value removes the variable.
fn apply(vars: &mut HashMap<String, String>, overrides: &[(&str, &str)]) {
    for (k, v) in overrides {
        if v.is_empty() {
            vars.remove(*k);
        } else {
            vars.insert((*k).to_owned(), (*v).to_owned());
        }
    }
}

/// `postonce db migrate` on `url`, as a user runs it before the first start.
pub async fn migrate(url: &str) {
    let db = postonce::stores::postgres::Database::new(
        &postonce::config::Secret::new(url),
        std::time::Duration::from_secs(20),
        1,
    )
    .expect("a valid DATABASE_URL");
    db.migrate().await.expect("db migrate");
}

pub async fn build(vars: &HashMap<String, String>) -> App {
    let config =
        Config::from_lookup(|k| vars.get(k).cloned()).expect("test configuration is valid");
    App::build(config).await.expect("app builds")
}

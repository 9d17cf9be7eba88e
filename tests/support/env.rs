//! A complete test environment: real Redis and DynamoDB Local (or the local store and
//! in-process claims), the LinkedIn, Telegram and image host fakes, and an [`App`] wired to them
//! through the same configuration variables a user sets.

use std::collections::HashMap;
use std::sync::Arc;

use postonce::app::App;
use postonce::budget::Deadline;
use postonce::config::Config;
use postonce::key::PostKey;
use postonce::outcome::Outcome;
use postonce::pipeline::{new_run_id, Action, PostRequest, Source};
use postonce::record::DraftContent;

use super::images::ImageHost;
use super::linkedin::LinkedInFake;
use super::services::{dynamodb_endpoint, unique, RedisServer};
use super::telegram::TelegramFake;

pub const LI_TOKEN: &str = "AQV-test-linkedin-token-SECRET1";
pub const TG_TOKEN: &str = "123456:tg-test-bot-token-SECRET2";
pub const TG_SECRET: &str = "tg-webhook-SECRET3";
pub const CI_SECRET: &str = "ci-hmac-webhook-SECRET4-0123456789";
pub const OWNER: i64 = 4242;
pub const CHAT: i64 = 777;

/// Which stores back the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stores {
    /// redis-server and DynamoDB Local.
    Real,
    /// The local file store and in-process claims.
    Local,
}

pub struct Env {
    pub redis: Option<RedisServer>,
    pub linkedin: LinkedInFake,
    pub images: ImageHost,
    pub telegram: TelegramFake,
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
        capture_logs();
        let linkedin = LinkedInFake::start(LI_TOKEN).await;
        let images = ImageHost::start().await;
        let telegram = TelegramFake::start(TG_TOKEN).await;
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
        let mut redis = None;
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
        }
        for (k, v) in overrides {
            if v.is_empty() {
                vars.remove(*k);
            } else {
                vars.insert((*k).to_owned(), (*v).to_owned());
            }
        }
        let app = Arc::new(build(&vars).await);
        if let Some(dynamo) = &app.dynamo {
            dynamo
                .create_table()
                .await
                .expect("create the test table in DynamoDB Local");
        }
        Self {
            redis,
            linkedin,
            images,
            telegram,
            vars,
            app,
            data_dir,
        }
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

    pub fn request(&self, key: &PostKey, content: Option<DraftContent>) -> PostRequest {
        PostRequest {
            key: key.clone(),
            content,
            action: Action::Post,
            source: Source::Cli,
            run_id: new_run_id(),
            reply_to: None,
            targets: Vec::new(),
        }
    }

    pub fn deadline(&self) -> Deadline {
        Deadline::after(self.app.config.function_timeout)
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

    pub async fn status(&self, key: &PostKey) -> postonce::pipeline::Status {
        self.app
            .pipeline
            .status(key, &self.deadline())
            .await
            .expect("status readable")
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
        if let Ok(file) = std::fs::File::create(path) {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new("info,postonce=trace"))
                .with_writer(std::sync::Mutex::new(file))
                .with_ansi(false)
                .try_init();
        }
    });
}

pub async fn build(vars: &HashMap<String, String>) -> App {
    let config =
        Config::from_lookup(|k| vars.get(k).cloned()).expect("test configuration is valid");
    App::build(config).await.expect("app builds")
}

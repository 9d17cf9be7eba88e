//! The command line: `post`, `preview`, `status`, `serve`, `sweep`, `schedule list`,
//! `table create`, `db migrate`, `doctor`, `telegram set-webhook`, `mcp`. Translation only;
//! exit codes follow the outcomes table (bad input: 2).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::app::App;
use crate::budget::Deadline;
use crate::config::Config;
use crate::key::PostKey;
use crate::networks::Network;
use crate::pipeline::{new_run_id, Action, PostRequest, Source};
use crate::record::DraftContent;
use crate::triggers::Router;

mod auth;
pub mod out_dir;
mod output;
mod preview;
use output::{print_outcome, print_waiting, schedule_list, status, status_all};

/// The one-line description: every network of the registry, by its label.
fn about() -> String {
    let labels: Vec<&str> = Network::ALL.iter().map(|n| n.label()).collect();
    let listed = match labels.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => labels.join(""),
    };
    format!("Publish a draft to {listed}, each exactly once, and report it in Telegram")
}

/// Exit code for bad input or configuration.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Nothing was posted; the same command may succeed later (the outcomes' `failed`, retryable).
pub const EXIT_RETRY: i32 = 4;

#[derive(Parser, Debug)]
#[command(
    name = "postonce",
    version,
    about = about()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log more: -v at info, -vv at debug (commands other than serve log only warnings and
    /// errors by default; RUST_LOG, when set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

/// The draft a command acts on, as `post` and `preview` take it: its key and, optionally, its
/// content (without --caption/--image, the stored draft).
#[derive(clap::Args, Debug)]
pub(super) struct DraftArgs {
    #[arg(long)]
    kind: String,
    #[arg(long)]
    slug: String,
    #[arg(long)]
    caption: Option<String>,
    /// An https URL, or a local JPEG/PNG/GIF/WebP file.
    #[arg(long)]
    image: Option<String>,
    #[arg(long)]
    link: Option<String>,
    #[arg(long)]
    alt: Option<String>,
    /// The networks, comma-separated (linkedin,x,telegram); default: the draft's, or
    /// POSTONCE_TARGETS.
    #[arg(long, value_delimiter = ',')]
    targets: Vec<String>,
    /// A caption for one network instead of --caption there: NETWORK=TEXT (repeatable).
    #[arg(long = "caption-for", value_name = "NETWORK=TEXT")]
    caption_for: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the pipeline once for a draft; without --caption/--image, post the stored draft.
    Post {
        #[command(flatten)]
        draft: DraftArgs,
        /// Publish at this time instead of now: RFC 3339 with a zone
        /// (2026-12-07T09:00:00+01:00); at most a year ahead. The sweeper posts it then.
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Print the outcome JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write what each target of a draft would get (its exact text and cover) and an
    /// index.html showing them side by side; sends nothing and stores nothing.
    Preview(preview::PreviewArgs),
    /// Scheduled drafts.
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// Show the record, draft and claim of a key as stored now; with --all, every draft that
    /// waits for a person.
    Status {
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        kind: Option<String>,
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        slug: Option<String>,
        /// List every draft that waits for a person (instead of one key).
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Serve POST /ci, POST /telegram and GET /healthz on a local port.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8787")]
        addr: SocketAddr,
    },
    /// Re-drive failed and stuck drafts once (what the scheduled sweeper does).
    Sweep {
        #[arg(long)]
        json: bool,
    },
    /// Check every part the configuration would use; exit 0 only when all pass.
    Doctor,
    /// Serve the Model Context Protocol over stdio (tools post, status, schedule_list, cancel,
    /// preview, doctor) for an agent; logs go to stderr.
    Mcp,
    /// Telegram bot set-up.
    Telegram {
        #[command(subcommand)]
        action: TelegramAction,
    },
    /// DynamoDB table management.
    Table {
        #[command(subcommand)]
        action: TableAction,
    },
    /// Sign in to a network and store its credential (`auth linkedin`), or show every
    /// credential's source, account and expiry (`auth status`).
    Auth(auth::AuthArgs),
    /// PostgreSQL schema management (DATABASE_URL).
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
}

#[derive(Subcommand, Debug)]
enum DbAction {
    /// Apply the schema migrations this version needs (idempotent; safe to run twice at once).
    Migrate,
}

#[derive(Subcommand, Debug)]
enum TelegramAction {
    /// Register the webhook (with TELEGRAM_WEBHOOK_SECRET, callback queries only).
    SetWebhook {
        /// The public https URL of the /telegram route.
        #[arg(long)]
        url: String,
    },
}

#[derive(Subcommand, Debug)]
enum ScheduleAction {
    /// List every scheduled draft: when, and for which targets.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum TableAction {
    /// Create the table POSTONCE_TABLE with the expected schema (for local servers).
    Create,
}

/// The log of a command. `serve` logs as it always has (info, every line). The other commands
/// answer a person: warnings and errors only, unless `-v` (info) / `-vv` (debug) or `RUST_LOG`
/// says otherwise; and the requests a dry run would send are printed as readable blocks
/// ([`DryRunBlocks`]), not as log lines.
fn init_logging(verbose: u8, serving: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};

    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let default = match (serving, verbose) {
        (true, _) | (false, 1) => "postonce=info,warn",
        (false, 0) => "warn",
        (false, _) => "postonce=debug,info",
    };
    let directives = from_env.as_deref().unwrap_or(default);
    let filter = if serving {
        EnvFilter::new(directives)
    } else {
        // The dry run's requests are shown by their own layer below.
        EnvFilter::new(format!("{directives},{}=off", crate::networks::show::SHOWN))
    };
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let blocks = (!serving).then(|| {
        DryRunBlocks.with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.target() == crate::networks::show::SHOWN
        }))
    });
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(blocks)
        .try_init();
}

/// Prints each request a dry run shows as a block on stderr: the method and URL, a header a
/// line, the body pretty-printed, a blank line after it.
struct DryRunBlocks;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for DryRunBlocks {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    value.clone_into(&mut self.0);
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        let block = m.0.strip_prefix("would send ").unwrap_or(&m.0);
        eprintln!("dry run, not sent: {block}\n");
    }
}

fn bad_input(message: impl std::fmt::Display) -> i32 {
    eprintln!("postonce: {message}");
    EXIT_BAD_INPUT
}

/// Runs the command line; returns the process exit code.
pub async fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
        }
    };
    init_logging(cli.verbose, matches!(cli.command, Command::Serve { .. }));
    if let Command::Auth(args) = cli.command {
        return match crate::startup::store_config().await {
            Ok(config) => auth::run(&config, args).await,
            Err(e) => bad_input(format!("configuration: {e}")),
        };
    }
    let mut config = match crate::startup::configured().await {
        Ok(c) => c,
        Err(e) => return bad_input(format!("configuration: {e}")),
    };
    if let Command::Db {
        action: DbAction::Migrate,
    } = &cli.command
    {
        return db_migrate(&config).await;
    }
    if let Some(why) = &config.credentials_unreadable {
        // Never a dry run in place of a network whose credential is stored (README "Getting
        // credentials"): the commands that post refuse, retryable.
        if matches!(
            cli.command,
            Command::Post { .. } | Command::Serve { .. } | Command::Sweep { .. } | Command::Mcp
        ) {
            eprintln!("postonce: {why}");
            return EXIT_RETRY;
        }
    }
    if matches!(cli.command, Command::Mcp) {
        // An agent's covers: only beneath POSTONCE_MCP_IMAGE_DIRS, at every read of the process.
        if let Err(e) = config.resolve_mcp_covers() {
            return bad_input(format!("configuration: {e}"));
        }
        config.local_covers = config.mcp_covers.clone();
    }
    if matches!(cli.command, Command::Serve { .. }) {
        // `serve` answers many requests at once: a larger pool than a CLI run's few.
        config.stores.postgres.pool = SERVE_DATABASE_POOL;
    }
    // Bad input is refused before any client is built or anything is stored.
    let post = match &cli.command {
        Command::Post { draft, at, .. } => match post_request(&config, draft, at) {
            Ok(req) => Some(req),
            Err(e) => return bad_input(e),
        },
        _ => None,
    };
    let preview = match &cli.command {
        Command::Preview(args) => match preview::check(&config, args) {
            Ok(checked) => Some(checked),
            Err(e) => return bad_input(e),
        },
        _ => None,
    };
    let status_key = match &cli.command {
        Command::Status {
            kind: Some(kind),
            slug: Some(slug),
            ..
        } => match PostKey::new(kind, slug) {
            Ok(key) => Some(key),
            Err(e) => return bad_input(e),
        },
        _ => None,
    };
    let app = match App::build(config).await {
        Ok(app) => Arc::new(app),
        Err(e) => return bad_input(e),
    };
    let dl = Deadline::after(app.config.function_timeout);
    match cli.command {
        Command::Post { json, .. } => {
            let Some(request) = post else {
                return EXIT_BAD_INPUT;
            };
            if let Some(content) = &request.content {
                let all = app.pipeline.targets_for(&request.targets);
                if let Err(e) = app.pipeline.check_text(content, &all) {
                    let flag = match e.field.strip_prefix("captions.") {
                        Some(n) => format!("--caption-for {n}="),
                        None if e.field == "targets" => "--targets".to_owned(),
                        None => "--caption".to_owned(),
                    };
                    return bad_input(format!("{flag}: {e}"));
                }
            }
            let outcome = app.pipeline.run(request, dl).await;
            print_outcome(&outcome, json);
            outcome.exit_code()
        }
        Command::Preview(args) => {
            let Some(checked) = preview else {
                return EXIT_BAD_INPUT;
            };
            preview::run(&app, checked, args.json, dl).await
        }
        Command::Status {
            all: true, json, ..
        } => {
            let code = status_all(&app, dl, json).await;
            if !json {
                auth::print_lapsing(&app.config).await;
            }
            code
        }
        Command::Status { json, .. } => {
            let Some(key) = status_key else {
                return EXIT_BAD_INPUT;
            };
            status(&app, &key, dl, json).await
        }
        Command::Serve { addr } => {
            match crate::serve::serve(Arc::new(Router::new(app)), addr).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("postonce: cannot serve on {addr}: {e}");
                    1
                }
            }
        }
        Command::Sweep { json } => match app.pipeline.sweep(&dl).await {
            Ok(report) => {
                if json {
                    println!("{}", serde_json::to_string(&report).unwrap_or_default());
                } else {
                    println!(
                        "examined {} drafts ({} due by schedule); ran {}; delayed by pacing {}; needs review {}; told {}; not delivered {}; left for later {}; waiting for you {}",
                        report.examined,
                        report.due,
                        report.runs.len(),
                        report.delayed.len(),
                        report.needs_review.len(),
                        report.reminded.len(),
                        report.undelivered.len(),
                        report.left_for_later,
                        report.waiting.len()
                    );
                    for o in &report.runs {
                        println!("  {} {}: {}", o.outcome.as_str(), o.key, o.detail);
                    }
                    for d in &report.delayed {
                        println!("  delayed {} until {}: {}", d.key, d.until, d.reason);
                    }
                    print_waiting(&report.waiting);
                }
                0
            }
            Err(e) => {
                eprintln!("postonce: sweep failed: {e}");
                4
            }
        },
        Command::Schedule {
            action: ScheduleAction::List { json },
        } => schedule_list(&app, dl, json).await,
        Command::Mcp => match crate::triggers::mcp::serve(app).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("postonce: {e}");
                1
            }
        },
        Command::Doctor => {
            let checks = crate::doctor::doctor(&app).await;
            for c in &checks {
                println!("{c}");
            }
            i32::from(!checks.iter().all(|c| c.ok))
        }
        Command::Telegram {
            action: TelegramAction::SetWebhook { url },
        } => match crate::doctor::set_webhook(&app, &url).await {
            Ok(info) => {
                println!("webhook set; getWebhookInfo: {info}");
                0
            }
            Err(e) => {
                eprintln!("postonce: {e}");
                1
            }
        },
        Command::Db { .. } => db_migrate(&app.config).await,
        Command::Auth(_) => EXIT_BAD_INPUT,
        Command::Table {
            action: TableAction::Create,
        } => {
            let Some(dynamo) = &app.stores.dynamo else {
                return bad_input("POSTONCE_TABLE is not set: name the table to create (and AWS_ENDPOINT_URL_DYNAMODB for a local server)");
            };
            match dynamo.create_table().await {
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

/// Connections `serve` may keep open to PostgreSQL.
const SERVE_DATABASE_POOL: usize = 16;

/// `postonce db migrate`.
#[cfg(feature = "postgres")]
async fn db_migrate(config: &Config) -> i32 {
    let db = match config.stores.postgres.database() {
        Ok(Some(db)) => db,
        Ok(None) => {
            return bad_input(
                "DATABASE_URL is not set: name the PostgreSQL database to migrate (postgres://user:password@host:5432/database)",
            )
        }
        Err(e) => return bad_input(e),
    };
    match db.migrate().await {
        Ok(said) => {
            println!("{said}");
            0
        }
        // A schema newer than this binary's: the same answer (exit 2) as at start-up.
        Err(e @ crate::stores::postgres::migrate::MigrateError::Ahead { .. }) => {
            bad_input(format!("DATABASE_URL: {e}"))
        }
        Err(e) => {
            eprintln!("postonce: {e}");
            1
        }
    }
}

#[cfg(not(feature = "postgres"))]
async fn db_migrate(_config: &Config) -> i32 {
    bad_input("this build has no PostgreSQL support: build it with `cargo build --release --features postgres`")
}

fn post_request(
    config: &Config,
    draft: &DraftArgs,
    at: &Option<String>,
) -> Result<PostRequest, String> {
    let DraftArgs {
        kind,
        slug,
        caption,
        image,
        link,
        alt,
        targets,
        caption_for,
    } = draft;
    let key = PostKey::new(kind, slug).map_err(|e| e.to_string())?;
    let publish_at = match at {
        Some(raw) => Some(
            crate::triggers::parse_publish_at(raw, crate::record::now_s(), "--at")
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    if publish_at.is_some() && (caption.is_none() || image.is_none()) {
        return Err("--at needs --caption and --image (the draft to schedule)".into());
    }
    let mut networks = Vec::new();
    for name in targets {
        let n = Network::parse(name.trim()).ok_or_else(|| {
            format!(
                "--targets: {name:?} is not a network: use {}",
                Network::names()
            )
        })?;
        if !networks.contains(&n) {
            networks.push(n);
        }
    }
    let mut captions = std::collections::BTreeMap::new();
    for pair in caption_for {
        let (name, text) = pair
            .split_once('=')
            .ok_or_else(|| format!("--caption-for {pair:?}: expected NETWORK=TEXT"))?;
        let n = Network::parse(name.trim()).ok_or_else(|| {
            format!(
                "--caption-for: {name:?} is not a network: use {}",
                Network::names()
            )
        })?;
        if text.trim().is_empty() {
            return Err(format!("--caption-for {name}=: the caption is empty"));
        }
        captions.insert(n, text.to_owned());
    }
    if !captions.is_empty() && caption.is_none() {
        return Err(
            "--caption-for needs --caption and --image (the caption for the other targets)".into(),
        );
    }
    let content = match (caption, image) {
        (None, None) => {
            if link.is_some() || alt.is_some() {
                return Err("--link and --alt need --caption and --image".into());
            }
            None
        }
        (Some(_), None) => {
            return Err("--caption needs --image (an https URL or a local file)".into())
        }
        (None, Some(_)) => return Err("--image needs --caption".into()),
        (Some(caption), Some(image)) => {
            if caption.trim().is_empty() {
                return Err("--caption is empty".into());
            }
            let image = if image.starts_with("https://") || image.starts_with("http://") {
                config
                    .image_hosts
                    .check(image)
                    .map_err(|e| format!("--image: {e}"))?;
                image.clone()
            } else {
                crate::image::check_local(image).map_err(|why| format!("--image: {why}"))?
            };
            if let Some(l) = link {
                if !url::Url::parse(l).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
                    return Err("--link must be an http(s) URL".into());
                }
            }
            Some(DraftContent {
                caption: caption.clone(),
                image,
                link: link.clone(),
                alt: alt.clone(),
                captions,
            })
        }
    };
    Ok(PostRequest {
        key,
        content,
        action: Action::Post,
        source: Source::Cli,
        run_id: new_run_id(),
        reply_to: None,
        targets: networks,
        publish_at,
    })
}

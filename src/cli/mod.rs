//! The command line: `post`, `preview`, `status`, `serve`, `sweep`, `schedule list`,
//! `doctor`, `telegram set-webhook`, `mcp`, `auth`, and each store's own commands (`table create`,
//! `db migrate`: [`crate::stores::admin`]). Translation only;
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
use crate::pipeline::PostRequest;
use crate::triggers::Router;

mod auth;
mod logging;
#[cfg(feature = "mcp")]
mod mcp;
pub mod out_dir;
mod output;
mod post;
mod preview;
use logging::init_logging;
use output::{print_outcome, schedule_list, status, status_all};
use post::{post_request, DraftArgs};

/// The one-line description: every network of the registry, by its label.
fn about() -> String {
    let labels: Vec<&str> = Network::ALL.iter().map(|n| n.label()).collect();
    let listed = match labels.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => labels.join(""),
    };
    format!("Publish a draft to {listed}, each exactly once, and report it in Telegram")
}

pub use crate::{EXIT_BAD_INPUT, EXIT_RETRY};

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
    #[cfg(feature = "mcp")]
    Mcp,
    /// Telegram bot set-up.
    Telegram {
        #[command(subcommand)]
        action: TelegramAction,
    },
    /// Sign in to a network and store its credential (`auth linkedin`), or show every
    /// credential's source, account and expiry (`auth status`).
    Auth(auth::AuthArgs),
    /// A store's own command (`table create`, `db migrate`): each store offers its own.
    #[command(flatten)]
    Store(crate::stores::admin::StoreCommand),
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

/// `postonce mcp`, in a build with it (feature `mcp`).
fn is_mcp(command: &Command) -> bool {
    #[cfg(feature = "mcp")]
    return matches!(command, Command::Mcp);
    #[cfg(not(feature = "mcp"))]
    {
        let _ = command;
        false
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
    // `auth` and a store's own commands need only the store's variables: nothing else is read
    // (a table or schema they make may not exist yet, and a network may not be set up yet).
    match cli.command {
        Command::Auth(args) => {
            return match crate::startup::store_config().await {
                Ok(config) => auth::run(&config, args).await,
                Err(e) => bad_input(format!("configuration: {e}")),
            };
        }
        Command::Store(store) => {
            return match crate::startup::store_config().await {
                Ok(config) => store.run(&config.stores).await,
                Err(e) => bad_input(format!("configuration: {e}")),
            };
        }
        _ => {}
    }
    let config = match prepared(&cli.command).await {
        Ok(config) => config,
        Err(code) => return code,
    };
    let checked = match Checked::read(&cli.command, &config) {
        Ok(checked) => checked,
        Err(e) => return bad_input(e),
    };
    let app = match App::build(config).await {
        Ok(app) => Arc::new(app),
        Err(e) => return bad_input(e),
    };
    run(cli.command, app, checked).await
}

/// The configuration a command runs with. `Err`: the command ended here (its exit code): a
/// malformed variable, stored credentials that cannot be
/// read for a command that posts.
async fn prepared(command: &Command) -> Result<Config, i32> {
    let mut config = match crate::startup::configured().await {
        Ok(c) => c,
        Err(e) => return Err(bad_input(format!("configuration: {e}"))),
    };
    if let Some(why) = &config.credentials_unreadable {
        // Never a dry run in place of a network whose credential is stored (README "Getting
        // credentials"): the commands that post refuse, retryable.
        if matches!(
            command,
            Command::Post { .. } | Command::Serve { .. } | Command::Sweep { .. }
        ) || is_mcp(command)
        {
            eprintln!("postonce: {why}");
            return Err(EXIT_RETRY);
        }
    }
    #[cfg(feature = "mcp")]
    if is_mcp(command) {
        mcp::prepare(&mut config)?;
    }
    if matches!(command, Command::Serve { .. }) {
        config.stores.for_server();
    }
    Ok(config)
}

/// What a command was given, checked before any client is built or anything is stored.
struct Checked {
    post: Option<PostRequest>,
    preview: Option<preview::Checked>,
    status_key: Option<PostKey>,
}

impl Checked {
    fn read(command: &Command, config: &Config) -> Result<Self, String> {
        let post = match command {
            Command::Post { draft, at, .. } => Some(post_request(config, draft, at)?),
            _ => None,
        };
        let preview = match command {
            Command::Preview(args) => Some(preview::check(config, args)?),
            _ => None,
        };
        let status_key = match command {
            Command::Status {
                kind: Some(kind),
                slug: Some(slug),
                ..
            } => Some(PostKey::new(kind, slug).map_err(|e| e.to_string())?),
            _ => None,
        };
        Ok(Self {
            post,
            preview,
            status_key,
        })
    }
}

/// Runs the command with the app built for it.
async fn run(command: Command, app: Arc<App>, checked: Checked) -> i32 {
    let Checked {
        post,
        preview,
        status_key,
    } = checked;
    let dl = Deadline::after(app.config.function_timeout);
    match command {
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
        Command::Sweep { json } => output::sweep(&app, &dl, json).await,
        Command::Schedule {
            action: ScheduleAction::List { json },
        } => schedule_list(&app, dl, json).await,
        #[cfg(feature = "mcp")]
        Command::Mcp => mcp::run(app).await,
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
        // Ran in `main`, before anything was opened.
        Command::Store(_) | Command::Auth(_) => EXIT_BAD_INPUT,
    }
}

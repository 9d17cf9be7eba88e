//! The `postonce` binary: picks the Lambda runtime (when `AWS_LAMBDA_RUNTIME_API` is set) or
//! the command line (feature `cli`, not in the Lambda build). Everything else is in the
//! library.

use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    // One thread: a Lambda sandbox runs one invocation at a time, a CLI command one run, and
    // `serve` only waits on the network (its few blocking file calls go to tokio's blocking
    // pool). A multi-thread scheduler would start a worker per core at every cold start and
    // hand each wake-up across threads for nothing.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("postonce: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
            lambda_main().await
        } else {
            command_line().await
        }
    });
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(feature = "cli")]
async fn command_line() -> i32 {
    postonce::cli::main(std::env::args_os()).await
}

/// The Lambda build (`cargo lambda build`, without the feature `cli`) is the function only.
#[cfg(not(feature = "cli"))]
async fn command_line() -> i32 {
    eprintln!("postonce: this build is the Lambda function only (AWS_LAMBDA_RUNTIME_API is not set); the command line is in the default build: cargo build --release");
    postonce::EXIT_BAD_INPUT
}

async fn lambda_main() -> i32 {
    init_lambda_logging();
    let config = match postonce::startup::configured().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("configuration: {e}");
            return 2;
        }
    };
    if let Some(why) = &config.credentials_unreadable {
        // The sandbox fails its start and the next invocation starts again: never a dry run
        // in place of a network whose credential is stored.
        tracing::error!("{why}");
        return postonce::EXIT_RETRY;
    }
    // Sandboxes share nothing but the stores: claims and records must live in a shared one.
    if let Some(why) = config.stores.lambda_refusal() {
        tracing::error!("configuration: {why}");
        return 2;
    }
    // Nothing answers `/covers/` in Lambda (only `serve` does): a file written there could never
    // be fetched.
    if let postonce::covers::CoverHosting::Folder { .. } = config.covers {
        tracing::error!("configuration: POSTONCE_PUBLIC_URL: covers are answered by `postonce serve`, which does not run in Lambda; use POSTONCE_COVERS_BUCKET (the template sets it)");
        return 2;
    }
    let app = match postonce::app::App::build(config).await {
        Ok(app) => Arc::new(app),
        Err(e) => {
            tracing::error!("start-up: {e}");
            return 1;
        }
    };
    match postonce::lambda::run(app).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("runtime: {e}");
            1
        }
    }
}

/// Lambda's log, as `lambda_runtime::tracing::init_default_subscriber` writes it (stdout, no
/// time or target, JSON when `AWS_LAMBDA_LOG_FORMAT` is `JSON`) but without its colour
/// escapes, filtered by `tracing_subscriber`'s `Targets` instead of its `EnvFilter`, whose
/// regular-expression engine was about 200 KB of the Lambda artifact (issue 34). Text lines'
/// fields are [`postonce::log_line::LineFields`]. The level: `AWS_LAMBDA_LOG_LEVEL` (the
/// template's `ApplicationLogLevel`), else `RUST_LOG`'s `target=level` directives, else info.
fn init_lambda_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let info = || Targets::new().with_default(LevelFilter::INFO);
    let filter = match std::env::var("AWS_LAMBDA_LOG_LEVEL") {
        Ok(level) => level
            .parse::<LevelFilter>()
            .map_or_else(|_| info(), |l| Targets::new().with_default(l)),
        Err(_) => std::env::var("RUST_LOG")
            .ok()
            .and_then(|d| d.parse::<Targets>().ok())
            .unwrap_or_else(info),
    };
    // No colours: CloudWatch shows ANSI escapes as text (`fmt::layer` paints by default, as
    // `lambda_runtime`'s own subscriber does).
    let lines = tracing_subscriber::fmt::layer()
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .with_writer(std::io::stdout);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    // One layer, so its filter is the subscriber's: a per-layer filter looks the span up in the
    // registry again at every enter and exit of a run's spans (issue 34).
    let registry = tracing_subscriber::registry().with(filter);
    let _ = if json {
        registry.with(lines.json()).try_init()
    } else {
        let lines = lines
            .fmt_fields(postonce::log_line::LineFields)
            .event_format(postonce::log_line::LineEvents { time: false });
        registry.with(lines).try_init()
    };
}

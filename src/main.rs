//! The `postonce` binary: picks the Lambda runtime (when `AWS_LAMBDA_RUNTIME_API` is set) or
//! the command line. Everything else is in the library.

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
            postonce::cli::main(std::env::args_os()).await
        }
    });
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

async fn lambda_main() -> i32 {
    lambda_runtime::tracing::init_default_subscriber();
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
        return postonce::cli::EXIT_RETRY;
    }
    // Sandboxes share nothing but the stores: claims and records must live in a shared one.
    if let Some(why) = config.stores.lambda_refusal() {
        tracing::error!("configuration: {why}");
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

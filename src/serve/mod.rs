//! `postonce serve`: the HTTP routes on a local port, through the same [`Router`] as Lambda.
//! Bodies are read up to the route limit (larger → 413 without reading the rest).
//!
//! On SIGTERM or Ctrl-C the server stops accepting, lets every in-flight request and run finish
//! (bounded by [`grace_period`]), then returns. A run dropped halfway would leave its claim to
//! the TTL and, after create-post, an outcome nobody hears of; a deploy or a Ctrl-C must not do
//! that to a run that only needed a few more seconds.
//!
//! A `serve` that runs for weeks keeps up with the stored credentials ([`reload`]): it looks at
//! them once a minute, refreshes those due, and posts with the new one once another process
//! stored it.

pub mod covers;
pub mod reload;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::budget::Deadline;
use crate::pipeline::new_run_id;
use crate::triggers::{HttpRequest, HttpResponse, Router, MAX_BODY};

async fn respond(
    router: Arc<Router>,
    runs: TaskTracker,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    if let Some(cover) = covers::answer(&router.app.config.covers, &method, &path).await {
        return Ok(cover);
    }
    // Header names from hyper are already lower case (`HeaderName` normalises them).
    let headers = req
        .headers()
        .iter()
        .filter_map(|(k, v)| {
            v.to_str()
                .ok()
                .map(|v| (k.as_str().to_owned(), v.to_owned()))
        })
        .collect();
    let too_large = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| len > MAX_BODY);
    let response = if too_large {
        HttpResponse::error(
            413,
            "payload_too_large",
            format!("the body is larger than {MAX_BODY} bytes"),
        )
    } else {
        match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(body) => {
                let request = HttpRequest {
                    method,
                    path,
                    headers,
                    body: body.to_bytes(),
                };
                let dl = Deadline::after(router.app.config.function_timeout);
                // The run goes on in its own task: a client that hangs up (GitHub stops
                // waiting after 10 s) must not cancel a run halfway through. The tracker lets
                // shutdown wait for it even when its connection is already gone.
                let router = router.clone();
                runs.spawn(async move { router.handle(request, dl, new_run_id()).await })
                    .await
                    .unwrap_or_else(|e| {
                        HttpResponse::error(500, "internal", format!("the run failed: {e}"))
                    })
            }
            Err(e) if e.to_string().contains("length limit") => HttpResponse::error(
                413,
                "payload_too_large",
                format!("the body is larger than {MAX_BODY} bytes"),
            ),
            Err(e) => {
                HttpResponse::error(400, "bad_request", format!("could not read the body: {e}"))
            }
        }
    };
    let mut builder = Response::builder()
        .status(response.status)
        .header("content-type", "application/json");
    if response.status == 413 {
        builder = builder.header("connection", "close");
    }
    let body = response.to_bytes();
    Ok(builder
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"{}")))))
}

/// Slack on top of the run deadline for the last response to be written and the tasks to be
/// scheduled on a busy machine.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

/// How long shutdown waits for in-flight work: the run deadline plus [`SHUTDOWN_MARGIN`].
///
/// Every run gets `function_timeout` from its start as its deadline, and every call it makes,
/// finishing calls included, is clipped to that deadline (rule 4). A run in flight at the signal
/// therefore ends within `function_timeout`; waiting longer only helps a run that is stuck
/// outside any budget, which no wait would cure. A request whose body was still arriving starts
/// its run after the signal; a client that slow is cut off by the bound.
pub fn grace_period(function_timeout: Duration) -> Duration {
    function_timeout + SHUTDOWN_MARGIN
}

/// Serves until Ctrl-C or SIGTERM, then drains (see the module docs); prints the address it
/// listens on and what the drain waited for.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(router: Arc<Router>, addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let routes = if matches!(
        router.app.config.covers,
        crate::covers::CoverHosting::Folder { .. }
    ) {
        "POST /ci, POST /telegram, GET /healthz, GET /covers/<sha256>.<ext>"
    } else {
        "POST /ci, POST /telegram, GET /healthz"
    };
    eprintln!("postonce listening on http://{local} ({routes})");
    tracing::info!(%local, "listening");
    let current = reload::Current::new(router);
    let (stop_reload, stopped_reload) = tokio::sync::watch::channel(false);
    // The credential checks go on beside the server on a thread of their own, on this runtime:
    // a refresh is not `Send` (a network's auth flow runs where it started). Each check is
    // bounded, and one under way at the signal finishes.
    let (reload, every) = (reload::Reload::new(current.clone()), reload::interval());
    let handle = tokio::runtime::Handle::current();
    let reloading = tokio::task::spawn_blocking(move || {
        handle.block_on(reload.run(every, stopped_reload));
    });
    serve_until_signal(listener, current, stop_reload).await;
    let _ = reloading.await;
    Ok(())
}

/// Accepts until the signal, then drains (see the module docs).
async fn serve_until_signal(
    listener: TcpListener,
    current: reload::Current,
    stop_reload: tokio::sync::watch::Sender<bool>,
) {
    let grace = grace_period(current.get().app.config.function_timeout);
    let connections = GracefulShutdown::new();
    let runs = TaskTracker::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let (current, runs) = (current.clone(), runs.clone());
                let service = service_fn(move |req| respond(current.get(), runs.clone(), req));
                let connection = connections
                    .watch(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }

    // Stop accepting: from here a new connection is refused rather than left unanswered.
    drop(listener);
    // No more credential checks; one under way finishes (a refresh it leased is written).
    let _ = stop_reload.send(true);
    let (runs_at_signal, connections_at_signal) = (runs.len(), connections.count());
    eprintln!(
        "postonce: shutting down; waiting up to {}s for {runs_at_signal} run(s) in flight and {connections_at_signal} open connection(s) (a second signal stops waiting)",
        grace.as_secs()
    );
    tracing::info!(
        runs = runs_at_signal,
        connections = connections_at_signal,
        grace_s = grace.as_secs(),
        "shutting down"
    );
    let begun = Instant::now();
    let drain = async {
        // Connections first: each ends after the response of its in-flight request is
        // written (idle keep-alive connections close at once), so no new run can start once
        // they are all gone. Then the runs whose clients hung up before their answer.
        connections.shutdown().await;
        runs.close();
        runs.wait().await;
    };
    let stopped = tokio::select! {
        finished = tokio::time::timeout(grace, drain) => finished.map_err(|_| "the grace period ran out"),
        () = shutdown_signal() => Err("a second signal"),
    };
    let waited = begun.elapsed();
    match stopped {
        Ok(()) => {
            eprintln!(
                "postonce: stopped after {:.1}s; every run finished ({runs_at_signal} were in flight at the signal)",
                waited.as_secs_f64()
            );
            tracing::info!(
                runs = runs_at_signal,
                waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                "stopped"
            );
        }
        Err(why) => {
            // What is dropped here ends with the process: a claim it held stays until its TTL
            // (never released early), so no other run can post meanwhile.
            let left = runs.len();
            eprintln!(
                "postonce: stopped after {:.1}s by {why}; {left} run(s) still in flight were abandoned ({runs_at_signal} were in flight at the signal); their claims expire with their TTL",
                waited.as_secs_f64()
            );
            tracing::warn!(
                runs = runs_at_signal,
                abandoned = left,
                reason = why,
                waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                "stopped before in-flight runs finished"
            );
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

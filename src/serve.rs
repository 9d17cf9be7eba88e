//! `postonce serve`: the HTTP routes on a local port, through the same [`Router`] as Lambda.
//! Bodies are read up to the route limit (larger → 413 without reading the rest).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::budget::Deadline;
use crate::pipeline::new_run_id;
use crate::triggers::{HttpRequest, HttpResponse, Router, MAX_BODY};

async fn respond(
    router: Arc<Router>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let headers = req
        .headers()
        .iter()
        .filter_map(|(k, v)| {
            v.to_str()
                .ok()
                .map(|v| (k.as_str().to_ascii_lowercase(), v.to_owned()))
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
                // waiting after 10 s) must not cancel a run halfway through.
                let router = router.clone();
                tokio::spawn(async move { router.handle(request, dl, new_run_id()).await })
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
    Ok(builder
        .body(Full::new(Bytes::from(response.body.to_string())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"{}")))))
}

/// Serves until Ctrl-C or SIGTERM; prints the address it listens on.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(router: Arc<Router>, addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    eprintln!("postonce listening on http://{local} (POST /ci, POST /telegram, GET /healthz)");
    tracing::info!(%local, "listening");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let router = router.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| respond(router.clone(), req));
                    if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
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

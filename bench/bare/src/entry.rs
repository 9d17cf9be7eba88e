//! The bare client behind postonce's entry (`bench_bare serve --addr ADDR`): the same HTTP
//! server crate (hyper, HTTP/1, one task per connection), the signed `POST /ci` checked as
//! postonce checks it (HMAC-SHA256 of the body with `POSTONCE_WEBHOOK_SECRET`, in
//! `X-Hub-Signature-256`), the body's JSON read, the caption's hash, then the bare client's
//! requests ([`crate::Mode`]) and a JSON answer. No logging, no pipeline: `bench/bench.py`
//! compares postonce with it to tell what the entry costs from what the rest costs.

use std::sync::Arc;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

use crate::{Error, Mode, Run};

/// The fields of postonce's CI body that a run uses.
#[derive(Deserialize)]
struct CiBody {
    kind: String,
    slug: String,
    caption: String,
    image_url: String,
    #[serde(default)]
    link: Option<String>,
}

struct State {
    /// The store's clients and the runs so far (the runs' tokens are numbered).
    mode: Mutex<(Mode, u64)>,
    secret: Vec<u8>,
}

pub async fn serve(addr: &str, mode: Mode) -> Result<(), Error> {
    let listener = TcpListener::bind(addr).await?;
    let state = Arc::new(State {
        mode: Mutex::new((mode, 0)),
        secret: std::env::var("POSTONCE_WEBHOOK_SECRET")?.into_bytes(),
    });
    loop {
        let (stream, _) = listener.accept().await?;
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(state.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Error> {
    if req.method() != hyper::Method::POST || req.uri().path() != "/ci" {
        return Ok(answer(
            StatusCode::NOT_FOUND,
            &json!({"error": "not found"}),
        ));
    }
    let signature = req
        .headers()
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("sha256="))
        .and_then(|h| hex::decode(h).ok());
    let body = req.into_body().collect().await?.to_bytes();
    let mut mac = Hmac::<Sha256>::new_from_slice(&state.secret)?;
    mac.update(&body);
    if signature.is_none_or(|s| mac.verify_slice(&s).is_err()) {
        return Ok(answer(
            StatusCode::UNAUTHORIZED,
            &json!({"error": "bad signature"}),
        ));
    }
    let ci: CiBody = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => {
            let why = json!({"error": format!("not a CI body: {e}")});
            return Ok(answer(StatusCode::BAD_REQUEST, &why));
        }
    };
    let key = format!("{}-{}", ci.kind, ci.slug);
    let link = ci.link.as_deref().unwrap_or_default();
    let hash = hex::encode(Sha256::digest(format!("{}\n\n{link}", ci.caption)));
    let run = Run {
        key: &key,
        caption: &ci.caption,
        image: &ci.image_url,
        link,
        hash: &hash,
    };
    let mut held = state.mode.lock().await;
    held.1 += 1;
    let n = held.1;
    Ok(match held.0.run(None, &run, n).await {
        Ok(outcome) => answer(StatusCode::OK, &json!({"key": key, "outcome": outcome})),
        Err(e) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"key": key, "error": e.to_string()}),
        ),
    })
}

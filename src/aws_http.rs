//! The HTTPS client every AWS SDK client here is built with (DynamoDB, SSM, and the credential
//! providers `aws-config` runs behind them): hyper's pooled client over rustls on *ring*, with
//! the TLS configuration the process's other connections use ([`crate::tls`]: the Mozilla
//! roots compiled in, as reqwest's).
//!
//! The SDK's own HTTPS client (`aws-smithy-http-client`, `rustls-ring`) read the system's root
//! certificates at every start: some 440 PEM files and bundle entries decoded (17.6 M
//! instructions, two thirds of a cold run's) before the first request, to trust the same
//! authorities.
//!
//! The file uses no `crate::` path but [`crate::tls`]: the benchmark's bare client builds both
//! files into its SDK client (`bench/bare`), so that both sides send alike.

use std::error::Error as StdError;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;
use hyper_util::client::legacy::connect::HttpConnector as Tcp;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// A new HTTPS client for an SDK configuration (`aws_config::defaults(..).http_client(..)` or a
/// service config's `http_client`). Build it once per SDK client: its connections pool in it.
#[must_use]
pub fn client() -> SharedHttpClient {
    SharedHttpClient::new(Client::default())
}

/// The connectors made so far, one per pair of timeouts the SDK asked for (it asks again for
/// every request; the answer is the same connector, so its connections are reused).
#[derive(Debug, Default)]
struct Client {
    connectors: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

/// (connect, read), as the SDK's settings give them.
type Timeouts = (Option<Duration>, Option<Duration>);

impl HttpClient for Client {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let key = (settings.connect_timeout(), settings.read_timeout());
        let mut known = self
            .connectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, connector)) = known.iter().find(|(k, _)| *k == key) {
            return connector.clone();
        }
        let connector = SharedHttpConnector::new(Connector::new(key));
        known.push((key, connector.clone()));
        connector
    }
}

type Https = hyper_rustls::HttpsConnector<Tcp>;

/// One connection pool with the SDK's connect timeout, and its read timeout (the time to the
/// answer's head, as the SDK's own client counts it); or why TLS could not be set up, told at
/// each call, since the SDK asks for a connector where it cannot take an error.
#[derive(Debug)]
struct Connector {
    pool: Result<Pool<Https, SdkBody>, String>,
    read: Option<Duration>,
}

impl Connector {
    fn new((connect, read): Timeouts) -> Self {
        let pool = crate::tls::client_config().map(|tls| {
            let mut tcp = Tcp::new();
            tcp.enforce_http(false);
            tcp.set_nodelay(true);
            tcp.set_connect_timeout(connect);
            let https = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .wrap_connector(tcp);
            Pool::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .build(https)
        });
        Self { pool, read }
    }
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let pool = match &self.pool {
            Ok(pool) => pool,
            Err(why) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::other(
                    why.clone().into(),
                    None,
                )))
            }
        };
        let request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        let sent = pool.request(request);
        let read = self.read;
        HttpConnectorFuture::new(async move {
            let answer = match read {
                Some(limit) => tokio::time::timeout(limit, sent).await.map_err(|_| {
                    ConnectorError::timeout(format!("no answer within {limit:?}").into())
                })?,
                None => sent.await,
            }
            .map_err(classify)?;
            HttpResponse::try_from(answer.map(SdkBody::from_body_1_x))
                .map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// How the SDK's retry policy reads a failed call: a timeout, a transport failure it may retry
/// (no connection made, a connection refused, reset or closed), an answer cut short, or another
/// failure. A TLS handshake the client refuses (a certificate outside the Mozilla roots, a
/// server that does not speak TLS) is another failure: trying again meets the same answer.
fn classify(e: hyper_util::client::legacy::Error) -> ConnectorError {
    let make = kind(&e);
    make(e.into())
}

/// [`classify`]'s verdict, as the `ConnectorError` constructor to call.
fn kind(e: &hyper_util::client::legacy::Error) -> fn(BoxError) -> ConnectorError {
    let other: fn(BoxError) -> ConnectorError = |b| ConnectorError::other(b, None);
    if causes(e).any(|err| err.is::<rustls::Error>()) {
        return other;
    }
    for err in causes(e) {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_timeout() {
                return ConnectorError::timeout;
            }
            if h.is_incomplete_message() {
                return |b| ConnectorError::other(b, Some(ErrorKind::TransientError));
            }
            if h.is_closed() || h.is_canceled() {
                return ConnectorError::io;
            }
            if h.is_user() {
                return ConnectorError::user;
            }
        }
        if err.is::<std::io::Error>() {
            return ConnectorError::io;
        }
    }
    if e.is_connect() {
        ConnectorError::io
    } else {
        other
    }
}

/// `e` and its causes. After an `io::Error` comes what it carries (`get_ref`: hyper-rustls
/// puts a handshake's `rustls::Error` there), which its `source` would skip.
fn causes<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&err| match err.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
        None => err.source(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(connector: &Connector, url: &str) -> Result<HttpResponse, ConnectorError> {
        let mut request = HttpRequest::new(SdkBody::from("{}"));
        request.set_uri(url).expect("a valid uri");
        request.set_method("POST").expect("a valid method");
        connector.call(request).await
    }

    async fn listen() -> (tokio::net::TcpListener, std::net::SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("its address");
        (listener, addr)
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_failure_the_sdk_may_retry() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("its address");
        drop(listener);
        let connector = Connector::new((Some(Duration::from_secs(2)), None));
        let e = call(&connector, &format!("http://{addr}/"))
            .await
            .expect_err("nothing listens there");
        assert!(e.is_io(), "{e:?}");
    }

    #[tokio::test]
    async fn a_refused_handshake_is_not_a_failure_to_retry() {
        use tokio::io::AsyncWriteExt;
        let (listener, addr) = listen().await;
        // A server that answers in plain HTTP where TLS was asked for.
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("a connection");
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        });
        let connector = Connector::new((Some(Duration::from_secs(2)), None));
        let e = call(&connector, &format!("https://{addr}/"))
            .await
            .expect_err("no TLS there");
        assert!(e.is_other() && e.as_other().is_none(), "{e:?}");
        server.abort();
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout() {
        let (listener, addr) = listen().await;
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("a connection");
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(socket);
        });
        let connector = Connector::new((None, Some(Duration::from_millis(200))));
        let e = call(&connector, &format!("http://{addr}/"))
            .await
            .expect_err("the server never answers");
        assert!(e.is_timeout(), "{e:?}");
        held.abort();
    }

    #[tokio::test]
    async fn an_answer_keeps_its_status_headers_and_body() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (listener, addr) = listen().await;
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("a connection");
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.ends_with(b"{}") {
                let n = socket.read(&mut buf).await.expect("the request");
                assert!(n > 0, "the request ended early");
                seen.extend_from_slice(&buf[..n]);
            }
            let body = r#"{"__type":"ConditionalCheckFailedException"}"#;
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\nx-amzn-requestid: r-1\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.expect("answered");
            String::from_utf8(seen).expect("text")
        });
        let connector = Connector::new((None, None));
        let answer = call(&connector, &format!("http://{addr}/"))
            .await
            .expect("an answer");
        assert_eq!(answer.status().as_u16(), 400);
        assert_eq!(answer.headers().get("x-amzn-requestid"), Some("r-1"));
        let body = http_body_util::BodyExt::collect(answer.into_body())
            .await
            .expect("the body")
            .to_bytes();
        assert_eq!(
            &body[..],
            &br#"{"__type":"ConditionalCheckFailedException"}"#[..]
        );
        let sent = server.await.expect("the server ran");
        assert!(sent.starts_with("POST / HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.to_ascii_lowercase().contains("content-length: 2\r\n"),
            "{sent}"
        );
    }
}

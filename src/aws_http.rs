//! The HTTPS client every AWS SDK client here is built with (DynamoDB, SSM, and the credential
//! providers `aws-config` runs behind them): the SDK's requests go out on reqwest, the client
//! every other HTTPS call here uses, with the same TLS (rustls on *ring*) and the same trust
//! anchors (the Mozilla roots compiled in, as reqwest's, redis's and PostgreSQL's are).
//!
//! The SDK's own HTTPS client read the system's root certificates at every start: some 440
//! PEM files and bundles' entries decoded (17.6 M instructions, two thirds of a cold run's, at
//! every Lambda cold start) before the first request, to trust the same authorities. Its
//! `rustls-ring` build also carried a second hyper client and `rustls-native-certs`.
//!
//! The file stands on its own (no `crate::` paths): the benchmark's bare client builds the
//! same file into its SDK client (`bench/bare`), so that both sides send alike.

use std::error::Error as StdError;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;

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

/// One reqwest client with the SDK's timeouts, or why it could not be built (told at each call,
/// since the SDK asks for a connector where it cannot take an error).
#[derive(Debug)]
struct Connector(Result<reqwest::Client, String>);

impl Connector {
    fn new((connect, read): Timeouts) -> Self {
        // As the SDK's own client: no redirects followed, no proxy from the environment.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(d) = connect {
            builder = builder.connect_timeout(d);
        }
        if let Some(d) = read {
            builder = builder.read_timeout(d);
        }
        Self(
            builder
                .build()
                .map_err(|e| format!("cannot build the AWS SDK's HTTPS client: {e}")),
        )
    }
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = match &self.0 {
            Ok(client) => client.clone(),
            Err(why) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::other(
                    why.clone().into(),
                    None,
                )))
            }
        };
        let request = match to_reqwest(request) {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e))),
        };
        HttpConnectorFuture::new(async move {
            let mut response = client.execute(request).await.map_err(classify)?;
            let status = response.status();
            let headers = std::mem::take(response.headers_mut());
            // The SDK's answers here are small documents (DynamoDB's, SSM's, the credential
            // providers'): read whole, under the read timeout.
            let body = response.bytes().await.map_err(classify)?;
            let mut answer = http::Response::new(SdkBody::from(body));
            *answer.status_mut() = status;
            *answer.headers_mut() = headers;
            HttpResponse::try_from(answer).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// The SDK's signed request as reqwest's. Its body is in memory (no operation here streams
/// one); a streaming body is refused rather than sent short.
fn to_reqwest(request: HttpRequest) -> Result<reqwest::Request, Box<dyn StdError + Send + Sync>> {
    let (parts, body) = request.try_into_http1x()?.into_parts();
    let Some(bytes) = body.bytes() else {
        return Err("a streaming request body (this client sends bodies held in memory)".into());
    };
    let body = reqwest::Body::from(bytes::Bytes::copy_from_slice(bytes));
    Ok(reqwest::Request::try_from(http::Request::from_parts(
        parts, body,
    ))?)
}

/// How the SDK's retry policy reads a failed call: a timeout, a transport failure it may retry
/// (refused or reset connections, a connection the server closed), or another failure.
fn classify(e: reqwest::Error) -> ConnectorError {
    if e.is_timeout() {
        return ConnectorError::timeout(e.into());
    }
    if e.is_builder() {
        return ConnectorError::user(e.into());
    }
    let mut source: Option<&(dyn StdError + 'static)> = Some(&e);
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return ConnectorError::other(e.into(), Some(ErrorKind::TransientError));
            }
            if h.is_closed() || h.is_canceled() {
                return ConnectorError::io(e.into());
            }
        }
        if err.is::<std::io::Error>() {
            return ConnectorError::io(e.into());
        }
        source = err.source();
    }
    if e.is_connect() {
        return ConnectorError::io(e.into());
    }
    ConnectorError::other(e.into(), None)
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
    async fn a_silent_server_is_a_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("its address");
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("its address");
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
        assert_eq!(
            answer.body().bytes(),
            Some(&br#"{"__type":"ConditionalCheckFailedException"}"#[..])
        );
        let sent = server.await.expect("the server ran");
        assert!(sent.starts_with("POST / HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.to_ascii_lowercase().contains("content-length: 2\r\n"),
            "{sent}"
        );
    }
}

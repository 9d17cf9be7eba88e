//! The HTTPS client every AWS SDK client here is built with (DynamoDB, SSM, and the credential
//! providers `aws-config` runs behind them): the SDK's own hyper client on rustls with *ring*,
//! the TLS provider reqwest and redis already use, so that the build carries one crypto library
//! and not a second one in C (aws-lc, what the SDK's `default-https-client` feature picks).

use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_http_client::Builder;
use aws_smithy_runtime_api::client::http::SharedHttpClient;

/// A new HTTPS client for an SDK configuration (`aws_config::defaults(..).http_client(..)` or a
/// service config's `http_client`). Build it once per SDK client: its connections pool in it.
#[must_use]
pub fn client() -> SharedHttpClient {
    Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

//! The TLS client configuration of the connections the process opens itself (the AWS SDK's,
//! and an adapter's own sockets): rustls on *ring*, trusting the Mozilla roots compiled in
//! (webpki-roots), the provider and the roots reqwest and the claim store's client use too. No
//! start reads the system's certificate store. A store with its own TLS rules keeps them in its
//! folder.
//!
//! The file stands on its own (no `crate::` paths): the benchmark's bare client builds it too.

/// A client configuration with no client certificate.
///
/// # Errors
/// When *ring* offers none of rustls's safe protocol versions (a build problem, not a runtime
/// one), named.
pub fn client_config() -> Result<rustls::ClientConfig, String> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS could not be set up ({e})"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

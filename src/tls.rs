//! The TLS client configuration of the process's own connections (the AWS SDK's, Nostr's
//! `wss://`): rustls on *ring*, trusting the Mozilla roots compiled in (webpki-roots), the
//! provider and the roots reqwest and redis use too. No start reads the system's certificate
//! store. PostgreSQL's TLS has its own (`src/stores/postgres/tls.rs`: libpq's sslmodes).
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

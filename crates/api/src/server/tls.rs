//! Serving HTTPS directly: the rustls configuration of `POSTURE_TLS_CERT` and
//! `POSTURE_TLS_KEY`.

use std::{path::Path, sync::Arc};

use anyhow::Context as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

/// The rustls server configuration of a PEM certificate chain and key.
pub fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "reading the certificate chain {} (POSTURE_TLS_CERT)",
                cert.display()
            )
        })?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "reading the private key {} (POSTURE_TLS_KEY)",
            key.display()
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("the TLS certificate and key do not match")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

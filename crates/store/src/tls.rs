//! TLS client settings for what sandcrab connects to itself (plugins'
//! HTTPS requests, a PostgreSQL store): the public Web PKI roots, plus the
//! certificates the operator names (an internal CA), with the ring
//! provider.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The client settings, or what is wrong with a named certificate file.
pub fn client_config(ca_files: &[PathBuf]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    for file in ca_files {
        let mut added = 0;
        for cert in CertificateDer::pem_file_iter(file)
            .map_err(|e| format!("{}: cannot read it as PEM: {e}", file.display()))?
        {
            let cert =
                cert.map_err(|e| format!("{}: a certificate is malformed: {e}", file.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("{}: not a usable CA certificate: {e}", file.display()))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!(
                "{}: holds no certificate (expected PEM, -----BEGIN CERTIFICATE-----)",
                file.display()
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS settings: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

//! The TLS of MCP's HTTP clients. rmcp's transports and sign-in use their
//! own reqwest, built without a cryptography provider of its own so that
//! the whole binary carries one (ring, as everything else here uses)
//! instead of a second one compiled from C. That reqwest asks rustls for
//! the process's provider, installed here before any client is made.

use std::sync::Once;

/// Make ring the process's TLS provider (once; a provider already
/// installed is kept).
pub fn install_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

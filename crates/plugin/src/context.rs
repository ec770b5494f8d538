//! What every plugin of one host shares: the workspace, the host's
//! private temp dir, what the host keeps and protects, the operator's policy, and the
//! host environment programs are resolved and granted from.

use std::path::PathBuf;

use super::policy::Policy;

/// Settings shared by every plugin of one host.
#[derive(Debug, Clone)]
pub struct SandboxContext {
    /// The workspace root on the host (canonical).
    pub workspace: PathBuf,
    /// The host's private temp dir (canonical); each plugin gets its own
    /// directory inside it as TMPDIR (and HOME unless granted the real one).
    pub temp_dir: PathBuf,
    /// What the host keeps and what the workspace protects: asked by the
    /// file tools of every plugin and by the confinement of every program.
    pub judge: crate::kept::Judge,
    /// The operator's policy.
    pub policy: Policy,
    /// Cap on captured stdout / stderr of each program.
    pub output_cap: usize,
    /// The host's PATH when sandcrab started (programs are resolved on it).
    pub host_path: String,
    /// The environment granted variables take their values from (the
    /// host's environment when sandcrab started).
    pub host_env: std::collections::BTreeMap<String, String>,
    /// The TLS settings of plugins' HTTPS requests (the public Web PKI
    /// roots and the operator's `[policy] http_ca_files`).
    pub http_tls: std::sync::Arc<rustls::ClientConfig>,
}

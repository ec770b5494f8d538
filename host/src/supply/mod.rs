//! Plugins from where components are published: OCI registries, archives
//! and HTTPS downloads, each resolved to a digest, checked against the
//! operator's signers and recorded in `sandcrab.lock`.
//!
//! - [`reference`]: what the operator typed, validated;
//! - [`artifact`] and [`layout`]: the plugin as an OCI artifact
//!   (component, manifest, signature), and as an OCI image layout on disk;
//! - [`download`] and [`registry`]: bounded, digest-checked HTTP and the
//!   OCI distribution API (pull, push);
//! - [`fetch`]: a reference to a checked package;
//! - [`signature`] and [`signers`]: SSH signatures over the component and
//!   the manifest, and `[trust.signers]`, who may sign what;
//! - [`lockfile`], which reads and writes `sandcrab.lock`, and [`files`],
//!   which writes nothing through a link;
//! - [`admission`]: the check at every load.

pub mod admission;
pub mod artifact;
pub mod download;
pub mod fetch;
pub mod files;
pub mod layout;
pub mod lockfile;
pub mod reference;
pub mod registry;
pub mod signature;
pub mod signers;

pub use artifact::Package;
pub use reference::{OciRef, Reference};
pub use signers::{SignerToml, Signers};

/// The folder `sandcrab plugins install` writes to when the operator
/// names none: `<data dir>/plugins`.
pub fn default_install_dir() -> Option<std::path::PathBuf> {
    Some(crate::user_files::data_dir()?.join("plugins"))
}

//! The first-party sandcrab plugins, built from `plugins/` for
//! wasm32-wasip2 by this crate's build script.
//!
//! [`BUNDLED`] holds the plugins the `sandcrab` binary carries inside itself
//! (so they are found without flags); [`ARTIFACTS`] lists every plugin the
//! build produced, including the example and the test fixtures, for tests
//! and benchmarks.

/// A plugin embedded in the binary: its manifest text and component bytes.
#[derive(Debug, Clone, Copy)]
pub struct BundledPlugin {
    /// Directory name under `plugins/`.
    pub name: &'static str,
    /// Contents of its `plugin.toml`.
    pub manifest: &'static str,
    /// The component.
    pub wasm: &'static [u8],
    /// SHA-256 (hex) of [`Self::wasm`], taken when it was built.
    pub wasm_sha256: &'static str,
    /// BLAKE3 (hex) of [`Self::wasm`], taken when it was built.
    pub wasm_blake3: &'static str,
}

/// A plugin the build produced.
#[derive(Debug, Clone, Copy)]
pub struct Artifact {
    /// Path under `plugins/`, e.g. `hello-tool` or `test-fixtures/hostile-tool`.
    pub name: &'static str,
    /// The plugin's source directory (holds `plugin.toml`).
    pub source_dir: &'static str,
    /// The built component.
    pub wasm_path: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// The artifact named `name` (see [`Artifact::name`]).
pub fn artifact(name: &str) -> Option<&'static Artifact> {
    ARTIFACTS.iter().find(|a| a.name == name)
}

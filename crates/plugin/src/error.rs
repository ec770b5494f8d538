//! Errors of the plugin runtime.

use std::path::PathBuf;

/// Why a plugin could not be loaded. Each variant names the plugin source
/// (directory or bundled name) and the file involved.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `plugin.toml` is missing or unreadable.
    #[error("{path}: cannot read manifest: {source}")]
    ManifestUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `plugin.toml` is not valid TOML or has wrong or missing fields.
    #[error("{path}: invalid manifest: {message}")]
    ManifestInvalid { path: PathBuf, message: String },
    /// The `.wasm` named by the manifest is missing or unreadable.
    #[error(
        "{path}: cannot read plugin wasm (named in {manifest}): {source}{}",
        if source.kind() == std::io::ErrorKind::NotFound { " — not built yet? build the plugin first (its README names the command), then load it again" } else { "" }
    )]
    WasmUnreadable {
        path: PathBuf,
        manifest: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a WebAssembly component (a core module, or garbage).
    #[error("{path}: not a WebAssembly component: {message}")]
    NotAComponent { path: PathBuf, message: String },
    /// The component does not implement the world its manifest's `kind`
    /// names, or imports something the host does not provide.
    #[error("{path}: wrong world: {message}")]
    WrongWorld { path: PathBuf, message: String },
    /// A plugin declared more tools than the host accepts.
    #[error("{path}: the plugin declares {count} tools; the limit is {max}")]
    TooManyTools {
        path: PathBuf,
        count: usize,
        max: usize,
    },
    /// Two plugins have the same name.
    #[error("{path}: a plugin named '{name}' is already loaded")]
    DuplicatePlugin { path: PathBuf, name: String },
    /// The component is not the one the operator pinned.
    #[error(
        "{path}: plugin '{plugin}' is pinned to sha256 {expected}, but its component has sha256 {actual}; it was not loaded (if you changed it on purpose, review it and run `sandcrab plugins pin {plugin}`)"
    )]
    PinMismatch {
        path: PathBuf,
        plugin: String,
        expected: String,
        actual: String,
    },
    /// Where the plugin comes from is not trusted as it is now (a
    /// project's own plugin after the project changed).
    #[error("{path}: not loaded: {message}")]
    NotAdmitted { path: PathBuf, message: String },
    /// Locked mode loads only pinned third-party plugins.
    #[error(
        "{path}: plugin '{plugin}' is not pinned, and locked mode loads third-party plugins only when pinned (review it, then run `sandcrab plugins pin {plugin}` to record sha256 {actual} in {})",
        crate::user_files::config_file_shown()
    )]
    Unpinned {
        path: PathBuf,
        plugin: String,
        actual: String,
    },
    /// A load-time call into the plugin (e.g. listing its tools) failed.
    #[error("{path}: plugin failed while loading: {message}")]
    Initialization { path: PathBuf, message: String },
}

impl LoadError {
    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            LoadError::ManifestUnreadable { path, .. }
            | LoadError::ManifestInvalid { path, .. }
            | LoadError::WasmUnreadable { path, .. }
            | LoadError::NotAComponent { path, .. }
            | LoadError::WrongWorld { path, .. }
            | LoadError::TooManyTools { path, .. }
            | LoadError::DuplicatePlugin { path, .. }
            | LoadError::PinMismatch { path, .. }
            | LoadError::NotAdmitted { path, .. }
            | LoadError::Unpinned { path, .. }
            | LoadError::Initialization { path, .. } => path,
        }
    }
}

/// Why one call into a plugin failed. The plugin stays loaded and the next
/// call gets a fresh instance.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The guest ran past its wall-clock deadline and was interrupted.
    #[error("plugin '{plugin}' exceeded its time limit of {limit_ms} ms and was stopped")]
    Timeout { plugin: String, limit_ms: u64 },
    /// The guest tried to grow its memory past the cap.
    #[error("plugin '{plugin}' exceeded its memory limit of {limit_mb} MiB and was stopped")]
    OutOfMemory { plugin: String, limit_mb: u64 },
    /// The guest held more resources (open files, streams, requests) at
    /// once than a store may.
    #[error(
        "plugin '{plugin}' held more than {limit} open resources (files, streams, requests) at once and was stopped; a plugin must close what it opens"
    )]
    TooManyResources { plugin: String, limit: usize },
    /// The guest trapped (panic, unreachable, out-of-bounds access, ...).
    #[error("plugin '{plugin}' crashed: {message}")]
    Trap { plugin: String, message: String },
    /// The guest returned something the host cannot use.
    #[error("plugin '{plugin}' returned an invalid result: {message}")]
    InvalidResult { plugin: String, message: String },
    /// Every instance of the plugin stayed busy for as long as a call may
    /// wait for one.
    #[error(
        "plugin '{plugin}' is busy: all {instances} of its instances stayed in use for {waited_ms} ms; try again later"
    )]
    Busy {
        plugin: String,
        instances: u32,
        waited_ms: u64,
    },
    /// The host could not set up the call (instance limits, WASI setup).
    #[error("plugin '{plugin}' could not be started: {message}")]
    Setup { plugin: String, message: String },
}

/// Errors creating the plugin engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot create the WebAssembly engine: {0}")]
    Create(String),
    #[error("cannot set up host imports: {0}")]
    Linker(String),
}

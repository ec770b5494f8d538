//! Where a workspace keeps its own configuration.

/// The project configuration file inside a workspace.
pub const PROJECT_FILE: &str = "sandcrab.toml";

/// The project's own directory (workspace plugins live under it).
pub const PROJECT_DIR: &str = ".sandcrab";

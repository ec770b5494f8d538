//! `plugin.toml`: what a plugin is and what it asks for.
//!
//! ```toml
//! name = "my-linter"
//! version = "0.2.0"
//! kind = "tool"                 # tool | profile | summarizer
//! wasm = "my_linter.wasm"       # relative to the plugin directory
//! description = "Runs the linter"
//!
//! [capabilities]
//! workspace = "read"            # none | read | read-write
//! paths = [{ path = "/usr/share/dict", access = "read" }]
//! programs = ["eslint"]
//! env = ["NODE_PATH"]
//! network = false
//!
//! [limits]
//! memory_mb = 256
//! timeout_ms = 30000
//! max_instances = 8
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::LoadError;

/// A parsed `plugin.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Unique plugin name: `[a-z0-9][a-z0-9_-]*`.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// Which world the component implements.
    pub kind: PluginKind,
    /// The component file, relative to the plugin directory.
    pub wasm: String,
    /// One line for `sandcrab plugins list`.
    #[serde(default)]
    pub description: String,
    /// What the plugin asks the host for.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Resource limits the plugin asks for (capped by the operator).
    #[serde(default)]
    pub limits: Limits,
}

/// The world a plugin implements.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// `tool-plugin`: tools for the model.
    Tool,
    /// `profile-plugin`: an LLM provider profile.
    Profile,
    /// `summarizer-plugin`: the compaction prompt.
    Summarizer,
}

impl PluginKind {
    /// The WIT world name.
    pub fn world(self) -> &'static str {
        match self {
            PluginKind::Tool => "tool-plugin",
            PluginKind::Profile => "profile-plugin",
            PluginKind::Summarizer => "summarizer-plugin",
        }
    }

    /// The interface the world exports.
    pub fn export_interface(self) -> &'static str {
        match self {
            PluginKind::Tool => "tool",
            PluginKind::Profile => "profile",
            PluginKind::Summarizer => "summarizer",
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Tool => "tool",
            PluginKind::Profile => "profile",
            PluginKind::Summarizer => "summarizer",
        })
    }
}

/// Filesystem access to a directory.
#[derive(
    Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Default, Hash,
)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Not visible at all.
    #[default]
    None,
    /// Visible, read-only.
    Read,
    /// Visible, readable and writable.
    ReadWrite,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::None => "none",
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        })
    }
}

/// A host directory other than the workspace. It is mounted in the guest at
/// the same absolute path.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields)]
pub struct PathAccess {
    /// Absolute host path.
    pub path: PathBuf,
    /// How it may be used.
    pub access: Access,
}

/// Capabilities a plugin requests (in its manifest) or the operator grants
/// (in `[policy.plugins.NAME]`). The same shape serves both.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Access to the workspace (mounted at `/workspace`).
    #[serde(default)]
    pub workspace: Access,
    /// Other host directories.
    #[serde(default)]
    pub paths: Vec<PathAccess>,
    /// Programs the plugin may start through the `process` import: bare
    /// names resolved on the host's PATH, or exact absolute paths.
    #[serde(default)]
    pub programs: Vec<String>,
    /// Environment variables the plugin (and programs it starts) may see.
    #[serde(default)]
    pub env: Vec<String>,
    /// Network access for the plugin's programs: `true` (always, when
    /// granted), `false`, or `"on-request"` (a call asks for it, and a
    /// rule or the operator's approval gives it to that call).
    #[serde(default)]
    pub network: NetworkUse,
    /// Origins the plugin makes HTTP requests to through
    /// `wasi:http/outgoing-handler` (`"https://api.github.com"`,
    /// `"https://*.example.com:8443"`); each also needs the operator's
    /// grant.
    #[serde(default)]
    pub http: Vec<super::http::OriginPattern>,
}

/// How a plugin's programs use the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetworkUse {
    /// Never.
    #[default]
    No,
    /// Always (when granted).
    Always,
    /// For a call that asks for it (its `network: true` argument), when a
    /// rule or the operator's approval gives it to that call.
    OnRequest,
}

impl NetworkUse {
    /// Whether the network is wanted at all.
    pub fn wanted(self) -> bool {
        self != NetworkUse::No
    }
}

impl<'de> Deserialize<'de> for NetworkUse {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Flag(false) => Ok(NetworkUse::No),
            Written::Flag(true) => Ok(NetworkUse::Always),
            Written::Word(w) if w == "on-request" => Ok(NetworkUse::OnRequest),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "network = \"{w}\": use true, false or \"on-request\""
            ))),
        }
    }
}

impl Serialize for NetworkUse {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NetworkUse::No => s.serialize_bool(false),
            NetworkUse::Always => s.serialize_bool(true),
            NetworkUse::OnRequest => s.serialize_str("on-request"),
        }
    }
}

/// Resource limits. Unset fields take the host defaults.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Linear memory cap, in MiB.
    pub memory_mb: Option<u64>,
    /// Guest execution time per call, in ms (time spent waiting on programs
    /// started through `process` does not count; those have their own
    /// timeouts).
    pub timeout_ms: Option<u64>,
    /// Concurrent calls (each is a fresh instance).
    pub max_instances: Option<u32>,
    /// In a manifest: the plugin's instances keep no state that matters
    /// between calls, so the host may call a warm instance again (within
    /// one session, the same grants and limits) instead of a fresh one per
    /// call. In the operator's policy, `false` refuses that; `true` grants
    /// nothing a plugin did not ask for.
    pub reuse: Option<bool>,
    /// Largest request body one HTTP request may send, in KiB.
    pub http_request_kb: Option<u64>,
    /// Largest response one HTTP request may receive, in KiB.
    pub http_response_kb: Option<u64>,
    /// Longest one HTTP request may take, in ms (never past the call's
    /// own time limit).
    pub http_timeout_ms: Option<u64>,
    /// HTTP requests one call may have open at once.
    pub http_concurrent: Option<u32>,
}

impl Manifest {
    /// Parse manifest text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, LoadError> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| LoadError::ManifestInvalid {
            path: path.to_path_buf(),
            // toml's own layout: the line, and a caret under the spot.
            message: e.to_string().trim_end().replace('\n', "\n  "),
        })?;
        manifest.validate(path)?;
        Ok(manifest)
    }

    /// Read and parse `dir/plugin.toml` (a regular file of at most 64 KiB).
    pub fn read(dir: &Path) -> Result<Manifest, LoadError> {
        Self::read_with_text(dir).map(|(manifest, _)| manifest)
    }

    /// Like [`Manifest::read`], with the text it was parsed from.
    pub fn read_with_text(dir: &Path) -> Result<(Manifest, String), LoadError> {
        let path = dir.join("plugin.toml");
        let bytes = crate::safe_fs::read_regular(&path, 64 * 1024, crate::safe_fs::Links::Follow)
            .map_err(|source| LoadError::ManifestUnreadable {
            path: path.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| LoadError::ManifestInvalid {
            path: path.clone(),
            message: "the file is not UTF-8 text".into(),
        })?;
        let manifest = Manifest::parse(&text, &path)?;
        Ok((manifest, text))
    }

    fn validate(&self, path: &Path) -> Result<(), LoadError> {
        let invalid = |message: String| LoadError::ManifestInvalid {
            path: path.to_path_buf(),
            message,
        };
        if !is_valid_name(&self.name) {
            return Err(invalid(format!(
                "name '{}' must match [a-z0-9][a-z0-9_-]*",
                self.name
            )));
        }
        if self.wasm.is_empty() || Path::new(&self.wasm).is_absolute() || self.wasm.contains("..") {
            return Err(invalid(format!(
                "wasm '{}' must be a file name relative to the plugin directory",
                self.wasm
            )));
        }
        for p in &self.capabilities.paths {
            if !p.path.is_absolute() {
                return Err(invalid(format!(
                    "capabilities.paths: '{}' must be an absolute path",
                    p.path.display()
                )));
            }
        }
        for program in &self.capabilities.programs {
            if program.is_empty() || (program.contains('/') && !program.starts_with('/')) {
                return Err(invalid(format!(
                    "capabilities.programs: '{program}' must be a bare name or an absolute path"
                )));
            }
        }
        if self.limits.memory_mb == Some(0) || self.limits.max_instances == Some(0) {
            return Err(invalid("limits must be greater than zero".into()));
        }
        Ok(())
    }
}

fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, LoadError> {
        Manifest::parse(text, Path::new("/plugins/x/plugin.toml"))
    }

    #[test]
    fn parses_a_full_manifest() {
        let m = parse(
            r#"
            name = "lint"
            version = "1.0.0"
            kind = "tool"
            wasm = "lint.wasm"
            [capabilities]
            workspace = "read-write"
            paths = [{ path = "/usr/share/dict", access = "read" }]
            programs = ["eslint", "/usr/bin/git"]
            env = ["NODE_PATH"]
            network = true
            [limits]
            memory_mb = 64
            "#,
        )
        .unwrap();
        assert_eq!(m.kind, PluginKind::Tool);
        assert_eq!(m.capabilities.workspace, Access::ReadWrite);
        assert_eq!(m.capabilities.programs, vec!["eslint", "/usr/bin/git"]);
        assert_eq!(m.limits.memory_mb, Some(64));
        assert_eq!(m.limits.timeout_ms, None);
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let err = parse("name = \"x\"\nversion = \"1\"\nkind = \"tool\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("/plugins/x/plugin.toml: invalid manifest"),
            "{msg}"
        );
        assert!(msg.contains("wasm"), "{msg}");

        let err = parse("name = \"x\"\nversion = \"1\"\nkind = \"widget\"\nwasm = \"a.wasm\"")
            .unwrap_err();
        assert!(err.to_string().contains("widget"), "{err}");

        let err = parse(
            "name = \"x\"\nversion = \"1\"\nkind = \"tool\"\nwasm = \"a.wasm\"\nsurprise = 1",
        )
        .unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");
    }

    #[test]
    fn rejects_bad_names_paths_and_programs() {
        let base = "version = \"1\"\nkind = \"tool\"\n";
        for (extra, needle) in [
            ("name = \"Bad Name\"\nwasm = \"a.wasm\"", "name 'Bad Name'"),
            ("name = \"ok\"\nwasm = \"../a.wasm\"", "wasm '../a.wasm'"),
            ("name = \"ok\"\nwasm = \"/abs.wasm\"", "wasm '/abs.wasm'"),
            (
                "name = \"ok\"\nwasm = \"a.wasm\"\n[capabilities]\nprograms = [\"bin/sh\"]",
                "bin/sh",
            ),
            (
                "name = \"ok\"\nwasm = \"a.wasm\"\n[capabilities]\npaths = [{ path = \"rel\", access = \"read\" }]",
                "'rel' must be an absolute path",
            ),
            (
                "name = \"ok\"\nwasm = \"a.wasm\"\n[limits]\nmemory_mb = 0",
                "greater than zero",
            ),
        ] {
            let err = parse(&format!("{base}{extra}")).unwrap_err().to_string();
            assert!(err.contains(needle), "expected '{needle}' in: {err}");
        }
    }
}

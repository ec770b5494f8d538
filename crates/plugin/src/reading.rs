//! Reading a plugin from disk, before anything of it runs: the manifest
//! and component as they are (bounded, regular files only), the component
//! header checked, and each tool the plugin declares validated against the
//! host's limits.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::discovery::PluginSource;
use super::error::LoadError;
use super::integrity;
use super::manifest::Manifest;
use super::types::ToolSpec;

/// Most tools one plugin may declare.
pub const MAX_TOOLS_PER_PLUGIN: usize = 256;
/// Largest parameter schema of a tool (JSON text).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Longest tool description.
pub const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
/// Largest component file.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// A plugin as read, before anything of it runs.
pub(super) struct SourceRead {
    pub manifest: Manifest,
    /// The manifest's text.
    pub text: String,
    /// Where the component is (for messages).
    pub wasm_path: PathBuf,
    /// The component (a built-in plugin's are the binary's own, not copied).
    pub bytes: Cow<'static, [u8]>,
}

/// Read `source`'s manifest and component.
pub(super) fn read_source(
    source: &PluginSource,
    manifest_path: &Path,
) -> Result<SourceRead, LoadError> {
    match source {
        PluginSource::Bundled(b) => {
            let manifest = Manifest::parse(b.manifest, manifest_path)?;
            let wasm_path = PathBuf::from(format!("builtin:{}/{}", b.name, manifest.wasm));
            Ok(SourceRead {
                manifest,
                text: b.manifest.to_string(),
                wasm_path,
                bytes: Cow::Borrowed(b.wasm),
            })
        }
        PluginSource::Dir(dir) => {
            let (manifest, text) = Manifest::read_with_text(dir)?;
            let wasm_path = dir.join(&manifest.wasm);
            let bytes = crate::safe_fs::read_regular(
                &wasm_path,
                MAX_COMPONENT_BYTES,
                crate::safe_fs::Links::Follow,
            )
            .map_err(|source| LoadError::WasmUnreadable {
                path: wasm_path.clone(),
                manifest: manifest_path.to_path_buf(),
                source,
            })?;
            Ok(SourceRead {
                manifest,
                text,
                wasm_path,
                bytes: Cow::Owned(bytes),
            })
        }
    }
}

/// The SHA-256 (hex) of `bytes`, the component `source` read: a built-in
/// plugin's was taken when the binary was built.
pub(super) fn component_sha256(source: &PluginSource, bytes: &[u8]) -> String {
    match source {
        PluginSource::Bundled(b) => b.wasm_sha256.to_string(),
        PluginSource::Dir(_) => integrity::sha256_hex(bytes),
    }
}

/// The manifest of a plugin and the SHA-256 of its component, read
/// without compiling or running anything (for `sandcrab plugins pin`).
pub fn component_digest(source: &PluginSource) -> Result<(Manifest, String), LoadError> {
    let read = read_source(source, &source.manifest_path())?;
    let digest = component_sha256(source, &read.bytes);
    Ok((read.manifest, digest))
}

/// Reject core modules and non-wasm files with a message that says which.
pub(super) fn check_component_header(bytes: &[u8], path: &Path) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    let not = |message: &str| LoadError::NotAComponent {
        path: path.to_path_buf(),
        message: message.to_string(),
    };
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(not("the file is not WebAssembly (bad magic number)"));
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(not(
            "this is a core WebAssembly module, not a component; build for the wasm32-wasip2 target",
        )),
        _ => Err(not("unknown WebAssembly version or layer")),
    }
}

/// The parsed schema of a tool the plugin declared, or why it is unusable.
pub(super) fn validate_tool(
    name: &str,
    description: &str,
    schema: &str,
    traits: &super::types::ToolTraits,
    earlier: &[ToolSpec],
) -> Result<serde_json::Value, String> {
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid_name {
        return Err(format!("tool name '{name}' must match [a-z0-9_]{{1,64}}"));
    }
    if earlier.iter().any(|t| t.name == name) {
        return Err(format!("tool '{name}' is declared twice"));
    }
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "tool '{name}': its description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}",
            description.len()
        ));
    }
    if schema.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "tool '{name}': its parameters schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}",
            schema.len()
        ));
    }
    let value: serde_json::Value = serde_json::from_str(schema)
        .map_err(|e| format!("tool '{name}': parameters schema is not valid JSON: {e}"))?;
    if value.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(format!(
            "tool '{name}': parameters schema must be an object schema"
        ));
    }
    jsonschema::meta::validate(&value)
        .map_err(|e| format!("tool '{name}': parameters schema is not a valid JSON Schema: {e}"))?;
    if let super::types::Writes::Paths(args) = &traits.writes {
        for arg in args {
            if value.pointer(&format!("/properties/{arg}/type"))
                != Some(&serde_json::json!("string"))
            {
                return Err(format!(
                    "tool '{name}': it says it writes the path in argument '{arg}', which its schema does not declare as a string"
                ));
            }
        }
    }
    if traits.background
        && value.pointer("/properties/run_in_background/type")
            != Some(&serde_json::json!("boolean"))
    {
        return Err(format!(
            "tool '{name}': it may run in the background, so its schema must declare a boolean 'run_in_background'"
        ));
    }
    Ok(value)
}

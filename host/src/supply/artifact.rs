//! A plugin as an OCI artifact, in the layout `wkg` uses for components:
//! the component is an `application/wasm` layer under a
//! `application/vnd.wasm.config.v0+json` config; sandcrab adds the
//! plugin's `plugin.toml` and, when signed, its `plugin.sig` as two more
//! layers. The same artifact is written as an OCI image layout (a folder
//! or `.tar`) by `sandcrab plugins package`, and pushed by `publish`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plugin::integrity::sha256_hex;
use crate::plugin::{MAX_COMPONENT_BYTES, Manifest};

/// An OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// An OCI image index (a layout's `index.json`).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The config of a WebAssembly component artifact (as `wkg` writes it).
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The component.
pub const WASM_LAYER: &str = "application/wasm";
/// The plugin's `plugin.toml`.
pub const PLUGIN_MANIFEST_LAYER: &str = "application/vnd.sandcrab.plugin.manifest.v1+toml";
/// The plugin's SSH signature (`plugin.sig`).
pub const SIGNATURE_LAYER: &str = "application/vnd.sandcrab.plugin.signature.v1+sshsig";

/// Largest OCI manifest read.
pub const MAX_OCI_MANIFEST: u64 = 64 << 10;
/// Largest `plugin.toml` read.
pub const MAX_PLUGIN_MANIFEST: u64 = 64 << 10;
/// Largest signature read.
pub const MAX_SIGNATURE: u64 = 16 << 10;
/// Largest config blob read.
pub const MAX_CONFIG: u64 = 64 << 10;
/// The signature's file name in a plugin folder.
pub const SIGNATURE_FILE: &str = "plugin.sig";

/// Something wrong with an artifact or a plugin folder.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{what} is not an OCI manifest: {reason}")]
    NotAManifest { what: String, reason: String },
    #[error(
        "{what} has no {media_type} layer, so it is not a sandcrab plugin (package it with `sandcrab plugins package`)"
    )]
    MissingLayer {
        what: String,
        media_type: &'static str,
    },
    #[error(
        "{what}: its {part} is {size} bytes; the bound is {bound} bytes, so it was not downloaded"
    )]
    TooBig {
        what: String,
        part: &'static str,
        size: u64,
        bound: u64,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A plugin's three files, as bytes: what is installed, signed and
/// published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `plugin.toml`.
    pub manifest: Vec<u8>,
    /// The component (the manifest's `wasm`).
    pub component: Vec<u8>,
    /// `plugin.sig`, when signed.
    pub signature: Option<Vec<u8>>,
}

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.into(),
            digest: digest_of(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }

    /// The hex of a `sha256:` digest (checked: 64 lower-case hex digits).
    pub fn hex(&self) -> Result<&str, String> {
        hex_of(&self.digest)
    }
}

/// An OCI image manifest, as much of it as sandcrab reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The layers of a plugin artifact, found by media type.
#[derive(Debug, Clone)]
pub struct PluginLayers {
    pub manifest: Descriptor,
    pub component: Descriptor,
    pub signature: Option<Descriptor>,
}

impl ImageManifest {
    /// Parse and check a pulled manifest (`what` names it in errors).
    pub fn parse(bytes: &[u8], what: &str) -> Result<ImageManifest, ArtifactError> {
        let not = |reason: String| ArtifactError::NotAManifest {
            what: what.to_string(),
            reason,
        };
        let manifest: ImageManifest =
            serde_json::from_slice(bytes).map_err(|e| not(e.to_string()))?;
        if manifest.schema_version != 2 {
            return Err(not(format!("schemaVersion {}", manifest.schema_version)));
        }
        if let Some(media_type) = &manifest.media_type
            && media_type != OCI_MANIFEST
        {
            return Err(not(format!(
                "its mediaType is {media_type} (an index or an image of another kind?)"
            )));
        }
        Ok(manifest)
    }

    /// The plugin's layers, each within its bound.
    pub fn plugin_layers(&self, what: &str) -> Result<PluginLayers, ArtifactError> {
        for media_type in [PLUGIN_MANIFEST_LAYER, WASM_LAYER, SIGNATURE_LAYER] {
            if self
                .layers
                .iter()
                .filter(|l| l.media_type == media_type)
                .count()
                > 1
            {
                return Err(ArtifactError::Invalid {
                    what: what.to_string(),
                    reason: format!(
                        "it has more than one {media_type} layer, so which one is the plugin is not clear"
                    ),
                });
            }
        }
        let find = |media_type: &'static str| {
            self.layers
                .iter()
                .find(|l| l.media_type == media_type)
                .cloned()
        };
        let missing = |media_type| ArtifactError::MissingLayer {
            what: what.to_string(),
            media_type,
        };
        let layers = PluginLayers {
            manifest: find(PLUGIN_MANIFEST_LAYER).ok_or_else(|| missing(PLUGIN_MANIFEST_LAYER))?,
            component: find(WASM_LAYER).ok_or_else(|| missing(WASM_LAYER))?,
            signature: find(SIGNATURE_LAYER),
        };
        for (part, d, bound) in [
            (
                "plugin.toml layer",
                Some(&layers.manifest),
                MAX_PLUGIN_MANIFEST,
            ),
            (
                "component layer",
                Some(&layers.component),
                MAX_COMPONENT_BYTES,
            ),
            ("signature layer", layers.signature.as_ref(), MAX_SIGNATURE),
        ] {
            let Some(d) = d else { continue };
            d.hex().map_err(|reason| ArtifactError::Invalid {
                what: what.to_string(),
                reason: format!("its {part}: {reason}"),
            })?;
            if d.size > bound {
                return Err(ArtifactError::TooBig {
                    what: what.to_string(),
                    part,
                    size: d.size,
                    bound,
                });
            }
        }
        Ok(layers)
    }
}

/// `sha256:HEX` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// The hex of a `sha256:` digest, checked.
pub fn hex_of(digest: &str) -> Result<&str, String> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| super::reference::is_sha256_hex(h))
        .ok_or_else(|| format!("'{digest}' is not a sha256 digest"))
}

impl Package {
    /// Read a plugin folder: its `plugin.toml` (parsed, so a broken one is
    /// named here), the component it names, and `plugin.sig` if present.
    pub fn from_dir(dir: &Path) -> Result<(Package, Manifest), ArtifactError> {
        let read = |path: PathBuf, bound: u64| {
            crate::safe_fs::read_regular(&path, bound, crate::safe_fs::Links::Refuse)
                .map_err(|source| ArtifactError::Io { path, source })
        };
        let manifest_bytes = read(dir.join("plugin.toml"), MAX_PLUGIN_MANIFEST)?;
        let manifest = parse_manifest(&manifest_bytes, &dir.join("plugin.toml"))?;
        let component = read(dir.join(&manifest.wasm), MAX_COMPONENT_BYTES)?;
        let sig_path = dir.join(SIGNATURE_FILE);
        let signature = match std::fs::symlink_metadata(&sig_path) {
            Ok(_) => Some(read(sig_path, MAX_SIGNATURE)?),
            Err(_) => None,
        };
        Ok((
            Package {
                manifest: manifest_bytes,
                component,
                signature,
            },
            manifest,
        ))
    }

    /// The parsed `plugin.toml` (`what` names the package in errors).
    pub fn parsed_manifest(&self, what: &str) -> Result<Manifest, ArtifactError> {
        parse_manifest(&self.manifest, Path::new(what))
    }

    /// The OCI manifest and every blob it names (config and layers).
    pub fn to_oci(&self, manifest: &Manifest) -> (Vec<u8>, Vec<(Descriptor, Vec<u8>)>) {
        let mut component = Descriptor::of(WASM_LAYER, &self.component);
        component.annotations.insert(
            "org.opencontainers.image.title".into(),
            manifest.wasm.clone(),
        );
        let mut layers = vec![
            (component, self.component.clone()),
            (
                Descriptor::of(PLUGIN_MANIFEST_LAYER, &self.manifest),
                self.manifest.clone(),
            ),
        ];
        if let Some(sig) = &self.signature {
            layers.push((Descriptor::of(SIGNATURE_LAYER, sig), sig.clone()));
        }
        // No time in the config: packaging the same files twice gives the
        // same digest.
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [digest_of(&self.component)],
        }))
        .expect("JSON of a literal");
        let config_d = Descriptor::of(WASM_CONFIG, &config);
        let image = ImageManifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            artifact_type: None,
            config: config_d.clone(),
            layers: layers.iter().map(|(d, _)| d.clone()).collect(),
            annotations: BTreeMap::from([
                (
                    "org.opencontainers.image.title".into(),
                    manifest.name.clone(),
                ),
                (
                    "org.opencontainers.image.version".into(),
                    manifest.version.clone(),
                ),
            ]),
        };
        let bytes = serde_json::to_vec(&image).expect("JSON of a manifest");
        let mut blobs = vec![(config_d, config)];
        blobs.extend(layers);
        (bytes, blobs)
    }

    /// Write the plugin's files into `dir` (which exists and is empty).
    pub fn write_dir(&self, dir: &Path, manifest: &Manifest) -> Result<(), ArtifactError> {
        let io = |path: PathBuf| move |source| ArtifactError::Io { path, source };
        let write = |name: &str, bytes: &[u8]| {
            // A manifest may name its component in a subfolder (a Rust
            // plugin's `target/wasm32-wasip2/release/…`); never outside.
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent.to_path_buf()))?;
            }
            super::files::create_new(&path)
                .and_then(|mut file| std::io::Write::write_all(&mut file, bytes))
                .map_err(io(path))
        };
        write("plugin.toml", &self.manifest)?;
        write(&manifest.wasm, &self.component)?;
        if let Some(sig) = &self.signature {
            write(SIGNATURE_FILE, sig)?;
        }
        Ok(())
    }
}

fn parse_manifest(bytes: &[u8], path: &Path) -> Result<Manifest, ArtifactError> {
    let invalid = |reason: String| ArtifactError::Invalid {
        what: path.display().to_string(),
        reason,
    };
    let text =
        std::str::from_utf8(bytes).map_err(|_| invalid("plugin.toml is not UTF-8".into()))?;
    Manifest::parse(text, path).map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::supply) fn package() -> (Package, Manifest) {
        let text =
            b"name = \"hello\"\nversion = \"0.1.0\"\nkind = \"tool\"\nwasm = \"hello.wasm\"\n";
        let package = Package {
            manifest: text.to_vec(),
            component: b"\0asm\x0d\0\x01\0rest".to_vec(),
            signature: Some(b"-----BEGIN SSH SIGNATURE-----\n".to_vec()),
        };
        let manifest = package.parsed_manifest("t").unwrap();
        (package, manifest)
    }

    #[test]
    fn a_layer_past_its_bound_is_refused_by_its_descriptor() {
        let (package, manifest) = package();
        let (bytes, _) = package.to_oci(&manifest);
        let mut image = ImageManifest::parse(&bytes, "x").unwrap();
        image.layers[1].size = MAX_PLUGIN_MANIFEST + 1;
        let err = image.plugin_layers("x").unwrap_err().to_string();
        assert!(
            err.contains("plugin.toml layer") && err.contains("bound"),
            "{err}"
        );
        image.layers[1].size = 10;
        let wasm = image.layers[0].clone();
        image.layers.push(wasm);
        let err = image.plugin_layers("x").unwrap_err().to_string();
        assert!(
            err.contains("more than one application/wasm layer"),
            "{err}"
        );
        image.layers.remove(0);
        image.layers.pop();
        let err = image.plugin_layers("x").unwrap_err().to_string();
        assert!(err.contains("application/wasm"), "{err}");
    }
}

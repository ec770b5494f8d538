//! The plugin ABI versions the host understands. Each released version is
//! frozen in its own module (bindings generated from `wit/since_vX.Y.Z`);
//! [`detect`] tells which version and world a component implements.

pub mod since_v0_1_0;

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::manifest::PluginKind;

/// WIT package versions the host loads, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.1.0"];

/// A released version of the plugin ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WitVersion {
    V0_1_0,
}

impl WitVersion {
    fn parse(version: &str) -> Option<Self> {
        match version {
            "0.1.0" => Some(WitVersion::V0_1_0),
            _ => None,
        }
    }
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WitVersion::V0_1_0 => "0.1.0",
        })
    }
}

/// The exported instance names of `component` (e.g.
/// `sandcrab:plugin/tool@0.1.0`).
pub fn export_names(component: &Component, engine: &Engine) -> Vec<String> {
    component
        .component_type()
        .exports(engine)
        .filter(|(_, item)| matches!(item.ty, ComponentItem::ComponentInstance(_)))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Which ABI version of `kind`'s world `component` implements, or a message
/// saying what it exports instead.
pub fn detect(
    component: &Component,
    engine: &Engine,
    kind: PluginKind,
) -> Result<WitVersion, String> {
    let exports = export_names(component, engine);
    let wanted = format!("sandcrab:plugin/{}@", kind.export_interface());
    for name in &exports {
        if let Some(version) = name.strip_prefix(&wanted) {
            return WitVersion::parse(version).ok_or_else(|| {
                format!(
                    "it exports {name}, an ABI version this host does not know (supported: {})",
                    SUPPORTED_VERSIONS.join(", ")
                )
            });
        }
    }
    let found = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    Err(format!(
        "manifest says kind = \"{kind}\" (world {}), so the component must export sandcrab:plugin/{}@{}, but it exports {found}",
        kind.world(),
        kind.export_interface(),
        SUPPORTED_VERSIONS[0]
    ))
}

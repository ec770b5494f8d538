//! The first-party plugins' native code, compiled when the binary was built
//! (see `crates/plugin/build.rs`) with the engine settings the host runs with, so a
//! first start on a new machine compiles nothing.
//!
//! The code is part of the binary and as trusted as the rest of it. It is
//! used only for the exact component it was compiled from, and wasmtime
//! refuses it when this engine's settings or this CPU's features differ
//! from the build machine's; then the component is compiled here, once,
//! through the on-disk cache, and the operator is told why.

use sandcrab_bundled_plugins::BundledPlugin;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::cache::{CacheOutcome, ComponentCache};

/// One first-party plugin's code as the build compiled it.
pub struct Precompiled {
    /// The plugin's directory name under `plugins/`.
    pub name: &'static str,
    /// BLAKE3 (hex) of the component the code was compiled from.
    pub wasm_blake3: &'static str,
    /// What `Engine::precompile_component` produced.
    pub code: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/precompiled.rs"));

/// A loaded first-party component and, when its embedded code could not be
/// used, a note saying why and what was done instead.
pub struct Loaded {
    pub component: Component,
    pub outcome: CacheOutcome,
    pub note: Option<String>,
}

/// Load the bundled plugin `plugin`: from the embedded code, or else
/// through `cache`.
pub fn load(
    engine: &Engine,
    cache: &ComponentCache,
    plugin: &BundledPlugin,
) -> wasmtime::Result<Loaded> {
    let (name, wasm) = (plugin.name, plugin.wasm);
    let refused = match embedded(engine, plugin) {
        Ok(component) => {
            return Ok(Loaded {
                component,
                outcome: CacheOutcome::Embedded,
                note: None,
            });
        }
        Err(why) => why,
    };
    // Said in the note below, once it is done.
    let (component, outcome) = cache.load(engine, wasm, &|| {})?;
    // A cache hit was compiled (and noted) by an earlier start.
    let note = (outcome != CacheOutcome::Hit).then(|| {
        format!(
            "built-in plugin {name}: the code compiled into this binary is not usable here ({refused}); {} instead",
            outcome.describe()
        )
    });
    Ok(Loaded {
        component,
        outcome,
        note,
    })
}

/// The embedded code of `plugin`, if there is one for exactly its
/// component and this engine accepts it; otherwise why not. Both digests
/// were taken by the build from the files it embedded.
fn embedded(engine: &Engine, plugin: &BundledPlugin) -> Result<Component, String> {
    let code = PRECOMPILED
        .iter()
        .find(|p| p.name == plugin.name)
        .ok_or("the binary was built without it")?;
    if plugin.wasm_blake3 != code.wasm_blake3 {
        return Err("it was compiled from another build of the component".into());
    }
    // SAFETY: the bytes are part of this binary (written by its build
    // script with `Engine::precompile_component`), as trusted as the host's
    // own code. wasmtime checks that they were compiled for this engine's
    // settings and for CPU features this machine has, and refuses them
    // otherwise.
    unsafe { Component::deserialize(engine, code.code) }.map_err(|e| {
        let mut chain = format!("{e:#}");
        // At most 400 bytes, cut where no character continues.
        chain.truncate(chain.floor_char_boundary(400));
        chain
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_plugin_ships_precompiled_code() {
        for plugin in sandcrab_bundled_plugins::BUNDLED {
            let code = PRECOMPILED.iter().find(|p| p.name == plugin.name);
            let code = code.unwrap_or_else(|| panic!("{} has no embedded code", plugin.name));
            assert_eq!(
                blake3::hash(plugin.wasm).to_hex().as_str(),
                code.wasm_blake3,
                "{}: the embedded code is for another component",
                plugin.name
            );
            assert_eq!(
                plugin.wasm_blake3, code.wasm_blake3,
                "{}: the component's build-time digest is not its own",
                plugin.name
            );
            assert_eq!(
                crate::integrity::sha256_hex(plugin.wasm),
                plugin.wasm_sha256,
                "{}: the component's build-time SHA-256 is not its own",
                plugin.name
            );
        }
    }
}

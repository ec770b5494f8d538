//! The wasmtime configuration sandcrab compiles plugins with, in one place.
//!
//! The host builds its engine from [`config`], and the host's build script
//! precompiles the first-party plugins with an engine from the same
//! function, so the code embedded in the binary matches what the running
//! host would compile itself. Whatever changes compiled code (features,
//! tunables, debug info) is decided here; the allocation strategy is the
//! host's business, as it does not change the code.

use wasmtime::Config;

/// Settings that change the compiled code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeSettings {
    /// Emit native debug information (for `perf` and debuggers). The
    /// embedded first-party code is built without it, so turning it on
    /// makes the host compile those plugins itself.
    pub native_debug_info: bool,
}

/// A wasmtime configuration for plugins compiled with `settings`.
pub fn config(settings: CodeSettings) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    // Plugin deadlines: a ticker thread advances the epoch.
    config.epoch_interruption(true);
    config.debug_info(settings.native_debug_info);
    config
}

/// Compile a component with an engine made from `config(settings)`: the
/// bytes [`wasmtime::component::Component::deserialize`] accepts on an
/// engine with the same settings and CPU features.
pub fn precompile(settings: CodeSettings, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let engine = wasmtime::Engine::new(&config(settings))?;
    engine.precompile_component(wasm)
}

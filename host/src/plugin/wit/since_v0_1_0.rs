//! Host bindings for `sandcrab:plugin@0.1.0` (`wit/since_v0.1.0`), frozen.
//!
//! Every world of this version is bound here; the host imports of the
//! version (`process`, `log`) forward to the one real implementation in
//! [`crate::plugin::imports`].

/// The `tool-plugin` world; also defines the shared `types`, `process` and
/// `log` interfaces that the other worlds reuse.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit/since_v0.1.0",
        world: "tool-plugin",
        imports: { default: async },
        exports: { default: async },
    });
}

/// The `profile-plugin` world.
pub mod profile {
    wasmtime::component::bindgen!({
        path: "../wit/since_v0.1.0",
        world: "profile-plugin",
        imports: { default: async },
        exports: { default: async },
        with: { "sandcrab:plugin/log": super::tool::sandcrab::plugin::log },
    });
}

/// The `summarizer-plugin` world.
pub mod summarizer {
    wasmtime::component::bindgen!({
        path: "../wit/since_v0.1.0",
        world: "summarizer-plugin",
        imports: { default: async },
        exports: { default: async },
        with: { "sandcrab:plugin/log": super::tool::sandcrab::plugin::log },
    });
}

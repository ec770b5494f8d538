//! Host bindings for `sandcrab:fs@0.1.0` (`wit/fs/since_v0.1.0`), frozen;
//! implemented in [`crate::plugin::imports::fs`]. Offered to every plugin,
//! whatever its `sandcrab:plugin` version: it grants nothing beyond the
//! plugin's own mounts.

use wasmtime::component::HasSelf;

use crate::plugin::state::HostState;

wasmtime::component::bindgen!({
    path: "../wit/fs/since_v0.1.0",
    world: "fs-user",
    imports: { default: trappable },
    with: {
        "sandcrab:fs/directories.directory": crate::plugin::imports::fs_directory::FsDirectory,
    },
});

/// Define the interface in `linker`.
pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    FsUser::add_to_linker::<_, HasSelf<_>>(linker, |state| state)
}

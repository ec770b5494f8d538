//! Host bindings for `sandcrab:fs@0.1.0` (`wit/fs/since_v0.1.0`), frozen;
//! implemented in [`crate::imports::fs`]. Offered to every plugin,
//! whatever its `sandcrab:plugin` version: it grants nothing beyond the
//! plugin's own mounts.

wasmtime::component::bindgen!({
    path: "../../wit/fs/since_v0.1.0",
    world: "fs-user",
    imports: { default: trappable },
    with: {
        "sandcrab:fs/directories.directory": crate::imports::fs_directory::FsDirectory,
    },
});

use self::sandcrab::fs::directories as v;

fs_directories_host!();

//! Host bindings for `sandcrab:fs@0.2.0` (`wit/fs/since_v0.2.0`), frozen:
//! 0.1.0 plus `read-lines` (the host counts the lines, the guest gets only
//! the window) and `entries-packed` (a directory's names in one buffer).

wasmtime::component::bindgen!({
    path: "../../wit/fs/since_v0.2.0",
    world: "fs-user",
    imports: { default: trappable },
    with: {
        "sandcrab:fs/directories.directory": crate::imports::fs_directory::FsDirectory,
    },
});

use self::sandcrab::fs::directories as v;

fs_directories_host! {
    fn read_lines(
        &mut self,
        dir: Resource<FsDirectory>,
        name: String,
        follow: bool,
        first: u64,
        max_lines: u64,
    ) -> wasmtime::Result<Result<v::Lines, v::Error>> {
        Ok(self
            .fs_read_lines(&dir, name, follow, first, max_lines)?
            .map(|l| v::Lines {
                text: l.text,
                count: l.count,
                total: l.total,
                size: l.size,
                head: l.head,
            })
            .map_err(error))
    }

    fn entries_packed(
        &mut self,
        dir: Resource<FsDirectory>,
    ) -> wasmtime::Result<Result<v::PackedEntries, v::Error>> {
        let mut names = Vec::new();
        let mut kinds = Vec::new();
        let listed = self.fs_entries(&dir, |name, k| {
            names.extend_from_slice(name.as_bytes());
            names.push(0);
            kinds.push(kind(k));
        })?;
        Ok(listed
            .map(|()| v::PackedEntries { names, kinds })
            .map_err(error))
    }
}

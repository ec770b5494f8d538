//! What every version of `sandcrab:fs/directories` binds the same way,
//! written once: the methods of 0.1.0, converted to and from the
//! version-neutral implementation in [`crate::imports::fs`]. A
//! version's file names its interface module `v` and adds the methods it
//! introduced.

/// Implement version `v`'s `Host` and `HostDirectory` for the host state;
/// `$extra` are the methods that version added.
macro_rules! fs_directories_host {
    ($($extra:item)*) => {
        use crate::imports::fs::{FsDirectory, FsError, Kind};
        use crate::state::HostState;
        use wasmtime::component::Resource;

        fn error(e: FsError) -> v::Error {
            match e {
                FsError::NotFound => v::Error::NotFound,
                FsError::AccessDenied | FsError::Refused => v::Error::AccessDenied,
                FsError::NotADirectory => v::Error::NotADirectory,
                FsError::InvalidName => v::Error::InvalidName,
                FsError::Other(text) => v::Error::Other(text),
            }
        }

        fn kind(k: Kind) -> v::EntryKind {
            match k {
                Kind::File => v::EntryKind::File,
                Kind::Directory => v::EntryKind::Directory,
                Kind::Other => v::EntryKind::Other,
            }
        }

        impl v::Host for HostState {}

        impl v::HostDirectory for HostState {
            fn open(
                &mut self,
                path: String,
            ) -> wasmtime::Result<Result<Resource<FsDirectory>, v::Error>> {
                Ok(self.fs_open(path)?.map_err(error))
            }

            fn entries(
                &mut self,
                dir: Resource<FsDirectory>,
            ) -> wasmtime::Result<Result<Vec<v::Entry>, v::Error>> {
                let mut entries = Vec::new();
                let listed = self.fs_entries(&dir, |name, k| {
                    entries.push(v::Entry {
                        name: name.to_string(),
                        kind: kind(k),
                    })
                })?;
                Ok(listed.map(|()| entries).map_err(error))
            }

            fn open_directory(
                &mut self,
                dir: Resource<FsDirectory>,
                name: String,
            ) -> wasmtime::Result<Result<Resource<FsDirectory>, v::Error>> {
                Ok(self.fs_open_directory(&dir, name)?.map_err(error))
            }

            fn read_file(
                &mut self,
                dir: Resource<FsDirectory>,
                name: String,
                follow: bool,
                offset: u64,
                max_bytes: u64,
            ) -> wasmtime::Result<Result<v::Content, v::Error>> {
                Ok(self
                    .fs_read_file(&dir, name, follow, offset, max_bytes)?
                    .map(|(bytes, complete)| v::Content { bytes, complete })
                    .map_err(error))
            }

            fn modified(
                &mut self,
                dir: Resource<FsDirectory>,
                names: Vec<String>,
            ) -> wasmtime::Result<Vec<Option<u64>>> {
                self.fs_modified(&dir, names)
            }

            fn drop(&mut self, dir: Resource<FsDirectory>) -> wasmtime::Result<()> {
                self.fs_drop(dir)
            }

            $($extra)*
        }

        /// Define the interface in `linker`.
        pub fn add_to_linker(
            linker: &mut wasmtime::component::Linker<HostState>,
        ) -> wasmtime::Result<()> {
            FsUser::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |state| state)
        }
    };
}

//! `wasi:filesystem/types` as every plugin gets it: wasmtime-wasi's own
//! implementation (mounts, read-only preopens, nothing beneath a mount
//! left), with each operation that reads, creates, changes, moves or
//! removes a path first judged by [`crate::kept::Judge`] on where that
//! path really is. A secret the host keeps is neither opened nor listed,
//! an integrity root or a protected path (`.git/config`, a `.git` entry,
//! `sandcrab.toml`) is never written, however the guest names it — through
//! a link, a `..`, a hard link or a descriptor it holds.
//!
//! How a path is located: the folder it would be in is opened beneath the
//! guest's descriptor (`openat2(RESOLVE_BENEATH)`, links followed as
//! wasmtime-wasi follows them, never out of the mount) and asked where it
//! really is (`/proc/self/fd`); the last name is joined to that. An opened
//! file or folder is asked again after opening, so what was judged is what
//! the guest holds.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, OFlags};
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};

use crate::kept::{Access, Judge, Refusal};
use crate::types::ActivityLog;

/// The `HasData` of the guarded interface.
pub struct GuardedFs;

impl HasData for GuardedFs {
    type Data<'a> = GuardedFsView<'a>;
}

/// wasmtime-wasi's view of the call's files, and what judges them.
pub struct GuardedFsView<'a> {
    pub inner: WasiFilesystemCtxView<'a>,
    pub judge: &'a Judge,
    /// Where refusals are recorded (the call's receipt).
    pub log: Option<&'a ActivityLog>,
}

/// Where the open file or folder `fd` really is.
fn real_path_of(fd: RawFd) -> Result<PathBuf, ErrorCode> {
    super::beneath::real_path_of(fd).map_err(|_| ErrorCode::Access)
}

fn raw_fd(descriptor: &Descriptor) -> RawFd {
    match descriptor {
        Descriptor::File(f) => f.file.as_raw_fd(),
        Descriptor::Dir(d) => d.dir.as_raw_fd(),
    }
}

/// `path`'s folder and last name; the folder is `.` for one name.
fn split(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rsplit_once('/') {
        Some((dir, name)) => (if dir.is_empty() { "/" } else { dir }, name),
        None => (".", trimmed),
    }
}

/// Where `path` (named beneath the folder `dir`) really is, or would be
/// created: its folder resolved beneath `dir` as the open would resolve
/// it, its last name joined (followed too, when `follow` and it is a
/// link).
fn locate(dir: RawFd, path: &str, follow: bool) -> Result<PathBuf, ErrorCode> {
    // SAFETY: `dir` is a descriptor the guest's table holds open for the
    // whole call; it is borrowed, not closed.
    let dir = unsafe { std::os::fd::BorrowedFd::borrow_raw(dir) };
    let (folder, name) = split(path);
    if name.is_empty() || name == "." || name == ".." {
        let whole = open_path(dir, if path.is_empty() { "." } else { path })?;
        return real_path_of(whole.as_raw_fd());
    }
    let parent = open_path(dir, folder)?;
    let at = real_path_of(parent.as_raw_fd())?.join(name);
    if follow
        && rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink())
    {
        // Where the link leads, if it leads anywhere beneath the mount; a
        // link to nothing would be created through: refused.
        let target = open_path(dir, path).map_err(|_| ErrorCode::Access)?;
        return real_path_of(target.as_raw_fd());
    }
    Ok(at)
}

/// `path` beneath `dir`, opened only to say where it is.
fn open_path(dir: std::os::fd::BorrowedFd<'_>, path: &str) -> Result<OwnedFd, ErrorCode> {
    super::beneath::open_beneath(dir, path, OFlags::PATH | OFlags::CLOEXEC).map_err(|e| match e {
        rustix::io::Errno::NOENT => ErrorCode::NoEntry,
        rustix::io::Errno::NOTDIR => ErrorCode::NotDirectory,
        _ => ErrorCode::Access,
    })
}

impl GuardedFsView<'_> {
    fn descriptor_fd(&mut self, fd: &Resource<Descriptor>) -> FsResult<RawFd> {
        Ok(raw_fd(self.inner.table.get(fd)?))
    }

    /// Judge `access` to `path` beneath the guest's folder `fd`.
    fn judge_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        access: Access,
    ) -> FsResult<()> {
        let dir = self.descriptor_fd(fd)?;
        let real = locate(dir, path, follow)?;
        self.judge_real(&real, access)
    }

    fn judge_real(&self, real: &Path, access: Access) -> FsResult<()> {
        match self.judge.check(real, access) {
            Ok(()) => Ok(()),
            Err(refusal) => Err(self.refused(refusal)),
        }
    }

    /// Record `refusal` for the call's receipt; the guest gets `access`.
    fn refused(&self, refusal: Refusal) -> FsError {
        tracing::info!("file access refused: {refusal}");
        if let Some(log) = self.log
            && let Ok(mut activity) = log.lock()
        {
            activity.refuse_file(refusal.to_string());
        }
        ErrorCode::Access.into()
    }
}

fn follows(flags: types::PathFlags) -> bool {
    flags.contains(types::PathFlags::SYMLINK_FOLLOW)
}

impl types::Host for GuardedFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl HostDescriptor for GuardedFsView<'_> {
    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let writes = oflags.intersects(types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE)
            || flags.contains(types::DescriptorFlags::WRITE);
        if writes {
            // Before anything is created or cut: where it would be.
            self.judge_at(&fd, &path, follows(path_flags), Access::Write)?;
        }
        let opened =
            HostDescriptor::open_at(&mut self.inner, fd, path_flags, path, oflags, flags).await?;
        // What was opened, where it really is.
        let checked = self
            .descriptor_fd(&opened)
            .and_then(|raw| Ok(real_path_of(raw)?))
            .and_then(|real| {
                self.judge_real(&real, Access::Read)?;
                if writes {
                    self.judge_real(&real, Access::Write)?;
                }
                Ok(())
            });
        match checked {
            Ok(()) => Ok(opened),
            Err(err) => {
                HostDescriptor::drop(&mut self.inner, opened).map_err(FsError::trap)?;
                Err(err)
            }
        }
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.judge_at(&fd, &path, false, Access::Write)?;
        HostDescriptor::create_directory_at(&mut self.inner, fd, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.judge_at(&fd, &path, follows(path_flags), Access::Write)?;
        HostDescriptor::set_times_at(&mut self.inner, fd, path_flags, path, atim, mtim).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        // A second name for a file is a second way to write it: what may
        // not be written may not be linked.
        self.judge_at(&fd, &old_path, follows(old_path_flags), Access::Read)?;
        self.judge_at(&fd, &old_path, follows(old_path_flags), Access::Write)?;
        self.judge_at(&new_descriptor, &new_path, false, Access::Write)?;
        HostDescriptor::link_at(
            &mut self.inner,
            fd,
            old_path_flags,
            old_path,
            new_descriptor,
            new_path,
        )
        .await
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.judge_at(&fd, &path, false, Access::Read)?;
        HostDescriptor::readlink_at(&mut self.inner, fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.judge_at(&fd, &path, false, Access::Move)?;
        HostDescriptor::remove_directory_at(&mut self.inner, fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.judge_at(&fd, &old_path, false, Access::Move)?;
        // Whatever is at the new name is replaced: removed.
        self.judge_at(&new_fd, &new_path, false, Access::Move)?;
        HostDescriptor::rename_at(&mut self.inner, fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.judge_at(&fd, &dest_path, false, Access::Write)?;
        HostDescriptor::symlink_at(&mut self.inner, fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.judge_at(&fd, &path, false, Access::Move)?;
        HostDescriptor::unlink_file_at(&mut self.inner, fd, path).await
    }

    // What follows acts on a descriptor the guest already holds (judged
    // when it was opened) or reads metadata only: as wasmtime-wasi does it.

    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        HostDescriptor::advise(&mut self.inner, fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync_data(&mut self.inner, fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        HostDescriptor::get_flags(&mut self.inner, fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        HostDescriptor::get_type(&mut self.inner, fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        HostDescriptor::set_size(&mut self.inner, fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        HostDescriptor::set_times(&mut self.inner, fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        HostDescriptor::read(&mut self.inner, fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        HostDescriptor::write(&mut self.inner, fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        HostDescriptor::read_directory(&mut self.inner, fd).await
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync(&mut self.inner, fd).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        HostDescriptor::stat(&mut self.inner, fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        HostDescriptor::stat_at(&mut self.inner, fd, path_flags, path).await
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.inner, fd)
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        HostDescriptor::read_via_stream(&mut self.inner, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::write_via_stream(&mut self.inner, fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::append_via_stream(&mut self.inner, fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        HostDescriptor::is_same_object(&mut self.inner, a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash(&mut self.inner, fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash_at(&mut self.inner, fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for GuardedFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        HostDirectoryEntryStream::read_directory_entry(&mut self.inner, stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}

/// Put the guarded interface in place of wasmtime-wasi's in `linker`
/// (after `wasmtime_wasi::p2::add_to_linker_async`), reaching each
/// store's view through `view`.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    view: fn(&mut T) -> GuardedFsView<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = types::add_to_linker::<_, GuardedFs>(linker, view);
    linker.allow_shadowing(false);
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_located_where_it_really_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("secret")).unwrap();
        std::fs::write(root.join("secret/key"), "k").unwrap();
        std::os::unix::fs::symlink("secret", root.join("via")).unwrap();
        std::os::unix::fs::symlink("secret/key", root.join("keylink")).unwrap();
        let fd = std::fs::File::open(&root).unwrap();
        let raw = fd.as_raw_fd();
        assert_eq!(locate(raw, "a/b/new", false).unwrap(), root.join("a/b/new"));
        assert_eq!(
            locate(raw, "via/key", false).unwrap(),
            root.join("secret/key")
        );
        assert_eq!(locate(raw, "keylink", false).unwrap(), root.join("keylink"));
        assert_eq!(
            locate(raw, "keylink", true).unwrap(),
            root.join("secret/key")
        );
        assert_eq!(locate(raw, "a/..", false).unwrap(), root);
        assert_eq!(locate(raw, "", false).unwrap(), root);
        // Out of the mount: refused as the open would be.
        assert!(locate(raw, "../x", false).is_err());
        assert!(matches!(
            locate(raw, "missing/x", false),
            Err(ErrorCode::NoEntry)
        ));
    }
}

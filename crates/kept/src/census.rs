//! Git metadata a program leaves behind. A confined program may write the
//! workspace, and a mount cannot stop it from making a name that did not
//! exist when it started: a `.git` file that sends the user's next `git
//! status` to a configuration of the model's, a `hooks` folder in a
//! repository that had none. So the git metadata of the workspace is
//! counted before a program starts ([`Census`]) and after it ended (its
//! PID namespace is gone: nothing of it still runs); what is new is let
//! stand only when git reads it as data (a `git init`, a `git clone`, a
//! linked worktree) and is otherwise taken out of the workspace — into
//! sandcrab's quarantine folder — and named.
//!
//! A count after the first reads again only the folders whose modification
//! stamp changed (a name added or removed changes it): the others are
//! taken as the last count left them, so counting a workspace costs a
//! `stat` per folder, not a listing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::git_config::runs_something;
use super::protected::{GIT, GIT_DATA, ProtectionKind, git_layout, git_metadata};

/// Most folders one count walks (a larger workspace is counted up to
/// here, and the count says it is incomplete).
pub const MAX_FOLDERS: usize = 500_000;
/// Largest git metadata file read to judge it.
const MAX_READ: u64 = 256 << 10;

/// The git metadata of a workspace at one moment.
#[derive(Debug, Clone, Default)]
pub struct Census {
    /// Every `.git` entry and every existing name inside one that makes
    /// git run something (absolute paths), with how a program finds it.
    found: BTreeMap<PathBuf, ProtectionKind>,
    /// Each folder walked, as it was read.
    folders: HashMap<PathBuf, Folder>,
    /// Whether every folder was walked.
    pub complete: bool,
    /// What was counted but is not known to be the workspace's own (see
    /// [`Alone`]): judged by the sweep as if it were new.
    unsettled: BTreeSet<PathBuf>,
}

/// Whether a program is the only one that may write its workspace when it
/// is counted or swept. What a count finds while another program runs
/// there may be that program's, not judged yet: a program counted then
/// does not take it as there before (or it could put it back, unjudged,
/// once the other program's sweep took it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alone {
    Yes,
    No,
}

/// What one folder held when it was last read.
#[derive(Debug, Clone)]
struct Folder {
    stamp: Stamp,
    subfolders: Vec<OsString>,
    git: bool,
    /// Laid out as a git folder itself (a bare repository).
    bare: bool,
}

/// What changes when a name is added to, removed from or renamed in a
/// folder (or the folder is replaced). The change time is in it because a
/// program can put a folder's modification time back (`touch -r`), never
/// its change time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

/// The last count of each workspace, by its root.
static LAST: Mutex<Option<HashMap<PathBuf, Census>>> = Mutex::new(None);
/// The git metadata of each workspace known to be its own: counted while
/// no program ran there, or let stand by a sweep then.
static SETTLED: Mutex<Option<HashMap<PathBuf, BTreeSet<PathBuf>>>> = Mutex::new(None);

/// What a sweep took out, and whether it saw the whole workspace.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub swept: Vec<Swept>,
    pub complete: bool,
}

/// One thing a program left that was taken out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub path: PathBuf,
    pub why: String,
    /// Where it went (None: removed).
    pub kept_in: Option<PathBuf>,
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was taken out of the workspace: a program made it, and {}",
            self.path.display(),
            self.why
        )?;
        if let Some(to) = &self.kept_in {
            write!(f, " (kept in {})", to.display())?;
        }
        Ok(())
    }
}

impl Census {
    /// Count the git metadata beneath `workspace`, reading every folder.
    pub fn take(workspace: &Path) -> Census {
        Census::default().recount(workspace)
    }

    /// Count the git metadata beneath `workspace` before a program starts:
    /// from the last count of it, reading again only what changed since.
    /// Counted while other programs run there (`alone` is No), what is not
    /// known to be the workspace's own is judged by this program's sweep.
    pub fn before_program(workspace: &Path, alone: Alone) -> Census {
        let last = lock(&LAST)
            .as_mut()
            .and_then(|all| all.remove(workspace))
            .unwrap_or_default();
        let mut census = last.recount(workspace);
        let mut settled = lock(&SETTLED);
        let settled = settled.get_or_insert_with(HashMap::new);
        match alone {
            Alone::Yes => {
                settled.insert(
                    workspace.to_path_buf(),
                    census.found.keys().cloned().collect(),
                );
            }
            Alone::No => {
                let known = settled.get(workspace);
                census.unsettled = census
                    .found
                    .keys()
                    .filter(|p| !known.is_some_and(|k| k.contains(*p)))
                    .cloned()
                    .collect();
            }
        }
        census
    }

    /// The git metadata found, each with how a program finds it (a `.git`
    /// folder pinned, what makes git run something read-only): every
    /// repository of the workspace, at any depth.
    pub fn protected(&self) -> Vec<(PathBuf, ProtectionKind)> {
        self.found.iter().map(|(p, k)| (p.clone(), *k)).collect()
    }

    /// Count again from this count: a folder whose stamp did not change is
    /// taken as it was; the others are read.
    pub fn recount(&self, workspace: &Path) -> Census {
        let mut census = Census {
            complete: true,
            ..Census::default()
        };
        // What the host keeps is covered for every program (hidden or
        // read-only): no program makes git metadata there, and the host's
        // own folders (its quarantine) are not the workspace's.
        let kept = super::current();
        let mut pending = vec![workspace.to_path_buf()];
        while let Some(dir) = pending.pop() {
            if dir != workspace && kept.holding(&dir).is_some() {
                continue;
            }
            if census.folders.len() >= MAX_FOLDERS {
                census.complete = false;
                break;
            }
            let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let stamp = Stamp {
                inode: meta.ino(),
                mtime: meta.mtime(),
                mtime_nsec: meta.mtime_nsec(),
                ctime: meta.ctime(),
                ctime_nsec: meta.ctime_nsec(),
            };
            let folder = match self.folders.get(&dir) {
                Some(known) if known.stamp == stamp => known.clone(),
                _ => match read_folder(&dir, stamp) {
                    Some(folder) => folder,
                    None => continue,
                },
            };
            // A git folder too large to search whole leaves the count
            // incomplete: what is in it cannot all be covered or judged.
            if folder.git {
                census.complete &= census.add_metadata(&dir.join(GIT));
            }
            if folder.bare {
                census.complete &= census.add_metadata(&dir);
            }
            pending.extend(folder.subfolders.iter().map(|name| dir.join(name)));
            census.folders.insert(dir, folder);
        }
        census
    }

    /// Add the metadata of the git folder (or file) `git`; false when it
    /// is too large to be searched whole.
    fn add_metadata(&mut self, git: &Path) -> bool {
        let mut metadata = Vec::new();
        let whole = git_metadata(git, &mut metadata);
        self.found.extend(metadata);
        whole
    }

    /// Count again after a program ended, and take out of the workspace
    /// what it made that git would not read as data; into `quarantine`
    /// (removed when it cannot be moved there). The count is kept for the
    /// workspace's next program.
    /// Swept while no other program runs there (`alone`), what is let
    /// stand is known to be the workspace's own.
    pub fn sweep(&self, workspace: &Path, quarantine: Option<&Path>, alone: Alone) -> Sweep {
        let after = self.recount(workspace);
        let swept = self.take_out_new(&after, workspace, quarantine);
        let complete = after.complete;
        if alone == Alone::Yes {
            let stands = after
                .found
                .keys()
                .filter(|p| !swept.iter().any(|s| p.starts_with(&s.path)))
                .cloned()
                .collect();
            lock(&SETTLED)
                .get_or_insert_with(HashMap::new)
                .insert(workspace.to_path_buf(), stands);
        }
        lock(&LAST)
            .get_or_insert_with(HashMap::new)
            .insert(workspace.to_path_buf(), after);
        Sweep { swept, complete }
    }

    /// What `after` holds beyond this count that would make git run
    /// something, taken out.
    fn take_out_new(
        &self,
        after: &Census,
        workspace: &Path,
        quarantine: Option<&Path>,
    ) -> Vec<Swept> {
        let mut swept = Vec::new();
        let mut taken: Vec<PathBuf> = Vec::new();
        for (path, kind) in after
            .found
            .iter()
            .filter(|(p, _)| !self.found.contains_key(*p) || self.unsettled.contains(*p))
        {
            // Inside what was taken out already: gone with it.
            if taken.iter().any(|t| path.starts_with(t)) {
                continue;
            }
            // A folder that became a bare repository stays (it is the
            // workspace's); what in it would make git run something is
            // judged on its own.
            if *kind == ProtectionKind::Pinned && path.file_name().is_some_and(|n| n != GIT) {
                continue;
            }
            let Some(why) = self.judge_new(path) else {
                continue;
            };
            let why = format!(
                "{why}; git metadata the model's programs make may not make git run anything"
            );
            let kept_in = take_out(path, workspace, quarantine);
            taken.push(path.clone());
            swept.push(Swept {
                path: path.clone(),
                why,
                kept_in,
            });
        }
        swept
    }

    /// Why a new piece of git metadata would make git run something (None:
    /// it is data).
    fn judge_new(&self, path: &Path) -> Option<String> {
        let name = path.file_name()?.to_str().unwrap_or("");
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            return Some("it is a link (git follows it wherever it leads)".into());
        }
        if let Some(why) = hard_linked(path, &meta) {
            return Some(why);
        }
        if name == GIT {
            return if meta.is_dir() {
                judge_git_dir(path)
            } else {
                self.judge_git_file(path)
            };
        }
        match name {
            "hooks" => judge_hooks(path),
            "config" | "config.worktree" => judge_config(path),
            // Where a linked worktree's common folder is: only the git
            // folder it is in.
            "commondir" => judge_commondir(path),
            // Where a linked worktree is: data.
            _ => None,
        }
    }

    /// A `gitdir:` file: it may only point into a repository that was
    /// there before (a linked worktree, a submodule), and what it points at
    /// is judged like a new git folder.
    fn judge_git_file(&self, path: &Path) -> Option<String> {
        let text = read_small(path)?;
        // As git reads it: `gitdir: ` exactly, then the path to the end of
        // the line (spaces are part of it).
        let Some(target) = text.strip_prefix("gitdir: ").map(pointer) else {
            return Some("it is a `.git` file git cannot read".into());
        };
        let base = path.parent()?;
        let Ok(resolved) = std::fs::canonicalize(base.join(target)) else {
            return Some(format!("it sends git to {target}, which does not exist"));
        };
        let old = self.found.iter().find(|(old, kind)| {
            **kind == ProtectionKind::Pinned
                && !self.unsettled.contains(*old)
                && resolved.starts_with(old)
        });
        match old {
            None => Some(format!(
                "it sends git to {target}, which is not in a repository that was there before"
            )),
            // The repository itself, or a linked worktree's or a
            // submodule's folder in it — never its data folders, which
            // are not searched for configuration — and what git would
            // read there is judged.
            Some((old, _)) if git_folder_within(old, &resolved) => judge_git_dir(&resolved),
            Some(_) => Some(format!(
                "it sends git to {target}, which is not a repository, a linked worktree's or a submodule's folder"
            )),
        }
    }
}

/// Whether `target` is the git folder `git` itself or a linked worktree's
/// or submodule's folder in it (`worktrees/…`, `modules/…`), outside the
/// data folders.
fn git_folder_within(git: &Path, target: &Path) -> bool {
    let Ok(inside) = target.strip_prefix(git) else {
        return false;
    };
    let names: Vec<&std::ffi::OsStr> = inside.iter().collect();
    match names.first() {
        None => true,
        Some(first) => {
            (*first == "worktrees" || *first == "modules")
                && !names
                    .iter()
                    .any(|n| n.to_str().is_some_and(|n| GIT_DATA.contains(&n)))
        }
    }
}

/// A `commondir` file: it may only name the git folder it is in (what
/// `git worktree add` writes, `../..`).
fn judge_commondir(path: &Path) -> Option<String> {
    let text = read_small(path)?;
    let target = pointer(&text);
    let own = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == GIT));
    let resolved = std::fs::canonicalize(path.parent()?.join(target)).ok();
    match (own, resolved) {
        (Some(own), Some(resolved)) if own == resolved => None,
        _ => Some(format!(
            "it sends git to {target:?} for its configuration, not to the git folder it is in"
        )),
    }
}

/// A path git reads from a pointer file (`gitdir:`, `commondir`): what is
/// there up to the end of the line, only `\n` and `\r` dropped from its
/// end — a trailing space is part of the name.
fn pointer(text: &str) -> &str {
    text.trim_end_matches(['\n', '\r'])
}

/// The names in `dir` (stamped `stamp`): its subfolders, whether it holds
/// a `.git` entry, and whether it is itself laid out as a git folder.
fn read_folder(dir: &Path, stamp: Stamp) -> Option<Folder> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut folder = Folder {
        stamp,
        subfolders: Vec::new(),
        git: false,
        bare: false,
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == GIT {
            folder.git = true;
        } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
            folder.subfolders.push(name);
        }
    }
    folder.bare = git_layout(dir, None);
    Some(folder)
}

/// A new git folder: what `git init` or `git clone` makes is data; a
/// configuration that names a program, a hook, or a pointer elsewhere is
/// not.
fn judge_git_dir(git: &Path) -> Option<String> {
    let mut inside = Vec::new();
    if !git_metadata(git, &mut inside) {
        return Some("it holds too many names to be searched whole".into());
    }
    for (path, _) in inside {
        if path == git {
            continue;
        }
        let name = path.file_name()?.to_str().unwrap_or("");
        if let Some(why) = std::fs::symlink_metadata(&path)
            .ok()
            .and_then(|m| hard_linked(&path, &m))
        {
            return Some(why);
        }
        let found = match name {
            "hooks" => judge_hooks(&path),
            "config" | "config.worktree" => judge_config(&path),
            "commondir" => judge_commondir(&path),
            "gitdir" => None,
            _ => Some(format!("it holds {name}, which sends git elsewhere")),
        };
        if let Some(why) = found {
            return Some(why);
        }
    }
    None
}

/// A file with another name elsewhere (a hard link): covering this name
/// read-only would not stop a program writing it through the other.
fn hard_linked(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    (!meta.is_dir() && meta.nlink() > 1).then(|| {
        format!(
            "{} has {} other name(s) (hard links) a program could rewrite it through",
            path.file_name().unwrap_or_default().to_string_lossy(),
            meta.nlink() - 1
        )
    })
}

/// A hooks folder: only git's own samples (`*.sample`, never run).
fn judge_hooks(hooks: &Path) -> Option<String> {
    let entries = match std::fs::read_dir(hooks) {
        Ok(entries) => entries,
        Err(_) => return Some("its hooks folder cannot be read".into()),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let plain = entry.file_type().is_ok_and(|t| t.is_file());
        if !(plain && name.ends_with(".sample")) {
            return Some(format!(
                "its hooks folder holds {name}, which git would run"
            ));
        }
    }
    None
}

fn judge_config(config: &Path) -> Option<String> {
    match read_small(config) {
        Some(text) => runs_something(&text).map(|key| format!("its configuration sets {key}")),
        None => Some("its configuration cannot be read".into()),
    }
}

fn read_small(path: &Path) -> Option<String> {
    let bytes = crate::safe_fs::read_regular(path, MAX_READ, crate::safe_fs::Links::Refuse).ok()?;
    String::from_utf8(bytes).ok()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Move `path` out of the workspace into `quarantine` (named after its
/// place beneath the workspace); remove it when that fails. Every step is
/// taken beneath the workspace without following a link (another program
/// of the model's may swap a folder on the way for a link to a repository
/// elsewhere): nothing outside the workspace is ever moved or removed.
pub(super) fn take_out(
    path: &Path,
    workspace: &Path,
    quarantine: Option<&Path>,
) -> Option<PathBuf> {
    let relative = path.strip_prefix(workspace).ok()?;
    let (parent, name) = match beneath::parent_of(workspace, relative) {
        Ok(found) => found,
        Err(err) => {
            tracing::warn!("could not take {} out: {err}", path.display());
            return None;
        }
    };
    if let Some(quarantine) = quarantine {
        let flat: String = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("__");
        let to = quarantine.join(format!(
            "{}-{:08x}-{flat}",
            crate::time::now_rfc3339().replace(':', ""),
            rand::random::<u32>()
        ));
        if create_private(quarantine).is_ok() && beneath::move_to(&parent, &name, &to).is_ok() {
            return Some(to);
        }
    }
    if let Err(err) = beneath::remove(&parent, &name) {
        tracing::warn!("could not take {} out: {err}", path.display());
    }
    None
}

/// Moving and removing beneath a folder, following no link.
mod beneath {
    use std::ffi::OsString;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
    use rustix::io::Errno;

    const DIR: OFlags = OFlags::DIRECTORY
        .union(OFlags::RDONLY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);

    /// The folder holding `relative` beneath `root`, reached one name at
    /// a time without following a link, and the last name.
    pub fn parent_of(root: &Path, relative: &Path) -> Result<(OwnedFd, OsString), Errno> {
        let mut names: Vec<OsString> = Vec::new();
        for c in relative.components() {
            match c {
                std::path::Component::Normal(n) => names.push(n.to_os_string()),
                _ => return Err(Errno::INVAL),
            }
        }
        let last = names.pop().ok_or(Errno::INVAL)?;
        let mut dir = rustix::fs::open(root, DIR, Mode::empty())?;
        for name in &names {
            dir = rustix::fs::openat(&dir, name.as_os_str(), DIR, Mode::empty())?;
        }
        Ok((dir, last))
    }

    /// Rename `name` in `dir` to `to` (a new name in a folder of the
    /// host's own).
    pub fn move_to(dir: &OwnedFd, name: &OsString, to: &Path) -> Result<(), Errno> {
        let target_dir = rustix::fs::open(to.parent().ok_or(Errno::INVAL)?, DIR, Mode::empty())?;
        let target = to.file_name().ok_or(Errno::INVAL)?;
        rustix::fs::renameat_with(
            dir,
            name.as_os_str(),
            &target_dir,
            target,
            RenameFlags::NOREPLACE,
        )
    }

    /// Remove `name` in `dir` and, for a folder, everything beneath it,
    /// never following a link.
    pub fn remove(dir: &OwnedFd, name: &OsString) -> Result<(), Errno> {
        let st = rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
            return rustix::fs::unlinkat(dir, name.as_os_str(), AtFlags::empty());
        }
        let inner = rustix::fs::openat(dir, name.as_os_str(), DIR, Mode::empty())?;
        let names: Vec<OsString> = rustix::fs::Dir::read_from(&inner)?
            .filter_map(Result::ok)
            .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
            .filter(|n| n != "." && n != "..")
            .collect();
        for child in &names {
            remove(&inner, child)?;
        }
        rustix::fs::unlinkat(dir, name.as_os_str(), AtFlags::REMOVEDIR)
    }

    use std::os::unix::ffi::OsStrExt;
}

fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        (dir, path)
    }

    /// Set `dir`'s access and modification times back to `from`'s, as
    /// `touch -r` does.
    fn put_times_back(dir: &Path, from: &std::fs::Metadata) {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let times = [
            libc::timespec {
                tv_sec: from.atime(),
                tv_nsec: from.atime_nsec(),
            },
            libc::timespec {
                tv_sec: from.mtime(),
                tv_nsec: from.mtime_nsec(),
            },
        ];
        // SAFETY: a NUL-terminated path and two timespecs.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(rc, 0);
    }

    fn plant(ws: &Path, repo: &str, config: &str) {
        std::fs::create_dir_all(ws.join(repo).join(".git/objects")).unwrap();
        std::fs::write(ws.join(repo).join(".git/config"), config).unwrap();
    }

    const EVIL: &str = "[core]\n\tfsmonitor = \"touch pwned\"\n";
    const CLEAN: &str = "[core]\n\tbare = false\n";

    #[test]
    fn a_folder_whose_commondir_names_a_git_store_is_a_git_folder() {
        let (_d, ws) = scratch();
        let before = Census::take(&ws);
        // HEAD and a commondir: a git folder to git, no `.git` in sight.
        std::fs::create_dir_all(ws.join(".cache/c/objects")).unwrap();
        std::fs::create_dir_all(ws.join(".cache/c/refs")).unwrap();
        std::fs::write(ws.join(".cache/c/config"), EVIL).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("src/commondir"), "../.cache/c\n").unwrap();
        assert!(git_layout(&ws.join("src"), None));
        let swept = before.sweep(&ws, None, Alone::Yes).swept;
        assert_eq!(swept.len(), 1, "{swept:#?}");
        assert_eq!(swept[0].path, ws.join("src/commondir"));
        assert!(!git_layout(&ws.join("src"), None));
    }

    #[test]
    fn a_git_file_may_point_at_a_worktree_folder_never_into_data() {
        let (_d, ws) = scratch();
        plant(&ws, "old", CLEAN);
        std::fs::create_dir_all(ws.join("old/.git/objects/wt")).unwrap();
        std::fs::write(ws.join("old/.git/objects/wt/HEAD"), "ref: refs/heads/x\n").unwrap();
        let before = Census::take(&ws);
        std::fs::create_dir_all(ws.join("into-data")).unwrap();
        std::fs::write(
            ws.join("into-data/.git"),
            "gitdir: ../old/.git/objects/wt\n",
        )
        .unwrap();
        // Control: a linked worktree's pointer stays.
        std::fs::create_dir_all(ws.join("old/.git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: ../old/.git/worktrees/wt\n").unwrap();
        let swept = before.sweep(&ws, None, Alone::Yes).swept;
        let paths: Vec<&Path> = swept.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(paths, [ws.join("into-data/.git").as_path()], "{swept:#?}");
        assert!(ws.join("wt/.git").exists());
    }

    #[test]
    fn a_new_configuration_with_a_second_name_is_taken_out() {
        let (_d, ws) = scratch();
        let before = Census::take(&ws);
        plant(&ws, "linked", CLEAN);
        std::fs::hard_link(ws.join("linked/.git/config"), ws.join("notes.txt")).unwrap();
        plant(&ws, "plain", CLEAN);
        let swept = before.sweep(&ws, None, Alone::Yes).swept;
        assert_eq!(swept.len(), 1, "{swept:#?}");
        assert_eq!(swept[0].path, ws.join("linked/.git"));
        assert!(swept[0].why.contains("hard link"), "{}", swept[0].why);
        assert!(
            ws.join("plain/.git/config").exists(),
            "control: one name stays"
        );
    }

    #[test]
    fn what_another_program_planted_is_judged_by_a_program_counted_while_it_ran() {
        let (_d, ws) = scratch();
        // A background program starts alone and plants a repository.
        let job = Census::before_program(&ws, Alone::Yes);
        plant(&ws, "e", EVIL);
        plant(&ws, "inited", CLEAN);
        // A second program is counted while it runs.
        let call = Census::before_program(&ws, Alone::No);
        assert!(
            call.protected()
                .iter()
                .any(|(p, _)| p == &ws.join("e/.git"))
        );
        // The background program ends first: its plant is taken out.
        let job_swept = job.sweep(&ws, None, Alone::No).swept;
        assert_eq!(job_swept.len(), 1, "{job_swept:#?}");
        assert!(!ws.join("e/.git").exists());
        // The second program puts it back; its own sweep takes it out,
        // and lets the clean one stand.
        plant(&ws, "e", EVIL);
        let call_swept = call.sweep(&ws, None, Alone::Yes).swept;
        assert_eq!(call_swept.len(), 1, "{call_swept:#?}");
        assert_eq!(call_swept[0].path, ws.join("e/.git"));
        assert!(ws.join("inited/.git/config").exists());
        // Swept alone: what stands is the workspace's own from now on.
        let next = Census::before_program(&ws, Alone::No);
        assert!(next.unsettled.is_empty(), "{:?}", next.unsettled);
    }

    #[test]
    fn a_folder_whose_modification_time_was_put_back_is_read_again() {
        let (_d, ws) = scratch();
        std::fs::create_dir_all(ws.join("src/lib")).unwrap();
        let first = Census::take(&ws);
        let before = std::fs::metadata(ws.join("src/lib")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir_all(ws.join("src/lib/.git/objects")).unwrap();
        put_times_back(&ws.join("src/lib"), &before);
        assert_eq!(
            std::fs::metadata(ws.join("src/lib")).unwrap().mtime_nsec(),
            before.mtime_nsec()
        );
        let again = first.recount(&ws);
        assert!(
            again
                .protected()
                .iter()
                .any(|(p, _)| p == &ws.join("src/lib/.git")),
            "{:?}",
            again.protected()
        );
    }

    #[test]
    fn pointers_are_read_as_git_reads_them_and_a_padded_git_folder_is_incomplete() {
        let (_d, ws) = scratch();
        std::fs::create_dir_all(ws.join("proj/.git/objects")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let before = Census::take(&ws);
        // `gitdir: ` with a trailing space: git opens `proj/.git `.
        std::fs::create_dir_all(ws.join("proj/.git ")).unwrap();
        std::fs::write(ws.join("src/.git"), "gitdir: ../proj/.git \n").unwrap();
        let swept = before.sweep(&ws, None, Alone::Yes).swept;
        assert!(
            swept.iter().any(|s| s.path == ws.join("src/.git")),
            "{swept:?}"
        );
        // A commondir naming its own folder with a trailing space.
        let wt = ws.join("proj/.git/worktrees/w");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join("commondir"), "../.. \n").unwrap();
        assert!(judge_commondir(&wt.join("commondir")).is_some());
        std::fs::write(wt.join("commondir"), "../..\n").unwrap();
        assert!(judge_commondir(&wt.join("commondir")).is_none());
        // Padded past what is searched: its config is still found by name,
        // and the count says it is incomplete.
        let git = ws.join("pad/.git");
        std::fs::create_dir_all(&git).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        for i in 0..5000 {
            std::fs::write(git.join(format!("pad{i}")), "").unwrap();
        }
        let padded = Census::take(&ws);
        assert!(!padded.complete);
        assert!(
            padded
                .protected()
                .iter()
                .any(|(p, _)| p == &git.join("config"))
        );
    }

    #[test]
    fn a_recount_reads_again_what_changed_deep_down() {
        let (_d, ws) = scratch();
        std::fs::create_dir_all(ws.join("a/b/c")).unwrap();
        std::fs::create_dir_all(ws.join("x/y")).unwrap();
        let first = Census::take(&ws);
        assert!(first.protected().is_empty());
        std::fs::write(ws.join("a/b/c/.git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::create_dir_all(ws.join("x/y/new/.git/hooks")).unwrap();
        let again = first.recount(&ws);
        let found: Vec<PathBuf> = again.protected().into_iter().map(|(p, _)| p).collect();
        assert!(found.contains(&ws.join("a/b/c/.git")), "{found:?}");
        assert!(found.contains(&ws.join("x/y/new/.git")), "{found:?}");
        assert!(found.contains(&ws.join("x/y/new/.git/hooks")), "{found:?}");
        // Removed: gone from the next count.
        std::fs::remove_file(ws.join("a/b/c/.git")).unwrap();
        let third = again.recount(&ws);
        assert!(
            !third
                .protected()
                .iter()
                .any(|(p, _)| p == &ws.join("a/b/c/.git"))
        );
    }

    #[test]
    fn a_planted_git_file_and_config_are_taken_out_and_an_init_stays() {
        let (_d, ws) = scratch();
        let (_q, quarantine) = scratch();
        std::fs::create_dir_all(ws.join("old/.git/objects")).unwrap();
        std::fs::write(ws.join("old/.git/config"), "[core]\n\tbare = false\n").unwrap();
        let before = Census::take(&ws);
        assert!(before.complete);
        // What a program did.
        std::fs::write(ws.join(".git"), "gitdir: .gitdata\n").unwrap();
        std::fs::create_dir_all(ws.join("inited/.git/hooks")).unwrap();
        std::fs::write(ws.join("inited/.git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(ws.join("inited/.git/hooks/pre-commit.sample"), "").unwrap();
        std::fs::create_dir_all(ws.join("evil/.git")).unwrap();
        std::fs::write(
            ws.join("evil/.git/config"),
            "[core]\n\tfsmonitor = \"touch pwned\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join("old/.git/hooks")).unwrap();
        std::fs::write(ws.join("old/.git/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: ../old/.git/worktrees/wt\n").unwrap();
        std::fs::create_dir_all(ws.join("old/.git/worktrees/wt")).unwrap();

        let swept = before.sweep(&ws, Some(&quarantine), Alone::Yes).swept;
        let paths: Vec<&Path> = swept.iter().map(|s| s.path.as_path()).collect();
        assert!(paths.contains(&ws.join(".git").as_path()), "{swept:#?}");
        assert!(
            paths.contains(&ws.join("evil/.git").as_path()),
            "{swept:#?}"
        );
        assert!(
            paths.contains(&ws.join("old/.git/hooks").as_path()),
            "{swept:#?}"
        );
        assert_eq!(swept.len(), 3, "{swept:#?}");
        assert!(!ws.join(".git").exists());
        assert!(!ws.join("evil/.git").exists());
        assert!(ws.join("inited/.git/config").exists(), "git init stays");
        assert!(ws.join("wt/.git").exists(), "a linked worktree stays");
        let kept = swept[0].kept_in.as_ref().unwrap();
        assert!(kept.starts_with(&quarantine) && kept.exists());
        assert!(swept.iter().any(|s| s.why.contains("core.fsmonitor")));
    }
}

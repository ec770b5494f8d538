//! Noticing that a plugin directory changed: polled fingerprints (size,
//! modification time, inode) of each plugin's manifest and component.
//! A change is reported once the files have stayed the same for one more
//! poll, so a component still being written is not loaded half-done.
//! Polling needs no platform watcher and sees replaced files (a build's
//! rename) as well as edited ones.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::discovery::{self, PluginSource};
use super::manifest::Manifest;

/// What changed in one plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A plugin directory that was not there before.
    Added(PathBuf),
    /// Its manifest or component changed.
    Modified(PathBuf),
    /// It is gone (or no longer holds a manifest).
    Removed(PathBuf),
}

impl Change {
    /// The plugin directory.
    pub fn dir(&self) -> &Path {
        match self {
            Change::Added(d) | Change::Modified(d) | Change::Removed(d) => d,
        }
    }
}

/// The state of a plugin directory's files that matter.
type Fingerprint = Vec<(PathBuf, Option<(u64, i64, i64, u64)>)>;

/// Polls the plugin roots (`--plugins`, `plugin_dirs`, ...) for changes.
pub struct PluginWatcher {
    roots: Vec<PathBuf>,
    /// What was last reported (or found at start).
    known: BTreeMap<PathBuf, Fingerprint>,
    /// A differing state seen once, reported when seen again unchanged.
    settling: BTreeMap<PathBuf, Option<Fingerprint>>,
}

impl PluginWatcher {
    /// Watch `roots`; what is there now is the starting point.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let known = current(&roots);
        PluginWatcher {
            roots,
            known,
            settling: BTreeMap::new(),
        }
    }

    /// Look once; returns the changes that have settled since the last
    /// look.
    pub fn poll(&mut self) -> Vec<Change> {
        let now = current(&self.roots);
        let mut dirs: Vec<PathBuf> = now.keys().chain(self.known.keys()).cloned().collect();
        dirs.sort();
        dirs.dedup();
        let mut changes = Vec::new();
        for dir in dirs {
            let before = self.known.get(&dir);
            let after = now.get(&dir);
            if before == after {
                self.settling.remove(&dir);
                continue;
            }
            let settled = self.settling.get(&dir) == Some(&after.cloned());
            if !settled {
                self.settling.insert(dir, after.cloned());
                continue;
            }
            self.settling.remove(&dir);
            let change = match (before, after) {
                (None, Some(_)) => Change::Added(dir.clone()),
                (Some(_), None) => Change::Removed(dir.clone()),
                _ => Change::Modified(dir.clone()),
            };
            match after {
                Some(fp) => self.known.insert(dir, fp.clone()),
                None => self.known.remove(&dir),
            };
            changes.push(change);
        }
        changes
    }
}

/// Every plugin directory under `roots` and its fingerprint.
fn current(roots: &[PathBuf]) -> BTreeMap<PathBuf, Fingerprint> {
    discovery::scan(roots)
        .into_iter()
        .filter_map(|source| match source {
            PluginSource::Dir(dir) if dir.join("plugin.toml").exists() => Some(dir),
            _ => None,
        })
        .map(|dir| {
            let fp = fingerprint(&dir);
            (dir, fp)
        })
        .collect()
}

fn fingerprint(dir: &Path) -> Fingerprint {
    let manifest = dir.join("plugin.toml");
    let mut files = vec![manifest.clone()];
    if let Ok(m) = Manifest::read(dir) {
        files.push(dir.join(m.wasm));
    }
    files
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path)
                .ok()
                .map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()));
            (path, meta)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(dir: &Path, wasm: &[u8]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("plugin.toml"),
            "name = \"p\"\nversion = \"0.1.0\"\nkind = \"tool\"\nwasm = \"p.wasm\"\n",
        )
        .unwrap();
        std::fs::write(dir.join("p.wasm"), wasm).unwrap();
    }

    #[test]
    fn changes_are_reported_once_they_settle() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        plugin(&a, b"one");
        let mut watcher = PluginWatcher::new(vec![root.path().to_path_buf()]);
        assert!(watcher.poll().is_empty(), "nothing changed yet");

        plugin(&a, b"two, longer");
        assert!(watcher.poll().is_empty(), "not settled after one look");
        assert_eq!(watcher.poll(), [Change::Modified(a.clone())]);
        assert!(watcher.poll().is_empty(), "reported once");

        let b = root.path().join("b");
        plugin(&b, b"new");
        watcher.poll();
        assert_eq!(watcher.poll(), [Change::Added(b.clone())]);

        std::fs::remove_dir_all(&a).unwrap();
        watcher.poll();
        assert_eq!(watcher.poll(), [Change::Removed(a)]);
    }

    #[test]
    fn a_component_still_being_written_is_not_reported() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        plugin(&a, b"one");
        let mut watcher = PluginWatcher::new(vec![a.clone()]);
        for n in 0..5 {
            // Grows on every look: never settles.
            std::fs::write(a.join("p.wasm"), vec![0u8; 10 + n]).unwrap();
            assert!(watcher.poll().is_empty(), "reported while still changing");
        }
        assert_eq!(watcher.poll(), [Change::Modified(a)]);
    }
}

//! On-disk cache of compiled components.
//!
//! A cache entry is native code that the host maps executable, outside
//! every sandbox, so an entry is loaded only when this user's cache wrote
//! it:
//!
//! - the directory comes from trusted configuration only, is created
//!   `0700`, and is refused when it is a link, not owned by the user or
//!   writable by others; no tool and no program writes it (it is an
//!   integrity root of [`crate::kept`]);
//! - a per-user secret key (`components.key` beside the `components`
//!   folder, `0600`, created on first use) keys a BLAKE3 MAC over each
//!   entry. The key lives outside the cache folder, where no tool and no
//!   program reads it (a secret of [`crate::kept`]);
//! - the MAC binds the entry to the component it was compiled from (the
//!   component's BLAKE3 hash, the entry's name and the engine's settings
//!   are inside it): an entry copied over another component's, edited,
//!   truncated or planted does not verify, and is recompiled and
//!   replaced, never handed to wasmtime. So a plugin pinned by the hash
//!   of its component runs that component's code and no other;
//! - the verified bytes in memory are what is deserialized, so the file
//!   cannot change between the check and the load.
//!
//! Entries are keyed by the BLAKE3 hash of the component and of the
//! engine's compatibility settings, so a changed plugin or engine never
//! reuses stale code.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// What happened when a component was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a valid cache entry; nothing was compiled.
    Hit,
    /// No entry: compiled and stored.
    Miss,
    /// The entry did not verify (corrupt, foreign or incompatible):
    /// recompiled and replaced.
    Repaired,
    /// Caching is off: compiled in memory.
    Disabled,
    /// A first-party plugin's code compiled into the binary; nothing was
    /// compiled or read from the cache.
    Embedded,
}

impl CacheOutcome {
    /// A few words for the operator.
    pub fn describe(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "taken from the cache",
            CacheOutcome::Miss => "compiled and cached",
            CacheOutcome::Repaired => "compiled again (the cache entry did not verify) and cached",
            CacheOutcome::Disabled => "compiled (cache off)",
            CacheOutcome::Embedded => "precompiled into the binary",
        }
    }
}

/// Length of an entry's MAC, stored before the compiled bytes.
const MAC_LEN: usize = 32;
/// Largest entry read.
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// What the MAC of an entry starts with (its format).
const MAC_CONTEXT: &[u8] = b"sandcrab component cache entry v2";

/// A directory of compiled components (or none, to always compile).
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    key: Option<[u8; 32]>,
    engine_key: String,
}

impl ComponentCache {
    /// A cache in `dir` for components of `engine`, its entries keyed by
    /// the key beside it ([`crate::user_files::cache_key_file`]). When
    /// the directory or the key cannot be made safe to load native code
    /// from, caching is off and the reason is returned for the operator.
    pub fn new(dir: Option<PathBuf>, engine: &Engine) -> (Self, Option<String>) {
        let mut hasher = Blake3Hasher(blake3::Hasher::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let engine_key = hasher.0.finalize().to_hex()[..16].to_string();
        let (dir, key, warning) = match dir {
            None => (None, None, None),
            Some(dir) => match open_dir(&dir)
                .and_then(|()| crate::kept::host_key(&crate::user_files::cache_key_file(&dir)))
            {
                Ok(key) => (Some(dir), Some(key), None),
                Err(why) => (
                    None,
                    None,
                    Some(format!(
                        "component cache {} is not used ({why}); plugins are compiled at every start",
                        dir.display()
                    )),
                ),
            },
        };
        (
            ComponentCache {
                dir,
                key,
                engine_key,
            },
            warning,
        )
    }

    /// The default cache directory: `$XDG_CACHE_HOME/sandcrab/components`
    /// or `~/.cache/sandcrab/components`.
    pub fn default_dir() -> Option<PathBuf> {
        Some(crate::user_files::cache_dir()?.join("components"))
    }

    /// The entry file for `wasm`, if caching is on.
    pub fn entry_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(self.entry_name(&blake3::hash(wasm))))
    }

    /// The entry's file name for a component of hash `content`.
    fn entry_name(&self, content: &blake3::Hash) -> String {
        format!("{}-{}.cwasm", &content.to_hex()[..32], self.engine_key)
    }

    /// Load `wasm` compiled for `engine`, from the cache when possible;
    /// `compiling` is called just before it is compiled instead.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        compiling: &dyn Fn(),
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let (Some(path), Some(key)) = (self.entry_path(wasm), self.key) else {
            compiling();
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Disabled));
        };
        let entry = Entry {
            path: &path,
            key: &key,
            content: blake3::hash(wasm),
        };
        let existed = std::fs::symlink_metadata(&path).is_ok();
        if existed && let Some(component) = self.read_entry(engine, &entry) {
            return Ok((component, CacheOutcome::Hit));
        }
        // One compile per component, across processes: whoever holds the
        // entry's lock compiles; the others wait, then read its result.
        let _lock = self.lock_entry(&path);
        if _lock.is_some()
            && std::fs::symlink_metadata(&path).is_ok()
            && let Some(component) = self.read_entry(engine, &entry)
        {
            return Ok((component, CacheOutcome::Hit));
        }
        compiling();
        let component = Component::new(engine, wasm)?;
        if let Err(err) = self.write_entry(&entry, &component) {
            tracing::warn!("cannot write component cache {}: {err}", path.display());
        }
        let outcome = if existed {
            CacheOutcome::Repaired
        } else {
            CacheOutcome::Miss
        };
        Ok((component, outcome))
    }

    /// Whether a compiled entry for `wasm` is present (not yet verified).
    pub fn has_entry(&self, wasm: &[u8]) -> bool {
        self.entry_path(wasm)
            .is_some_and(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// Hold the lock file beside `entry` (None when it cannot be taken:
    /// compiling without it is only slower, never wrong).
    fn lock_entry(&self, entry: &Path) -> Option<std::fs::File> {
        let lock_path = entry.with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .ok()?;
        file.lock().ok()?;
        Some(file)
    }

    /// The MAC of `entry` holding `payload`: the component it was
    /// compiled from, its name and the engine's settings are inside.
    fn mac(&self, entry: &Entry, payload: &[u8]) -> [u8; MAC_LEN] {
        let mut h = blake3::Hasher::new_keyed(entry.key);
        let name = self.entry_name(&entry.content);
        for part in [
            MAC_CONTEXT,
            entry.content.as_bytes(),
            name.as_bytes(),
            self.engine_key.as_bytes(),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(payload);
        *h.finalize().as_bytes()
    }

    /// A verified entry's component, or None (with a log line).
    fn read_entry(&self, engine: &Engine, entry: &Entry) -> Option<Component> {
        let path = entry.path;
        let bytes = match crate::safe_fs::read_regular(
            path,
            MAX_ENTRY_BYTES,
            crate::safe_fs::Links::Refuse,
        ) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(
                    "component cache entry {} unreadable ({e}); recompiling",
                    path.display()
                );
                return None;
            }
        };
        let verified = bytes.len() > MAC_LEN && {
            let (mac, payload) = bytes.split_at(MAC_LEN);
            // Constant-time comparison through blake3's Hash type.
            blake3::Hash::from_bytes(mac.try_into().expect("32 bytes"))
                == blake3::Hash::from_bytes(self.mac(entry, payload))
        };
        if !verified {
            tracing::warn!(
                "component cache entry {} was not written by this user's cache for this component (or is corrupt); recompiling",
                path.display()
            );
            return None;
        }
        // SAFETY: these bytes carry a MAC under this user's secret key
        // over the component they were compiled from, so this cache wrote
        // them with `Component::serialize` of exactly this component, for
        // an engine with the same compatibility hash; they are the bytes
        // in memory, not a file that could change after the check.
        // wasmtime also rejects data built for another engine
        // configuration.
        match unsafe { Component::deserialize(engine, &bytes[MAC_LEN..]) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(
                    "component cache entry {} unusable ({err}); recompiling",
                    path.display()
                );
                None
            }
        }
    }

    /// Write atomically: a temp file in the same directory, then rename.
    fn write_entry(&self, entry: &Entry, component: &Component) -> Result<(), String> {
        let payload = component.serialize().map_err(|e| format!("{e:#}"))?;
        let dir = entry
            .path
            .parent()
            .expect("cache entries live in a directory");
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
        file.write_all(&self.mac(entry, &payload))
            .and_then(|()| file.write_all(&payload))
            .map_err(|e| e.to_string())?;
        file.persist(entry.path).map_err(|e| e.error.to_string())?;
        Ok(())
    }
}

/// One entry as it is read or written: where, under which key, for which
/// component.
struct Entry<'a> {
    path: &'a Path,
    key: &'a [u8; 32],
    content: blake3::Hash,
}

/// Create `dir` (0700) or check that it is safe: a real directory owned by
/// this user and writable by nobody else.
fn open_dir(dir: &Path) -> Result<(), String> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.to_string()),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    crate::kept::owned_and_private(&meta, "directory", 0o022)
}

struct Blake3Hasher(blake3::Hasher);

impl Hasher for Blake3Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.finalize();
        u64::from_le_bytes(digest.as_bytes()[..8].try_into().expect("8 bytes"))
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

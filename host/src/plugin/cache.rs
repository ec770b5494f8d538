//! On-disk cache of compiled components.
//!
//! Entries are keyed by the BLAKE3 hash of the component bytes and of the
//! engine's compatibility settings, so a changed plugin or a changed engine
//! never reuses stale code. Each entry (`KEY.cwasm`, memory-mapped on load)
//! has a checksum beside it (`KEY.b3`): a truncated or corrupted entry is
//! detected, recompiled and rewritten, never handed to wasmtime.

use std::hash::{Hash, Hasher};
use std::io::Write;
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
    /// The entry was corrupt or incompatible: recompiled and replaced.
    Repaired,
    /// Caching is off: compiled in memory.
    Disabled,
}

/// A directory of compiled components (or none, to always compile).
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write), for components of `engine`.
    pub fn new(dir: Option<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = Blake3Hasher(blake3::Hasher::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let engine_key = hasher.0.finalize().to_hex()[..16].to_string();
        ComponentCache { dir, engine_key }
    }

    /// The default cache directory: `$XDG_CACHE_HOME/sandcrab/components`
    /// or `~/.cache/sandcrab/components`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("sandcrab").join("components"))
    }

    /// The entry file for `wasm`, if caching is on.
    pub fn entry_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let content = blake3::hash(wasm).to_hex();
        Some(dir.join(format!("{}-{}.cwasm", &content[..32], self.engine_key)))
    }

    /// Load `wasm` compiled for `engine`, from the cache when possible.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(path) = self.entry_path(wasm) else {
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Disabled));
        };
        let existed = path.exists();
        if existed && let Some(component) = read_entry(engine, &path) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = Component::new(engine, wasm)?;
        if let Err(err) = write_entry(&path, &component) {
            tracing::warn!("cannot write component cache {}: {err}", path.display());
        }
        let outcome = if existed {
            CacheOutcome::Repaired
        } else {
            CacheOutcome::Miss
        };
        Ok((component, outcome))
    }
}

/// The checksum file of an entry.
fn sum_path(entry: &Path) -> PathBuf {
    entry.with_extension("b3")
}

/// A valid entry's component, or None (with a log line) if it is corrupt.
fn read_entry(engine: &Engine, path: &Path) -> Option<Component> {
    let bytes = std::fs::read(path).ok()?;
    let expected = std::fs::read_to_string(sum_path(path)).unwrap_or_default();
    if blake3::hash(&bytes).to_hex().as_str() != expected.trim() {
        tracing::warn!(
            "component cache entry {} is corrupt; recompiling",
            path.display()
        );
        return None;
    }
    drop(bytes);
    // SAFETY: the file was produced by `Component::serialize` of this host
    // (the key includes the engine's compatibility hash) and its checksum
    // matches, so it holds the bytes we wrote; the cache directory belongs
    // to the user running sandcrab. wasmtime additionally rejects files
    // built for another engine configuration.
    match unsafe { Component::deserialize_file(engine, path) } {
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
fn write_entry(path: &Path, component: &Component) -> Result<(), String> {
    let payload = component.serialize().map_err(|e| format!("{e:#}"))?;
    let sum = blake3::hash(&payload).to_hex();
    write_file(path, &payload)
        .and_then(|()| write_file(&sum_path(path), sum.as_bytes()))
        .map_err(|e| e.to_string())
}

fn write_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("cache entries live in a directory");
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(contents)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
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

//! What the host keeps: the one registry of every secret and every
//! integrity root, computed once at start from the resolved configuration
//! ([`Registry`]), and the repository paths that make other programs run
//! code later ([`Protected`]).
//!
//! Everything that enforces these asks this module and nothing else:
//!
//! - every confined program gets each existing entry covered
//!   ([`Registry::covers`]): a secret by an unreadable cover, an integrity
//!   root read-only, and the folders leading to an entry pinned so they
//!   cannot be moved away and replaced;
//! - the file tools (`wasi:filesystem`, `sandcrab:fs`) ask [`Judge`] about
//!   the real path of everything they open, create, move or remove: a
//!   secret is neither read nor written, an integrity root and a protected
//!   path are not written;
//! - the host's own writers that act for a session (`/undo`, exports,
//!   remembered rules) ask [`Registry::host_write`] before they write.
//!
//! A path is judged by where it really is (links resolved by the caller),
//! never by the name it was given.

use sandcrab_core::{time, user_files};

pub mod safe_fs;

mod appeared;
mod census;
mod covers;
mod git_config;
mod judge;
mod keys;
mod protected;
mod stores;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Serialize;

pub use appeared::Absent;
pub use census::{Alone, Census, MAX_FOLDERS as MAX_CENSUS_FOLDERS, Sweep, Swept};
pub use covers::{Cover, CoverKind};
pub use judge::{Access, Judge, Refusal};
pub use keys::{existing_key, host_key, owned_and_private};
pub use protected::{DEFAULT_PROTECTED, Protected, ProtectionKind};
pub use stores::{CREDENTIAL_STORES, STARTUP_FILES, UserPlace, user_places};

/// What an entry of the registry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Item {
    /// The folders of the bridge and MCP tokens (every sandcrab's), and a
    /// token file named elsewhere: whoever holds one drives the bridge.
    BridgeTokens,
    /// The operator's configuration: its folder (`config.toml`, the trust
    /// records in it) and a `--config` file kept elsewhere.
    OperatorConfig,
    /// An approval rules file the configuration names.
    RulesFile,
    /// sandcrab's data folder: the session database, checkpoints, input
    /// history, the host's keys.
    DataDir,
    /// A session database kept outside the data folder (`[store] path`).
    SessionDatabase,
    /// `[store] password_file`: the PostgreSQL password of every host.
    StorePassword,
    /// The host's keys: the one that binds cached native code to this
    /// user (beside the cache folder), the host's keys folder.
    HostKeys,
    /// Where the files a conversation changed are kept for `/undo`.
    Checkpoints,
    /// A certificate authority the host trusts (`[policy] http_ca_files`,
    /// `[store] ca_file`).
    CaFile,
    /// The compiled-component cache: native code the host maps
    /// executable.
    ComponentCache,
    /// A folder trusted plugins load from (`plugin_dirs`, `--plugins`, a
    /// trusted project's `.sandcrab/plugins`), and where its links lead.
    TrustedPlugins,
    /// One of the user's credential stores (`~/.ssh`, `~/.aws`, …).
    CredentialStore,
    /// A file the user's own programs run or obey at their next start (a
    /// shell's start files, git's own configuration, an editor's, a
    /// desktop's autostart): read, never written, so a workspace that is
    /// the home folder cannot plant code for the user's next shell.
    StartupFile,
    /// A credential agent's socket (`$SSH_AUTH_SOCK`, gpg-agent, the
    /// desktop keyring, the session bus its secret service answers on):
    /// whoever reaches it signs or reads with the keys it holds.
    CredentialAgent,
    /// A path the operator names in `[policy] kept_paths`.
    OperatorNamed,
}

impl Item {
    /// Every item, for listings and for the test that proves each one.
    pub const ALL: [Item; 15] = [
        Item::BridgeTokens,
        Item::OperatorConfig,
        Item::RulesFile,
        Item::DataDir,
        Item::SessionDatabase,
        Item::StorePassword,
        Item::HostKeys,
        Item::Checkpoints,
        Item::CaFile,
        Item::ComponentCache,
        Item::TrustedPlugins,
        Item::CredentialStore,
        Item::StartupFile,
        Item::CredentialAgent,
        Item::OperatorNamed,
    ];

    /// How it is kept.
    pub fn kind(self) -> Kind {
        match self {
            Item::CaFile | Item::ComponentCache | Item::TrustedPlugins | Item::StartupFile => {
                Kind::Integrity
            }
            _ => Kind::Secret,
        }
    }

    /// A few words for the operator.
    pub fn describe(self) -> &'static str {
        match self {
            Item::BridgeTokens => "bridge tokens",
            Item::OperatorConfig => "the operator's configuration",
            Item::RulesFile => "approval rules",
            Item::DataDir => "sandcrab's data folder",
            Item::SessionDatabase => "the session database",
            Item::StorePassword => "the store's password file",
            Item::HostKeys => "the host's keys",
            Item::Checkpoints => "checkpoints",
            Item::CaFile => "a trusted certificate authority",
            Item::ComponentCache => "the compiled-component cache",
            Item::TrustedPlugins => "a trusted plugin folder",
            Item::CredentialStore => "a credential store",
            Item::CredentialAgent => "a credential agent",
            Item::StartupFile => "a file your programs run at their start",
            Item::OperatorNamed => "a path the operator keeps",
        }
    }
}

/// How an entry is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Neither read nor written by any tool or program.
    Secret,
    /// Read, never written: what the host trusts to be as it left it.
    Integrity,
}

/// One thing the host keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub item: Item,
    pub kind: Kind,
    /// Where it really is (links resolved when it exists; else absolute as
    /// named).
    pub path: PathBuf,
    /// Where it was named: `default`, or `FILE: [section] key`.
    pub source: String,
    /// The names that led here through a link (`~/.bashrc` when it is a
    /// link into a dotfiles folder), absolute as named: kept too, and
    /// each link on the way put back if a program replaces it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<PathBuf>,
}

/// Every secret and integrity root of this host, as resolved at start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Registry {
    entries: Vec<Entry>,
    /// The entry each path and name belongs to, by position in `entries`
    /// (the latest entry where two share one). Start-up keeps a few
    /// hundred paths, and every file a tool opens is judged against them:
    /// a lookup per ancestor of the file, not a comparison per entry.
    #[serde(skip)]
    index: std::collections::HashMap<PathBuf, usize>,
    /// Where each entry's own path is in `entries` (a path is kept once).
    #[serde(skip)]
    by_path: std::collections::HashMap<PathBuf, usize>,
}

impl Registry {
    /// An empty registry (add entries with [`Registry::keep`]).
    pub fn new() -> Self {
        Registry::default()
    }

    /// What every host keeps before any configuration is read: the user's
    /// sandcrab folders (configuration, tokens, data, cache) and the
    /// user's credential stores.
    pub fn defaults() -> Self {
        use crate::user_files as places;
        let mut registry = Registry::new();
        let default = "default";
        for dir in places::runtime_dir()
            .into_iter()
            .chain(places::config_tokens_dir())
        {
            registry.keep(Item::BridgeTokens, &dir, default);
        }
        if let Some(dir) = places::config_dir() {
            registry.keep(Item::OperatorConfig, &dir, default);
        }
        if let Some(dir) = places::data_dir() {
            registry.keep(Item::DataDir, &dir, default);
            registry.keep(Item::Checkpoints, &dir.join("checkpoints"), default);
        }
        if let Some(dir) = places::keys_dir() {
            registry.keep(Item::HostKeys, &dir, default);
        }
        if let Some(dir) = places::cache_dir() {
            let components = dir.join("components");
            registry.keep(Item::ComponentCache, &components, default);
            registry.keep(
                Item::HostKeys,
                &places::cache_key_file(&components),
                default,
            );
        }
        if let Some(home) = places::home() {
            for place in user_places(&home, &|var| std::env::var_os(var)) {
                registry.keep(place.item, &place.path, &place.source);
            }
        }
        for agent in stores::credential_agents() {
            registry.keep(Item::CredentialAgent, &agent, "the environment");
        }
        registry
    }

    /// Keep `path` as `item` (named by `source`). A path is kept once; the
    /// stricter kind wins.
    pub fn keep(&mut self, item: Item, path: &Path, source: &str) {
        let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let path = real(path);
        let names: Vec<PathBuf> = (named != path).then_some(named).into_iter().collect();
        self.keep_entry(Entry {
            item,
            kind: item.kind(),
            path,
            source: source.to_string(),
            names,
        });
    }

    fn keep_entry(&mut self, entry: Entry) {
        if let Some(&i) = self.by_path.get(&entry.path) {
            let existing = &mut self.entries[i];
            if entry.kind == Kind::Secret && existing.kind == Kind::Integrity {
                existing.item = entry.item;
                existing.kind = Kind::Secret;
                existing.source = entry.source;
            }
            let added: Vec<PathBuf> = entry
                .names
                .into_iter()
                .filter(|name| !existing.names.contains(name))
                .collect();
            existing.names.extend(added.iter().cloned());
            for name in added {
                self.index_at(name, i);
            }
            return;
        }
        let i = self.entries.len();
        self.by_path.insert(entry.path.clone(), i);
        self.index_at(entry.path.clone(), i);
        for name in &entry.names {
            self.index_at(name.clone(), i);
        }
        self.entries.push(entry);
    }

    /// Index `path` as entry `i`'s, unless a later entry has it.
    fn index_at(&mut self, path: PathBuf, i: usize) {
        let at = self.index.entry(path).or_insert(i);
        *at = (*at).max(i);
    }

    /// Every entry, in the order they were kept.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry `path` (a real path) falls in: the deepest entry that is
    /// `path` or holds it.
    pub fn holding(&self, path: &Path) -> Option<&Entry> {
        path.ancestors()
            .find_map(|at| self.index.get(at))
            .map(|&i| &self.entries[i])
    }

    /// The entries that lie beneath `path` (a real path), `path` excluded.
    pub fn beneath<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.path != path && e.path.starts_with(path))
    }

    /// Whether the host may write `path` (a real path, or absolute where
    /// it does not exist yet) for a session — `/undo`, an export, a rule
    /// remembered — when the writer owns `own` (its own entry: the
    /// checkpoints writing checkpoints). Refused inside any other entry.
    pub fn host_write(&self, path: &Path, own: Option<Item>) -> Result<(), Refusal> {
        let path = real_or_parent(path);
        match self.holding(&path) {
            Some(entry) if Some(entry.item) != own => {
                Err(Refusal::kept(&path, entry, Access::Write))
            }
            _ => Ok(()),
        }
    }
}

/// `path` where it really is, when it exists; else absolute as named.
pub fn real(path: &Path) -> PathBuf {
    // One `stat` tells a path that does not resolve from one that does;
    // resolving reads every link of the way (most kept places of a home
    // do not exist, and start-up keeps a hundred of them).
    if std::fs::metadata(path).is_err() {
        return std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    }
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// `path` with its deepest existing ancestor resolved: where a file that
/// does not exist yet would be created.
pub fn real_or_parent(path: &Path) -> PathBuf {
    if let Ok(found) = std::fs::canonicalize(path) {
        return found;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    let mut at = absolute.as_path();
    while let Some(parent) = at.parent() {
        if let Some(name) = at.file_name() {
            rest.push(name.to_os_string());
        }
        if let Ok(found) = std::fs::canonicalize(parent) {
            let mut out = found;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return out;
        }
        at = parent;
    }
    absolute
}

static CURRENT: RwLock<Option<Arc<Registry>>> = RwLock::new(None);

/// Add what `registry` keeps to the registry every enforcement point
/// asks from now on (at start, once the configuration is resolved). The
/// registry only grows while sandcrab runs: what one workspace's
/// configuration named stays kept for the next.
pub fn install(registry: Registry) -> Arc<Registry> {
    let mut slot = CURRENT.write().unwrap_or_else(|e| e.into_inner());
    let merged = match slot.as_ref() {
        Some(current) => {
            let mut merged = (**current).clone();
            for entry in registry.entries {
                merged.keep_entry(entry);
            }
            merged
        }
        None => registry,
    };
    let merged = Arc::new(merged);
    *slot = Some(merged.clone());
    merged
}

/// Keep one more path (what a command names as it starts: the token file
/// it issues, the store it opens).
pub fn extend(item: Item, path: &Path, source: &str) {
    let mut one = Registry::new();
    one.keep(item, path, source);
    install(one);
}

/// The registry in force: the installed one, else (a library user that
/// installed none) [`Registry::defaults`], installed now.
pub fn current() -> Arc<Registry> {
    if let Some(registry) = CURRENT.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return registry.clone();
    }
    let mut slot = CURRENT.write().unwrap_or_else(|e| e.into_inner());
    slot.get_or_insert_with(|| Arc::new(Registry::defaults()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_entry_holds_a_path_and_the_stricter_kind_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("data/keys")).unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::DataDir, &root.join("data"), "default");
        registry.keep(Item::HostKeys, &root.join("data/keys"), "default");
        registry.keep(Item::CaFile, &root.join("ca.pem"), "x");
        registry.keep(Item::OperatorNamed, &root.join("ca.pem"), "y");
        let held = registry.holding(&root.join("data/keys/cache.key")).unwrap();
        assert_eq!(held.item, Item::HostKeys);
        assert_eq!(
            registry.holding(&root.join("ca.pem")).unwrap().kind,
            Kind::Secret
        );
        assert!(registry.holding(&root.join("other")).is_none());
        assert!(
            registry
                .host_write(&root.join("data/checkpoints/x"), Some(Item::DataDir))
                .is_ok()
        );
        assert!(
            registry
                .host_write(&root.join("data/keys/x"), Some(Item::DataDir))
                .is_err()
        );
        assert!(registry.host_write(&root.join("free/x"), None).is_ok());
    }

    /// The entry holding `path` by comparing it with every path and name
    /// of every entry: what the index must answer.
    fn holding_by_scan<'a>(registry: &'a Registry, path: &Path) -> Option<&'a Entry> {
        registry
            .entries()
            .iter()
            .filter_map(|e| {
                std::iter::once(&e.path)
                    .chain(&e.names)
                    .filter(|at| path.starts_with(at))
                    .map(|at| (e, at.components().count()))
                    .max_by_key(|(_, depth)| *depth)
            })
            .max_by_key(|(_, depth)| *depth)
            .map(|(e, _)| e)
    }

    #[test]
    fn the_index_answers_as_a_scan_of_every_entry_would() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join("x")).unwrap();
        // A kept place named through a link: held by its real path and by
        // the name it was given.
        std::os::unix::fs::symlink(root.join("a/b"), root.join("x/to-b")).unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::DataDir, &root.join("a"), "default");
        registry.keep(Item::HostKeys, &root.join("x/to-b"), "default");
        registry.keep(Item::CaFile, &root.join("a/b/c/missing.pem"), "x");
        registry.keep(Item::OperatorConfig, &root.join("a/b"), "again");
        registry.keep(Item::CredentialStore, &root, "everything");
        assert_eq!(registry.entries().len(), 4, "a path is kept once");
        let mut asked = 0;
        for path in [
            "",
            "a",
            "a/b",
            "a/b/c",
            "a/b/c/missing.pem",
            "a/b/c/missing.pem/deeper",
            "a/bc",
            "x",
            "x/to-b",
            "x/to-b/c/f",
            "elsewhere/f",
        ] {
            let path = root.join(path);
            let indexed = registry.holding(&path).map(|e| &e.path);
            let scanned = holding_by_scan(&registry, &path).map(|e| &e.path);
            assert_eq!(indexed, scanned, "{}", path.display());
            asked += usize::from(indexed.is_some());
        }
        assert_eq!(asked, 11, "every path under the root is held");
        assert!(registry.holding(Path::new("/")).is_none());
        assert_eq!(
            registry.holding(&root.join("x/to-b/f")).unwrap().item,
            Item::HostKeys,
            "the name given holds as the real path does"
        );
    }

    #[test]
    fn a_path_that_does_not_exist_is_judged_where_it_would_be_created() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(
            real_or_parent(&root.join("link/new/file")),
            root.join("real/new/file")
        );
    }
}

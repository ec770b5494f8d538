//! Plugins that change while the agent runs: a changed plugin directory is
//! loaded again and its tools published to the sessions' [`ToolCatalog`]
//! in one step. Calls already running finish on the version they started
//! on; calls made afterwards get the new one. A new version that fails to
//! load leaves the old one in place, and the report says why — except one
//! the operator's trust no longer admits (a project changed since it was
//! trusted): then the old one is unloaded too, as a fresh start would. Plugins
//! whose first compile was deferred are loaded here too, in the
//! background, while the catalog tells sessions to wait for them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::profile::Profile;
use super::tool_set::{ToolSelection, plugin_tools, served_tools};
use crate::plugin::watch::{Change, PluginWatcher};
use crate::plugin::{LoadedPlugin, PluginHost, PluginSource};
use crate::tools::{ToolCatalog, ToolRegistry};

/// What happened to one plugin, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginReport {
    /// A plugin is being compiled for its first load.
    Compiling { dir: PathBuf },
    /// A plugin (new or changed) is loaded and its tools are offered.
    Loaded {
        name: String,
        version: String,
        tools: Vec<String>,
        /// It replaced an earlier version.
        replaced: bool,
        took: Duration,
        /// What the loader said about it (grants refused, tools refused).
        notes: Vec<String>,
    },
    /// A plugin directory went away; its tools are no longer offered.
    Unloaded { name: String },
    /// A plugin failed to load; if an earlier version was loaded, it stays.
    Failed {
        dir: PathBuf,
        message: String,
        kept: bool,
    },
}

impl PluginReport {
    /// The report without the loader's notes, and the notes (each a
    /// warning on its own).
    pub fn split_notes(self) -> (PluginReport, Vec<String>) {
        match self {
            PluginReport::Loaded {
                name,
                version,
                tools,
                replaced,
                took,
                notes,
            } => (
                PluginReport::Loaded {
                    name,
                    version,
                    tools,
                    replaced,
                    took,
                    notes: Vec::new(),
                },
                notes,
            ),
            other => (other, Vec::new()),
        }
    }
}

impl std::fmt::Display for PluginReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginReport::Compiling { dir } => write!(
                f,
                "compiling the plugin in {} (first load; cached afterwards)...",
                dir.display()
            ),
            PluginReport::Loaded {
                name,
                version,
                tools,
                replaced,
                took,
                notes,
            } => {
                write!(
                    f,
                    "plugin '{name}' {version} {} in {} ms (tools: {})",
                    if *replaced { "reloaded" } else { "loaded" },
                    took.as_millis(),
                    if tools.is_empty() {
                        "none".to_string()
                    } else {
                        tools.join(", ")
                    }
                )?;
                for note in notes {
                    write!(f, "\n  {note}")?;
                }
                Ok(())
            }
            PluginReport::Unloaded { name } => {
                write!(f, "plugin '{name}' unloaded (its directory is gone)")
            }
            PluginReport::Failed { message, kept, .. } => write!(
                f,
                "{message}{}",
                if *kept {
                    " — the version loaded before stays in use"
                } else {
                    ""
                }
            ),
        }
    }
}

/// The plugin host of a running agent and the catalog it publishes to.
pub struct LivePlugins {
    host: tokio::sync::Mutex<PluginHost>,
    catalog: ToolCatalog,
    /// None: every plugin tool counts as core (what MCP serves).
    profile: Option<Arc<Profile>>,
    selection: ToolSelection,
    /// Tools from elsewhere (MCP servers) offered beside the plugins'.
    kept: std::sync::RwLock<ToolRegistry>,
}

impl LivePlugins {
    /// Take over `host`; tools are published to `catalog` for `profile`
    /// and the operator's `selection` (as [`AgentKit`](super::AgentKit)
    /// built them).
    pub fn new(
        host: PluginHost,
        catalog: ToolCatalog,
        profile: Arc<Profile>,
        selection: ToolSelection,
    ) -> Arc<Self> {
        Arc::new(LivePlugins {
            host: tokio::sync::Mutex::new(host),
            catalog,
            profile: Some(profile),
            selection,
            kept: Default::default(),
        })
    }

    /// Take over `host` for `sandcrab mcp serve`: tools are published to
    /// `catalog` as [`served_tools`] chooses them.
    pub fn serving(host: PluginHost, catalog: ToolCatalog, selection: ToolSelection) -> Arc<Self> {
        Arc::new(LivePlugins {
            host: tokio::sync::Mutex::new(host),
            catalog,
            profile: None,
            selection,
            kept: Default::default(),
        })
    }

    /// Keep offering `tools` (an agent's MCP tools) beside the plugins'
    /// whenever plugins reload.
    pub fn keep_tools(&self, tools: ToolRegistry) {
        *self.kept.write().unwrap_or_else(|e| e.into_inner()) = tools;
    }

    /// The loaded plugins now.
    pub async fn plugins(&self) -> Vec<Arc<LoadedPlugin>> {
        self.host.lock().await.plugins().to_vec()
    }

    /// Apply one change of a plugin directory.
    pub async fn apply(&self, change: &Change) -> PluginReport {
        let dir = change.dir().to_path_buf();
        let source = PluginSource::Dir(dir.clone());
        let mut host = self.host.lock().await;
        if let Change::Removed(_) = change {
            let report = match host.unload(&source.manifest_path()) {
                Some(old) => PluginReport::Unloaded {
                    name: old.name().to_string(),
                },
                None => {
                    return PluginReport::Unloaded {
                        name: dir.display().to_string(),
                    };
                }
            };
            self.publish(&host);
            return report;
        }
        let replaced = host
            .plugins()
            .iter()
            .any(|p| p.source == source.manifest_path());
        let started = Instant::now();
        let before = host.diagnostics().len();
        match compute_heavy(host.reload(&source)).await {
            Ok(plugin) => {
                self.publish(&host);
                let notes = host.diagnostics()[before..]
                    .iter()
                    .map(|d| d.message.clone())
                    .collect();
                PluginReport::Loaded {
                    name: plugin.name().to_string(),
                    version: plugin.manifest.version.clone(),
                    tools: plugin.tools.iter().map(|t| t.name.clone()).collect(),
                    replaced,
                    took: started.elapsed(),
                    notes,
                }
            }
            // Not admitted (a project changed since it was trusted): what
            // was loaded from it goes too, as a fresh start would not load
            // it.
            Err(err @ crate::plugin::LoadError::NotAdmitted { .. }) => {
                if !host.unload_scope_of(&dir).is_empty() {
                    self.publish(&host);
                }
                PluginReport::Failed {
                    dir,
                    message: err.to_string(),
                    kept: false,
                }
            }
            Err(err) => PluginReport::Failed {
                dir,
                message: err.to_string(),
                kept: replaced,
            },
        }
    }

    /// Load plugins whose first compile was deferred, one after the other,
    /// reporting each. Sessions wait for them before their next request
    /// (the catalog counts them as loading until each is done).
    pub fn load_deferred(
        self: &Arc<Self>,
        sources: Vec<PluginSource>,
        report: impl Fn(PluginReport) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let pending: Vec<_> = sources.iter().map(|_| self.catalog.loading()).collect();
        let live = self.clone();
        tokio::spawn(async move {
            for (source, guard) in sources.into_iter().zip(pending) {
                let PluginSource::Dir(dir) = source else {
                    continue;
                };
                report(PluginReport::Compiling { dir: dir.clone() });
                report(live.apply(&Change::Added(dir)).await);
                drop(guard);
            }
        })
    }

    /// Watch `watcher`'s folders every `interval` and apply what changed,
    /// reporting each change, until the task is aborted.
    pub fn watch(
        self: &Arc<Self>,
        mut watcher: PluginWatcher,
        interval: Duration,
        report: impl Fn(PluginReport) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let live = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let changes = tokio::task::spawn_blocking(move || {
                    let changes = watcher.poll();
                    (watcher, changes)
                })
                .await;
                let Ok((back, changes)) = changes else { return };
                watcher = back;
                for change in changes {
                    report(live.apply(&change).await);
                }
            }
        })
    }

    /// Offer the tools of the plugins loaded now.
    fn publish(&self, host: &PluginHost) {
        let set = match &self.profile {
            Some(profile) => plugin_tools(host, profile, &self.selection),
            None => served_tools(host, &self.selection, &|_| false),
        };
        let mut registry = set.registry;
        registry.overlay(&self.kept.read().unwrap_or_else(|e| e.into_inner()));
        self.catalog.publish(registry);
    }
}

/// Run a future that compiles (seconds of CPU) without stalling the other
/// tasks of a multi-threaded runtime.
async fn compute_heavy<F: std::future::Future>(future: F) -> F::Output {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let handle = Handle::current();
    if handle.runtime_flavor() == RuntimeFlavor::MultiThread {
        tokio::task::block_in_place(|| handle.block_on(future))
    } else {
        future.await
    }
}

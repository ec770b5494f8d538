//! [`PluginHost`]: one engine, one linker and one cache shared by every
//! plugin; loads plugins (reporting each bad one with its file and reason,
//! then carrying on) and hands out the loaded ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::Linker;

use super::cache::{CacheOutcome, ComponentCache};
use super::discovery::PluginSource;
use super::embedded;
use super::engine::{EngineOptions, PluginEngine};
use super::error::{EngineError, LoadError};
use super::integrity;
use super::loaded::LoadedPlugin;
use super::manifest::{Manifest, PluginKind};
use super::policy::Policy;
use super::reading::{
    MAX_TOOLS_PER_PLUGIN, SourceRead, check_component_header, component_sha256, read_source,
    validate_tool,
};
use super::sandbox::{PluginSandbox, SandboxContext};
use super::state::HostState;
use super::tool_owners::{self, Owners};
use super::types::ToolSpec;
use super::wit;

/// Settings of a plugin host.
#[derive(Debug, Clone)]
pub struct PluginHostConfig {
    /// The workspace every plugin's `/workspace` maps to.
    pub workspace: PathBuf,
    pub policy: Policy,
    /// Compiled-component cache directory (None: no disk cache).
    pub cache_dir: Option<PathBuf>,
    pub engine: EngineOptions,
    /// Cap on each program's captured stdout / stderr.
    pub output_cap: usize,
    /// Environment that granted variables are taken from (None: the
    /// process environment).
    pub host_env: Option<std::collections::BTreeMap<String, String>>,
    /// Most instances one call of a shardable tool is spread over (1: never
    /// shard). Defaults to the machine's cores, at most [`MAX_SHARDS`].
    pub max_shards: usize,
    /// Asked, each in turn, before a plugin from a directory is compiled
    /// (none: every directory is admitted).
    pub admission: Vec<Arc<dyn Admission>>,
    /// Run the built-in plugins from the code compiled into the binary
    /// (true, the default) or compile them like any other plugin (to
    /// compare the two, or to rule the embedded code out).
    pub embedded_code: bool,
    /// Told a plugin directory's component is about to be compiled (the
    /// cache has no code for it): a first load can take seconds.
    pub compiling: Option<CompilingNotice>,
}

/// See [`PluginHostConfig::compiling`]: called with the plugin's folder.
#[derive(Clone)]
pub struct CompilingNotice(pub Arc<dyn Fn(&Path) + Send + Sync>);

impl std::fmt::Debug for CompilingNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompilingNotice")
    }
}

/// The operator's trust in where a plugin comes from, asked with the
/// bytes the loader read (so what is checked is what is loaded).
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// Whether the plugin in `dir` with this manifest and component may
    /// be loaded (and what vouches for it); the reason if not.
    fn admit(&self, dir: &Path, manifest: &[u8], component: &[u8]) -> Result<Admitted, String>;

    /// The folder a refusal for `dir` stands for (a project's plugins are
    /// trusted together, so a refusal for one is a refusal for all).
    fn scope(&self, dir: &Path) -> Option<PathBuf>;
}

/// What an [`Admission`] found vouching for a plugin it admitted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// Who signed exactly these bytes (`NAME (SHA256:…)`).
    pub signer: Option<String>,
}

impl Admitted {
    /// Both answers together (a later signer adds to an earlier).
    fn and(self, other: Admitted) -> Admitted {
        Admitted {
            signer: other.signer.or(self.signer),
        }
    }
}

/// Most shards a call is ever split into.
pub const MAX_SHARDS: usize = 8;

/// The default for [`PluginHostConfig::max_shards`]: one per core.
pub fn default_max_shards() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_SHARDS)
}

impl PluginHostConfig {
    /// Defaults for `workspace`: default policy, the user cache dir.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        PluginHostConfig {
            workspace: workspace.into(),
            policy: Policy::default(),
            cache_dir: ComponentCache::default_dir(),
            engine: EngineOptions::default(),
            output_cap: crate::process::DEFAULT_OUTPUT_CAP,
            host_env: None,
            max_shards: default_max_shards(),
            admission: Vec::new(),
            embedded_code: true,
            compiling: None,
        }
    }
}

/// Something worth telling the operator about a plugin.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file concerned.
    pub path: PathBuf,
    /// What is wrong, starting with the file.
    pub message: String,
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The plugin (or part of it) was not loaded.
    Error,
    /// Loaded, with less than it asked for.
    Warning,
    /// Loaded as asked; something the operator may want to know (a
    /// built-in plugin compiled here instead of taken from the binary).
    Note,
}

/// Why the host itself could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[policy] http_ca_files: {0}")]
    HttpCa(String),
}

/// The loaded plugins and the machinery to run them.
pub struct PluginHost {
    engine: PluginEngine,
    linker: Linker<HostState>,
    cache: ComponentCache,
    ctx: SandboxContext,
    _temp_dir: tempfile::TempDir,
    plugins: Vec<Arc<LoadedPlugin>>,
    /// Which plugin provides each tool name.
    owners: Owners,
    diagnostics: Vec<Diagnostic>,
    /// See [`PluginHostConfig::max_shards`].
    max_shards: usize,
    /// See [`PluginHostConfig::admission`].
    admission: Vec<Arc<dyn Admission>>,
    /// See [`PluginHostConfig::embedded_code`].
    embedded_code: bool,
    /// See [`PluginHostConfig::compiling`].
    compiling: Option<CompilingNotice>,
    /// Idle instances kept for reuse, across every plugin.
    warm_allowance: Arc<tokio::sync::Semaphore>,
}

impl PluginHost {
    /// Create the engine, linker and cache for `config`.
    pub fn new(config: PluginHostConfig) -> Result<Self, HostError> {
        let workspace = config
            .workspace
            .canonicalize()
            .map_err(|source| HostError::Workspace {
                path: config.workspace.clone(),
                source,
            })?;
        if config.policy.sandbox_mode() != super::policy::SandboxMode::Off {
            // Probe once, from the start, so a kernel that cannot confine
            // is reported before anything runs; plugins load meanwhile.
            crate::process::probe_in_background();
        }
        let engine = PluginEngine::new(&config.engine)?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| EngineError::Linker(format!("{e:#}")))?;
        // Its files through the judge of what the host keeps.
        super::imports::wasi_fs::add_to_linker(&mut linker, HostState::guarded_fs)
            .map_err(|e| EngineError::Linker(format!("{e:#}")))?;
        // `wasi:http/outgoing-handler` is there for every plugin; each
        // request goes through the plugin's grants (none: refused).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| EngineError::Linker(format!("{e:#}")))?;
        wit::add_to_linker(&mut linker).map_err(|e| EngineError::Linker(format!("{e:#}")))?;
        let temp_dir = tempfile::Builder::new()
            .prefix("sandcrab-")
            .tempdir()
            .map_err(|source| HostError::Workspace {
                path: std::env::temp_dir(),
                source,
            })?;
        let temp_path = temp_dir
            .path()
            .canonicalize()
            .unwrap_or(temp_dir.path().to_path_buf());
        let (cache, cache_warning) = ComponentCache::new(config.cache_dir.clone(), engine.engine());
        let host_env = config
            .host_env
            .unwrap_or_else(|| std::env::vars().collect());
        let host_path = host_env
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| crate::process::DEFAULT_PATH.into());
        // What the host keeps (the registry in force) and what the
        // workspace protects: one judge for every file tool and program.
        let judge = crate::kept::Judge::new(
            crate::kept::current(),
            config.policy.protected(),
            workspace.clone(),
        );
        let http_tls =
            crate::tls::client_config(&config.policy.http_ca_files).map_err(HostError::HttpCa)?;
        Ok(PluginHost {
            max_shards: config.max_shards.clamp(1, MAX_SHARDS),
            ctx: SandboxContext {
                workspace,
                temp_dir: temp_path,
                judge,
                policy: config.policy,
                output_cap: config.output_cap,
                host_path,
                host_env,
                http_tls,
            },
            engine,
            linker,
            cache,
            admission: config.admission,
            embedded_code: config.embedded_code,
            compiling: config.compiling,
            warm_allowance: Arc::new(tokio::sync::Semaphore::new(
                super::warm_pool::HOST_WARM_INSTANCES,
            )),
            _temp_dir: temp_dir,
            plugins: Vec::new(),
            owners: Owners::new(),
            diagnostics: cache_warning
                .into_iter()
                .map(|message| Diagnostic {
                    severity: Severity::Warning,
                    path: config.cache_dir.clone().unwrap_or_default(),
                    message,
                })
                .collect(),
        })
    }

    /// Load every source; failures become diagnostics and loading goes on.
    /// The plugins' load-time calls run concurrently, so one slow or stuck
    /// plugin delays the others by at most its load limit, not the sum.
    pub async fn load_all(&mut self, sources: &[PluginSource]) {
        let mut staged = Vec::new();
        for source in sources {
            match self.stage(source, &staged, None) {
                Ok(plugin) => staged.push(plugin),
                Err(err) => self.note_error(err),
            }
        }
        let listed = futures::future::join_all(staged.iter().map(list_tools_if_tool)).await;
        let mut added = Vec::new();
        for (plugin, raw) in staged.into_iter().zip(listed) {
            match self.finish(plugin, raw) {
                Ok(plugin) => added.push(plugin.name().to_string()),
                Err(err) => self.note_error(err),
            }
        }
        self.resolve_owners(&added);
    }

    /// Decide again which plugin provides each tool; report what concerns
    /// the plugins named in `report`.
    fn resolve_owners(&mut self, report: &[String]) {
        let (owners, claims) = tool_owners::resolve(&self.plugins, &self.ctx.policy);
        self.owners = owners;
        for claim in claims.into_iter().filter(|c| report.contains(&c.plugin)) {
            let path = self
                .get(&claim.plugin)
                .map(|p| p.source.clone())
                .unwrap_or_default();
            let severity = if claim.refused {
                Severity::Error
            } else {
                Severity::Warning
            };
            self.note(severity, &path, claim.message);
        }
    }

    fn note_error(&mut self, err: LoadError) {
        let path = err.path().to_path_buf();
        self.note(Severity::Error, &path, err.to_string());
    }

    /// Validate a plugin without running any of its code: manifest, wasm,
    /// component format, world and imports (compiling it through the
    /// cache).
    pub fn check(&self, source: &PluginSource) -> Result<Checked, LoadError> {
        let prepared = self.prepare(source)?;
        Ok(Checked {
            manifest: prepared.manifest,
            version: prepared.version,
            cache: prepared.cache,
        })
    }

    /// Load one plugin.
    pub async fn load(&mut self, source: &PluginSource) -> Result<Arc<LoadedPlugin>, LoadError> {
        let plugin = self.stage(source, &[], None)?;
        let raw = list_tools_if_tool(&plugin).await;
        let plugin = self.finish(plugin, raw)?;
        self.resolve_owners(&[plugin.name().to_string()]);
        Ok(plugin)
    }

    /// Load `source` again and put the new version where the one loaded
    /// from the same manifest was (or add it, if none was). Nothing changes
    /// when the new version fails to load: the old one stays, and the error
    /// says why. Calls already running keep the version they started on
    /// (they hold it); the host hands out the new one from now on.
    pub async fn reload(&mut self, source: &PluginSource) -> Result<Arc<LoadedPlugin>, LoadError> {
        let manifest_path = source.manifest_path();
        let Some(index) = self.index_of(&manifest_path) else {
            return self.load(source).await;
        };
        let staged = self.stage(source, &[], Some(index))?;
        let raw = list_tools_if_tool(&staged).await;
        let plugin = Arc::new(self.accept(staged, raw)?);
        self.plugins[index] = plugin.clone();
        self.resolve_owners(&[plugin.name().to_string()]);
        Ok(plugin)
    }

    /// Remove the plugin loaded from `manifest_path` (its running calls
    /// finish); returns it.
    pub fn unload(&mut self, manifest_path: &Path) -> Option<Arc<LoadedPlugin>> {
        let index = self.index_of(manifest_path)?;
        let plugin = self.plugins.remove(index);
        self.resolve_owners(&[]);
        Some(plugin)
    }

    /// Whether loading `source` would take its compiled code from the
    /// cache (false when it would compile, or cannot be read at all).
    pub fn is_compiled(&self, source: &PluginSource) -> bool {
        read_source(source, &source.manifest_path())
            .is_ok_and(|read| self.cache.has_entry(&read.bytes))
    }

    /// Remove every plugin the admission no longer admits together with
    /// `dir` (see [`Admission::scope`]); their names.
    pub fn unload_scope_of(&mut self, dir: &Path) -> Vec<String> {
        let Some(scope) = self.admission.iter().find_map(|a| a.scope(dir)) else {
            return Vec::new();
        };
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.plugins)
            .into_iter()
            .partition(|p| p.source.starts_with(&scope));
        self.plugins = kept;
        self.resolve_owners(&[]);
        gone.iter().map(|p| p.name().to_string()).collect()
    }

    fn index_of(&self, manifest_path: &Path) -> Option<usize> {
        self.plugins.iter().position(|p| p.source == manifest_path)
    }

    /// Prepare a plugin and apply the policy: everything but running it.
    /// `replacing`: the index of the plugin this one will replace (its
    /// name is not taken).
    fn stage(
        &mut self,
        source: &PluginSource,
        staged: &[LoadedPlugin],
        replacing: Option<usize>,
    ) -> Result<LoadedPlugin, LoadError> {
        let Prepared {
            manifest,
            manifest_path,
            version,
            cache,
            guest,
            sharded,
            component_sha256,
            note,
            signer,
        } = self.prepare(source)?;
        if let Some(note) = note {
            self.note(Severity::Note, &manifest_path, note);
        }
        let taken = self
            .plugins
            .iter()
            .enumerate()
            .any(|(i, p)| p.name() == manifest.name && Some(i) != replacing)
            || staged.iter().any(|p| p.name() == manifest.name);
        if taken {
            return Err(LoadError::DuplicatePlugin {
                path: manifest_path,
                name: manifest.name,
            });
        }
        let decision = self.ctx.policy.decide(&manifest, source.origin());
        if let Some(warning) =
            self.ctx
                .policy
                .consent_changed(&manifest.name, &component_sha256, &decision.denied)
        {
            let message = format!("{}: {warning}", manifest_path.display());
            self.note(Severity::Warning, &manifest_path, message);
        }
        for denied in &decision.denied {
            let message = format!(
                "{}: plugin '{}': not granted: {denied}",
                manifest_path.display(),
                manifest.name
            );
            self.note(Severity::Warning, &manifest_path, message);
        }
        let sandbox = PluginSandbox::new(
            &manifest.name,
            source.origin(),
            &decision.grants,
            &manifest.capabilities.http,
            &self.ctx,
        );
        let mut plugin = LoadedPlugin::new(
            manifest,
            source.origin(),
            manifest_path,
            version,
            decision,
            cache,
            sandbox,
            guest,
            self.engine.engine().clone(),
        );
        if let Some(sharded) = sharded {
            plugin.allow_shards(sharded, self.max_shards);
        }
        if plugin.decision.grants.limits.reuse && plugin.kind() == PluginKind::Tool {
            plugin.allow_reuse(self.warm_allowance.clone());
        }
        plugin.component_sha256 = component_sha256;
        plugin.signer = signer;
        Ok(plugin)
    }

    /// Keep the valid tools of a staged plugin and add it to the host.
    fn finish(
        &mut self,
        plugin: LoadedPlugin,
        raw: Option<ToolList>,
    ) -> Result<Arc<LoadedPlugin>, LoadError> {
        let plugin = Arc::new(self.accept(plugin, raw)?);
        self.plugins.push(plugin.clone());
        Ok(plugin)
    }

    /// Keep the valid tools of a staged plugin.
    fn accept(
        &mut self,
        mut plugin: LoadedPlugin,
        raw: Option<ToolList>,
    ) -> Result<LoadedPlugin, LoadError> {
        if let Some(raw) = raw {
            let path = plugin.source.clone();
            let raw = raw.map_err(|e| LoadError::Initialization {
                path: path.clone(),
                message: e.to_string(),
            })?;
            plugin.tools = self.accept_tools(&plugin, &path, raw)?;
        }
        Ok(plugin)
    }

    /// Everything up to (not including) running guest code.
    fn prepare(&self, source: &PluginSource) -> Result<Prepared, LoadError> {
        let manifest_path = source.manifest_path();
        let SourceRead {
            manifest,
            text,
            wasm_path,
            bytes,
        } = read_source(source, &manifest_path)?;
        let mut admitted = Admitted::default();
        if let PluginSource::Dir(dir) = source {
            for admission in &self.admission {
                let answer = admission
                    .admit(dir, text.as_bytes(), &bytes)
                    .map_err(|message| LoadError::NotAdmitted {
                        path: manifest_path.clone(),
                        message,
                    })?;
                admitted = admitted.and(answer);
            }
        }
        integrity::verify(
            &self.ctx.policy,
            &manifest.name,
            source.origin(),
            &bytes,
            &wasm_path,
        )?;
        check_component_header(&bytes, &wasm_path)?;
        let engine = self.engine.engine();
        let loaded = match source {
            PluginSource::Bundled(b) if self.embedded_code => embedded::load(engine, &self.cache, b),
            _ => self
                .cache
                .load(engine, &bytes, &|| {
                    if let (PluginSource::Dir(dir), Some(tell)) = (source, &self.compiling) {
                        (tell.0)(dir);
                    }
                })
                .map(|(component, outcome)| embedded::Loaded {
                    component,
                    outcome,
                    // An entry that did not verify was planted, swapped or
                    // damaged: its code never ran, and the operator hears.
                    note: (outcome == CacheOutcome::Repaired).then(|| {
                        format!(
                            "plugin {}: its compiled code in the cache did not verify (written by someone else, for another component, or damaged); it was compiled again from {}",
                            manifest.name,
                            wasm_path.display()
                        )
                    }),
                }),
        };
        let embedded::Loaded {
            component,
            outcome: cache,
            note,
        } = loaded.map_err(|e| LoadError::NotAComponent {
            path: wasm_path.clone(),
            message: format!("{e:#}"),
        })?;
        let wrong_world = |message: String| LoadError::WrongWorld {
            path: wasm_path.clone(),
            message,
        };
        let version = wit::detect(&component, engine, manifest.kind).map_err(wrong_world)?;
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| {
            wrong_world(format!(
                "it needs an import the host does not provide: {e:#}"
            ))
        })?;
        let sharded = match manifest.kind {
            PluginKind::Tool => wit::shards_v0_1_0::guest(&component, engine, &instance_pre)
                .map_err(|e| wrong_world(format!("{e:#}")))?,
            _ => None,
        };
        let guest = wit::Guest::new(version, manifest.kind, instance_pre)
            .map_err(|e| wrong_world(format!("{e:#}")))?;
        Ok(Prepared {
            manifest,
            manifest_path,
            version,
            cache,
            guest,
            sharded,
            component_sha256: component_sha256(source, &bytes),
            note,
            signer: admitted.signer,
        })
    }

    /// The valid tools among those a plugin declared.
    fn accept_tools(
        &mut self,
        plugin: &LoadedPlugin,
        path: &Path,
        raw: Vec<wit::RawTool>,
    ) -> Result<Vec<ToolSpec>, LoadError> {
        if raw.len() > MAX_TOOLS_PER_PLUGIN {
            return Err(LoadError::TooManyTools {
                path: path.to_path_buf(),
                count: raw.len(),
                max: MAX_TOOLS_PER_PLUGIN,
            });
        }
        let mut tools: Vec<ToolSpec> = Vec::new();
        for wit::RawTool {
            name,
            description,
            schema,
            traits,
        } in raw
        {
            match validate_tool(&name, &description, &schema, &traits, &tools) {
                Ok(parameters) => {
                    // A call may ask for the network when the plugin's
                    // programs have it on request and the tool's schema
                    // lets the model say so.
                    let asks = parameters.pointer("/properties/network/type")
                        == Some(&serde_json::json!("boolean"));
                    let traits = super::ToolTraits {
                        network: asks && plugin.decision.grants.network_on_request,
                        ..traits
                    };
                    tools.push(ToolSpec {
                        name,
                        description,
                        parameters,
                        traits,
                    })
                }
                Err(why) => {
                    let message = format!(
                        "{}: plugin '{}': tool skipped: {why}",
                        path.display(),
                        plugin.name()
                    );
                    self.note(Severity::Error, path, message);
                }
            }
        }
        Ok(tools)
    }

    /// The plugin that provides the tool `tool` (see [`tool_owners`]).
    pub fn tool_owner(&self, tool: &str) -> Option<&Arc<LoadedPlugin>> {
        self.owners.get(tool)
    }

    /// Every tool name and the plugin that provides it.
    pub fn tool_owners(&self) -> &Owners {
        &self.owners
    }

    /// Record a diagnostic; `message` names the file.
    fn note(&mut self, severity: Severity, path: &Path, message: String) {
        tracing::debug!("{message}");
        self.diagnostics.push(Diagnostic {
            severity,
            path: path.to_path_buf(),
            message,
        });
    }

    /// Every loaded plugin, in load order.
    pub fn plugins(&self) -> &[Arc<LoadedPlugin>] {
        &self.plugins
    }

    /// The plugin named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<LoadedPlugin>> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    /// Problems found while loading.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The first summarizer plugin.
    pub fn summarizer(&self) -> Option<&Arc<LoadedPlugin>> {
        self.plugins
            .iter()
            .find(|p| p.kind() == PluginKind::Summarizer)
    }

    /// Settings shared by every plugin's sandbox.
    pub fn sandbox_context(&self) -> &SandboxContext {
        &self.ctx
    }

    /// Whether the pooling allocator is in use.
    pub fn pooling(&self) -> bool {
        self.engine.pooling()
    }
}

/// A plugin that passed [`PluginHost::check`].
#[derive(Debug)]
pub struct Checked {
    pub manifest: Manifest,
    /// The ABI version it was built against.
    pub version: wit::WitVersion,
    /// Whether its compiled code came from the cache.
    pub cache: super::cache::CacheOutcome,
}

/// What a tool plugin's `tools()` returned.
type ToolList = Result<Vec<wit::RawTool>, super::error::CallError>;

/// The raw tool list of a tool plugin (None for other kinds).
async fn list_tools_if_tool(plugin: &LoadedPlugin) -> Option<ToolList> {
    if plugin.kind() == PluginKind::Tool {
        Some(plugin.list_tools().await)
    } else {
        None
    }
}

/// A plugin whose component is compiled and linked, not yet run.
struct Prepared {
    manifest: Manifest,
    manifest_path: PathBuf,
    version: wit::WitVersion,
    cache: super::cache::CacheOutcome,
    guest: wit::Guest,
    /// The optional `sandcrab:shards` export of a tool plugin.
    sharded: Option<Arc<dyn wit::ShardedGuest>>,
    component_sha256: String,
    /// What the operator should know about how it was compiled.
    note: Option<String>,
    /// Who signed it, as an admission found.
    signer: Option<String>,
}

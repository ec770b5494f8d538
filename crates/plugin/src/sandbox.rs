//! What one plugin may touch, turned into mechanisms: WASI preopens for its
//! directories, the environment it sees, and the gate its `process` calls
//! go through (program allow-list, working directory check, environment,
//! confinement).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use super::context::SandboxContext;
use super::manifest::Access;
use super::policy::{Grants, PluginOrigin, SandboxMode};
use crate::process::{
    self, ChildEnv, Confinement, ConfinementSpec, LiveOutput, ProcessOutput, ProcessRequest,
    find_on_path,
};

/// Where the workspace appears inside every plugin.
pub const GUEST_WORKSPACE: &str = "/workspace";

/// A directory visible to the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Path inside the guest.
    pub guest: String,
    /// Canonical host path.
    pub host: PathBuf,
    pub access: Access,
}

/// Why a `process` call was refused (maps onto the WIT `process-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessDenied {
    #[error("{0}")]
    NotAllowed(String),
    #[error("{0}")]
    InvalidCwd(String),
    #[error("{0}")]
    SandboxUnavailable(String),
    #[error("{0}")]
    SpawnFailed(String),
}

/// A process call as the guest asked for it.
#[derive(Debug, Clone)]
pub struct GuestCommand {
    pub program: String,
    pub args: Vec<String>,
    /// The directory the guest named.
    pub cwd: Option<String>,
    /// Where a command without `cwd` runs (None: the workspace root); a
    /// plugin without a directory there gets its private scratch directory.
    pub default_cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: Option<u64>,
}

/// The sandbox of one plugin.
#[derive(Debug)]
pub struct PluginSandbox {
    pub plugin: String,
    /// The workspace on the host (what the model calls it).
    pub host_workspace: PathBuf,
    pub mounts: Vec<Mount>,
    /// Variables the guest and its programs see (granted names, host values).
    pub env: Vec<(String, String)>,
    /// How programs are confined (told to each tool call in its context).
    pub sandbox_mode: SandboxMode,
    pub programs: Vec<String>,
    /// The plugin (and so its programs) may use the network.
    pub network: bool,
    /// Its programs get the network for a call given it (see
    /// [`super::ToolCallContext::network`]).
    pub network_on_request: bool,
    /// Where its HTTP requests may go, with which credentials.
    pub http: Arc<super::http::HttpEgress>,
    /// The protected paths as the operator wrote them (told to the guest
    /// in each tool call's context; the host enforces them, see
    /// [`crate::kept::Judge`]).
    pub protected: Vec<String>,
    /// What the host keeps and protects, for this plugin's file access.
    judge: crate::kept::Judge,
    /// How programs are confined; prepared on first use (most plugins
    /// never start a program).
    confinement: OnceLock<Result<Confinement, String>>,
    confinement_spec: ConfinementSpec,
    /// The same, with the network, for calls given it (plugins whose
    /// programs have it on request).
    networked: OnceLock<Result<Confinement, String>>,
    networked_spec: ConfinementSpec,
    temp_dir: PathBuf,
    output_cap: usize,
    host_path: String,
    home: Option<String>,
}

impl PluginSandbox {
    /// Build the sandbox for a plugin with `grants`.
    pub fn new(
        plugin: &str,
        origin: PluginOrigin,
        grants: &Grants,
        requested_http: &[super::http::OriginPattern],
        ctx: &SandboxContext,
    ) -> Arc<Self> {
        let mut mounts = Vec::new();
        if grants.workspace > Access::None {
            mounts.push(Mount {
                guest: GUEST_WORKSPACE.to_string(),
                host: ctx.workspace.clone(),
                access: grants.workspace,
            });
        }
        // Granted paths are real paths already (the policy resolved them).
        for p in &grants.paths {
            mounts.push(Mount {
                guest: p.path.display().to_string(),
                host: p.path.clone(),
                access: p.access,
            });
        }
        // Whatever was granted, a folder the host keeps is not mounted when
        // it is a secret, and only read when it is an integrity root.
        mounts.retain_mut(|m| match ctx.judge.registry().holding(&m.host) {
            Some(entry) if entry.kind == crate::kept::Kind::Secret => {
                tracing::warn!(
                    "plugin {plugin}: {} is not mounted: it is {}",
                    m.host.display(),
                    entry.item.describe()
                );
                false
            }
            Some(_) => {
                m.access = m.access.min(Access::Read);
                true
            }
            None => true,
        });
        let env = grants
            .env
            .iter()
            .filter_map(|name| ctx.host_env.get(name).map(|v| (name.clone(), v.clone())))
            .collect::<Vec<_>>();
        let locked = ctx.policy.sandbox_mode() == SandboxMode::Locked;
        let home = env
            .iter()
            .find(|(k, _)| k == "HOME")
            .filter(|_| !locked)
            .map(|(_, v)| v.clone());
        let temp_dir = ctx.temp_dir.join(plugin);
        let confinement_spec = super::confinement::spec(
            super::confinement::ProgramOwner::Plugin(origin),
            super::confinement::Footprint {
                workspace: grants.workspace,
                paths: &grants.paths,
                network: grants.network,
            },
            ctx,
            &temp_dir,
        );
        let protected = ctx.judge.protected().written().to_vec();
        Arc::new(PluginSandbox {
            plugin: plugin.to_string(),
            host_workspace: ctx.workspace.clone(),
            mounts,
            env,
            sandbox_mode: ctx.policy.sandbox_mode(),
            programs: grants.programs.clone(),
            network: grants.network,
            network_on_request: grants.network_on_request,
            http: Arc::new(super::http::HttpEgress::new(
                plugin,
                requested_http.to_vec(),
                grants.http.clone(),
                &grants.credentials,
                super::http::HttpLimits {
                    request_bytes: grants.limits.http_request_kb << 10,
                    response_bytes: grants.limits.http_response_kb << 10,
                    timeout_ms: grants.limits.http_timeout_ms,
                    concurrent: grants.limits.http_concurrent.max(1),
                    held_bytes: (grants.limits.memory_mb as usize) << 20,
                },
                &ctx.host_env,
                ctx.http_tls.clone(),
            )),
            protected,
            judge: ctx.judge.clone(),
            confinement: OnceLock::new(),
            networked: OnceLock::new(),
            networked_spec: ConfinementSpec {
                network: true,
                ..confinement_spec.clone()
            },
            confinement_spec,
            temp_dir,
            output_cap: ctx.output_cap,
            host_path: ctx.host_path.clone(),
            home,
        })
    }

    /// What judges this plugin's file access.
    pub fn judge(&self) -> &crate::kept::Judge {
        &self.judge
    }

    /// What this plugin's programs are confined to.
    pub fn confinement_spec(&self) -> &ConfinementSpec {
        &self.confinement_spec
    }

    /// What the programs of a call are confined to: with the network when
    /// the call was given it and the plugin's programs have it on request.
    pub fn confinement_spec_for(&self, network: bool) -> &ConfinementSpec {
        if self.networked_for(network) {
            &self.networked_spec
        } else {
            &self.confinement_spec
        }
    }

    fn networked_for(&self, network: bool) -> bool {
        network && self.network_on_request && !self.network
    }

    /// How programs of this plugin are confined (or why they cannot run).
    pub fn confinement(&self) -> Result<&Confinement, &str> {
        self.confinement_for(false)
    }

    /// How the programs of a call given the network (or not) are confined.
    pub fn confinement_for(&self, network: bool) -> Result<&Confinement, &str> {
        let (cell, spec) = if self.networked_for(network) {
            (&self.networked, &self.networked_spec)
        } else {
            (&self.confinement, &self.confinement_spec)
        };
        cell.get_or_init(|| {
            Confinement::prepare(spec).map_err(|e| {
                tracing::warn!("plugin {}: programs will be refused: {e}", self.plugin);
                e.to_string()
            })
        })
        .as_ref()
        .map_err(|e| e.as_str())
    }

    /// The plugin's private temp dir (its programs' TMPDIR), created on
    /// first use, readable by the user only.
    fn private_temp(&self) -> Result<&Path, ProcessDenied> {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&self.temp_dir)
        {
            Ok(()) => Ok(&self.temp_dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(&self.temp_dir),
            Err(e) => Err(ProcessDenied::SpawnFailed(format!(
                "cannot create the private temp dir {}: {e}",
                self.temp_dir.display()
            ))),
        }
    }

    /// Run a program for the guest, after every check; with the network
    /// when its call was given it (`network`) and the plugin's programs
    /// have it on request.
    pub async fn run(
        &self,
        cmd: GuestCommand,
        live: Option<LiveOutput>,
        network: bool,
    ) -> Result<ProcessOutput, ProcessDenied> {
        let program = self.resolve_program(&cmd.program)?;
        self.private_temp()?;
        let cwd = match cmd.cwd.as_deref() {
            Some(dir) => self.resolve_cwd(dir)?,
            None => self.default_cwd(cmd.default_cwd.as_deref())?,
        };
        let confinement = self
            .confinement_for(network)
            .map_err(|e| ProcessDenied::SandboxUnavailable(e.to_string()))?;
        let timeout = cmd
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(process::DEFAULT_TIMEOUT)
            .min(process::MAX_TIMEOUT);
        let request = ProcessRequest {
            program,
            args: cmd.args,
            cwd,
            env: self.child_env(&cmd.env),
            stdin: cmd.stdin,
            timeout,
            output_cap: self.output_cap,
            kill_grace: process::KILL_GRACE,
        };
        process::run(&request, confinement, live)
            .await
            .map_err(|e| match e {
                process::ProcessError::Confine(e) => {
                    ProcessDenied::SandboxUnavailable(e.to_string())
                }
                other => ProcessDenied::SpawnFailed(other.to_string()),
            })
    }

    fn resolve_program(&self, program: &str) -> Result<PathBuf, ProcessDenied> {
        if !self.programs.iter().any(|p| p == program) {
            let allowed = if self.programs.is_empty() {
                "none".to_string()
            } else {
                self.programs.join(", ")
            };
            return Err(ProcessDenied::NotAllowed(format!(
                "plugin '{}' may not run '{program}' (allowed programs: {allowed})",
                self.plugin
            )));
        }
        if program.starts_with('/') {
            return Ok(PathBuf::from(program));
        }
        find_on_path(program, &self.host_path).ok_or_else(|| {
            ProcessDenied::SpawnFailed(format!("'{program}' was not found on the host's PATH"))
        })
    }

    /// Where a command without `cwd` runs: `default` (the call's working
    /// directory, else the workspace root), or the plugin's private scratch
    /// directory when no granted directory holds it (a plugin granted
    /// programs but not the workspace).
    fn default_cwd(&self, default: Option<&str>) -> Result<PathBuf, ProcessDenied> {
        let guest = default.unwrap_or(GUEST_WORKSPACE);
        if self
            .mounts
            .iter()
            .any(|m| guest_relative(&m.guest, guest).is_some())
        {
            return self.resolve_cwd(guest);
        }
        self.scratch()
    }

    /// The plugin's scratch directory (inside its private temp dir, so its
    /// programs may write there), created on first use.
    fn scratch(&self) -> Result<PathBuf, ProcessDenied> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.temp_dir.join("scratch");
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dir),
            Err(e) => Err(ProcessDenied::SpawnFailed(format!(
                "cannot create the scratch directory {}: {e}",
                dir.display()
            ))),
        }
    }

    /// A warning for a plugin that may run programs but sees no workspace:
    /// its programs run in a private scratch directory.
    pub fn scratch_note(&self) -> Option<String> {
        let sees_workspace = self.mounts.iter().any(|m| m.guest == GUEST_WORKSPACE);
        (!self.programs.is_empty() && !sees_workspace).then(|| scratch_warning(&self.plugin))
    }

    /// The mount holding the guest path `guest`, and the rest of the path
    /// inside it (no `..`).
    pub(crate) fn mount_for<'a>(&self, guest: &'a str) -> Option<(&Mount, &'a str)> {
        self.mounts
            .iter()
            .filter_map(|m| guest_relative(&m.guest, guest).map(|rest| (m, rest)))
            .max_by_key(|(m, _)| m.guest.len())
    }

    /// Map a guest directory to the host, refusing anything outside a mount
    /// (including through symlinks).
    fn resolve_cwd(&self, guest: &str) -> Result<PathBuf, ProcessDenied> {
        let invalid = |why: &str| {
            ProcessDenied::InvalidCwd(format!(
                "working directory '{guest}' {why} (plugin '{}')",
                self.plugin
            ))
        };
        let (mount, rest) = self
            .mount_for(guest)
            .ok_or_else(|| invalid("is not inside a directory granted to the plugin"))?;
        let host = mount
            .host
            .join(rest)
            .canonicalize()
            .map_err(|e| invalid(&format!("cannot be used: {e}")))?;
        if !host.starts_with(&mount.host) {
            return Err(invalid("leads outside the granted directory"));
        }
        Ok(host)
    }

    fn child_env(&self, requested: &[(String, String)]) -> ChildEnv {
        let granted = |name: &str| self.env.iter().any(|(k, _)| k == name);
        let path = granted("PATH").then_some(self.host_path.as_str());
        let mut env = ChildEnv::base(&self.temp_dir, path, self.home.as_deref());
        for (name, value) in &self.env {
            if name != "PATH" && name != "HOME" {
                env.set(name, value);
            }
        }
        for (name, value) in requested {
            if granted(name) {
                env.set(name, value);
            } else {
                tracing::debug!("plugin {}: dropped ungranted env var {name}", self.plugin);
            }
        }
        env.harden_git();
        env
    }
}

/// The warning for a plugin that may run programs without workspace
/// access (see [`PluginSandbox::scratch_note`]).
pub fn scratch_warning(plugin: &str) -> String {
    format!(
        "plugin '{plugin}' may run programs but has no access to the workspace: they run in a private, empty scratch directory (to let them see the workspace, grant it with [policy.plugins.{plugin}] workspace = \"read\" in {}, and request it in the plugin's manifest)",
        crate::user_files::config_file_shown()
    )
}

/// A path a tool call names, as the host sees it — resolved exactly as the
/// tools resolve it (the SDK's `paths::resolve`): a name under the host's
/// workspace path is that place in the guest's workspace; a relative name
/// is under the guest's working directory; `.` and `..` are resolved by
/// name in the guest's view; what lands inside [`GUEST_WORKSPACE`] is in
/// `workspace`. Anything else stays outside (the tools refuse it;
/// checkpoints and previews find it outside the workspace).
pub fn host_path_of(name: &str, workspace: &Path, working_dir: &Path) -> PathBuf {
    let guest_root = GUEST_WORKSPACE.trim_end_matches('/');
    let host_root = workspace.to_string_lossy();
    let host_root = host_root.trim_end_matches('/');
    let guest_wd = match working_dir.strip_prefix(workspace) {
        Ok(rest) if rest.as_os_str().is_empty() => guest_root.to_string(),
        Ok(rest) => format!("{guest_root}/{}", rest.to_string_lossy()),
        Err(_) => guest_root.to_string(),
    };
    let guest = match name.strip_prefix(host_root) {
        Some(rest) if !host_root.is_empty() && (rest.is_empty() || rest.starts_with('/')) => {
            format!("{guest_root}{rest}")
        }
        _ if !name.starts_with('/') => format!("{guest_wd}/{name}"),
        _ => name.to_string(),
    };
    let guest = lexical(Path::new(&guest));
    match guest_relative(GUEST_WORKSPACE, &guest.to_string_lossy()) {
        Some(rest) => workspace.join(rest),
        None => guest,
    }
}

/// `path` with `.` and `..` resolved by name (never above `/`).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(name) => out.push(name),
            std::path::Component::CurDir | std::path::Component::RootDir => {}
            std::path::Component::Prefix(_) => {}
        }
    }
    out
}

/// `guest` relative to `mount` if it lies inside it.
fn guest_relative<'a>(mount: &str, guest: &'a str) -> Option<&'a str> {
    let rest = guest.strip_prefix(mount.trim_end_matches('/'))?;
    if rest.is_empty() {
        return Some("");
    }
    let rest = rest.strip_prefix('/')?;
    if rest.split('/').any(|part| part == "..") {
        return None;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths_map_inside_mounts_only() {
        assert_eq!(guest_relative("/workspace", "/workspace"), Some(""));
        assert_eq!(
            guest_relative("/workspace", "/workspace/src/a"),
            Some("src/a")
        );
        assert_eq!(guest_relative("/workspace", "/workspaces"), None);
        assert_eq!(guest_relative("/workspace", "/workspace/../etc"), None);
        assert_eq!(guest_relative("/workspace", "/etc"), None);
        let (ws, wd) = (Path::new("/home/u/ws"), Path::new("/home/u/ws/sub"));
        assert_eq!(host_path_of("/workspace", ws, wd), ws);
        assert_eq!(host_path_of("/workspace/src/a", ws, wd), ws.join("src/a"));
        assert_eq!(host_path_of("a.txt", ws, wd), wd.join("a.txt"));
        assert_eq!(
            host_path_of("/workspace/../etc/x", ws, wd),
            Path::new("/etc/x")
        );
        // `..` is resolved in the guest's view, as the tools resolve it.
        assert_eq!(host_path_of("/workspace/x/../y", ws, wd), ws.join("y"));
        assert_eq!(host_path_of("../a.txt", ws, wd), ws.join("a.txt"));
        assert_eq!(host_path_of("../../workspace/b", ws, wd), ws.join("b"));
        assert_eq!(
            host_path_of("/home/u/ws/../workspace/c", ws, wd),
            ws.join("c")
        );
        assert_eq!(host_path_of("/home/u/ws/src/d", ws, wd), ws.join("src/d"));
        // A workspace that is itself under /workspace: the host's path of
        // it is taken first, as the tools take it.
        let (ws, wd) = (Path::new("/workspace/repo"), Path::new("/workspace/repo"));
        assert_eq!(
            host_path_of("/workspace/repo/src/k", ws, wd),
            ws.join("src/k")
        );
        assert_eq!(host_path_of("/workspace/src/k", ws, wd), ws.join("src/k"));
    }

    #[test]
    fn programs_are_found_on_the_given_path_only() {
        use crate::process::find_on_path;
        assert!(find_on_path("sh", "/usr/bin:/bin").is_some());
        assert!(find_on_path("sh", "/nonexistent").is_none());
        // A relative entry that leads (from the current directory) to a
        // directory holding an executable `sh` is not used.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("sh");
        std::fs::write(&fake, "#!/bin/true\n").unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count() - 1);
        let relative = format!(
            "{up}{}",
            dir.path().display().to_string().trim_start_matches('/')
        );
        assert!(
            Path::new(&relative).join("sh").exists(),
            "the relative entry reaches the fake"
        );
        assert_eq!(find_on_path("sh", &relative), None);
        assert_eq!(
            find_on_path("sh", &dir.path().display().to_string()),
            Some(fake)
        );
    }
}

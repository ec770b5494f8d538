//! What one plugin may touch, turned into mechanisms: WASI preopens for its
//! directories, the environment it sees, and the gate its `process` calls
//! go through (program allow-list, working directory check, environment,
//! confinement).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;

use super::manifest::Access;
use super::policy::{Grants, Policy, PolicyMode, SandboxMode};
use crate::process::{
    self, ChildEnv, Confinement, ConfinementSpec, OutputChunk, ProcessOutput, ProcessRequest,
};

/// Where the workspace appears inside every plugin.
pub const GUEST_WORKSPACE: &str = "/workspace";

/// Settings shared by every plugin of one host.
#[derive(Debug, Clone)]
pub struct SandboxContext {
    /// The workspace root on the host (canonical).
    pub workspace: PathBuf,
    /// The private temp dir programs get as TMPDIR (canonical).
    pub temp_dir: PathBuf,
    /// The operator's policy.
    pub policy: Policy,
    /// Cap on captured stdout / stderr of each program.
    pub output_cap: usize,
    /// The host's PATH when sandcrab started (programs are resolved on it).
    pub host_path: String,
    /// The environment granted variables take their values from (the
    /// host's environment when sandcrab started).
    pub host_env: std::collections::BTreeMap<String, String>,
}

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
    pub cwd: Option<String>,
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
    /// How programs are confined (told to the guest as SANDCRAB_SANDBOX).
    pub sandbox_mode: SandboxMode,
    pub programs: Vec<String>,
    pub network: bool,
    /// How programs are confined; prepared on first use (most plugins
    /// never start a program).
    confinement: OnceLock<Result<Confinement, String>>,
    confinement_spec: ConfinementSpec,
    temp_dir: PathBuf,
    output_cap: usize,
    host_path: String,
    home: Option<String>,
}

impl PluginSandbox {
    /// Build the sandbox for a plugin with `grants`.
    pub fn new(plugin: &str, grants: &Grants, ctx: &SandboxContext) -> Arc<Self> {
        let mut mounts = Vec::new();
        if grants.workspace > Access::None {
            mounts.push(Mount {
                guest: GUEST_WORKSPACE.to_string(),
                host: ctx.workspace.clone(),
                access: grants.workspace,
            });
        }
        for p in &grants.paths {
            match p.path.canonicalize() {
                Ok(host) => mounts.push(Mount {
                    guest: p.path.display().to_string(),
                    host,
                    access: p.access,
                }),
                Err(err) => tracing::warn!(
                    "plugin {plugin}: granted path {} is unusable: {err}",
                    p.path.display()
                ),
            }
        }
        let env = grants
            .env
            .iter()
            .filter_map(|name| ctx.host_env.get(name).map(|v| (name.clone(), v.clone())))
            .collect::<Vec<_>>();
        let locked = ctx.policy.sandbox_mode() == SandboxMode::Locked
            || ctx.policy.mode == PolicyMode::Locked;
        let home = env
            .iter()
            .find(|(k, _)| k == "HOME")
            .filter(|_| !locked)
            .map(|(_, v)| v.clone());
        let confinement_spec = confinement_spec(&mounts, grants, ctx);
        Arc::new(PluginSandbox {
            plugin: plugin.to_string(),
            host_workspace: ctx.workspace.clone(),
            mounts,
            env,
            sandbox_mode: ctx.policy.sandbox_mode(),
            programs: grants.programs.clone(),
            network: grants.network && ctx.policy.mode != PolicyMode::Locked,
            confinement: OnceLock::new(),
            confinement_spec,
            temp_dir: ctx.temp_dir.clone(),
            output_cap: ctx.output_cap,
            host_path: ctx.host_path.clone(),
            home,
        })
    }

    /// How programs of this plugin are confined (or why they cannot run).
    pub fn confinement(&self) -> Result<&Confinement, &str> {
        self.confinement
            .get_or_init(|| {
                Confinement::prepare(&self.confinement_spec).map_err(|e| {
                    tracing::warn!("plugin {}: programs will be refused: {e}", self.plugin);
                    e.to_string()
                })
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// Run a program for the guest, after every check.
    pub async fn run(
        &self,
        cmd: GuestCommand,
        live: Option<mpsc::UnboundedSender<OutputChunk>>,
    ) -> Result<ProcessOutput, ProcessDenied> {
        let program = self.resolve_program(&cmd.program)?;
        let cwd = self.resolve_cwd(cmd.cwd.as_deref())?;
        let confinement = self
            .confinement()
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
            .map_err(|e| ProcessDenied::SpawnFailed(e.to_string()))
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

    /// Map a guest directory to the host, refusing anything outside a mount
    /// (including through symlinks).
    fn resolve_cwd(&self, guest: Option<&str>) -> Result<PathBuf, ProcessDenied> {
        let guest = guest.unwrap_or(GUEST_WORKSPACE);
        let invalid = |why: &str| {
            ProcessDenied::InvalidCwd(format!(
                "working directory '{guest}' {why} (plugin '{}')",
                self.plugin
            ))
        };
        let (mount, rest) = self
            .mounts
            .iter()
            .filter_map(|m| guest_relative(&m.guest, guest).map(|rest| (m, rest)))
            .max_by_key(|(m, _)| m.guest.len())
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
        env
    }
}

fn confinement_spec(mounts: &[Mount], grants: &Grants, ctx: &SandboxContext) -> ConfinementSpec {
    let mut read = Vec::new();
    let mut write = vec![ctx.temp_dir.clone()];
    for m in mounts {
        match m.access {
            Access::ReadWrite => write.push(m.host.clone()),
            Access::Read => read.push(m.host.clone()),
            Access::None => {}
        }
    }
    ConfinementSpec {
        mode: ctx.policy.sandbox_mode(),
        read,
        write,
        network: ctx.policy.process_network(grants),
    }
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

/// The first executable named `program` on `path`. Relative entries (`.`,
/// `bin`) are skipped: they would resolve against wherever sandcrab runs.
pub fn find_on_path(program: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
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
    }

    #[test]
    fn programs_are_found_on_the_given_path_only() {
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

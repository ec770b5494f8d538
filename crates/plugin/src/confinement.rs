//! The one translation from a principal's effective grants to how its
//! programs are confined, used by every principal that starts programs:
//! the programs a plugin starts (for the agent, its subagents and its
//! background jobs alike), the MCP server programs sandcrab starts, and
//! the git sandcrab runs to read repository facts. What differs between principals is written down once, as data
//! ([`TABLE`]), with the reason beside it; the policy has already decided
//! the grants (what was requested ∩ granted, the network after locked
//! mode and `[policy] network`).

use std::path::{Path, PathBuf};

use super::context::SandboxContext;
use super::manifest::{Access, PathAccess};
use super::policy::{PluginOrigin, SandboxMode};
use crate::process::{ConfinementSpec, ProtectedWorkspace};

/// Who starts the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramOwner {
    /// A plugin's program (first-party or third-party).
    Plugin(PluginOrigin),
    /// An MCP server program the operator configured.
    McpServer,
    /// A hook the operator consented to.
    Hook,
}

/// What a principal may touch, as the policy decided it.
#[derive(Debug, Clone, Copy)]
pub struct Footprint<'a> {
    pub workspace: Access,
    /// Further granted paths (real paths).
    pub paths: &'a [PathAccess],
    pub network: bool,
}

/// One row of the table: for a mode and a kind of principal, what its
/// programs get beyond their grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub mode: SandboxMode,
    pub principal: ProgramOwner,
    /// Read the whole filesystem (else: grants, temp dir, system paths).
    pub read_everywhere: bool,
    /// Why this row is as it is.
    pub why: &'static str,
}

/// Every principal, every confining mode. In all rows: writes go only to
/// read-write grants and the principal's private temp dir; the network
/// only with a network grant (never in `locked`: the policy takes it);
/// protected paths stay read-only for a principal that may write the
/// workspace (for one that may not, Landlock already keeps them so). `off`
/// confines nothing.
pub const TABLE: &[Row] = &[
    Row {
        mode: SandboxMode::WorkspaceWrite,
        principal: ProgramOwner::Plugin(PluginOrigin::Builtin),
        read_everywhere: true,
        why: "first-party tools run the user's toolchains (compilers, caches under $HOME), which live anywhere",
    },
    Row {
        mode: SandboxMode::WorkspaceWrite,
        principal: ProgramOwner::Plugin(PluginOrigin::ThirdParty),
        read_everywhere: false,
        why: "a third-party plugin reads only what the operator granted it",
    },
    Row {
        mode: SandboxMode::WorkspaceWrite,
        principal: ProgramOwner::McpServer,
        read_everywhere: false,
        why: "an MCP server is third-party code: it reads only its [policy.mcp.NAME] grant",
    },
    Row {
        mode: SandboxMode::WorkspaceWrite,
        principal: ProgramOwner::Hook,
        read_everywhere: false,
        why: "a hook judges what the model does: it reads the workspace and the files it runs (copies of what was consented), and nothing of the host's",
    },
    Row {
        mode: SandboxMode::Locked,
        principal: ProgramOwner::Plugin(PluginOrigin::Builtin),
        read_everywhere: false,
        why: "locked: every program reads only its grants, its temp dir and system paths",
    },
    Row {
        mode: SandboxMode::Locked,
        principal: ProgramOwner::Plugin(PluginOrigin::ThirdParty),
        read_everywhere: false,
        why: "locked: every program reads only its grants, its temp dir and system paths",
    },
    Row {
        mode: SandboxMode::Locked,
        principal: ProgramOwner::McpServer,
        read_everywhere: false,
        why: "locked: every program reads only its grants, its temp dir and system paths",
    },
    Row {
        mode: SandboxMode::Locked,
        principal: ProgramOwner::Hook,
        read_everywhere: false,
        why: "locked: every program reads only its grants, its temp dir and system paths",
    },
];

/// The row for `mode` and `principal` (None for `off`).
pub fn row(mode: SandboxMode, principal: ProgramOwner) -> Option<&'static Row> {
    TABLE
        .iter()
        .find(|r| r.mode == mode && r.principal == principal)
}

/// How the programs of `principal` with `reach` are confined, with `temp`
/// as their private temp dir.
pub fn spec(
    principal: ProgramOwner,
    reach: Footprint<'_>,
    ctx: &SandboxContext,
    temp: &Path,
) -> ConfinementSpec {
    let mode = ctx.policy.sandbox_mode();
    let mut read: Vec<PathBuf> = Vec::new();
    let mut write = vec![temp.to_path_buf()];
    let mut add = |path: &Path, access: Access| match access {
        Access::ReadWrite => write.push(path.to_path_buf()),
        Access::Read => read.push(path.to_path_buf()),
        Access::None => {}
    };
    add(&ctx.workspace, reach.workspace);
    for p in reach.paths {
        add(&p.path, p.access);
    }
    ConfinementSpec {
        mode,
        read_everywhere: row(mode, principal).is_some_and(|r| r.read_everywhere),
        read,
        write,
        network: reach.network,
        unix_sockets: ctx.policy.unix_sockets == Some(true),
        protected: (reach.workspace == Access::ReadWrite).then(|| ProtectedWorkspace {
            root: ctx.workspace.clone(),
            paths: ctx.judge.protected().clone(),
        }),
    }
}

/// How the git that reads repository facts for the prompt is confined,
/// whatever the mode: `locked`, reading only the workspace, writing only
/// its scratch directory, no network (it runs repository content's
/// configuration, so it gets the least of any principal).
pub fn repository_reader(workspace: &Path, scratch: &Path) -> ConfinementSpec {
    ConfinementSpec {
        mode: SandboxMode::Locked,
        read_everywhere: false,
        read: vec![workspace.to_path_buf()],
        write: vec![scratch.to_path_buf()],
        network: false,
        unix_sockets: false,
        protected: None,
    }
}

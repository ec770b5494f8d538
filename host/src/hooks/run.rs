//! Running one hook: a principal of its own, confined by the one
//! translation every principal's programs go through
//! ([`crate::plugin::confinement`]) with the operator's `[policy.hooks]`
//! grant (default: read the workspace, no network), a private temp dir as
//! its home, nothing of the host's environment, its timeout bounding
//! everything it starts. The files it runs are copies of the consented
//! bytes, made in its temp dir just before it starts.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Hook;
use super::answer::{self, HookAnswer};
use crate::plugin::SandboxContext;
use crate::plugin::confinement::{Footprint, ProgramOwner, spec};
use crate::plugin::manifest::Access;
use crate::plugin::{ProgramConfinement, ProgramRun};
use crate::process::{self, ChildEnv, Confinement, DEFAULT_PATH, ProcessRequest};

/// Most bytes of a hook's stdout and of its stderr kept.
const OUTPUT_CAP: usize = 1 << 20;

/// What running a hook gave.
pub struct Ran {
    pub answer: HookAnswer,
    pub program: Option<ProgramRun>,
    pub duration: Duration,
}

/// Run `hook` with `input` on its stdin.
pub async fn run(hook: &Hook, input: &[u8], ctx: &SandboxContext) -> Ran {
    let started = Instant::now();
    let refused = |why: String| Ran {
        answer: HookAnswer {
            failure: Some(why.clone()),
            ..Default::default()
        },
        program: Some(ProgramRun {
            program: hook.command.clone(),
            confinement: None,
            exit_code: None,
            signal: None,
            timed_out: false,
            duration_ms: 0,
            refused: Some(why),
        }),
        duration: started.elapsed(),
    };
    let temp = match tempfile::Builder::new()
        .prefix("hook-")
        .tempdir_in(&ctx.temp_dir)
    {
        Ok(t) => t,
        Err(e) => return refused(format!("cannot make its temp dir: {e}")),
    };
    // The files its command names now must be the ones pinned: a file
    // that appeared since (a script the model wrote where the command
    // looks) is not what was consented.
    let home = crate::user_files::home();
    let now = super::command::scan(
        &hook.command,
        &ctx.workspace,
        home.as_deref(),
        hook.own_folder.as_deref(),
    );
    let named: Vec<&Path> = now.files.iter().map(|f| f.path.as_path()).collect();
    let pinned: Vec<&Path> = hook.files.iter().map(|f| f.path.as_path()).collect();
    if named != pinned || !now.refused.is_empty() {
        return refused(format!(
            "the files its command runs are not the ones you consented to (now: {}); review it, then run `sandcrab trust`",
            if named.is_empty() {
                "none".to_string()
            } else {
                named
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    }
    let command = match copies(hook, temp.path()) {
        Ok(command) => command,
        Err(why) => return refused(why),
    };
    let grant = &ctx.policy.hooks;
    let confinement_spec = spec(
        ProgramOwner::Hook,
        Footprint {
            workspace: grant.workspace,
            paths: &grant.paths,
            network: ctx.policy.hook_network(),
        },
        ctx,
        temp.path(),
    );
    let confinement = match Confinement::prepare(&confinement_spec) {
        Ok(c) => c,
        Err(e) => return refused(e.to_string()),
    };
    let home = temp.path().display().to_string();
    let mut env = ChildEnv::base(temp.path(), Some(DEFAULT_PATH), Some(&home));
    let workspace = ctx.workspace.display().to_string();
    for var in super::command::PROJECT_VARS {
        env.set(var, &workspace);
    }
    let request = ProcessRequest {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), command],
        cwd: if grant.workspace == Access::None {
            temp.path().to_path_buf()
        } else {
            ctx.workspace.clone()
        },
        env,
        stdin: Some(input.to_vec()),
        timeout: hook.timeout,
        output_cap: OUTPUT_CAP,
        kill_grace: process::KILL_GRACE,
    };
    let confined = Some(ProgramConfinement::of(&confinement_spec));
    match process::run(&request, &confinement, None).await {
        Ok(out) => Ran {
            answer: answer::read(
                hook.event,
                &answer::Ended {
                    exit_code: out.exit_code,
                    timed_out: out.timed_out,
                    stdout: &out.stdout,
                    stderr: &out.stderr,
                },
            ),
            program: Some(ProgramRun {
                program: hook.command.clone(),
                confinement: confined,
                exit_code: out.exit_code,
                signal: out.signal,
                timed_out: out.timed_out,
                duration_ms: out.duration.as_millis() as u64,
                refused: None,
            }),
            duration: started.elapsed(),
        },
        Err(e) => refused(e.to_string()),
    }
}

/// The hook's command with each file it runs replaced by a copy of the
/// consented bytes in `temp` (refused when a file is no longer what was
/// consented).
fn copies(hook: &Hook, temp: &Path) -> Result<String, String> {
    let dir = temp.join("consented");
    let mut copied = Vec::new();
    for (n, named) in hook.files.iter().enumerate() {
        let pinned = hook
            .pinned
            .files
            .iter()
            .find(|f| f.path == named.path)
            .ok_or_else(|| format!("{} was not pinned", named.path.display()))?;
        let bytes =
            crate::safe_fs::read_regular(&named.path, 16 << 20, crate::safe_fs::Links::Follow)
                .map_err(|e| format!("cannot read {}: {e}", named.path.display()))?;
        if crate::plugin::integrity::sha256_hex(&bytes) != pinned.sha256 {
            return Err(format!(
                "{} changed after it was checked; run `sandcrab trust` after reviewing it",
                named.path.display()
            ));
        }
        let name = named
            .path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "script".into());
        let at = dir.join(n.to_string()).join(name);
        write_copy(&at, &bytes, &named.path)
            .map_err(|e| format!("cannot copy {}: {e}", named.path.display()))?;
        copied.push((named.path.clone(), at));
    }
    Ok(super::command::with_copies(
        &hook.command,
        &hook.files,
        |path| {
            copied
                .iter()
                .find(|(from, _)| from == path)
                .map(|(_, to)| to.clone())
                .unwrap_or_else(|| path.to_path_buf())
        },
    ))
}

/// Write the copy at `at`, executable when `from` is.
fn write_copy(at: &Path, bytes: &[u8], from: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = at.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(at, bytes)?;
    let executable = std::fs::metadata(from).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    let mode = if executable { 0o700 } else { 0o600 };
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(mode))
}

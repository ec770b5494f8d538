//! Facts about the repository for the system prompt (branch, short
//! status, recent commits), read without letting the repository run
//! anything on the host.
//!
//! `git` reads `.git/config`, which a hostile repository (or a model that
//! wrote it) controls: `core.fsmonitor`, hooks, pagers, filters, helpers.
//! So git runs like any confined program, in `locked` mode whatever the
//! operator's mode: it reads only the workspace and system paths, writes
//! only a throw-away temp dir, has no network and no Unix sockets, sees
//! none of sandcrab's environment, and dies with its PID namespace. On
//! top of that the helpers that would run code are forced off on the
//! command line and no system or global configuration is read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::{self, ChildEnv, Confinement, DEFAULT_PATH, ProcessRequest};

/// What the environment block shows about the repository.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RepoFacts {
    /// The current branch (None: detached HEAD).
    pub branch: Option<String>,
    /// `git status --short` lines.
    pub status: Vec<String>,
    /// `git log --oneline -5`.
    pub recent_commits: Vec<String>,
}

/// Longest a git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most output kept from a git command.
const GIT_OUTPUT_CAP: usize = 256 * 1024;

/// What this git needs beyond what every program's git gets
/// ([`crate::process::GIT_HARDENING`], in its environment): no network,
/// no signature checks, no cache written, no locks taken.
const HARDENING: &[&str] = &[
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.sshCommand=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "protocol.allow=never",
    "--no-pager",
    "--no-optional-locks",
];

/// The facts for `dir` inside `workspace`, or None when `dir` is not in a
/// repository inside the workspace, git is missing, or git cannot run
/// confined on this host.
pub async fn read(workspace: &Path, dir: &Path) -> Option<RepoFacts> {
    let git = process::find_on_path("git", &std::env::var("PATH").unwrap_or_default())
        .or_else(|| process::find_on_path("git", DEFAULT_PATH))?;
    let scratch = tempfile::Builder::new()
        .prefix("sandcrab-git-")
        .tempdir()
        .ok()?;
    let scratch_path = scratch.path().canonicalize().ok()?;
    let spec = crate::plugin::confinement::repository_reader(workspace, &scratch_path);
    let confinement = match Confinement::prepare(&spec) {
        Ok(c) => c,
        Err(e) => {
            tracing::info!("repository facts left out of the prompt: {e}");
            return None;
        }
    };
    let run = |args: &[&str]| {
        let request = request(&git, workspace, dir, &scratch_path, args);
        let confinement = confinement.clone();
        async move {
            let out = process::run(&request, &confinement, None).await.ok()?;
            (out.exit_code == Some(0) && !out.truncated)
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        }
    };
    let status = run(&["status", "--short", "--branch"]).await?;
    let mut lines = status.lines();
    let branch = branch_of(lines.next().unwrap_or_default());
    let status: Vec<String> = lines.map(str::to_string).collect();
    let recent_commits = run(&["log", "--oneline", "-5"])
        .await
        .map(|log| log.lines().map(str::to_string).collect())
        .unwrap_or_default();
    Some(RepoFacts {
        branch,
        status,
        recent_commits,
    })
}

/// A workspace's facts read in the background from when a command sets
/// up (while its plugins load), for the session it starts right after.
pub struct Prefetched {
    workspace: PathBuf,
    started: std::time::Instant,
    task: tokio::task::JoinHandle<Option<RepoFacts>>,
}

/// Oldest prefetched facts a new session takes; a session started later
/// (a server's, a new chat) reads them afresh.
const PREFETCH_FRESH: Duration = Duration::from_secs(10);

impl Prefetched {
    /// Start reading `workspace`'s facts (for `workspace` itself). Call it
    /// once the host keeps what it keeps: git runs confined by it.
    pub fn start(workspace: &Path) -> Self {
        let at = workspace.to_path_buf();
        Self {
            workspace: at.clone(),
            started: std::time::Instant::now(),
            task: tokio::spawn(async move { read(&at, &at).await }),
        }
    }

    /// The facts, when they were read for `workspace` recently enough;
    /// None: the caller reads them itself.
    pub async fn take(self, workspace: &Path) -> Option<Option<RepoFacts>> {
        if self.workspace != workspace || self.started.elapsed() > PREFETCH_FRESH {
            self.task.abort();
            return None;
        }
        self.task.await.ok()
    }
}

fn request(
    git: &Path,
    workspace: &Path,
    dir: &Path,
    scratch: &Path,
    args: &[&str],
) -> ProcessRequest {
    let mut env = ChildEnv::base(scratch, None, None);
    let ceiling = workspace
        .parent()
        .unwrap_or(workspace)
        .display()
        .to_string();
    for (name, value) in [
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_ATTR_NOSYSTEM", "1"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_CEILING_DIRECTORIES", ceiling.as_str()),
        ("LC_ALL", "C"),
    ] {
        env.set(name, value);
    }
    let mut argv: Vec<String> = HARDENING.iter().map(|s| s.to_string()).collect();
    argv.push("-C".into());
    argv.push(dir.display().to_string());
    argv.extend(args.iter().map(|s| s.to_string()));
    ProcessRequest {
        program: git.to_path_buf(),
        args: argv,
        cwd: PathBuf::from(dir),
        env,
        stdin: None,
        timeout: GIT_TIMEOUT,
        output_cap: GIT_OUTPUT_CAP,
        kill_grace: Duration::from_millis(200),
    }
}

/// The branch from `git status --branch`'s first line (`## main...origin`,
/// `## No commits yet on main`, `## HEAD (no branch)`).
fn branch_of(line: &str) -> Option<String> {
    let rest = line.strip_prefix("## ")?;
    if rest.starts_with("HEAD (no branch)") {
        return None;
    }
    let rest = rest
        .strip_prefix("No commits yet on ")
        .or_else(|| rest.strip_prefix("Initial commit on "))
        .unwrap_or(rest);
    let name = rest.split("...").next().unwrap_or(rest);
    let name = name.split(" [").next().unwrap_or(name);
    Some(name.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefetched facts are the facts `read` gives, and only for the
    /// workspace they were read for.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prefetched_facts_are_read_facts_of_their_own_workspace() {
        let confined = crate::process::support()
            .missing(crate::process::SandboxMode::Locked, false)
            .is_empty();
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let git = std::process::Command::new("git")
            .args(["init", "-q", "-b", "trunk"])
            .current_dir(&dir)
            .status();
        if !confined || !git.is_ok_and(|s| s.success()) {
            return;
        }
        std::fs::write(dir.join("f.txt"), "x").unwrap();
        let other = tempfile::tempdir().unwrap();
        assert_eq!(
            Prefetched::start(&dir).take(other.path()).await,
            None,
            "facts of one workspace are not another's"
        );
        let prefetched = Prefetched::start(&dir).take(&dir).await;
        let facts = prefetched.expect("taken").expect("a repository");
        assert_eq!(facts.branch.as_deref(), Some("trunk"));
        assert_eq!(facts.status, vec!["?? f.txt".to_string()]);
        assert_eq!(Some(facts), read(&dir, &dir).await);
    }

    #[test]
    fn branch_lines_parse() {
        assert_eq!(branch_of("## main").as_deref(), Some("main"));
        assert_eq!(
            branch_of("## main...origin/main [ahead 1]").as_deref(),
            Some("main")
        );
        assert_eq!(
            branch_of("## No commits yet on trunk").as_deref(),
            Some("trunk")
        );
        assert_eq!(branch_of("## HEAD (no branch)"), None);
    }
}

//! The files a hook's command runs, found in the command itself: each word
//! that names an existing file (after `~`, `$HOME` and the project-folder
//! variables Claude Code's hooks use) is pinned by content, and at run time
//! the word is replaced by a copy of exactly the consented bytes, so what
//! runs is what was consented, however quickly the file changes.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// Variables a hook's command may name a file with, and what they are.
pub const PROJECT_VARS: [&str; 2] = ["CLAUDE_PROJECT_DIR", "SANDCRAB_PROJECT_DIR"];

/// Folders of the system's own programs: an interpreter named by its path
/// is not pinned (an update of the system would undo every consent).
const SYSTEM_DIRS: [&str; 5] = ["/usr", "/bin", "/sbin", "/lib", "/nix/store"];

/// One word of a command and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    span: Range<usize>,
    /// Its value, when it is plain (no expansion sandcrab cannot do, no
    /// glob, no substitution).
    value: Option<String>,
}

/// A file a command runs, and where the command names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    pub path: PathBuf,
    span: Range<usize>,
}

/// What a command runs, as found in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// The files it names, pinned by content.
    pub files: Vec<NamedFile>,
    /// Files it names that may not be pinned (links, what the host keeps),
    /// and why: the hook does not run.
    pub refused: Vec<String>,
    /// What it runs depends on the workspace (a relative path, a file in
    /// the workspace, a program that runs the workspace's own scripts):
    /// its consent holds for this workspace only.
    pub workspace_bound: bool,
}

/// Programs that run what the folder they run in holds (its Makefile, its
/// package scripts, its modules).
const WORKSPACE_RUNNERS: &[&str] = &[
    "make", "npm", "npx", "yarn", "pnpm", "bun", "deno", "cargo", "just", "task", "go", "gradle",
    "mvn", "rake", "bundle", "poetry", "uv", "uvx", "tox", "nox", "-m",
];

/// The files `command` names, taken from `workspace` for relative names
/// and `home` for `~`. A file may be pinned only as itself (no link on
/// the way) and never when the host keeps it — except inside
/// `own_folder` (the operator's hooks folder, for the operator's hooks).
pub fn scan(
    command: &str,
    workspace: &Path,
    home: Option<&Path>,
    own_folder: Option<&Path>,
) -> Scan {
    let kept = crate::kept::current();
    let mut out = Scan::default();
    for word in words(command, workspace, home) {
        let Some(value) = word.value else { continue };
        if WORKSPACE_RUNNERS.contains(&value.as_str()) {
            out.workspace_bound = true;
        }
        if value.is_empty() {
            continue;
        }
        let relative = !Path::new(&value).is_absolute();
        if relative && value.contains('/') {
            out.workspace_bound = true;
        }
        let lexical = normalize(&if relative {
            workspace.join(&value)
        } else {
            PathBuf::from(&value)
        });
        if !lexical.is_file() {
            continue;
        }
        let real = lexical.canonicalize().unwrap_or_else(|_| lexical.clone());
        if SYSTEM_DIRS.iter().any(|d| real.starts_with(d)) {
            continue;
        }
        if real != lexical {
            out.refused.push(format!(
                "`{value}` leads through a link to {}; name the file itself",
                real.display()
            ));
            continue;
        }
        let own = own_folder.is_some_and(|f| real.starts_with(f));
        if let Some(entry) = kept.holding(&real).filter(|_| !own) {
            out.refused.push(format!(
                "`{value}` is {} ({}), which no hook may run or read",
                entry.item.describe(),
                real.display()
            ));
            continue;
        }
        if real.starts_with(workspace) {
            out.workspace_bound = true;
        }
        out.files.push(NamedFile {
            path: real,
            span: word.span,
        });
    }
    out
}

/// `path` with `.` and `..` resolved by name.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `command` with each named file's word replaced by the path `copy` gives
/// for it (single-quoted).
pub fn with_copies(command: &str, files: &[NamedFile], copy: impl Fn(&Path) -> PathBuf) -> String {
    let mut out = String::with_capacity(command.len());
    let mut at = 0;
    let mut sorted: Vec<&NamedFile> = files.iter().collect();
    sorted.sort_by_key(|f| f.span.start);
    for file in sorted {
        out.push_str(&command[at..file.span.start]);
        out.push_str(&quote(&copy(&file.path).display().to_string()));
        at = file.span.end;
    }
    out.push_str(&command[at..]);
    out
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The words of `command` by the shell's quoting rules, with the
/// variables sandcrab knows expanded.
fn words(command: &str, workspace: &Path, home: Option<&Path>) -> Vec<Word> {
    let bytes = command.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() || b";&|<>()".contains(&c) {
            i += 1;
            continue;
        }
        let start = i;
        let mut value = Some(String::new());
        let push = |value: &mut Option<String>, s: &str| {
            if let Some(v) = value {
                v.push_str(s);
            }
        };
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_whitespace() || b";&|<>()".contains(&c) {
                break;
            }
            match c {
                b'\'' => {
                    let end = command[i + 1..].find('\'').map(|n| i + 1 + n);
                    let end = end.unwrap_or(bytes.len());
                    push(&mut value, &command[i + 1..end]);
                    i = (end + 1).min(bytes.len());
                }
                b'"' => {
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' {
                        if bytes[i] == b'$' {
                            i = expand(command, i, &mut value, workspace, home);
                        } else if bytes[i] == b'\\' && i + 1 < bytes.len() {
                            push(&mut value, &command[i + 1..i + 2]);
                            i += 2;
                        } else if bytes[i] == b'`' {
                            value = None;
                            i += 1;
                        } else {
                            let ch = command[i..].chars().next().unwrap_or(' ');
                            push(&mut value, &ch.to_string());
                            i += ch.len_utf8();
                        }
                    }
                    i = (i + 1).min(bytes.len());
                }
                b'$' => i = expand(command, i, &mut value, workspace, home),
                b'~' if i == start => {
                    match home {
                        Some(h) => push(&mut value, &h.display().to_string()),
                        None => value = None,
                    }
                    i += 1;
                }
                b'\\' if i + 1 < bytes.len() => {
                    push(&mut value, &command[i + 1..i + 2]);
                    i += 2;
                }
                b'*' | b'?' | b'[' | b'`' => {
                    value = None;
                    i += 1;
                }
                _ => {
                    let ch = command[i..].chars().next().unwrap_or(' ');
                    push(&mut value, &ch.to_string());
                    i += ch.len_utf8();
                }
            }
        }
        out.push(Word {
            span: start..i,
            value,
        });
    }
    out
}

/// Expand the variable at `at` (a `$`) into `value`; where the word goes
/// on.
fn expand(
    command: &str,
    at: usize,
    value: &mut Option<String>,
    workspace: &Path,
    home: Option<&Path>,
) -> usize {
    let rest = &command[at + 1..];
    let (name, used) = if let Some(inner) = rest.strip_prefix('{') {
        match inner.find('}') {
            Some(end) => (&inner[..end], end + 2),
            None => ("", 0),
        }
    } else {
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        (&rest[..n], n)
    };
    let known = match name {
        "HOME" => home.map(|h| h.display().to_string()),
        n if PROJECT_VARS.contains(&n) => Some(workspace.display().to_string()),
        _ => None,
    };
    match (known, value.as_mut()) {
        (Some(text), Some(v)) => v.push_str(&text),
        _ => *value = None,
    }
    at + 1 + used.max(usize::from(name.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_command_runs_are_found_and_replaced_by_copies() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let ws = root.join("ws");
        std::fs::create_dir_all(home.join(".config/sandcrab/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".claude/hooks")).unwrap();
        std::fs::write(home.join(".config/sandcrab/hooks/guard.py"), "x").unwrap();
        std::fs::write(ws.join(".claude/hooks/fmt.sh"), "y").unwrap();
        std::fs::write(ws.join("run.sh"), "z").unwrap();
        std::fs::write(ws.join("lint"), "l").unwrap();
        std::os::unix::fs::symlink(
            home.join(".config/sandcrab/hooks/guard.py"),
            ws.join("link.py"),
        )
        .unwrap();
        let found = |cmd: &str| -> (Vec<PathBuf>, bool) {
            let scan = scan(cmd, &ws, Some(&home), None);
            (
                scan.files.into_iter().map(|f| f.path).collect(),
                scan.workspace_bound,
            )
        };
        assert_eq!(
            found("python3 ~/.config/sandcrab/hooks/guard.py --strict"),
            (vec![home.join(".config/sandcrab/hooks/guard.py")], false)
        );
        assert_eq!(
            found("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/fmt.sh && echo ok"),
            (vec![ws.join(".claude/hooks/fmt.sh")], true)
        );
        assert_eq!(
            found("bash ${HOME}/nothing.sh; ./run.sh"),
            (vec![ws.join("run.sh")], true)
        );
        // A bare name of a workspace file is pinned; a program that runs
        // the workspace's own scripts binds the consent to it.
        assert_eq!(found("bash lint"), (vec![ws.join("lint")], true));
        assert_eq!(found("make lint"), (vec![ws.join("lint")], true));
        assert_eq!(found("python3 -m pkg.guard"), (vec![], true));
        assert_eq!(found("node hooks/guard"), (vec![], true));
        // Unknown variables, globs and substitutions name nothing.
        assert!(found("bash $OTHER/run.sh").0.is_empty());
        assert!(found("bash r*.sh").0.is_empty());
        assert!(found("/usr/bin/env true").0.is_empty());
        // A link is never pinned for what it leads to.
        let linked = scan("python3 link.py", &ws, Some(&home), None);
        assert!(
            linked.files.is_empty() && linked.refused[0].contains("link"),
            "{linked:?}"
        );
        let sneaky = scan("sh /usr/../proc/self/cwd/run.sh", &ws, Some(&home), None);
        assert!(sneaky.files.is_empty(), "{sneaky:?}");
        let cmd = "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/fmt.sh && echo ok";
        let files = scan(cmd, &ws, Some(&home), None).files;
        let copied = with_copies(cmd, &files, |_| PathBuf::from("/tmp/it's"));
        assert_eq!(copied, "'/tmp/it'\\''s' && echo ok");
    }
}

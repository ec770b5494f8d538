//! Reading a git configuration file written by a program the model ran,
//! to tell whether it makes git run anything: every key must be one git
//! reads as data (where objects, remotes and branches are), none that
//! names a program, a hook folder, a pager or another file to include.
//! What cannot be read plainly is refused.

/// Keys a repository's configuration may hold (`section.name`, or
/// `section.*.name` for one with a subsection), lowercased.
const DATA_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.worktree",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.compression",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "extensions.refstorage",
    "extensions.preciousobjects",
    "extensions.partialclone",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "remote.*.mirror",
    "remote.*.prune",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "branch.*.remote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.pushremote",
    "branch.*.description",
    "submodule.*.url",
    "submodule.*.active",
    "submodule.*.branch",
    "submodule.*.update",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "merge.conflictstyle",
    "gc.auto",
    "index.version",
];

/// The first thing in `text` (a git configuration file) that makes git
/// run something or read another file, or that cannot be read plainly;
/// None when every key is data.
pub fn runs_something(text: &str) -> Option<String> {
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.to_string();
        // A value continued on the next line.
        while line.ends_with('\\') {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let Some((inside, rest)) = header.split_once(']') else {
                return Some(format!("a section header it cannot read: {line}"));
            };
            if !rest.trim().is_empty() && !rest.trim().starts_with(['#', ';']) {
                return Some(format!("a key on a section's line: {line}"));
            }
            section = match section_name(inside) {
                Some(name) => name,
                None => return Some(format!("a section header it cannot read: {line}")),
            };
            continue;
        }
        if section.is_empty() {
            return Some(format!("a key outside any section: {line}"));
        }
        let (name, value) = match line.split_once('=') {
            Some((name, value)) => (name.trim(), value.trim()),
            None => (line, "true"),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Some(format!("a key it cannot read: {line}"));
        }
        let key = format!("{section}.{}", name.to_ascii_lowercase());
        if !allowed(&key) {
            return Some(format!(
                "{} (git would run a program or read another file)",
                key.replace('\u{0}', ".")
            ));
        }
        if let Some(why) = bad_value(&key, value) {
            return Some(why);
        }
    }
    None
}

/// `core`, `remote "origin"`, `remote.origin` as `core`, `remote.*origin`
/// (the subsection kept apart by a marker no key has).
fn section_name(inside: &str) -> Option<String> {
    let inside = inside.trim();
    let (name, sub) = match inside.split_once(char::is_whitespace) {
        Some((name, quoted)) => {
            let sub = quoted.trim().strip_prefix('"')?.strip_suffix('"')?;
            (name, Some(sub.to_string()))
        }
        None => match inside.split_once('.') {
            Some((name, sub)) => (name, Some(sub.to_ascii_lowercase())),
            None => (inside, None),
        },
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return None;
    }
    let name = name.to_ascii_lowercase();
    Some(match sub {
        Some(sub) => format!("{name}\u{0}{sub}"),
        None => name,
    })
}

fn allowed(key: &str) -> bool {
    let pattern = match key.split_once('\u{0}') {
        Some((section, rest)) => match rest.rsplit_once('.') {
            Some((_, name)) => format!("{section}.*.{name}"),
            None => return false,
        },
        None => key.to_string(),
    };
    DATA_KEYS.contains(&pattern.as_str())
}

/// A value of an allowed key that still runs something: a remote reached
/// through a transport helper (`ext::sh -c …`), a submodule updated by a
/// command (`!…`).
fn bad_value(key: &str, value: &str) -> Option<String> {
    let value = value.trim_matches('"');
    let shown = key.replace('\u{0}', ".");
    if (key.ends_with(".url") || key.ends_with(".pushurl"))
        && (value.contains("::") || value.starts_with('-'))
    {
        return Some(format!(
            "{shown} = {value} (a transport that runs a program)"
        ));
    }
    if key.ends_with(".update") && value.starts_with('!') {
        return Some(format!("{shown} = {value} (a command git would run)"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::runs_something;

    #[test]
    fn what_git_init_and_clone_write_is_data() {
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert_eq!(runs_something(init), None);
        let clone = "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n# a comment\n";
        assert_eq!(runs_something(clone), None);
    }

    #[test]
    fn whatever_runs_a_program_is_named() {
        for (text, named) in [
            (
                "[core]\n\tfsmonitor = \"touch /tmp/x; false\"\n",
                "core.fsmonitor",
            ),
            ("[core]\nhooksPath = .h\n", "core.hookspath"),
            ("[diff \"x\"]\n\ttextconv = sh\n", "diff.x.textconv"),
            ("[filter \"lfs\"]\n\tclean = evil\n", "filter"),
            ("[include]\n\tpath = ../x\n", "include.path"),
            ("[alias]\n\tst = !sh\n", "alias"),
            ("[remote \"o\"]\n\turl = ext::sh -c evil\n", "transport"),
            ("[submodule \"s\"]\n\tupdate = !evil\n", "command"),
            ("[Core]\n\tFSMonitor = x\n", "core.fsmonitor"),
            ("[core]\n\tpager = less \\\n -R\n", "core.pager"),
            ("no section = 1\n", "outside"),
            ("[core\n", "cannot read"),
        ] {
            let why = runs_something(text).unwrap_or_else(|| panic!("allowed: {text}"));
            assert!(why.contains(named), "{text}: {why}");
        }
    }
}

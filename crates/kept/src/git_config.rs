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
/// None when every key is data. The file is read the way git reads it
/// (comments to the end of the line, a `\\` at the end of a value's line
/// continuing it, quotes and escapes inside values), so what git sees is
/// what is judged.
pub fn runs_something(text: &str) -> Option<String> {
    let text = text.replace("\r\n", "\n");
    let mut chars = Chars::new(&text);
    let mut section: Option<String> = None;
    loop {
        chars.skip_blanks();
        let c = chars.next()?;
        match c {
            '\n' => {}
            '#' | ';' => chars.skip_line(),
            '[' => {
                section = Some(match read_section(&mut chars) {
                    Some(name) => name,
                    None => return Some("a section header git reads differently".into()),
                });
                chars.skip_blanks();
                match chars.next() {
                    None | Some('\n') => {}
                    Some('#' | ';') => chars.skip_line(),
                    Some(_) => return Some("a key on a section's line".into()),
                }
            }
            c if c.is_ascii_alphabetic() => {
                let mut name = String::from(c.to_ascii_lowercase());
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        name.push(c.to_ascii_lowercase());
                        chars.next();
                    } else {
                        break;
                    }
                }
                chars.skip_blanks();
                let value = match chars.next() {
                    None | Some('\n') => "true".to_string(),
                    Some('=') => match read_value(&mut chars) {
                        Some(value) => value,
                        None => return Some(format!("a value of {name} git reads differently")),
                    },
                    Some(_) => return Some(format!("a key it cannot read: {name}")),
                };
                let Some(section) = &section else {
                    return Some(format!("a key outside any section: {name}"));
                };
                let key = format!("{section}.{name}");
                if !allowed(&key) {
                    return Some(format!(
                        "{} (git would run a program or read another file)",
                        key.replace('\u{0}', ".")
                    ));
                }
                if let Some(why) = bad_value(&key, &value) {
                    return Some(why);
                }
            }
            other => return Some(format!("something git reads differently: {other:?}")),
        }
    }
}

/// The file's characters as git reads them (a leading byte-order mark
/// dropped; `\r\n` was made `\n` before).
struct Chars<'a> {
    inner: std::iter::Peekable<std::str::Chars<'a>>,
}

impl<'a> Chars<'a> {
    fn new(text: &'a str) -> Self {
        Chars {
            inner: text
                .strip_prefix('\u{feff}')
                .unwrap_or(text)
                .chars()
                .peekable(),
        }
    }

    fn peek(&mut self) -> Option<&char> {
        self.inner.peek()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.next();
        }
    }

    fn skip_line(&mut self) {
        for c in self.by_ref() {
            if c == '\n' {
                break;
            }
        }
    }
}

impl Iterator for Chars<'_> {
    type Item = char;
    fn next(&mut self) -> Option<char> {
        self.inner.next()
    }
}

/// A value after `=`, to the end of its line (as git's `parse_value`):
/// blanks outside quotes squeezed, `#` and `;` outside quotes start a
/// comment, `\\` escapes (`\\` at the end of a line continues the value
/// on the next). None where git would refuse it.
fn read_value(chars: &mut Chars) -> Option<String> {
    let (mut value, mut quoted, mut comment, mut blanks) = (String::new(), false, false, 0);
    while let Some(c) = chars.next() {
        if c == '\n' {
            return (!quoted).then_some(value);
        }
        if comment {
            continue;
        }
        if (c == ' ' || c == '\t') && !quoted {
            if !value.is_empty() {
                blanks += 1;
            }
            continue;
        }
        if !quoted && (c == '#' || c == ';') {
            comment = true;
            continue;
        }
        for _ in 0..blanks {
            value.push(' ');
        }
        blanks = 0;
        match c {
            '\\' => match chars.next()? {
                '\n' => {}
                't' => value.push('\t'),
                'b' => value.push('\u{8}'),
                'n' => value.push('\n'),
                '\\' => value.push('\\'),
                '"' => value.push('"'),
                _ => return None,
            },
            '"' => quoted = !quoted,
            c => value.push(c),
        }
    }
    (!quoted).then_some(value)
}

/// A section header after `[`: `core`, `remote "origin"`, `remote.origin`
/// as `core`, `remote\0origin` (the subsection kept apart by a marker no
/// key has). None where git would refuse it.
fn read_section(chars: &mut Chars) -> Option<String> {
    let mut name = String::new();
    loop {
        let c = chars.next()?;
        match c {
            ']' => break,
            ' ' | '\t' => {
                // `[name "subsection"]`
                chars.skip_blanks();
                if chars.next()? != '"' {
                    return None;
                }
                let mut sub = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\n' => return None,
                        '\\' => sub.push(chars.next().filter(|c| *c != '\n')?),
                        c => sub.push(c),
                    }
                }
                if chars.next()? != ']' {
                    return None;
                }
                return valid_section(&name)
                    .then(|| format!("{}\u{0}{sub}", name.to_ascii_lowercase()));
            }
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => name.push(c),
            _ => return None,
        }
    }
    if !valid_section(&name) {
        return None;
    }
    // `[name.sub]`: the old way, the subsection lowercased.
    Some(match name.split_once('.') {
        Some((name, sub)) => format!(
            "{}\u{0}{}",
            name.to_ascii_lowercase(),
            sub.to_ascii_lowercase()
        ),
        None => name.to_ascii_lowercase(),
    })
}

fn valid_section(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
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
            ("nosection = 1\n", "outside"),
            ("[core\n", "differently"),
            // A comment ending in a backslash does not go on (git reads
            // the next line as a key), nor does an escaped backslash.
            ("[core]\n# note \\\n\tfsmonitor = \"x\"\n", "core.fsmonitor"),
            (
                "[core]\n\teol = lf\\\\\n\tfsmonitor = \"x\"\n",
                "core.fsmonitor",
            ),
            (
                "[core]\n\teol = lf ; note \\\n\tfsmonitor = x\n",
                "core.fsmonitor",
            ),
            // Quotes git drops: the value it sees.
            ("[submodule \"s\"]\n\tupdate = \"\" !touch x\n", "command"),
            ("[remote \"o\"]\n\turl = \"ext:\"\":sh x\"\n", "transport"),
            ("\u{feff}[core]\r\n\tfsmonitor = x\r\n", "core.fsmonitor"),
        ] {
            let why = runs_something(text).unwrap_or_else(|| panic!("allowed: {text}"));
            assert!(why.contains(named), "{text}: {why}");
        }
    }
}

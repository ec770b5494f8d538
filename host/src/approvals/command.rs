//! A shell command line as rules see it: the simple commands it runs, each
//! as its argument list (quotes resolved), never a raw substring. A line
//! the host cannot read reliably (substitutions, redirections, subshells)
//! is opaque: no rule allows it, so it is asked about or decided by the
//! mode.

/// How a command line reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// One or more simple commands joined by `;`, `&&`, `||`, `|`, `&` or
    /// new lines, each as its words.
    Simple(Vec<Vec<String>>),
    /// Something rules cannot see through.
    Opaque,
}

impl CommandLine {
    /// Read `line`.
    pub fn parse(line: &str) -> CommandLine {
        let Some(segments) = split_segments(line) else {
            return CommandLine::Opaque;
        };
        let mut commands = Vec::new();
        for segment in segments {
            if segment.trim().is_empty() {
                continue;
            }
            match shlex::split(&segment) {
                Some(words) if runs_others(&words) => return CommandLine::Opaque,
                Some(words) if !words.is_empty() => commands.push(words),
                Some(_) => {}
                None => return CommandLine::Opaque,
            }
        }
        if commands.is_empty() {
            CommandLine::Opaque
        } else {
            CommandLine::Simple(commands)
        }
    }
}

/// The words of `command` after any leading `NAME=value` assignments.
pub fn without_assignments(command: &[String]) -> &[String] {
    let skip = command
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .count();
    &command[skip..]
}

/// Words that make the rest of a command something else (a keyword, a
/// wrapper that runs its arguments, an interpreter given a script): a
/// command starting with one is opaque.
const RUNS_OTHERS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
    "case", "esac", "function", "select", "time", "[[", "eval", "exec", "command", "builtin",
    "env", "xargs", "nohup", "nice", "timeout", "sudo", "doas", "su", "sh", "bash", "dash", "zsh",
    "ksh", "fish", "busybox", "source", ".",
];

/// Split at unquoted command separators; None when the line uses what
/// rules cannot read: substitution and expansion (`$`, backquotes),
/// redirection, subshells and groups, globs, comments, escapes, a new
/// line inside quotes, or a command run through another.
fn split_segments(line: &str) -> Option<Vec<String>> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    let (mut single, mut double) = (false, false);
    // Whether the next character starts a word.
    let mut word_start = true;
    while let Some(c) = chars.next() {
        if single {
            if c == '\n' {
                return None;
            }
            single = c != '\'';
            current.push(c);
            word_start = false;
            continue;
        }
        match c {
            // An escape can hide any of the below from a reader.
            '\\' => return None,
            '\'' if !double => {
                single = true;
                current.push(c);
            }
            '"' => {
                double = !double;
                current.push(c);
            }
            '\n' if double => return None,
            '`' | '$' => return None,
            '#' if !double && word_start => return None,
            '<' | '>' | '(' | ')' | '{' | '}' | '*' | '?' | '[' | ']' | '~' if !double => {
                return None;
            }
            ';' | '&' | '|' | '\n' if !double => {
                segments.push(std::mem::take(&mut current));
                // `&&` and `||` are one separator.
                if (c == '&' || c == '|') && chars.peek() == Some(&c) {
                    chars.next();
                }
                word_start = true;
                continue;
            }
            _ => current.push(c),
        }
        word_start = !double && c.is_whitespace();
    }
    if single || double {
        return None;
    }
    segments.push(current);
    Some(segments)
}

/// Whether `words` (one simple command) runs something rules cannot see.
pub fn runs_others(words: &[String]) -> bool {
    let first = without_assignments(words).first();
    first.is_none_or(|w| {
        let name = w.rsplit('/').next().unwrap_or(w);
        RUNS_OTHERS.contains(&name) || w.contains('/')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&[&str]]) -> CommandLine {
        CommandLine::Simple(
            list.iter()
                .map(|c| c.iter().map(|w| w.to_string()).collect())
                .collect(),
        )
    }

    #[test]
    fn a_line_reads_as_its_simple_commands() {
        assert_eq!(
            CommandLine::parse("git status --short"),
            words(&[&["git", "status", "--short"]])
        );
        assert_eq!(
            CommandLine::parse("cargo test && git 'sta''tus'; ls | wc -l"),
            words(&[
                &["cargo", "test"],
                &["git", "status"],
                &["ls"],
                &["wc", "-l"]
            ])
        );
        assert_eq!(
            CommandLine::parse("echo \"a; b\""),
            words(&[&["echo", "a; b"]])
        );
        assert_eq!(
            CommandLine::parse("grep -n 'fn main' src/main.rs"),
            words(&[&["grep", "-n", "fn main", "src/main.rs"]])
        );
    }

    #[test]
    fn what_rules_cannot_read_is_opaque() {
        for line in [
            "echo $(rm -rf x)",
            "echo `id`",
            "cat < /etc/passwd",
            "ls > out",
            "(cd x && rm y)",
            "echo 'unclosed",
            "   ",
            // A comment's quote would hide the new line from a reader.
            "git status #'\nrm -rf ~ #'",
            // bash's $'...' and any expansion.
            "git status $'\\'' ; rm -rf ~ ; echo \\'",
            "X=push; git $X",
            // Globs can become any word a file is named.
            "git pu?h",
            "rm -rf *",
            "{ rm -rf x; }",
            "if :; then rm x; fi",
            "! rm x",
            "env rm x",
            "/bin/rm x",
            "sh -c 'git push'",
            "xargs rm < list",
            "eval rm x",
            "echo \"a\nb\"",
            "git pu\\sh",
        ] {
            assert_eq!(CommandLine::parse(line), CommandLine::Opaque, "{line}");
        }
    }

    #[test]
    fn leading_assignments_are_not_the_command() {
        let cmd: Vec<String> = ["GIT_DIR=/x", "git", "push"].map(String::from).to_vec();
        assert_eq!(without_assignments(&cmd), &cmd[1..]);
    }
}

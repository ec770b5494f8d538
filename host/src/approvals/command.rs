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

/// Split at unquoted command separators; None when the line uses what
/// rules cannot read (substitution, redirection, subshells, here-docs).
fn split_segments(line: &str) -> Option<Vec<String>> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    let (mut single, mut double) = (false, false);
    while let Some(c) = chars.next() {
        if single {
            single = c != '\'';
            current.push(c);
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '\'' if !double => {
                single = true;
                current.push(c);
            }
            '"' => {
                double = !double;
                current.push(c);
            }
            '`' => return None,
            '$' if chars.peek() == Some(&'(') => return None,
            '<' | '>' | '(' | ')' if !double => return None,
            ';' | '&' | '|' | '\n' if !double => {
                segments.push(std::mem::take(&mut current));
                // `&&` and `||` are one separator.
                if (c == '&' || c == '|') && chars.peek() == Some(&c) {
                    chars.next();
                }
            }
            _ => current.push(c),
        }
    }
    if single || double {
        return None;
    }
    segments.push(current);
    Some(segments)
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

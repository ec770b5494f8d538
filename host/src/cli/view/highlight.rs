//! Light syntax highlighting for code blocks: keywords, strings, numbers
//! and comments of the languages models write most, one line at a time
//! (a block comment or string spanning lines is not followed). A diff
//! block gets the diff's colours.

use super::style::{Style, Styled};

/// Append `line` of `lang` code to `out`, highlighted.
pub fn highlight(lang: &str, line: &str, out: &mut Styled) {
    let lang = lang.to_ascii_lowercase();
    if matches!(lang.as_str(), "diff" | "patch") {
        super::diff_view::diff_line(line, out);
        return;
    }
    let Some(syntax) = syntax(&lang) else {
        out.text(line);
        return;
    };
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if syntax.comments.iter().any(|m| rest.starts_with(m)) {
            out.styled(Style::Dim, rest);
            return;
        }
        if c == '"' || (c == '\'' && syntax.single_quoted) || (c == '`' && syntax.backtick) {
            let end = string_end(rest, c);
            out.styled(Style::Green, &rest[..end]);
            rest = &rest[end..];
            continue;
        }
        if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            out.styled(Style::Yellow, &rest[..end]);
            rest = &rest[end..];
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            if syntax.keywords.contains(&word) {
                out.styled(Style::Magenta, word);
            } else {
                out.text(word);
            }
            rest = &rest[end..];
            continue;
        }
        out.text(&rest[..c.len_utf8()]);
        rest = &rest[c.len_utf8()..];
    }
}

/// Where the string starting `text` (with `quote`) ends: after its closing
/// quote, or at the line's end.
fn string_end(text: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return i + c.len_utf8();
        }
    }
    text.len()
}

struct Syntax {
    keywords: &'static [&'static str],
    comments: &'static [&'static str],
    single_quoted: bool,
    backtick: bool,
}

fn syntax(lang: &str) -> Option<Syntax> {
    const C_LIKE: &[&str] = &["//"];
    const HASH: &[&str] = &["#"];
    Some(match lang {
        "rust" | "rs" => Syntax {
            keywords: &[
                "as", "async", "await", "break", "const", "continue", "crate", "else", "enum",
                "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
                "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
                "type", "unsafe", "use", "where", "while", "true", "false", "dyn",
            ],
            comments: C_LIKE,
            single_quoted: false,
            backtick: false,
        },
        "python" | "py" => Syntax {
            keywords: &[
                "and", "as", "assert", "async", "await", "break", "class", "continue", "def",
                "del", "elif", "else", "except", "finally", "for", "from", "if", "import", "in",
                "is", "lambda", "not", "or", "pass", "raise", "return", "try", "while", "with",
                "yield", "None", "True", "False", "self",
            ],
            comments: HASH,
            single_quoted: true,
            backtick: false,
        },
        "js" | "javascript" | "ts" | "typescript" | "jsx" | "tsx" => Syntax {
            keywords: &[
                "async",
                "await",
                "break",
                "case",
                "catch",
                "class",
                "const",
                "continue",
                "default",
                "delete",
                "else",
                "export",
                "extends",
                "finally",
                "for",
                "from",
                "function",
                "if",
                "import",
                "in",
                "instanceof",
                "interface",
                "let",
                "new",
                "of",
                "return",
                "switch",
                "this",
                "throw",
                "try",
                "type",
                "typeof",
                "var",
                "while",
                "yield",
                "true",
                "false",
                "null",
                "undefined",
            ],
            comments: C_LIKE,
            single_quoted: true,
            backtick: true,
        },
        "go" => Syntax {
            keywords: &[
                "break",
                "case",
                "chan",
                "const",
                "continue",
                "default",
                "defer",
                "else",
                "for",
                "func",
                "go",
                "if",
                "import",
                "interface",
                "map",
                "package",
                "range",
                "return",
                "select",
                "struct",
                "switch",
                "type",
                "var",
                "nil",
                "true",
                "false",
            ],
            comments: C_LIKE,
            single_quoted: true,
            backtick: true,
        },
        "c" | "cpp" | "c++" | "h" | "java" | "kotlin" | "swift" | "cs" | "csharp" => Syntax {
            keywords: &[
                "auto",
                "break",
                "case",
                "catch",
                "class",
                "const",
                "continue",
                "default",
                "do",
                "else",
                "enum",
                "extern",
                "final",
                "for",
                "if",
                "import",
                "include",
                "new",
                "private",
                "protected",
                "public",
                "return",
                "static",
                "struct",
                "switch",
                "this",
                "throw",
                "try",
                "typedef",
                "void",
                "while",
                "true",
                "false",
                "null",
                "nullptr",
            ],
            comments: C_LIKE,
            single_quoted: true,
            backtick: false,
        },
        "sh" | "bash" | "shell" | "zsh" | "console" => Syntax {
            keywords: &[
                "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "case",
                "esac", "function", "return", "export", "local", "set",
            ],
            comments: HASH,
            single_quoted: true,
            backtick: false,
        },
        "toml" | "yaml" | "yml" | "ini" => Syntax {
            keywords: &["true", "false", "null"],
            comments: HASH,
            single_quoted: true,
            backtick: false,
        },
        "json" => Syntax {
            keywords: &["true", "false", "null"],
            comments: &[],
            single_quoted: false,
            backtick: false,
        },
        _ => return None,
    })
}

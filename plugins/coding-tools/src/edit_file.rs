//! `edit_file(file_path, old_string, new_string, replace_all? = false)`:
//! exact string replacement, with a whitespace-tolerant fallback that is
//! reported as such.

use sandcrab_sdk::prelude::*;

use crate::fs;

pub struct EditFile;

#[derive(Deserialize)]
pub struct Args {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

impl Tool for EditFile {
    const NAME: &'static str = "edit_file";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 10_000,
            lines: None,
            keep: Keep::Tail,
        })
    }
    const DESCRIPTION: &'static str = "Replace text in a file. old_string must match the file exactly (including indentation) and be unique, unless replace_all is true, in which case every occurrence is replaced. Include enough surrounding lines to make old_string unique. If no exact match exists, a match that differs only in whitespace is used and reported. Read the file first.";
    type Args = Args;

    fn writes() -> Writes {
        Writes::Paths(vec!["file_path".into()])
    }

    fn parameters() -> Schema {
        Schema::object()
            .required("file_path", fs::file_path_schema())
            .required("old_string", Schema::string("The exact text to replace"))
            .required("new_string", Schema::string("The text to put in its place"))
            .optional(
                "replace_all",
                Schema::boolean("Replace every occurrence (default false)"),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        if args.old_string.is_empty() {
            return Err(ToolError::invalid(
                "old_string is empty; use write_file to create a file",
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::invalid(
                "old_string and new_string are identical; nothing to change",
            ));
        }
        let (guest, text) = fs::read_utf8(ctx, &args.file_path)?;
        let shown = fs::display(ctx, &guest).to_string();
        // Match and replace in the file's own line endings.
        let crlf = fs::uses_crlf(&text);
        let (old, new) = if crlf {
            (fs::to_crlf(&args.old_string), fs::to_crlf(&args.new_string))
        } else {
            (args.old_string.clone(), args.new_string.clone())
        };
        let (updated, report) = edit(&text, &old, &new, args.replace_all)
            .map_err(|e| ToolError::failed(e.replace("{file}", &shown)))?;
        fs::write(ctx, &guest, &shown, updated.as_bytes())?;
        Ok(format!("Edited {shown}: {report}"))
    }
}

/// Apply the edit to `text`: the new text and a one-line report, or why not
/// (with `{file}` standing for the file's name).
pub fn edit(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, String), String> {
    let exact = text.matches(old).count();
    match exact {
        1 => return Ok((text.replacen(old, new, 1), "replaced 1 occurrence".into())),
        n if n > 1 && replace_all => {
            return Ok((text.replace(old, new), format!("replaced {n} occurrences")));
        }
        n if n > 1 => {
            return Err(format!(
                "old_string is not unique ({n} matches) in {{file}}; include more surrounding lines to make it unique, or set replace_all to true"
            ));
        }
        _ => {}
    }
    let spans = fuzzy_spans(text, old);
    match spans.len() {
        0 => Err("old_string not found in {file} (read the file again: the text and its indentation must match)".into()),
        n if n > 1 && !replace_all => Err(format!(
            "old_string is not unique ({n} matches when ignoring whitespace) in {{file}}; include more surrounding lines"
        )),
        n => {
            let first_line = text[..spans[0].0].lines().count() + 1;
            let mut out = text.to_string();
            for &(start, end) in spans.iter().rev() {
                let ends_with_newline = text[start..end].ends_with('\n');
                let mut replacement = new.to_string();
                if ends_with_newline && !replacement.ends_with('\n') {
                    replacement.push('\n');
                }
                out.replace_range(start..end, &replacement);
            }
            let what = if n == 1 { "1 occurrence".to_string() } else { format!("{n} occurrences") };
            Ok((
                out,
                format!("replaced {what} (old_string matched only after ignoring whitespace differences, starting at line {first_line})"),
            ))
        }
    }
}

/// Byte spans of whole-line regions of `text` that equal `old` line by line
/// once whitespace runs are collapsed and ends trimmed.
fn fuzzy_spans(text: &str, old: &str) -> Vec<(usize, usize)> {
    let wanted: Vec<String> = old.trim_end_matches('\n').lines().map(normalize).collect();
    if wanted.is_empty() || wanted.iter().all(String::is_empty) {
        return Vec::new();
    }
    // (start offset, end offset incl. newline, normalized) per line.
    let mut lines = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        lines.push((offset, offset + raw.len(), normalize(raw)));
        offset += raw.len();
    }
    let mut spans = Vec::new();
    let mut i = 0;
    while i + wanted.len() <= lines.len() {
        if lines[i..i + wanted.len()]
            .iter()
            .zip(&wanted)
            .all(|(l, w)| &l.2 == w)
        {
            spans.push((lines[i].0, lines[i + wanted.len() - 1].1));
            i += wanted.len();
        } else {
            i += 1;
        }
    }
    spans
}

fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::edit;

    #[test]
    fn exact_unique_match_is_replaced() {
        let (out, report) = edit("let a = 1;\nlet b = 2;\n", "a = 1", "a = 10", false).unwrap();
        assert_eq!(out, "let a = 10;\nlet b = 2;\n");
        assert_eq!(report, "replaced 1 occurrence");
    }

    #[test]
    fn missing_and_ambiguous_are_errors() {
        assert!(
            edit("abc", "xyz", "q", false)
                .unwrap_err()
                .starts_with("old_string not found")
        );
        let err = edit("x x x", "x", "y", false).unwrap_err();
        assert!(
            err.starts_with("old_string is not unique (3 matches)"),
            "{err}"
        );
        assert_eq!(edit("x x x", "x", "y", true).unwrap().0, "y y y");
    }

    #[test]
    fn whitespace_fallback_is_reported() {
        let text = "fn main() {\n    println!(\"hi\");\n}\n";
        let (out, report) = edit(
            text,
            "fn main() {\n  println!(\"hi\");\n}",
            "fn main() {}",
            false,
        )
        .unwrap();
        assert_eq!(out, "fn main() {}\n");
        assert!(
            report.contains("ignoring whitespace differences, starting at line 1"),
            "{report}"
        );
    }
}

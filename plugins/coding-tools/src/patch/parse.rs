//! Parsing v4a patches into operations.

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hunk {
    /// Text after `@@`: a line to seek to before matching.
    pub hint: Option<String>,
    pub lines: Vec<Line>,
    /// `*** End of File` followed the hunk: it matches at the end.
    pub end_of_file: bool,
}

/// A line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Context(String),
    Remove(String),
    Add(String),
}

impl Hunk {
    /// The lines the file has now (context and removed).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Remove(s) => Some(s.as_str()),
                Line::Add(_) => None,
            })
            .collect()
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

/// Parse a whole patch. Errors name the line number and what was expected.
pub fn parse(patch: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let first = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .ok_or("the patch is empty")?;
    let last = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .unwrap_or(first);
    if lines[first].trim() != BEGIN {
        return Err(format!(
            "line {}: expected '{BEGIN}', found '{}'",
            first + 1,
            lines[first]
        ));
    }
    if lines[last].trim() != END || last == first {
        return Err(format!("the patch must end with '{END}'"));
    }
    let body = &lines[first + 1..last];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let at = first + 2 + i; // 1-based line number in the patch
        if let Some(path) = line.strip_prefix(ADD) {
            let path = file_path(path, at)?;
            i += 1;
            let mut content = String::new();
            while i < body.len() && !body[i].starts_with("*** ") {
                let added = body[i].strip_prefix('+').ok_or_else(|| {
                    format!(
                        "line {}: every line of an added file must start with '+'",
                        first + 2 + i
                    )
                })?;
                content.push_str(added);
                content.push('\n');
                i += 1;
            }
            ops.push(Op::Add { path, content });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            ops.push(Op::Delete {
                path: file_path(path, at)?,
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            let path = file_path(path, at)?;
            i += 1;
            let mut move_to = None;
            if i < body.len()
                && let Some(to) = body[i].strip_prefix(MOVE)
            {
                move_to = Some(file_path(to, first + 2 + i)?);
                i += 1;
            }
            let (hunks, next) = parse_hunks(body, i, first + 2)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!("line {at}: '{UPDATE}{path}' has no hunks"));
            }
            ops.push(Op::Update {
                path,
                move_to,
                hunks,
            });
            i = next;
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "line {at}: expected '{ADD}', '{DELETE}' or '{UPDATE}', found '{line}'"
            ));
        }
    }
    if ops.is_empty() {
        return Err("the patch changes no file".into());
    }
    Ok(ops)
}

/// Hunks from `body[start..]` up to the next file header; returns them and
/// the index after them. `base` converts indexes to patch line numbers.
fn parse_hunks(body: &[&str], start: usize, base: usize) -> Result<(Vec<Hunk>, usize), String> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut i = start;
    while i < body.len() {
        let line = body[i];
        if line.starts_with(ADD) || line.starts_with(DELETE) || line.starts_with(UPDATE) {
            break;
        }
        if line.trim() == EOF_MARK {
            match hunks.last_mut() {
                Some(h) => h.end_of_file = true,
                None => return Err(format!("line {}: '{EOF_MARK}' before any hunk", base + i)),
            }
        } else if let Some(rest) = line.strip_prefix("@@") {
            let hint = rest.trim().trim_end_matches("@@").trim();
            hunks.push(Hunk {
                hint: (!hint.is_empty()).then(|| hint.to_string()),
                ..Hunk::default()
            });
        } else {
            if hunks.is_empty() || hunks.last().is_some_and(|h| h.end_of_file) {
                hunks.push(Hunk::default());
            }
            let hunk = hunks.last_mut().expect("a hunk is open");
            let parsed = match line.chars().next() {
                Some(' ') => Line::Context(line[1..].to_string()),
                Some('-') => Line::Remove(line[1..].to_string()),
                Some('+') => Line::Add(line[1..].to_string()),
                None => Line::Context(String::new()),
                Some(_) => {
                    return Err(format!(
                        "line {}: hunk lines must start with ' ', '-' or '+', found '{line}'",
                        base + i
                    ));
                }
            };
            hunk.lines.push(parsed);
        }
        i += 1;
    }
    if let Some(pos) = hunks.iter().position(|h| h.lines.is_empty()) {
        return Err(format!("hunk {} of an update has no lines", pos + 1));
    }
    Ok((hunks, i))
}

fn file_path(raw: &str, line: usize) -> Result<String, String> {
    let path = raw.trim();
    if path.is_empty() {
        return Err(format!("line {line}: missing file path"));
    }
    Ok(path.to_string())
}

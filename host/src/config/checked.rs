//! One configuration file read and checked: parsed with the position of
//! every key, cut to the keys its layer may set, then checked against the
//! settings sandcrab knows. An error names the line and column, shows the
//! line, and suggests the known key closest to a mistyped one.

use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue, Deserializer};

use super::{Config, ConfigError};

/// Which keys of a file count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every key (the operator's file).
    All,
    /// Every key but `[hooks]`, which is read apart (a trusted project).
    AllButHooks,
    /// Only the project settings of [`super::layers::PROJECT_KEYS`] (an
    /// untrusted project); the others are dropped and named (`[hooks]`
    /// is read apart).
    ProjectKeys,
}

/// A file as its layer contributes it.
#[derive(Debug)]
pub struct Checked {
    /// What is merged with the other layers.
    pub table: toml::Table,
    /// The file's own settings, checked.
    pub config: Config,
    /// The dotted paths of keys dropped by [`Keep::ProjectKeys`].
    pub dropped: Vec<String>,
}

/// Read `text` (the file `path`) keeping `keep`.
pub fn check(text: &str, path: &Path, keep: Keep) -> Result<Checked, ConfigError> {
    let located = |err: toml::de::Error| ConfigError::Parse {
        path: path.to_path_buf(),
        message: locate(text, &err),
    };
    let mut doc = DeTable::parse(text).map_err(located)?;
    let mut dropped = Vec::new();
    // A project's `[hooks]` is read apart: a hook sandcrab cannot read
    // must not cost the project's other settings (its deny rules above
    // all).
    if keep != Keep::All {
        doc.get_mut().remove("hooks");
        // What only the operator sets is dropped before anything is read
        // from it: even a broken `[budget]` costs the project nothing.
        for key in super::layers::OPERATOR_ONLY {
            if doc.get_mut().remove(*key).is_some() {
                dropped.push(key.to_string());
            }
        }
    }
    if keep == Keep::ProjectKeys {
        // A key sandcrab does not know is a mistake wherever it is (a
        // typo is not "a setting only the operator may set").
        if let Err(err) = Config::deserialize(Deserializer::from(doc.clone()))
            && is_unknown_name(err.message())
        {
            return Err(located(err));
        }
        filter(doc.get_mut(), "", &mut dropped);
    }
    let config = Config::deserialize(Deserializer::from(doc.clone())).map_err(located)?;
    let table = toml::Table::deserialize(Deserializer::from(doc)).map_err(located)?;
    Ok(Checked {
        table,
        config,
        dropped,
    })
}

/// Remove every key of `table` its layer may not set, noting its path.
fn filter(table: &mut DeTable<'_>, prefix: &str, dropped: &mut Vec<String>) {
    let keys: Vec<String> = table.keys().map(|k| k.get_ref().to_string()).collect();
    for key in keys {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let keep = match super::layers::allowance(&path) {
            super::layers::Allowance::Whole => true,
            super::layers::Allowance::Inside => match table.get_mut(key.as_str()) {
                Some(value) => match value.get_mut() {
                    DeValue::Table(inner) => {
                        filter(inner, &path, dropped);
                        !inner.is_empty()
                    }
                    _ => {
                        dropped.push(path);
                        false
                    }
                },
                None => true,
            },
            super::layers::Allowance::None => {
                dropped.push(path);
                false
            }
        };
        if !keep {
            table.remove(key.as_str());
        }
    }
}

/// The error with where it is: `line L, column C: MESSAGE`, the line, a
/// caret under the spot, and the closest known name to a mistyped one.
fn locate(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim_end();
    let hint = did_you_mean(message)
        .map(|name| format!(" (did you mean `{name}`?)"))
        .unwrap_or_default();
    let Some(span) = err.span() else {
        return format!("{message}{hint}");
    };
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text[line_start..].lines().next().unwrap_or("");
    let column = text[line_start..start].chars().count() + 1;
    let width = text[start..span.end.min(text.len())]
        .lines()
        .next()
        .map_or(1, |s| s.chars().count().max(1));
    let number = line_no.to_string();
    format!(
        "line {line_no}, column {column}: {message}{hint}\n  {number} | {line}\n  {pad} | {gap}{carets}",
        pad = " ".repeat(number.len()),
        gap = " ".repeat(column - 1),
        carets = "^".repeat(width),
    )
}

/// For `unknown field `X`, expected one of `a`, `b`` (or a variant): the
/// expected name closest to `X`, when it is close enough to be a typo.
fn did_you_mean(message: &str) -> Option<String> {
    if !is_unknown_name(message) {
        return None;
    }
    let mut names = message.split('`').skip(1).step_by(2);
    let given = names.next()?;
    sandcrab_core::spelling::closest(given, names).map(str::to_string)
}

/// Whether serde's `message` is about a name it does not know.
fn is_unknown_name(message: &str) -> bool {
    message.starts_with("unknown field") || message.starts_with("unknown variant")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str, keep: Keep) -> String {
        check(text, Path::new("sandcrab.toml"), keep)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_mistyped_key_names_its_line_shows_it_and_suggests_the_known_one() {
        let shown = error("model = \"m\"\n[approvals]\nmdoe = \"always\"\n", Keep::All);
        assert!(shown.contains("line 3, column 1"), "{shown}");
        assert!(shown.contains("did you mean `mode`?"), "{shown}");
        assert!(shown.contains("3 | mdoe = \"always\""), "{shown}");
        assert!(shown.contains("  | ^^^^"), "{shown}");
    }

    #[test]
    fn a_syntax_error_keeps_its_line_and_a_far_name_gets_no_suggestion() {
        let shown = error("model = \n", Keep::All);
        assert!(shown.contains("line 1"), "{shown}");
        let shown = error("[agent]\nzzzzzzzzzz = 1\n", Keep::All);
        assert!(!shown.contains("did you mean"), "{shown}");
        assert!(shown.contains("line 2"), "{shown}");
    }

    #[test]
    fn keys_a_project_may_not_set_are_dropped_before_they_are_checked() {
        let checked = check(
            "[policy]\nsandbox = \"off\"\n[agent]\nmax_turns = 3\n[providers.x]\nmodel = \"m\"\nbase_url = \"u\"\n",
            Path::new("sandcrab.toml"),
            Keep::ProjectKeys,
        )
        .unwrap();
        assert_eq!(checked.config.agent.max_turns, Some(3));
        assert_eq!(checked.dropped, ["policy", "providers.x.base_url"]);
        // A name nothing knows is a mistake, wherever it is, with its line.
        let shown = error("[agent]\nmax_turnz = 3\n", Keep::ProjectKeys);
        assert!(
            shown.contains("line 2") && shown.contains("did you mean `max_turns`"),
            "{shown}"
        );
        let shown = error("model = \"m\"\n[policy]\nfoo = 1\n", Keep::ProjectKeys);
        assert!(shown.contains("line 3") && shown.contains("foo"), "{shown}");
    }
}

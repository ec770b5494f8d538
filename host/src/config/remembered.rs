//! Approval rules sandcrab writes into the operator's configuration file
//! and takes out again: an "always in this workspace" answer becomes an
//! `allow` rule for that workspace only (`[[approvals.rules]]` with
//! `workspace = "…"`, a comment saying when and why above it), and
//! `sandcrab approvals revoke N` removes the N-th rule. The file keeps its
//! comments and layout and is replaced atomically.

use std::path::Path;

use super::edit::{EditError, edit};
use crate::approvals::{Matcher, Rule, RuleSource, Rules, rules_from_flags};

/// Write an allow rule for `flag` (an `--approve` value such as
/// `command:git push`) that applies in `workspace` only, with `why` as its
/// comment; the rule as the file now holds it (its line and number).
pub fn remember_rule(
    file: &Path,
    flag: &str,
    workspace: &Path,
    why: &str,
) -> Result<Rule, EditError> {
    let fail = |message: String| EditError {
        path: file.to_path_buf(),
        message,
    };
    let rule = rules_from_flags(&[flag.to_string()])
        .map_err(|e| fail(e.to_string()))?
        .iter()
        .next()
        .cloned()
        .ok_or_else(|| fail(format!("{flag:?} is no rule")))?;
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut entry = rule_entry(&rule, &workspace).map_err(|m| fail(m.into()))?;
    let comment: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    entry.decor_mut().set_prefix(format!("\n# {comment}\n"));
    edit(file, |doc| {
        rules_array(doc)?.push(entry);
        Ok(())
    })?;
    let text = std::fs::read_to_string(file).map_err(|e| fail(e.to_string()))?;
    let rules = Rules::parse(&text, file, RuleSource::Trusted).map_err(|e| fail(e.to_string()))?;
    rules
        .iter()
        .last()
        .cloned()
        .ok_or_else(|| fail("the rule written is not there".into()))
}

/// The rule an "always in this workspace" answer to `flag` would write,
/// as it would appear in the file (shown before the operator answers).
pub fn rule_text(flag: &str, workspace: &Path) -> Option<String> {
    let rule = rules_from_flags(&[flag.to_string()])
        .ok()?
        .iter()
        .next()?
        .clone();
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let entry = rule_entry(&rule, &workspace).ok()?;
    let mut doc = toml_edit::DocumentMut::new();
    rules_array(&mut doc).ok()?.push(entry);
    Some(doc.to_string().trim().to_string())
}

/// The table of an allow rule matching what `rule` matches, in
/// `workspace` only.
fn rule_entry(rule: &Rule, workspace: &Path) -> Result<toml_edit::Table, &'static str> {
    let mut entry = toml_edit::Table::new();
    match &rule.matcher {
        Matcher::Shell(words) | Matcher::Command(words) => {
            let mut array = toml_edit::Array::new();
            for word in words {
                array.push(word.as_str());
            }
            let key = match &rule.matcher {
                Matcher::Shell(_) => "shell",
                _ => "command",
            };
            entry[key] = toml_edit::value(array);
        }
        Matcher::Path { tool, glob } => {
            if let Some(tool) = tool {
                entry["tool"] = toml_edit::value(tool.as_str());
            }
            entry["path"] = toml_edit::value(glob.as_str());
        }
        Matcher::Tool(tool) => entry["tool"] = toml_edit::value(tool.as_str()),
        Matcher::Grant(_) => return Err("grant rules cannot be written yet"),
    }
    entry["decision"] = toml_edit::value("allow");
    if rule.network {
        entry["network"] = toml_edit::value(true);
    }
    entry["workspace"] = toml_edit::value(workspace.display().to_string());
    Ok(entry)
}

/// Remove the rules numbered `numbers` (as `sandcrab approvals list`
/// shows them: 1 for the file's first) from `file`; the rules removed.
pub fn revoke_rules(file: &Path, numbers: &[usize]) -> Result<Vec<Rule>, EditError> {
    let fail = |message: String| EditError {
        path: file.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| fail(e.to_string()))?;
    let before = Rules::parse(&text, file, RuleSource::Trusted).map_err(|e| fail(e.to_string()))?;
    let count = before.iter().count();
    if let Some(bad) = numbers.iter().find(|n| **n == 0 || **n > count) {
        return Err(fail(format!(
            "there is no rule {bad}: the file has {count} (see `sandcrab approvals list --all`)"
        )));
    }
    let removed: Vec<Rule> = before
        .iter()
        .filter(|r| numbers.contains(&r.number))
        .cloned()
        .collect();
    edit(file, |doc| {
        let rules = rules_array(doc)?;
        let mut doomed: Vec<usize> = numbers.iter().map(|n| n - 1).collect();
        doomed.sort_unstable();
        doomed.dedup();
        for index in doomed.into_iter().rev() {
            rules.remove(index);
        }
        Ok(())
    })?;
    Ok(removed)
}

/// `[[approvals.rules]]` of `doc`, created if missing.
fn rules_array(
    doc: &mut toml_edit::DocumentMut,
) -> Result<&mut toml_edit::ArrayOfTables, &'static str> {
    let approvals = doc
        .as_table_mut()
        .entry("approvals")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or("`approvals` is not a table")?;
    approvals
        .entry("rules")
        .or_insert(toml_edit::Item::ArrayOfTables(
            toml_edit::ArrayOfTables::new(),
        ))
        .as_array_of_tables_mut()
        .ok_or("`approvals.rules` is an inline array: write each rule as [[approvals.rules]]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_rule_is_for_its_workspace_and_can_be_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "# mine\nmodel = \"m\"\n\n[[approvals.rules]]\ntool = \"read_file\"\ndecision = \"allow\"\n",
        )
        .unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let rule =
            remember_rule(&file, "command:git push", &ws, "via chat, answering p-1").unwrap();
        assert_eq!(rule.number, 2);
        assert_eq!(rule.workspace.as_deref(), Some(ws.as_path()));
        assert_eq!(rule.describe(), "command git push");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# mine\nmodel = \"m\"\n"), "{text}");
        assert!(
            text.contains("# via chat, answering p-1\n[[approvals.rules]]"),
            "{text}"
        );
        assert!(
            rule.at.ends_with(&format!(
                ":{}",
                text.lines()
                    .position(|l| l == "# via chat, answering p-1")
                    .unwrap()
                    + 2
            )),
            "{} in {text}",
            rule.at
        );
        let shown = rule_text("command:git push", &ws).unwrap();
        assert_eq!(
            shown,
            format!(
                "[[approvals.rules]]\ncommand = [\"git\", \"push\"]\ndecision = \"allow\"\nworkspace = {:?}",
                ws.display().to_string()
            )
        );
        assert!(
            text.contains(&shown),
            "what is shown is what is written: {text}"
        );
        let removed = revoke_rules(&file, &[2]).unwrap();
        assert_eq!(removed[0].describe(), "command git push");
        let left = Rules::parse(
            &std::fs::read_to_string(&file).unwrap(),
            &file,
            RuleSource::Trusted,
        )
        .unwrap();
        assert_eq!(
            left.iter().map(Rule::describe).collect::<Vec<_>>(),
            ["tool read_file"]
        );
        let err = revoke_rules(&file, &[5]).unwrap_err().to_string();
        assert!(err.contains("there is no rule 5: the file has 1"), "{err}");
    }

    #[test]
    fn a_new_file_gets_the_rule_and_a_link_keeps_leading_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/config.toml");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        remember_rule(&link, "path:src/main.rs", dir.path(), "why").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&real)
                .unwrap()
                .contains("path = \"src/main.rs\"")
        );
        let fresh = dir.path().join("new/config.toml");
        remember_rule(&fresh, "tool:grep", dir.path(), "why").unwrap();
        assert!(
            std::fs::read_to_string(&fresh)
                .unwrap()
                .contains("tool = \"grep\"")
        );
    }
}

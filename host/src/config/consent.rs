//! Recording the operator's consent to pinned things (hooks, skills) in
//! their configuration file, as `[consented."<what>"]`.

use std::path::Path;

use crate::consent::Pinned;

/// Record consent to each of `pinned` as it is now, in `file` (created if
/// missing, other content kept as written); copies of their files are kept
/// for the diffs of later changes.
pub fn give(file: &Path, pinned: &[&Pinned]) -> Result<(), super::edit::EditError> {
    if pinned.is_empty() {
        return Ok(());
    }
    super::edit::edit(file, |doc| {
        let consented = doc
            .entry("consented")
            .or_insert(toml_edit::table())
            .as_table_mut()
            .ok_or("`consented` is not a table")?;
        consented.set_implicit(true);
        for item in pinned {
            let mut record = toml_edit::Table::new();
            record["sha256"] = toml_edit::value(item.sha256.clone());
            record["at"] = toml_edit::value(crate::time::now_rfc3339());
            let mut files = toml_edit::InlineTable::new();
            for f in &item.files {
                files.insert(f.path.display().to_string(), f.sha256.clone().into());
            }
            record["files"] = toml_edit::value(files);
            consented.insert(&item.what, toml_edit::Item::Table(record));
        }
        Ok(())
    })?;
    for item in pinned {
        item.keep_copies();
    }
    Ok(())
}

/// Add `hooks` to the `[hooks]` of `file`, after those already there.
pub fn add_hooks(
    file: &Path,
    hooks: &crate::hooks::HooksToml,
) -> Result<(), super::edit::EditError> {
    super::edit::edit(file, |doc| {
        let table = doc
            .entry("hooks")
            .or_insert(toml_edit::table())
            .as_table_mut()
            .ok_or("`hooks` is not a table")?;
        table.set_implicit(true);
        for (event, groups) in hooks {
            let list = table
                .entry(event.name())
                .or_insert(toml_edit::Item::ArrayOfTables(Default::default()))
                .as_array_of_tables_mut()
                .ok_or("a `[hooks]` event is not a list of tables")?;
            for group in groups {
                let mut t = toml_edit::Table::new();
                t["matcher"] = toml_edit::value(group.matcher.clone());
                let mut commands = toml_edit::Array::new();
                for hook in &group.hooks {
                    let mut c = toml_edit::InlineTable::new();
                    c.insert("type", "command".into());
                    c.insert("command", hook.command.clone().into());
                    if let Some(timeout) = hook.timeout {
                        c.insert("timeout", (timeout as i64).into());
                    }
                    commands.push(c);
                }
                t["hooks"] = toml_edit::value(commands);
                list.push(t);
            }
        }
        Ok(())
    })
}

//! `sandcrab hooks import FILE`: the hooks block of a Claude Code
//! `settings.json`, as sandcrab hooks — events kept, tool names in
//! matchers mapped to sandcrab's (`Bash` → `shell`, `Write` →
//! `write_file`, …), what has no counterpart left out with a note.

use serde_json::Value;

use super::settings::{HookCommandToml, HookEvent, HookKind, HooksToml, MatcherGroup};

/// Claude Code's tool names and sandcrab's (the tools that write files
/// include `apply_patch`, the editing tool some models are given).
pub const TOOL_NAMES: &[(&str, &str)] = &[
    ("Bash", "shell"),
    ("Write", "write_file|apply_patch"),
    ("Edit", "edit_file|apply_patch"),
    ("MultiEdit", "edit_file|apply_patch"),
    ("Read", "read_file"),
    ("Glob", "glob"),
    ("Grep", "grep"),
    ("LS", "list_dir"),
    ("Task", "spawn_agent"),
];

/// What an import found.
#[derive(Debug, Default)]
pub struct Imported {
    pub hooks: HooksToml,
    /// What was left out or changed, one line each.
    pub notes: Vec<String>,
}

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("it is not JSON: {0}")]
    NotJson(String),
    #[error("it has no `hooks` object (Claude Code keeps hooks under \"hooks\" in settings.json)")]
    NoHooks,
    #[error("hooks.{event}: {message}")]
    Shape { event: String, message: String },
}

/// Read the hooks of the Claude Code settings `text`.
pub fn from_claude_settings(text: &str) -> Result<Imported, ImportError> {
    let json: Value =
        serde_json::from_str(text).map_err(|e| ImportError::NotJson(e.to_string()))?;
    let hooks = json
        .get("hooks")
        .and_then(Value::as_object)
        .ok_or(ImportError::NoHooks)?;
    let mut out = Imported::default();
    for (name, groups) in hooks {
        let Some(event) = HookEvent::named(name) else {
            out.notes
                .push(format!("{name}: sandcrab has no such event; left out"));
            continue;
        };
        let shape = |message: &str| ImportError::Shape {
            event: name.clone(),
            message: message.to_string(),
        };
        let groups = groups
            .as_array()
            .ok_or_else(|| shape("must be a list of matcher groups"))?;
        for group in groups {
            let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or("");
            let matcher = if event.matches_tools() {
                map_matcher(matcher, &mut out.notes)
            } else {
                matcher.to_string()
            };
            let list = group
                .get("hooks")
                .and_then(Value::as_array)
                .ok_or_else(|| shape("a matcher group needs a `hooks` list"))?;
            let mut commands = Vec::new();
            for hook in list {
                let kind = hook.get("type").and_then(Value::as_str).unwrap_or("");
                let Some(command) = hook.get("command").and_then(Value::as_str) else {
                    out.notes.push(format!(
                        "{name}: a `{kind}` hook has no command; sandcrab runs command hooks only, left out"
                    ));
                    continue;
                };
                if kind != "command" {
                    out.notes.push(format!(
                        "{name}: `{kind}` hooks are not supported; left out"
                    ));
                    continue;
                }
                commands.push(HookCommandToml {
                    kind: HookKind::Command,
                    command: command.to_string(),
                    timeout: hook.get("timeout").and_then(Value::as_u64),
                    prompt: None,
                    model: None,
                });
            }
            if !commands.is_empty() {
                out.hooks.entry(event).or_default().push(MatcherGroup {
                    matcher,
                    hooks: commands,
                });
            }
        }
    }
    Ok(out)
}

/// A Claude Code matcher with tool names mapped to sandcrab's: each
/// known name as a whole word (inside groups too), and `mcp__SERVER__TOOL`
/// as sandcrab names MCP tools, `SERVER__TOOL`.
fn map_matcher(matcher: &str, notes: &mut Vec<String>) -> String {
    if matcher.is_empty() || matcher == "*" {
        return matcher.to_string();
    }
    let words = regex::Regex::new(r"\b[A-Za-z][A-Za-z0-9_]*\b").expect("a valid pattern");
    let mapped = words.replace_all(matcher, |found: &regex::Captures<'_>| {
        let word = &found[0];
        if let Some((_, ours)) = TOOL_NAMES.iter().find(|(claude, _)| *claude == word) {
            return (*ours).to_string();
        }
        if let Some(rest) = word.strip_prefix("mcp__") {
            return rest.to_string();
        }
        if word.starts_with(char::is_uppercase) && word.chars().all(|c| c.is_ascii_alphanumeric()) {
            notes.push(format!(
                "matcher `{matcher}`: sandcrab has no tool like Claude Code's {word}; kept as written"
            ));
        }
        word.to_string()
    });
    let mut names: Vec<&str> = Vec::new();
    // Simple alternations lose repeated names (Edit|MultiEdit).
    if !mapped.contains(['(', ')', '[', '*', '+', '?', '\\']) {
        for name in mapped.split('|') {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        return names.join("|");
    }
    mapped.into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_settings_become_sandcrab_hooks_with_our_tool_names() {
        let settings = r#"{
          "permissions": {"allow": []},
          "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 guard.py", "timeout": 5}]}],
            "PostToolUse": [{"matcher": "Edit|MultiEdit|Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "ctx.sh"}, {"type": "prompt", "prompt": "judge"}]}],
            "PostToolUseFailure": [{"hooks": [{"type": "command", "command": "x"}]}]
          }
        }"#;
        let imported = from_claude_settings(settings).unwrap();
        let pre = &imported.hooks[&HookEvent::PreToolUse][0];
        assert_eq!(pre.matcher, "shell");
        assert_eq!(pre.hooks[0].timeout, Some(5));
        assert_eq!(
            imported.hooks[&HookEvent::PostToolUse][0].matcher,
            "edit_file|apply_patch|write_file"
        );
        let mut notes = Vec::new();
        assert_eq!(map_matcher("mcp__github__.*", &mut notes), "github__.*");
        assert_eq!(
            map_matcher("(Bash|Write)", &mut notes),
            "(shell|write_file|apply_patch)"
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            imported.hooks[&HookEvent::UserPromptSubmit][0].hooks.len(),
            1
        );
        assert_eq!(imported.notes.len(), 2, "{:?}", imported.notes);
        assert!(matches!(
            from_claude_settings("{}"),
            Err(ImportError::NoHooks)
        ));
        assert!(matches!(
            from_claude_settings("nope"),
            Err(ImportError::NotJson(_))
        ));
    }
}

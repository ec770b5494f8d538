//! How hooks are written in a configuration file: Claude Code's settings
//! shape, in TOML.
//!
//! ```toml
//! [[hooks.PreToolUse]]
//! matcher = "shell"
//! hooks = [{ type = "command", command = "python3 ~/.config/sandcrab/hooks/guard.py", timeout = 10 }]
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The moments a hook can run at, named as Claude Code names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    /// A session starts or is taken up again.
    SessionStart,
    /// The operator's input, before the model sees it.
    UserPromptSubmit,
    /// A tool call, before it is approved and run.
    PreToolUse,
    /// A tool call the operator is about to be asked about.
    PermissionRequest,
    /// A tool call, after it ran.
    PostToolUse,
    /// The model answered without asking for tools: the turn would end.
    Stop,
    /// A subagent's turn would end.
    SubagentStop,
    /// The conversation is about to be compacted.
    PreCompact,
    /// The session ends.
    SessionEnd,
    /// sandcrab tells the operator something (it waits for an answer).
    Notification,
}

/// Every event, in the order they are documented.
pub const EVENTS: [HookEvent; 10] = [
    HookEvent::SessionStart,
    HookEvent::UserPromptSubmit,
    HookEvent::PreToolUse,
    HookEvent::PermissionRequest,
    HookEvent::PostToolUse,
    HookEvent::Stop,
    HookEvent::SubagentStop,
    HookEvent::PreCompact,
    HookEvent::SessionEnd,
    HookEvent::Notification,
];

impl HookEvent {
    /// Its name, as in the configuration and the hook's input.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
        }
    }

    /// The event named `name`.
    pub fn named(name: &str) -> Option<Self> {
        EVENTS.into_iter().find(|e| e.name() == name)
    }

    /// Whether a hook of this event guards something: when it cannot run
    /// or gives no usable answer, what it guards is refused (fail
    /// closed). Other hooks only observe or add, and fail open with a
    /// warning.
    pub fn guards(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PermissionRequest)
    }

    /// Whether its matcher is matched against a tool's name.
    pub fn matches_tools(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PermissionRequest | HookEvent::PostToolUse
        )
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[hooks]`: matcher groups by event.
pub type HooksToml = BTreeMap<HookEvent, Vec<MatcherGroup>>;

/// One `[[hooks.EVENT]]` entry: which tools (or sources) it is for, and
/// the hooks that run then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatcherGroup {
    /// A regular expression matched against the whole tool name (or the
    /// event's source); empty or `*` matches everything.
    #[serde(default)]
    pub matcher: String,
    pub hooks: Vec<HookCommandToml>,
}

/// One hook: a command run through `sh -c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCommandToml {
    /// `command`; Claude Code's other kinds (`prompt`, `agent`) are read
    /// and left out with a warning.
    #[serde(rename = "type")]
    pub kind: HookKind,
    #[serde(default)]
    pub command: String,
    /// Seconds it may take (default 60, at most 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// A `prompt` hook's prompt (not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A `prompt` hook's model (not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl HookCommandToml {
    /// Its kind's name, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            HookKind::Command => "command",
            HookKind::Other => "prompt or agent",
        }
    }
}

/// What a hook is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookKind {
    /// A program, run through `sh -c`.
    Command,
    /// Anything else (`prompt`, `agent`): not run.
    #[serde(other)]
    Other,
}

/// Default seconds a hook may take.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Most seconds a hook may take.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// Which names a matcher admits.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Everything.
    All,
    /// Names the whole expression matches.
    Pattern(regex::Regex),
}

impl Matcher {
    /// Read `text` (empty or `*`: everything; else a regular expression
    /// the whole name must match).
    pub fn parse(text: &str) -> Result<Matcher, String> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        regex::Regex::new(&format!("^(?:{text})$"))
            .map(Matcher::Pattern)
            .map_err(|e| format!("matcher `{text}` is not a regular expression: {e}"))
    }

    /// Whether it admits `name` (None: the event has no name to match,
    /// and every group runs).
    pub fn admits(&self, name: Option<&str>) -> bool {
        match (self, name) {
            (Matcher::All, _) | (_, None) => true,
            (Matcher::Pattern(re), Some(name)) => re.is_match(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_shape_reads_in_toml() {
        let text = r#"
[[hooks.PreToolUse]]
matcher = "shell|write_file"
hooks = [{ type = "command", command = "python3 guard.py", timeout = 10 }]

[[hooks.UserPromptSubmit]]
hooks = [{ type = "command", command = "./ctx.sh" }]
"#;
        #[derive(Deserialize)]
        struct File {
            hooks: HooksToml,
        }
        let file: File = toml::from_str(text).unwrap();
        let pre = &file.hooks[&HookEvent::PreToolUse][0];
        assert_eq!(pre.hooks[0].timeout, Some(10));
        let m = Matcher::parse(&pre.matcher).unwrap();
        assert!(m.admits(Some("shell")) && m.admits(Some("write_file")));
        assert!(!m.admits(Some("shell_x")) && !m.admits(Some("read_file")));
        assert!(Matcher::parse("").unwrap().admits(Some("any")));
        assert!(Matcher::parse("(").is_err());
        let wrong: Result<File, _> = toml::from_str("[[hooks.BeforeTool]]\nhooks = []\n");
        assert!(wrong.is_err());
        let other: File = toml::from_str(
            "[[hooks.Stop]]\nhooks = [{ type = \"prompt\", prompt = \"judge it\" }]\n",
        )
        .unwrap();
        assert_eq!(
            other.hooks[&HookEvent::Stop][0].hooks[0].kind,
            HookKind::Other
        );
    }
}

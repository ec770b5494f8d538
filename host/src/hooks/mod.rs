//! Hooks: programs the operator configured to run at moments of a session
//! (before a tool call, after it, when a prompt is submitted, …), written
//! to Claude Code's contract — JSON on stdin, exit code 2 blocks, JSON on
//! stdout with a decision — so existing hook scripts run unchanged.
//!
//! Unlike the hosts that contract comes from, a hook here is
//! - **consented by content** ([`crate::consent`]): it runs only while
//!   the operator's consent names the hash of its command and the files it
//!   runs; a changed hook waits for `sandcrab trust`;
//! - **confined** ([`run`]): a principal with its own grant
//!   (`[policy.hooks]`), through the one confinement translation;
//! - **closed where it guards**: a PreToolUse or PermissionRequest hook
//!   that cannot run, crashes, times out or answers garbage refuses the
//!   calls it matches; other hooks fail open with a warning;
//! - **receipted**: each run is a [`HookRecord`] on the call it judged.

mod answer;
mod command;
pub mod import;
mod run;
pub mod settings;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

pub use answer::{Decided, HookAnswer};
use command::NamedFile;
pub use settings::{EVENTS, HookEvent, HooksToml, Matcher};

use crate::consent::{ConsentRecord, ConsentState, Pinned};
use crate::plugin::SandboxContext;
use crate::tools::{HookRecord, HookVerdict};

/// Whose a hook is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookOrigin {
    /// The operator's configuration.
    Operator,
    /// The project's `sandcrab.toml`.
    Project,
}

impl HookOrigin {
    pub fn word(self) -> &'static str {
        match self {
            HookOrigin::Operator => "operator",
            HookOrigin::Project => "project",
        }
    }
}

/// One configured hook, as found now.
#[derive(Debug, Clone)]
pub struct Hook {
    pub event: HookEvent,
    pub matcher_text: String,
    matcher: Matcher,
    pub command: String,
    pub timeout: Duration,
    pub origin: HookOrigin,
    /// Its command and files, pinned by content.
    pub pinned: Pinned,
    files: Vec<NamedFile>,
    /// Whether the operator consented to it as it is.
    pub consent: ConsentState,
    /// Why it may not run even when consented (an untrusted project, a
    /// file it names that may not be pinned, a matcher that cannot be
    /// read).
    pub barred: Option<String>,
    /// Where it may run files the host keeps from (the operator's hooks
    /// folder, for the operator's hooks).
    own_folder: Option<PathBuf>,
}

impl Hook {
    /// Whether it may run.
    pub fn runnable(&self) -> bool {
        self.consent == ConsentState::Given && self.barred.is_none()
    }

    /// Why it does not run, with what to do.
    pub fn why_not(&self) -> String {
        if let Some(barred) = &self.barred {
            return barred.clone();
        }
        let state = match self.consent {
            ConsentState::Changed => "changed since you consented to it",
            _ => "has not been consented to",
        };
        format!(
            "the {} hook `{}` {state}; review it with `sandcrab hooks list`, then run `sandcrab trust`",
            self.event, self.command
        )
    }
}

/// The hooks of a project, and whether the project is trusted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectHooks {
    pub hooks: HooksToml,
    pub trusted: bool,
}

/// What a pinned hook is called in the operator's records: whose it is,
/// the workspace when its consent holds there only (a project's hooks,
/// and the operator's that run what the workspace holds), the event, and
/// its matcher and command quoted (so no two hooks share a name).
pub fn identity(
    origin: HookOrigin,
    workspace: Option<&Path>,
    event: HookEvent,
    matcher: &str,
    command: &str,
) -> String {
    let whose = match (origin, workspace) {
        (HookOrigin::Operator, None) => "operator".to_string(),
        (HookOrigin::Operator, Some(ws)) => format!("operator in {:?}", ws.display().to_string()),
        (HookOrigin::Project, Some(ws)) => format!("project {:?}", ws.display().to_string()),
        (HookOrigin::Project, None) => "project".to_string(),
    };
    format!("hook {whose} {event} matcher {matcher:?} command {command:?}")
}

/// The operator's own hooks folder (`~/.config/sandcrab/hooks/`): the one
/// place inside what the host keeps that the operator's hooks may run
/// files from.
pub fn operator_folder() -> Option<PathBuf> {
    let dir = crate::user_files::config_dir()?.join("hooks");
    Some(dir.canonicalize().unwrap_or(dir))
}

/// The configured hooks of a session, and what they run in.
#[derive(Clone)]
pub struct Hooks {
    hooks: Arc<Vec<Hook>>,
    ctx: Option<SandboxContext>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").field("hooks", &self.hooks).finish()
    }
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            hooks: Arc::new(Vec::new()),
            ctx: None,
        }
    }
}

/// What firing an event's hooks gave.
#[derive(Debug, Clone, Default)]
pub struct Fired {
    /// Every hook's answer, combined: deny over ask over allow; contexts
    /// joined; the last rewritten input.
    pub answer: HookAnswer,
    /// One record per hook that matched.
    pub records: Vec<HookRecord>,
    /// What the operator should be told (hooks that failed open, that were
    /// not run).
    pub warnings: Vec<String>,
}

impl Fired {
    /// Whether any hook matched.
    pub fn any(&self) -> bool {
        !self.records.is_empty()
    }
}

/// Who and where, for a hook's input.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
    /// The approvals mode, as Claude Code names permission modes.
    pub permission_mode: &'static str,
}

impl Hooks {
    /// The hooks of `operator` and `project`, under the consents in
    /// `records`, run in `ctx`.
    pub fn load(
        operator: &HooksToml,
        project: Option<&ProjectHooks>,
        records: &BTreeMap<String, ConsentRecord>,
        ctx: &SandboxContext,
    ) -> (Hooks, Vec<String>) {
        let (hooks, warnings) = found(operator, project, records, &ctx.workspace);
        (
            Hooks {
                hooks: Arc::new(hooks),
                ctx: Some(ctx.clone()),
            },
            warnings,
        )
    }

    /// A warning for each tool hook whose matcher admits none of the tools
    /// named `tools` (a Claude Code name, a typo): it would never run.
    pub fn unmatched(&self, tools: &[String]) -> Vec<String> {
        self.hooks
            .iter()
            .filter(|h| h.event.matches_tools() && !matches!(h.matcher, Matcher::All))
            .filter(|h| !tools.iter().any(|t| h.matcher.admits(Some(t))))
            .map(|h| {
                format!(
                    "the {} hook `{}` matches no tool offered (matcher `{}`; sandcrab's tools are named {}); it never runs",
                    h.event,
                    h.command,
                    h.matcher_text,
                    tools.join(", ")
                )
            })
            .collect()
    }

    /// Whether any hook is configured for `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// Run the hooks of `event` whose matcher admits `name` (the tool, or
    /// the event's source), each given `facts` and `fields` on its stdin,
    /// all at once.
    pub async fn fire(
        &self,
        event: HookEvent,
        name: Option<&str>,
        facts: &Facts<'_>,
        fields: Map<String, Value>,
    ) -> Fired {
        let matched: Vec<&Hook> = self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.matcher.admits(name))
            .collect();
        let mut fired = Fired::default();
        if matched.is_empty() {
            return fired;
        }
        let mut input = json!({
            "session_id": facts.session_id,
            "transcript_path": "",
            "cwd": facts.cwd.display().to_string(),
            "hook_event_name": event.name(),
            "permission_mode": facts.permission_mode,
        });
        if let Value::Object(map) = &mut input {
            map.extend(fields);
        }
        let input = serde_json::to_vec(&input).unwrap_or_default();
        let runs = matched.iter().map(|hook| self.run_one(hook, &input));
        let results = futures::future::join_all(runs).await;
        for (hook, (record, answer)) in matched.iter().zip(results) {
            combine(&mut fired, hook, &record, answer);
            fired.records.push(record);
        }
        fired
    }

    /// Run one hook (or say why it is not run).
    async fn run_one(&self, hook: &Hook, input: &[u8]) -> (HookRecord, HookAnswer) {
        let at = crate::time::now_rfc3339();
        let mut record = HookRecord {
            event: hook.event.name().to_string(),
            command: hook.command.clone(),
            origin: hook.origin.word().to_string(),
            sha256: hook.pinned.sha256.clone(),
            verdict: HookVerdict::NotConsented,
            reason: None,
            at,
            duration_ms: 0,
            program: None,
        };
        let ctx = match (&self.ctx, hook.runnable()) {
            (Some(ctx), true) => ctx,
            _ => {
                let why = hook.why_not();
                record.reason = Some(why.clone());
                let answer = HookAnswer {
                    failure: Some(why),
                    ..Default::default()
                };
                return (record, answer);
            }
        };
        let ran = run::run(hook, input, ctx).await;
        record.duration_ms = ran.duration.as_millis() as u64;
        record.program = ran.program;
        record.verdict = match (&ran.answer.failure, ran.answer.decision) {
            (Some(_), _) => HookVerdict::Failed,
            (None, Some(d)) => d.verdict(),
            (None, None) => HookVerdict::Pass,
        };
        record.reason = ran.answer.failure.clone().or(ran.answer.reason.clone());
        (record, ran.answer)
    }
}

/// Fold one hook's answer into the event's.
fn combine(fired: &mut Fired, hook: &Hook, record: &HookRecord, answer: HookAnswer) {
    let into = &mut fired.answer;
    if let Some(failure) = &answer.failure {
        if hook.event.guards() {
            // Closed: what it guards is refused.
            into.decision = Some(Decided::Deny);
            into.reason = Some(format!(
                "refused because a {} hook could not judge it: {failure}",
                hook.event
            ));
        } else {
            fired.warnings.push(format!(
                "{} hook `{}` {}: {failure}",
                hook.event,
                hook.command,
                if record.verdict == HookVerdict::NotConsented {
                    "was not run"
                } else {
                    "failed (ignored)"
                }
            ));
        }
        return;
    }
    // A project may make things stricter, never looser.
    let decision = match (hook.origin, answer.decision) {
        (HookOrigin::Project, Some(Decided::Allow)) => None,
        (_, d) => d,
    };
    if decision > into.decision {
        into.decision = decision;
        into.reason = answer.reason.clone();
    } else if decision.is_some() && decision == into.decision && into.reason.is_none() {
        into.reason = answer.reason.clone();
    }
    if let Some(context) = answer.context {
        into.context = Some(match into.context.take() {
            Some(before) => format!("{before}\n{context}"),
            None => context,
        });
    }
    if answer.updated_input.is_some() && hook.origin == HookOrigin::Operator {
        into.updated_input = answer.updated_input;
    }
    if into.stop.is_none() {
        into.stop = answer.stop;
    }
    if let Some(message) = answer.system_message {
        fired
            .warnings
            .push(format!("{} hook: {message}", hook.event));
    }
}

/// The hooks of `operator` and `project` for `workspace`, each pinned
/// and with its consent state under `records`; and what the operator
/// should be told (hooks that will not run, matchers that do not read).
pub fn found(
    operator: &HooksToml,
    project: Option<&ProjectHooks>,
    records: &BTreeMap<String, ConsentRecord>,
    workspace: &Path,
) -> (Vec<Hook>, Vec<String>) {
    let home = crate::user_files::home();
    let operator_folder = operator_folder();
    let mut hooks = Vec::new();
    let mut warnings = Vec::new();
    let mut add = |table: &HooksToml, origin: HookOrigin, barred: Option<String>| {
        for (event, groups) in table {
            for group in groups {
                // A guard whose matcher cannot be read guards everything
                // and runs nothing (closed); an observer's is left out.
                let (matcher, unreadable) = match Matcher::parse(&group.matcher) {
                    Ok(m) => (m, None),
                    Err(e) if event.guards() => (
                        Matcher::All,
                        Some(format!(
                            "{event} hook: {e}; fix it in the configuration (until then the calls it would guard are refused)"
                        )),
                    ),
                    Err(e) => {
                        warnings.push(format!("{event} hook: {e}; its hooks do not run"));
                        continue;
                    }
                };
                for entry in &group.hooks {
                    if entry.kind != settings::HookKind::Command {
                        warnings.push(format!(
                            "{event} hook: `{}` hooks are not supported (command hooks only); left out",
                            entry.kind_name()
                        ));
                        continue;
                    }
                    let own = operator_folder
                        .clone()
                        .filter(|_| origin == HookOrigin::Operator);
                    let scan =
                        command::scan(&entry.command, workspace, home.as_deref(), own.as_deref());
                    let files = scan.files.clone();
                    let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
                    let bound = (origin == HookOrigin::Project || scan.workspace_bound)
                        .then_some(workspace);
                    let what = identity(origin, bound, *event, &group.matcher, &entry.command);
                    let pinned = Pinned::of(
                        what,
                        &format!("{event}\0{}\0{}", group.matcher, entry.command),
                        &paths,
                    );
                    let consent = pinned.state(records);
                    let secs = entry
                        .timeout
                        .unwrap_or(settings::DEFAULT_TIMEOUT_SECS)
                        .clamp(1, settings::MAX_TIMEOUT_SECS);
                    hooks.push(Hook {
                        event: *event,
                        matcher_text: group.matcher.clone(),
                        matcher: matcher.clone(),
                        command: entry.command.clone(),
                        timeout: Duration::from_secs(secs),
                        origin,
                        pinned,
                        files,
                        consent,
                        barred: unreadable
                            .clone()
                            .or_else(|| {
                                (!scan.refused.is_empty()).then(|| {
                                    format!(
                                        "{event} hook `{}`: {}",
                                        entry.command,
                                        scan.refused.join("; ")
                                    )
                                })
                            })
                            .or_else(|| barred.clone()),
                        own_folder: own,
                    });
                }
            }
        }
    };
    add(operator, HookOrigin::Operator, None);
    if let Some(project) = project {
        // An untrusted project's hooks never run; its guards still refuse
        // what they match (a project may make things stricter).
        let barred = (!project.trusted).then(|| {
            format!(
                "the project in {} is not trusted, so its hooks do not run; review it, then run `sandcrab trust`",
                workspace.display()
            )
        });
        add(&project.hooks, HookOrigin::Project, barred);
    }
    for hook in &hooks {
        if !hook.runnable() {
            warnings.push(hook.why_not());
        }
    }
    (hooks, warnings)
}

/// The approvals mode as Claude Code names permission modes.
pub fn permission_mode(mode: crate::approvals::Mode) -> &'static str {
    match mode {
        crate::approvals::Mode::Never => "bypassPermissions",
        _ => "default",
    }
}

/// A tool call's arguments as hooks see them: as the tool takes them (the
/// coding tools use Claude Code's names: `file_path`, `command`,
/// `old_string`…), with a relative `file_path` made absolute, as Claude
/// Code gives it.
pub fn tool_input(arguments: &Value, working_dir: &Path) -> Value {
    let mut input = arguments.clone();
    if let Value::Object(map) = &mut input
        && let Some(path) = map.get("file_path").and_then(Value::as_str)
        && Path::new(path).is_relative()
    {
        let full = working_dir.join(path).display().to_string();
        map.insert("file_path".into(), Value::String(full));
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_whose_matcher_cannot_be_read_guards_everything_and_runs_nothing() {
        let text = "[[PreToolUse]]\nmatcher = \"(\"\nhooks = [{ type = \"command\", command = \"true\" }]\n[[PostToolUse]]\nmatcher = \"(\"\nhooks = [{ type = \"command\", command = \"true\" }]\n";
        let hooks: HooksToml = toml::from_str(text).unwrap();
        let (found, warnings) = found(&hooks, None, &BTreeMap::new(), Path::new("/w"));
        assert_eq!(found.len(), 1, "the observer is left out");
        let guard = &found[0];
        assert!(guard.matcher.admits(Some("shell")) && !guard.runnable());
        assert!(
            guard.why_not().contains("not a regular expression"),
            "{}",
            guard.why_not()
        );
        assert!(
            warnings.iter().any(|w| w.contains("PostToolUse hook")),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_relative_file_path_is_given_absolute_as_claude_code_gives_it() {
        let input = tool_input(
            &json!({"file_path": "src/a.rs", "content": "x"}),
            Path::new("/w"),
        );
        assert_eq!(input["file_path"], "/w/src/a.rs");
        let absolute = tool_input(&json!({"file_path": "/etc/x"}), Path::new("/w"));
        assert_eq!(absolute["file_path"], "/etc/x");
        let shell = tool_input(&json!({"command": "ls"}), Path::new("/w"));
        assert_eq!(shell, json!({"command": "ls"}));
    }
}

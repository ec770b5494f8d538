//! Approvals at the moment a call is about to run: what the call is to the
//! rules (its tool, its shell command, the workspace paths it writes), the
//! verdict, and — with nobody to ask yet — the refusal the model reads.
//! Every verdict goes into the call's receipt.

use std::path::Path;

use crate::approvals::{Approvals, Decision, SHELL_TOOL, Subject, receipt_line, refusal};
use crate::llm::ToolCall;
use crate::plugin::Writes;
use crate::tools::{Receipt, Standing, ToolOutcome, ToolRegistry, ToolStatus};

/// What the gate lets through.
pub(super) enum Gate {
    /// Run it; the line for its receipt.
    Run(String),
    /// Do not run it: the outcome the model gets.
    Refuse(Box<ToolOutcome>),
}

/// Decide `call` before it runs.
pub(super) fn check(
    approvals: &Approvals,
    call: &ToolCall,
    registry: &ToolRegistry,
    workspace: &Path,
    working_dir: &Path,
) -> Gate {
    let subject = subject(call, registry, workspace, working_dir);
    let verdict = approvals.decide(&subject);
    let line = receipt_line(&verdict, approvals.mode);
    if verdict.decision == Decision::Allow {
        return Gate::Run(line);
    }
    let text = refusal(&subject, &verdict);
    let standing = registry
        .get(&call.name)
        .map(|t| t.executor.standing(&call.name))
        .unwrap_or_else(|| Standing::host(&call.name));
    let mut outcome = ToolOutcome::with_status(ToolStatus::Denied, text);
    outcome.receipt = Some(Receipt {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        standing,
        programs: Vec::new(),
        approvals: vec![format!("{line}; nobody to ask, refused")],
        outcome: ToolStatus::Denied.outcome().into(),
        status: Some(ToolStatus::Denied),
    });
    Gate::Refuse(Box::new(outcome))
}

/// The call as the rules see it.
fn subject(
    call: &ToolCall,
    registry: &ToolRegistry,
    workspace: &Path,
    working_dir: &Path,
) -> Subject {
    let args = match &call.arguments {
        serde_json::Value::String(raw) => serde_json::from_str(raw).unwrap_or_default(),
        other => other.clone(),
    };
    let command = (call.name == SHELL_TOOL)
        .then(|| args["command"].as_str().map(String::from))
        .flatten();
    let paths = match registry.get(&call.name).map(|t| &t.spec.traits.writes) {
        Some(Writes::Paths(names)) => names
            .iter()
            .filter_map(|name| args[name.as_str()].as_str())
            .map(|p| relative(p, workspace, working_dir))
            .collect(),
        _ => Vec::new(),
    };
    Subject::Call {
        tool: call.name.clone(),
        command,
        paths,
    }
}

/// `path` relative to the workspace (as given when it is not inside it,
/// so no glob matches it).
fn relative(path: &str, workspace: &Path, working_dir: &Path) -> String {
    let full = working_dir.join(path);
    full.strip_prefix(workspace)
        .map(|rel| rel.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_judged_relative_to_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(relative("src/a.rs", ws, Path::new("/w")), "src/a.rs");
        assert_eq!(relative("a.rs", ws, Path::new("/w/src")), "src/a.rs");
        assert_eq!(relative("/w/src/a.rs", ws, Path::new("/w/x")), "src/a.rs");
        assert_eq!(relative("/etc/passwd", ws, Path::new("/w")), "/etc/passwd");
    }
}

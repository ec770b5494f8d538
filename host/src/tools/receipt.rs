//! A receipt for every tool call: who acted (the plugin, its version and
//! the SHA-256 of its component, or the MCP server, or the host), what it
//! was allowed and which rule allowed it (`file:key`, or a built-in
//! default), what it asked for and was refused, and every program it
//! started with the confinement it ran under and how it ended. Names only:
//! a variable's value never appears.

use serde::{Deserialize, Serialize};

use crate::plugin::policy::GrantSource;
use crate::plugin::{CallActivity, HttpExchange, LoadedPlugin, ModelUse, ProgramRun};

/// What kind of principal ran a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrincipalKind {
    /// A plugin's component.
    Plugin,
    /// An MCP server the operator configured.
    McpServer,
    /// sandcrab's own code (jobs, memory, subagents), or a name no tool
    /// has.
    Host,
}

impl std::fmt::Display for PrincipalKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PrincipalKind::Plugin => "plugin",
            PrincipalKind::McpServer => "mcp-server",
            PrincipalKind::Host => "host",
        })
    }
}

/// What a principal's calls run under: the host itself, unconfined by
/// design (its own code), or a sandbox mode. Written as one word
/// (`host`, `workspace-write`, `locked`, `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum RunsUnder {
    Host,
    Sandbox(crate::process::SandboxMode),
}

impl std::fmt::Display for RunsUnder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunsUnder::Host => f.write_str("host"),
            RunsUnder::Sandbox(mode) => mode.fmt(f),
        }
    }
}

impl From<RunsUnder> for String {
    fn from(under: RunsUnder) -> String {
        under.to_string()
    }
}

impl TryFrom<String> for RunsUnder {
    type Error = String;
    fn try_from(word: String) -> Result<Self, String> {
        match word.as_str() {
            "host" => Ok(RunsUnder::Host),
            mode => mode.parse().map(RunsUnder::Sandbox),
        }
    }
}

/// Who ran a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub kind: PrincipalKind,
    pub name: String,
    /// The plugin's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// SHA-256 of the plugin's component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_sha256: Option<String>,
    /// `builtin` or `external` (plugins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Who signed the plugin's component and manifest (`NAME
    /// (SHA256:…)`), as checked when it was loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

/// What a principal was allowed, before the call ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    pub principal: Principal,
    /// The sandbox mode in force.
    pub mode: RunsUnder,
    pub grants: Vec<GrantSource>,
    /// Requested and refused, each with the rule that refused it.
    pub denials: Vec<String>,
    /// Programs that run for the principal whatever the call (an MCP
    /// server's own program).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standing_programs: Vec<ProgramRun>,
}

impl Standing {
    /// A host-native tool (sandcrab's own code: jobs, memory, subagents),
    /// or a name no tool has.
    pub fn host(tool: &str) -> Self {
        Standing {
            principal: Principal {
                kind: PrincipalKind::Host,
                name: tool.into(),
                version: None,
                component_sha256: None,
                origin: None,
                signer: None,
            },
            mode: RunsUnder::Host,
            grants: Vec::new(),
            denials: Vec::new(),
            standing_programs: Vec::new(),
        }
    }

    /// A plugin's standing.
    pub fn plugin(plugin: &LoadedPlugin) -> Self {
        Standing {
            principal: Principal {
                kind: PrincipalKind::Plugin,
                name: plugin.name().into(),
                version: Some(plugin.manifest.version.clone()),
                component_sha256: Some(plugin.component_sha256.clone()),
                origin: Some(plugin.origin.label().into()),
                signer: plugin.signer.clone(),
            },
            mode: RunsUnder::Sandbox(plugin.sandbox().sandbox_mode),
            grants: plugin.decision.sources.clone(),
            denials: plugin.decision.denied.clone(),
            standing_programs: Vec::new(),
        }
    }
}

/// The receipt of one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub call_id: String,
    pub tool: String,
    #[serde(flatten)]
    pub standing: Standing,
    /// The programs the call started, or was refused.
    pub programs: Vec<ProgramRun>,
    /// The HTTP requests the call made, or was refused (method, origin,
    /// status, sizes; never a header's value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<HttpExchange>,
    /// Requests beyond the most a receipt lists, counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http_unlisted: u64,
    /// Model calls made for the call's MCP server (sampling): who asked,
    /// the model, the tokens (never a prompt or an answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_calls: Vec<ModelUse>,
    /// File accesses the host refused (what it keeps, protected paths),
    /// each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_refused: Vec<String>,
    /// How the approval rules decided the call, and what became of
    /// asking (receipts written before records hold the line said then).
    #[serde(default)]
    pub approvals: Vec<sandcrab_core::approval::Approval>,
    /// How the call ended: `ok`, `error` or `timed-out` (or, for a call
    /// that became a job, `background job ID`).
    pub outcome: String,
    /// The call's typed status (receipts recorded before it existed have
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<super::ToolStatus>,
    /// The hooks that judged or watched the call, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRecord>,
}

/// What a hook said, as a receipt keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookVerdict {
    /// It let the call through without asking.
    Allow,
    /// It had the operator asked.
    Ask,
    /// It refused the call (or blocked what its event is about).
    Deny,
    /// It ran and decided nothing.
    Pass,
    /// It crashed, timed out or answered garbage.
    Failed,
    /// It was not run: the operator has not consented to it as it is.
    NotConsented,
}

impl HookVerdict {
    /// Whether the hook gave no usable answer (it failed, or may not run).
    pub fn is_failure(self) -> bool {
        matches!(self, HookVerdict::Failed | HookVerdict::NotConsented)
    }

    /// Its word.
    pub fn word(self) -> &'static str {
        match self {
            HookVerdict::Allow => "allow",
            HookVerdict::Ask => "ask",
            HookVerdict::Deny => "deny",
            HookVerdict::Pass => "pass",
            HookVerdict::Failed => "failed",
            HookVerdict::NotConsented => "not-consented",
        }
    }
}

/// One hook's part in a call (or in a turn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRecord {
    /// The event it ran at (`PreToolUse`).
    pub event: String,
    /// Its command as configured.
    pub command: String,
    /// Whose it is: `operator` or `project`.
    pub origin: String,
    /// The SHA-256 of its command and the files it runs.
    pub sha256: String,
    pub verdict: HookVerdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was run (RFC 3339).
    pub at: String,
    pub duration_ms: u64,
    /// Its program, with how it was confined and how it ended (None:
    /// it was not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramRun>,
}

impl HookRecord {
    /// One line for receipts and `sandcrab audit`.
    pub fn line(&self) -> String {
        let ran = match &self.program {
            Some(p) => format!(" — {}", program_line(p)),
            None => String::new(),
        };
        format!(
            "{} hook ({}, sha256 {}) {}{}{} in {} ms{ran}",
            self.event,
            self.origin,
            &self.sha256[..self.sha256.len().min(12)],
            self.verdict.word(),
            match &self.reason {
                Some(r) => format!(": {r}"),
                None => String::new(),
            },
            if self.command.is_empty() {
                String::new()
            } else {
                format!(" [{}]", self.command)
            },
            self.duration_ms
        )
    }
}

impl Receipt {
    /// The receipt of call `call_id` of `tool`, run (or refused) by who
    /// `standing` names, which ended with `status`: nothing started,
    /// nothing asked yet.
    pub fn of(call_id: &str, tool: &str, standing: Standing, status: super::ToolStatus) -> Self {
        Receipt {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            standing,
            programs: Vec::new(),
            http: Vec::new(),
            http_unlisted: 0,
            model_calls: Vec::new(),
            files_refused: Vec::new(),
            approvals: Vec::new(),
            outcome: status.outcome().into(),
            status: Some(status),
            hooks: Vec::new(),
        }
    }

    /// The receipt with what its call did, as it happened: the programs
    /// it started, its HTTP requests, the files refused to it, the model
    /// calls made for it.
    pub fn with_activity(mut self, activity: CallActivity) -> Self {
        self.programs = activity.programs;
        self.http = activity.http;
        self.http_unlisted = activity.http_unlisted;
        self.files_refused = activity.files_refused;
        self.model_calls = activity.model_calls;
        self
    }

    /// One line for `sandcrab audit`: who decided, tool, how it ended,
    /// grants, ran under.
    pub fn summary(&self) -> String {
        let who = match (
            &self.standing.principal.version,
            &self.standing.principal.component_sha256,
        ) {
            (Some(v), Some(sha)) => format!(
                "{} {} ({}, sha256 {}{})",
                self.standing.principal.name,
                v,
                self.standing.principal.kind,
                &sha[..sha.len().min(12)],
                match &self.standing.principal.signer {
                    Some(signer) => format!(", signed by {signer}"),
                    None => String::new(),
                }
            ),
            _ => format!(
                "{} ({})",
                self.standing.principal.name, self.standing.principal.kind
            ),
        };
        let mut allowed: Vec<String> = self
            .standing
            .grants
            .iter()
            .filter(|g| g.capability != "limits")
            .map(|g| format!("{} {} [{}]", g.capability, g.value, g.source))
            .collect();
        allowed.dedup();
        let ran: Vec<String> = self
            .programs
            .iter()
            .chain(&self.standing.standing_programs)
            .map(program_line)
            .collect();
        let mut requests: Vec<String> = self.http.iter().map(HttpExchange::line).collect();
        if self.http_unlisted > 0 {
            requests.push(format!("and {} more not listed", self.http_unlisted));
        }
        let mut refused = if self.files_refused.is_empty() {
            String::new()
        } else {
            format!(" — refused: {}", self.files_refused.join("; "))
        };
        for hook in &self.hooks {
            refused.push_str(" — ");
            refused.push_str(&hook.line());
        }
        if !self.model_calls.is_empty() {
            let calls: Vec<String> = self.model_calls.iter().map(ModelUse::line).collect();
            refused.push_str(&format!(" — model calls: {}", calls.join("; ")));
        }
        // Who decided comes first: the operator's answer, a rule or a mode.
        let decided = match self.approvals.first() {
            Some(approval) => format!("{} — ", approval.decision_phrase()),
            None => String::new(),
        };
        // How it ended, in the status's own word (`denied`, `interrupted`);
        // receipts written before statuses say ok/error.
        let ended = match self.status {
            Some(status) => status.name(),
            None => self.outcome.clone(),
        };
        format!(
            "{decided}{} by {} — {ended} — grants: {} — ran under: {}{}{}{refused}",
            self.tool,
            who,
            if allowed.is_empty() {
                "nothing beyond the host".into()
            } else {
                allowed.join("; ")
            },
            self.standing.mode,
            if ran.is_empty() {
                String::new()
            } else {
                format!(" — programs: {}", ran.join("; "))
            },
            if requests.is_empty() {
                String::new()
            } else {
                format!(" — http: {}", requests.join("; "))
            }
        )
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn program_line(p: &ProgramRun) -> String {
    match (&p.refused, &p.confinement) {
        (Some(why), _) => format!("{} REFUSED ({why})", p.program),
        (None, Some(c)) => format!(
            "{} [{}, network {}, writes {}] {}",
            p.program,
            c.mode,
            if c.network { "yes" } else { "no" },
            if c.write.is_empty() {
                "nothing".into()
            } else {
                c.write.join(", ")
            },
            match (p.exit_code, p.signal, p.timed_out) {
                (_, _, true) => "timed out".to_string(),
                (Some(code), _, _) => format!("exit {code}"),
                (None, Some(sig), _) => format!("signal {sig}"),
                _ => "did not end (stopped with its call)".to_string(),
            }
        ),
        (None, None) => p.program.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcrab_core::approval::{Approval, ApprovalRecord, DecidedBy, Decision, Mode};
    use serde_json::json;

    /// The JSON of a receipt is what `sandcrab audit`, the bridge, MCP
    /// clients and recordings read: pinned field by field. A receipt
    /// written before approvals were records reads back, and writes back,
    /// unchanged.
    #[test]
    fn a_receipts_json_is_pinned_and_old_receipts_read_back_unchanged() {
        let mut receipt = Receipt::of(
            "c1",
            "shell",
            Standing::host("shell"),
            super::super::ToolStatus::Denied,
        );
        receipt
            .approvals
            .push(Approval::Record(ApprovalRecord::verdict(
                Decision::Deny,
                DecidedBy::Mode { mode: Mode::Never },
            )));
        assert_eq!(
            serde_json::to_value(&receipt).unwrap(),
            json!({
                "call_id": "c1",
                "tool": "shell",
                "principal": {"kind": "host", "name": "shell"},
                "mode": "host",
                "grants": [],
                "denials": [],
                "programs": [],
                "approvals": [{"decision": "deny", "by": {"kind": "mode", "mode": "never"}}],
                "outcome": "error",
                "status": "denied"
            })
        );
        let old = json!({
            "call_id": "c1",
            "tool": "echo",
            "principal": {"kind": "host", "name": "echo"},
            "mode": "host",
            "grants": [],
            "denials": [],
            "programs": [],
            "approvals": ["allow by mode never"],
            "outcome": "ok",
            "status": "ok"
        });
        let read: Receipt = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(read.standing.principal.kind, PrincipalKind::Host);
        // The mode is one word, as it always was.
        let mut confined = old.clone();
        confined["mode"] = json!("workspace-write");
        confined["principal"]["kind"] = json!("mcp-server");
        let back: Receipt = serde_json::from_value(confined.clone()).unwrap();
        assert_eq!(
            back.standing.mode,
            RunsUnder::Sandbox(crate::process::SandboxMode::WorkspaceWrite)
        );
        assert_eq!(serde_json::to_value(&back).unwrap(), confined);
        confined["mode"] = json!("sometimes");
        assert!(serde_json::from_value::<Receipt>(confined).is_err());
        assert_eq!(read.approvals[0].line(), "allow by mode never");
        assert_eq!(serde_json::to_value(&read).unwrap(), old);
    }
}

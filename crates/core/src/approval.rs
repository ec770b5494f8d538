//! What the approval rules say of a call, how far an operator's yes
//! reaches, and the record of it all that a receipt carries. The human
//! line is rendered from the record at the edge ([`ApprovalRecord::line`]);
//! the record itself holds no prose.

use serde::{Deserialize, Serialize};

/// What a rule says about a call, ordered by strictness: when several
/// rules match, the strictest (the greatest) wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it without asking.
    Allow,
    /// Ask the operator first.
    Ask,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// The word the configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// When nothing in the rules speaks to a call (ordered from least to most
/// asking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing asks (what the policy grants runs, unless a rule says
    /// otherwise): the default until a session can ask.
    #[default]
    Never,
    /// Ask before shell commands no rule allows, and before anything
    /// beyond a plugin's grants.
    OnRisk,
    /// Ask before every tool call no rule allows.
    Always,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Never, Mode::OnRisk, Mode::Always];

    /// The word the configuration and `--approvals` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Never => "never",
            Mode::OnRisk => "on-risk",
            Mode::Always => "always",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown approvals mode '{s}': use never, on-risk or always"))
    }
}

/// How far a yes reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// This call only.
    Once,
    /// Calls matching the offered rule, for the rest of this conversation.
    Session,
    /// Calls matching the offered rule, from now on in this workspace: the
    /// rule is written to the operator's configuration file.
    Workspace,
}

/// What gave a call its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DecidedBy {
    /// A rule: where it was written (`FILE:approvals.rules[N]`, a flag)
    /// and what it matches.
    Rule { at: String, rule: String },
    /// No rule spoke to the call: the mode.
    Mode { mode: Mode },
    /// The operator made the call themselves (`sandcrab tool call`).
    Operator,
    /// A hook the operator consented to (`PreToolUse`,
    /// `PermissionRequest`): its event and command.
    Hook { event: String, command: String },
}

/// What became of a call the verdict said to ask about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
pub enum Answered {
    /// Nobody could be asked (a scripted run, a client that cannot
    /// answer): refused.
    NobodyToAsk,
    /// The operator said yes through `via` (the terminal, the bridge, an
    /// MCP client) at `at`; how far the yes reaches.
    Allowed {
        via: String,
        at: String,
        reach: Reach,
    },
    /// The operator said no through `via` at `at`.
    Denied { via: String, at: String },
}

/// How far an operator's yes reached, as it was kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reach {
    /// This call.
    Once,
    /// `rule` for the rest of the conversation.
    Conversation { rule: String },
    /// `rule` from now on in this workspace, written to the operator's
    /// file at `written_at`.
    Workspace { rule: String, written_at: String },
    /// Meant to reach further, but `rule` could not be kept (written to
    /// the operator's file, or said as a rule at all): this call only.
    Unwritten { rule: String, error: String },
}

/// The approval of one call: the verdict, what gave it, and — when it
/// said to ask — what became of asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub decision: Decision,
    pub by: DecidedBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answered>,
}

impl ApprovalRecord {
    /// The verdict alone (nobody asked yet).
    pub fn verdict(decision: Decision, by: DecidedBy) -> Self {
        ApprovalRecord {
            decision,
            by,
            answer: None,
        }
    }

    /// Whether the call may run.
    pub fn allows(&self) -> bool {
        match &self.answer {
            Some(Answered::Allowed { .. }) => true,
            Some(_) => false,
            None => self.decision == Decision::Allow,
        }
    }

    /// The verdict in words: `deny by rule FILE:… (shell touch)`,
    /// `allow by mode never`.
    pub fn verdict_line(&self) -> String {
        let by = match &self.by {
            DecidedBy::Rule { at, rule } => format!("rule {at} ({rule})"),
            DecidedBy::Mode { mode } => format!("mode {}", mode.as_str()),
            DecidedBy::Operator => "the operator's own call".to_string(),
            DecidedBy::Hook { event, command } => format!("the {event} hook `{command}`"),
        };
        format!("{} by {by}", self.decision.as_str())
    }

    /// Who decided, first and in a few words, for a list of calls
    /// (`sandcrab audit`): `denied by the operator (chat at T)`,
    /// `approved once by the operator (…)`, `allowed by rule FILE:… (R)`,
    /// `refused: nobody to ask`.
    pub fn decision_phrase(&self) -> String {
        let rule_or_mode = |verb: &str| match &self.by {
            DecidedBy::Rule { at, rule } => format!("{verb} by rule {at} ({rule})"),
            DecidedBy::Mode { mode } => format!("{verb} by mode {}", mode.as_str()),
            DecidedBy::Operator => format!("{verb}: the operator's own call"),
            DecidedBy::Hook { event, command } => format!("{verb} by the {event} hook `{command}`"),
        };
        match &self.answer {
            None => match self.decision {
                Decision::Allow => rule_or_mode("allowed"),
                Decision::Deny => rule_or_mode("denied"),
                Decision::Ask => rule_or_mode("to be asked"),
            },
            Some(Answered::NobodyToAsk) => {
                format!("refused: nobody to ask ({})", rule_or_mode("ask"))
            }
            Some(Answered::Denied { via, at }) => {
                format!("denied by the operator ({via} at {at})")
            }
            Some(Answered::Allowed { via, at, reach }) => {
                let reach = match reach {
                    Reach::Once => "once".to_string(),
                    Reach::Conversation { rule } => format!("for this conversation ({rule})"),
                    Reach::Workspace { rule, .. } => {
                        format!("always in this workspace ({rule})")
                    }
                    Reach::Unwritten { rule, .. } => {
                        format!("once (the rule for {rule} could not be kept)")
                    }
                };
                format!("approved {reach} by the operator ({via} at {at})")
            }
        }
    }

    /// The whole record in one line, for people (`sandcrab audit`, the
    /// chat's receipt view).
    pub fn line(&self) -> String {
        let verdict = self.verdict_line();
        match &self.answer {
            None => verdict,
            Some(Answered::NobodyToAsk) => format!("{verdict}; nobody to ask, refused"),
            Some(Answered::Denied { via, at }) => {
                format!("{verdict}; denied by the operator via {via} at {at}")
            }
            Some(Answered::Allowed { via, at, reach }) => {
                let reach = match reach {
                    Reach::Once => "once".to_string(),
                    Reach::Conversation { rule } => format!("{rule} for this conversation"),
                    Reach::Workspace { rule, written_at } => {
                        format!("{rule} always in this workspace: rule written at {written_at}")
                    }
                    Reach::Unwritten { rule, error } => {
                        format!("once; the rule for {rule} could not be kept: {error}")
                    }
                };
                format!("{verdict}; allowed by the operator via {via} at {at} ({reach})")
            }
        }
    }
}

/// One entry of a receipt's approvals: a record, or — in receipts written
/// before records existed — the line that was written then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Approval {
    Record(ApprovalRecord),
    Written(String),
}

impl Approval {
    /// The entry in words.
    pub fn line(&self) -> String {
        match self {
            Approval::Record(record) => record.line(),
            Approval::Written(line) => line.clone(),
        }
    }

    /// Who decided, in a few words (see
    /// [`ApprovalRecord::decision_phrase`]).
    pub fn decision_phrase(&self) -> String {
        match self {
            Approval::Record(record) => record.decision_phrase(),
            Approval::Written(line) => line.clone(),
        }
    }

    /// The record, when it is one.
    pub fn record(&self) -> Option<&ApprovalRecord> {
        match self {
            Approval::Record(record) => Some(record),
            Approval::Written(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_strictest_decision_is_the_greatest() {
        assert_eq!(
            [Decision::Allow, Decision::Deny, Decision::Ask]
                .iter()
                .max(),
            Some(&Decision::Deny)
        );
        assert!(Decision::Allow < Decision::Ask && Decision::Ask < Decision::Deny);
        assert_eq!("on-risk".parse::<Mode>(), Ok(Mode::OnRisk));
        assert!("sometimes".parse::<Mode>().unwrap_err().contains("on-risk"));
    }

    /// The record's JSON is pinned, and so are the lines rendered from it:
    /// they are the words the receipts said before records existed.
    #[test]
    fn a_record_is_data_and_renders_the_line_receipts_always_said() {
        let asked = ApprovalRecord {
            decision: Decision::Ask,
            by: DecidedBy::Mode { mode: Mode::OnRisk },
            answer: Some(Answered::Allowed {
                via: "terminal".into(),
                at: "2026-11-26T12:00:00Z".into(),
                reach: Reach::Conversation {
                    rule: "shell:git push".into(),
                },
            }),
        };
        assert_eq!(
            serde_json::to_value(&asked).unwrap(),
            json!({
                "decision": "ask",
                "by": {"kind": "mode", "mode": "on-risk"},
                "answer": {
                    "answer": "allowed",
                    "via": "terminal",
                    "at": "2026-11-26T12:00:00Z",
                    "reach": {"kind": "conversation", "rule": "shell:git push"}
                }
            })
        );
        assert_eq!(
            asked.line(),
            "ask by mode on-risk; allowed by the operator via terminal at 2026-11-26T12:00:00Z (shell:git push for this conversation)"
        );
        assert!(asked.allows());
        let denied = ApprovalRecord {
            decision: Decision::Deny,
            by: DecidedBy::Rule {
                at: "config.toml:approvals.rules[0]".into(),
                rule: "shell touch".into(),
            },
            answer: None,
        };
        assert_eq!(
            denied.line(),
            "deny by rule config.toml:approvals.rules[0] (shell touch)"
        );
        assert!(!denied.allows());
        let nobody = ApprovalRecord {
            answer: Some(Answered::NobodyToAsk),
            ..ApprovalRecord::verdict(Decision::Ask, DecidedBy::Mode { mode: Mode::Always })
        };
        assert_eq!(nobody.line(), "ask by mode always; nobody to ask, refused");
        assert!(!nobody.allows());
    }

    #[test]
    fn receipts_written_before_records_still_read() {
        let read: Vec<Approval> = serde_json::from_value(
            json!(["allow by mode never", {"decision": "allow", "by": {"kind": "operator"}}]),
        )
        .unwrap();
        assert_eq!(read[0], Approval::Written("allow by mode never".into()));
        assert_eq!(read[0].line(), "allow by mode never");
        assert_eq!(read[1].line(), "allow by the operator's own call");
        assert!(read[1].record().is_some_and(ApprovalRecord::allows));
    }
}

//! Approvals: between "granted, runs" and "not granted, refused", a third
//! answer — ask the operator. This folder holds the rules (what they
//! match, what they decide, strictest wins, examples checked at load) and
//! the modes for calls no rule speaks to.
//!
//! ```toml
//! [[approvals.rules]]
//! shell = ["git", "status"]        # the start of the argument list
//! decision = "allow"                # allow | ask | deny
//! examples = ["git status --short"]
//! not_examples = ["git push"]
//!
//! [[approvals.rules]]
//! path = "src/**"                   # paths a file tool writes
//! decision = "allow"
//! ```
//!
//! In force: the operator's rules (and a rules file they name), the
//! project's ask and deny rules and `--approve` flags decide every tool
//! call of `run`, `chat` and `serve` sessions and of `mcp serve` clients.
//! `chat` asks on the terminal, `serve` through the bridge and `acp` the
//! editor, all through a [`PermissionQueue`]; `mcp serve` asks its client by
//! elicitation; `run` refuses, naming what would allow the call. An
//! "always in this workspace" answer is written to the operator's file as
//! a rule scoped to that workspace. Not built yet: grant rules.

mod command;
mod form;
mod gate;
mod glob;
mod preview;
mod queue;
mod rules;
mod subject;

pub use command::CommandLine;
pub use form::{FieldKind, FormError, FormField, FormQuestion};
pub use gate::{
    Approvals, describe_call, operator_denial, refusal, rules_from_flags, suggestion,
    unknown_tools, verdict_record,
};
pub use glob::Glob;
pub use preview::edit_diff;
pub use queue::{
    Answer, AnswerError, MAX_NOTE_CHARS, PermissionQueue, PermissionRequest, QueueEvent,
    ScopeOffer, Ticket, UnknownRequest,
};
pub use rules::{Matcher, Rule, RuleError, RuleSource, Rules, SHELL_TOOL, Subject, Verdict};
pub use sandcrab_core::approval::{
    Answered, Approval, ApprovalRecord, DecidedBy, Decision, Mode, Reach, Scope,
};
pub use subject::call_subject;

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
//!
//! [[approvals.rules]]
//! grant = "network"                 # a grant asked for at run time
//! decision = "ask"
//! ```
//!
//! Not yet wired: the agent loop, the asking channels (chat, bridge,
//! `run`, MCP) and the receipts' approvals (issue #26).

mod command;
mod decision;
mod glob;
mod rules;

pub use command::CommandLine;
pub use decision::{Decision, Mode};
pub use glob::Glob;
pub use rules::{Matcher, Origin, Rule, RuleError, Rules, SHELL_TOOL, Subject, Verdict};

//! What a front end supplies to the call path: how it judges a call (its
//! rules, and anything it adds), who it asks and how, where checkpoints
//! go, how a call runs and where its receipt is kept. Everything else is
//! the same for every front end.

use std::path::Path;

use async_trait::async_trait;

use crate::approvals::{
    ApprovalRecord, Approvals, Mode, Reach, Rules, Subject, Verdict, verdict_record,
};
use crate::checkpoint::FileChange;
use crate::tools::{PreparedCall, Receipt, ToolOutcome};

/// How a call was judged before anyone was asked: the verdict (what a
/// refusal names) and the record its receipt keeps.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub verdict: Verdict,
    pub record: ApprovalRecord,
}

impl Judgement {
    /// By `approvals`, with `more` rules (a conversation's answers)
    /// beside them.
    pub fn by_rules(approvals: &Approvals, subject: &Subject, more: Option<&Rules>) -> Self {
        Self::in_mode(&approvals.rules, approvals.mode, subject, more)
    }

    /// The verdict of `rules` (and `more` beside them) for `subject`, in
    /// `mode` for what no rule speaks to.
    pub fn in_mode(rules: &Rules, mode: Mode, subject: &Subject, more: Option<&Rules>) -> Self {
        let verdict = match more {
            Some(more) => rules.decide_with(more, subject, mode),
            None => rules.decide(subject, mode),
        };
        Judgement {
            record: verdict_record(&verdict, mode),
            verdict,
        }
    }

    /// The operator made the call themselves: it runs.
    pub fn operator() -> Self {
        let verdict = Verdict {
            decision: crate::approvals::Decision::Allow,
            rule: None,
        };
        Judgement {
            record: ApprovalRecord::verdict(
                verdict.decision,
                crate::approvals::DecidedBy::Operator,
            ),
            verdict,
        }
    }
}

/// The operator's answer, as a front end heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Yes, through `via` at `at`, reaching as far as `reach`.
    Allowed {
        via: String,
        at: String,
        reach: Reach,
    },
    /// No, through `via` at `at`, with the operator's note for the model.
    Denied {
        via: String,
        at: String,
        note: Option<String>,
    },
}

/// The hooks a front end runs, with who and where for their input.
pub struct HookScene<'a> {
    pub hooks: &'a crate::hooks::Hooks,
    pub facts: crate::hooks::Facts<'a>,
}

/// A front end of the call path.
#[async_trait]
pub trait CallFront: Send + Sync {
    /// The workspace the call's paths are judged in.
    fn workspace(&self) -> &Path;

    /// The hooks this front end runs (None: none here).
    fn hooks(&self) -> Option<HookScene<'_>> {
        None
    }

    /// `call` read again with `arguments` (a hook rewrote them); None
    /// where this front end cannot, and the call goes on as it was.
    fn reprepare(
        &self,
        _call: &PreparedCall,
        _arguments: &serde_json::Value,
    ) -> Option<PreparedCall> {
        None
    }

    /// Tell the operator something about the call (a hook that failed
    /// open).
    fn warn(&self, message: &str) {
        tracing::warn!("{message}");
    }

    /// A hook said `continue: false`: end the turn after this round, for
    /// `reason`.
    fn stop_turn(&self, reason: &str) {
        tracing::warn!("a hook stopped the turn: {reason}");
    }

    /// The recorded answer when this is a replay (None: run it live).
    async fn played(&self, _call: &PreparedCall) -> Option<ToolOutcome> {
        None
    }

    /// The verdict of the rules this front end holds for `subject`.
    fn judge(&self, subject: &Subject) -> Judgement;

    /// Put `call` to whoever this front end asks (None: nobody can be
    /// asked, and the call is refused).
    async fn ask(
        &self,
        call: &PreparedCall,
        subject: &Subject,
        judged: &ApprovalRecord,
    ) -> Option<Asked>;

    /// Keep the files `call` says it writes (nothing where there are no
    /// checkpoints).
    async fn checkpoint_before(&self, _call: &PreparedCall) {}

    /// What `call` changed of the files kept before it.
    async fn checkpoint_after(&self, _call: &PreparedCall) -> Vec<FileChange> {
        Vec::new()
    }

    /// Run `call` (given the network when `network`); its outcome carries
    /// a receipt.
    async fn run(&self, call: &PreparedCall, network: bool) -> ToolOutcome;

    /// Keep the call's outcome, receipt and all (a recording, a log).
    fn receipted(&self, _call: &PreparedCall, _outcome: &ToolOutcome) {}

    /// `call` was allowed and started, and its caller stopped waiting
    /// before it ended (an interrupt): keep its receipt, `interrupted`,
    /// with the decision that let it start. Called from a drop: it must
    /// not block.
    fn unfinished(&self, _call: &PreparedCall, _receipt: Receipt) {}
}

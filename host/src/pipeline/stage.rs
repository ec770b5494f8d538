//! The stages of a tool call, as data: their order is [`STAGES`], and a
//! call's [`super::Finished::trace`] says which of them it went through.

/// One stage of the call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// A replay answers the call from its recording; a live call goes on.
    Playback,
    /// PreToolUse hooks judge the call: refuse it, rewrite its arguments,
    /// let it through or have the operator asked.
    HooksBefore,
    /// The approval rules decide; when they say to ask, the front end
    /// asks whoever it asks. A refusal skips to the receipt.
    Approve,
    /// The files the call says it writes are kept, so `/undo` can put
    /// them back.
    CheckpointBefore,
    /// The tool runs: inline, or as a background job.
    Run,
    /// What the call changed of the files kept before it.
    CheckpointAfter,
    /// PostToolUse hooks see the result, and may tell the model something.
    HooksAfter,
    /// The approval joins the call's receipt, and the front end keeps it.
    Receipt,
}

/// Every stage, in the order a call goes through them.
pub const STAGES: [Stage; 8] = [
    Stage::Playback,
    Stage::HooksBefore,
    Stage::Approve,
    Stage::CheckpointBefore,
    Stage::Run,
    Stage::CheckpointAfter,
    Stage::HooksAfter,
    Stage::Receipt,
];

impl Stage {
    /// Its name, for logs and `sandcrab` documentation.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Playback => "playback",
            Stage::HooksBefore => "hooks-before",
            Stage::Approve => "approve",
            Stage::CheckpointBefore => "checkpoint-before",
            Stage::Run => "run",
            Stage::CheckpointAfter => "checkpoint-after",
            Stage::HooksAfter => "hooks-after",
            Stage::Receipt => "receipt",
        }
    }

    /// Whether a refused call still goes through it.
    pub(super) fn runs_after_refusal(self) -> bool {
        self == Stage::Receipt
    }
}

//! The session as a front end of the call path: a replay answers from its
//! recording, the rules are the session's with this conversation's
//! answers beside them, the operator is asked through the session's
//! queue, checkpoints are the session's, a call runs inline or as a job
//! with its live output as events, and its answer is recorded.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::playback::Played;
use super::recording::{Entry, ToolAnswer};
use super::session::Session;
use crate::approvals::{ApprovalRecord, Subject};
use crate::checkpoint::FileChange;
use crate::llm::ToolCall;
use crate::pipeline::{Asked, CallFront, Judgement};
use crate::plugin::ActivityLog;
use crate::tools::{PreparedCall, Receipt, ToolOutcome, ToolRegistry};

/// One call of the session, on its way through the call path.
pub(super) struct SessionFront<'a> {
    pub session: &'a Arc<Session>,
    pub registry: ToolRegistry,
    /// The call as the model made it (what a recording is keyed by).
    pub call: &'a ToolCall,
    /// What the call's programs and requests did, as they happen (kept
    /// here so an interrupted call's receipt still lists them).
    pub activity: ActivityLog,
}

#[async_trait]
impl CallFront for SessionFront<'_> {
    fn workspace(&self) -> &Path {
        &self.session.workspace
    }

    fn hooks(&self) -> Option<crate::pipeline::HookScene<'_>> {
        // A replay runs no hook: its calls are answered whole from the
        // recording, before this stage.
        if self.session.playback.is_some() {
            return None;
        }
        Some(crate::pipeline::HookScene {
            hooks: &self.session.config.hooks,
            facts: self.session.hook_facts(),
        })
    }

    fn reprepare(
        &self,
        call: &PreparedCall,
        arguments: &serde_json::Value,
    ) -> Option<PreparedCall> {
        let place = crate::tools::CallPlace {
            workspace: &self.session.workspace,
            working_dir: &self.session.working_dir,
        };
        let mut again = PreparedCall::new(&call.id, &call.name, arguments, &self.registry, place);
        // What the model sent is what its recording is keyed by.
        again.raw = call.raw.clone();
        Some(again)
    }

    fn warn(&self, message: &str) {
        self.session.warn(message);
    }

    fn stop_turn(&self, reason: &str) {
        if let Ok(mut stop) = self.session.hook_stop.lock() {
            stop.get_or_insert_with(|| reason.to_string());
        }
    }

    async fn played(&self, _call: &PreparedCall) -> Option<ToolOutcome> {
        let playback = self.session.playback.as_ref()?;
        let name = self.call.name.as_str();
        if self.session.is_own_tool(name) && !PLAYED_BACK_OWN_TOOLS.contains(&name) {
            return None;
        }
        match playback.tool_outcome(self.call) {
            Played::Outcome(outcome) => Some(*outcome),
            Played::Interrupt => {
                self.session.interrupt();
                std::future::pending().await
            }
        }
    }

    fn judge(&self, subject: &Subject) -> Judgement {
        let rules = &self.session.config.approvals.rules;
        let mode = self.session.approval_mode();
        // This conversation's answers count beside the rules (none if
        // their lock was poisoned).
        match self.session.granted.lock() {
            Ok(granted) => Judgement::in_mode(rules, mode, subject, Some(&granted)),
            Err(_) => Judgement::in_mode(rules, mode, subject, None),
        }
    }

    async fn ask(
        &self,
        call: &PreparedCall,
        subject: &Subject,
        judged: &ApprovalRecord,
    ) -> Option<Asked> {
        super::approval_gate::ask(self.session, call, subject, judged).await
    }

    async fn checkpoint_before(&self, call: &PreparedCall) {
        self.session.before_writes(call).await;
    }

    async fn checkpoint_after(&self, call: &PreparedCall) -> Vec<FileChange> {
        self.session.after_writes(&call.id).await
    }

    async fn run(&self, call: &PreparedCall, network: bool) -> ToolOutcome {
        self.session
            .dispatched(self.registry.clone(), call, network, self.activity.clone())
            .await
    }

    fn receipted(&self, call: &PreparedCall, outcome: &ToolOutcome) {
        self.session.record(Entry::Tool(Box::new(ToolAnswer::of(
            &call.id, &call.name, outcome,
        ))));
    }

    fn unfinished(&self, call: &PreparedCall, mut receipt: Receipt) {
        if let Ok(activity) = self.activity.lock() {
            receipt = receipt.with_activity(activity.clone());
        }
        if let Ok(mut unfinished) = self.session.unfinished.lock() {
            unfinished.insert(call.id.clone(), receipt);
        }
    }
}

/// The session's own tools whose answers are played back rather than run
/// again: they change nothing of the session, and their answer depends on
/// a service a replay must not call (`memory_read` by meaning).
const PLAYED_BACK_OWN_TOOLS: &[&str] = &["memory_read"];

//! Taking one prepared call through [`STAGES`].

use crate::approvals::{Answered, Approval, Decision, call_subject, operator_denial, refusal};
use crate::checkpoint::FileChange;
use crate::tools::{PreparedCall, Receipt, ToolOutcome, ToolStatus};

use super::front::{Asked, CallFront};
use super::hooked::{self, Before, HookNotes};
use super::stage::{STAGES, Stage};
use crate::hooks::Decided;

/// What became of a call.
#[derive(Debug)]
pub struct Finished {
    /// Its outcome, full (the model's view is cut later); its receipt
    /// carries the approval.
    pub outcome: ToolOutcome,
    /// The files it changed.
    pub changes: Vec<FileChange>,
    /// The stages it went through, in order.
    pub trace: Vec<Stage>,
}

/// Where a call stands between stages.
enum Flow {
    /// On to the next stage.
    Next,
    /// Refused: only the stages that run after a refusal.
    Refused,
    /// Answered from a recording: nothing more.
    Played,
}

/// A call that was allowed and has no receipt yet. If the caller stops
/// waiting (an interrupt drops the call path), it still leaves a receipt:
/// `interrupted`, with the decision that let it start and the hooks that
/// judged it.
struct Unreceipted<'a> {
    front: &'a dyn CallFront,
    call: &'a PreparedCall,
    approval: Option<crate::approvals::ApprovalRecord>,
    hooks: HookNotes,
    started: bool,
}

impl Drop for Unreceipted<'_> {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        let Some(record) = self.approval.take() else {
            return;
        };
        let call = self.call;
        let mut receipt = Receipt::of(
            &call.id,
            &call.name,
            call.standing.clone(),
            ToolStatus::Interrupted,
        );
        receipt.approvals.push(Approval::Record(record));
        receipt.hooks = std::mem::take(&mut self.hooks.records);
        self.front.unfinished(call, receipt);
    }
}

/// Take `call` through every stage, with `front` supplying what differs.
pub async fn run_call(front: &dyn CallFront, call: &PreparedCall) -> Finished {
    let mut flow = Flow::Next;
    let mut trace = Vec::with_capacity(STAGES.len());
    let mut approval = Unreceipted {
        front,
        call,
        approval: None,
        hooks: HookNotes::default(),
        started: false,
    };
    // The call as a PreToolUse hook rewrote it, if one did.
    let mut rewritten: Option<PreparedCall> = None;
    let mut network = false;
    let mut outcome = None;
    let mut changes = Vec::new();
    for stage in STAGES {
        match flow {
            Flow::Played => break,
            Flow::Refused if !stage.runs_after_refusal() => continue,
            _ => {}
        }
        trace.push(stage);
        let current = rewritten.as_ref().unwrap_or(call);
        match stage {
            Stage::Playback => {
                if let Some(played) = front.played(call).await {
                    outcome = Some(played);
                    flow = Flow::Played;
                }
            }
            Stage::HooksBefore => match hooked::before(front, call, &mut approval.hooks).await {
                Before::Go(again) => rewritten = again,
                Before::Refused(refused) => {
                    outcome = Some(refused);
                    flow = Flow::Refused;
                }
            },
            Stage::Approve => {
                let (record, refused, again) = approve(front, current, &mut approval.hooks).await;
                if again.is_some() {
                    rewritten = again;
                }
                let current = rewritten.as_ref().unwrap_or(call);
                network = current.asks_network;
                approval.approval = Some(record);
                match refused {
                    Some(refused) => {
                        outcome = Some(refused);
                        flow = Flow::Refused;
                    }
                    None => approval.started = true,
                }
            }
            Stage::CheckpointBefore => front.checkpoint_before(current).await,
            Stage::Run => outcome = Some(front.run(current, network).await),
            Stage::CheckpointAfter => changes = front.checkpoint_after(current).await,
            Stage::HooksAfter => {
                if let Some(done) = outcome.as_mut() {
                    hooked::after(front, current, done, &mut approval.hooks).await;
                }
            }
            Stage::Receipt => {
                let done = outcome.get_or_insert_with(|| unreachable_outcome(call));
                let receipt = done.receipt.get_or_insert_with(|| {
                    Receipt::of(&call.id, &call.name, call.standing.clone(), done.status)
                });
                approval.started = false;
                if let Some(record) = approval.approval.take() {
                    receipt.approvals.insert(0, Approval::Record(record));
                }
                receipt.hooks = std::mem::take(&mut approval.hooks.records);
                front.receipted(current, done);
            }
        }
    }
    Finished {
        outcome: outcome.unwrap_or_else(|| unreachable_outcome(call)),
        changes,
        trace,
    }
}

/// The approval of `call`, and the outcome of its refusal when it is
/// refused. A PreToolUse hook's allow or ask stands in for the verdict of
/// the mode and of allow and ask rules (a deny rule still refuses); a
/// PermissionRequest hook answers before the operator is asked.
async fn approve(
    front: &dyn CallFront,
    call: &PreparedCall,
    hooks: &mut HookNotes,
) -> (
    crate::approvals::ApprovalRecord,
    Option<ToolOutcome>,
    Option<PreparedCall>,
) {
    let mut rewritten = None;
    let subject = call_subject(call, front.workspace());
    let judged = front.judge(&subject);
    let mut verdict = judged.verdict;
    let mut record = judged.record;
    if let Some((decided, by)) = hooks.decided.take()
        && verdict.decision != Decision::Deny
    {
        verdict.decision = match decided {
            Decided::Allow => Decision::Allow,
            _ => Decision::Ask,
        };
        verdict.rule = None;
        record = crate::approvals::ApprovalRecord::verdict(verdict.decision, by);
    }
    let refused = match verdict.decision {
        Decision::Allow => None,
        Decision::Deny => Some(refusal(&subject, &verdict)),
        Decision::Ask => match hooked::permission(front, call, hooks).await {
            Some(answer) if answer.decided == Decided::Deny => {
                record = crate::approvals::ApprovalRecord::verdict(Decision::Deny, answer.by);
                Some(format!(
                    "Refused by a PermissionRequest hook: {}",
                    answer.reason.unwrap_or_default()
                ))
            }
            Some(answer) => match answer.rewritten {
                // Rewritten: the rules judge what will run (a deny rule
                // still refuses it).
                Some(again) => {
                    let subject = call_subject(&again, front.workspace());
                    let judged = front.judge(&subject);
                    if judged.verdict.decision == Decision::Deny {
                        record = judged.record;
                        Some(refusal(&subject, &judged.verdict))
                    } else {
                        record =
                            crate::approvals::ApprovalRecord::verdict(Decision::Allow, answer.by);
                        rewritten = Some(again);
                        None
                    }
                }
                None => {
                    record = crate::approvals::ApprovalRecord::verdict(Decision::Allow, answer.by);
                    None
                }
            },
            None => match front.ask(call, &subject, &record).await {
                None => {
                    record.answer = Some(Answered::NobodyToAsk);
                    Some(refusal(&subject, &verdict))
                }
                Some(Asked::Allowed { via, at, reach }) => {
                    record.answer = Some(Answered::Allowed { via, at, reach });
                    None
                }
                Some(Asked::Denied { via, at, note }) => {
                    record.answer = Some(Answered::Denied { via, at });
                    Some(operator_denial(note.as_deref()))
                }
            },
        },
    };
    let refused = refused.map(|text| ToolOutcome::with_status(ToolStatus::Denied, text));
    (record, refused, rewritten)
}

/// A call that reached its receipt without an outcome: no stage that
/// ends a call ran, which the stage list rules out.
fn unreachable_outcome(call: &PreparedCall) -> ToolOutcome {
    ToolOutcome::with_status(
        ToolStatus::Failed,
        format!("{} was not run (no stage ran it)", call.name),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::approvals::{
        ApprovalRecord, Approvals, Mode, Reach, Rules, Subject, rules_from_flags,
    };
    use crate::pipeline::Judgement;
    use crate::tools::{CallPlace, PreparedCall};

    /// A front end that answers as told and notes which of its hooks ran.
    struct Scripted {
        approvals: Approvals,
        answer: Option<Asked>,
        played: Option<ToolOutcome>,
        hooks: Mutex<Vec<&'static str>>,
    }

    impl Scripted {
        fn new(mode: Mode, allow: &[&str], answer: Option<Asked>) -> Self {
            let flags: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
            Scripted {
                approvals: Approvals {
                    rules: rules_from_flags(&flags).unwrap_or_else(|_| Rules::default()),
                    mode,
                },
                answer,
                played: None,
                hooks: Mutex::default(),
            }
        }

        fn hook(&self, name: &'static str) {
            self.hooks.lock().unwrap().push(name);
        }
    }

    #[async_trait::async_trait]
    impl CallFront for Scripted {
        fn workspace(&self) -> &Path {
            Path::new("/w")
        }
        async fn played(&self, _: &PreparedCall) -> Option<ToolOutcome> {
            self.played.clone()
        }
        fn judge(&self, subject: &Subject) -> Judgement {
            Judgement::by_rules(&self.approvals, subject, None)
        }
        async fn ask(&self, _: &PreparedCall, _: &Subject, _: &ApprovalRecord) -> Option<Asked> {
            self.hook("ask");
            self.answer.clone()
        }
        async fn checkpoint_before(&self, _: &PreparedCall) {
            self.hook("checkpoint_before");
        }
        async fn checkpoint_after(&self, _: &PreparedCall) -> Vec<FileChange> {
            self.hook("checkpoint_after");
            Vec::new()
        }
        async fn run(&self, call: &PreparedCall, network: bool) -> ToolOutcome {
            self.hook(if network { "run with network" } else { "run" });
            let mut outcome = ToolOutcome::ok("done".into());
            outcome.receipt = Some(Receipt::of(
                &call.id,
                &call.name,
                call.standing.clone(),
                ToolStatus::Ok,
            ));
            outcome
        }
        fn receipted(&self, _: &PreparedCall, _: &ToolOutcome) {
            self.hook("receipted");
        }
    }

    fn shell(command: &str) -> PreparedCall {
        shell_with(command, false)
    }

    fn shell_with(command: &str, network: bool) -> PreparedCall {
        let place = CallPlace {
            workspace: Path::new("/w"),
            working_dir: Path::new("/w"),
        };
        let tools = crate::tools::testing::file_tools();
        let args = json!({ "command": command, "network": network });
        PreparedCall::new("c1", "shell", &args, &tools, place)
    }

    fn approval_line(finished: &Finished) -> String {
        let receipt = finished.outcome.receipt.as_ref().expect("a receipt");
        receipt.approvals[0].line()
    }

    const LIVE: [Stage; 8] = STAGES;
    const REFUSED: [Stage; 4] = [
        Stage::Playback,
        Stage::HooksBefore,
        Stage::Approve,
        Stage::Receipt,
    ];

    #[tokio::test]
    async fn an_allowed_call_goes_through_every_stage_in_order() {
        let front = Scripted::new(Mode::Never, &[], None);
        let finished = run_call(&front, &shell("ls")).await;
        assert_eq!(finished.trace, LIVE);
        assert_eq!(finished.outcome.status, ToolStatus::Ok);
        assert_eq!(
            *front.hooks.lock().unwrap(),
            ["checkpoint_before", "run", "checkpoint_after", "receipted"]
        );
        assert_eq!(approval_line(&finished), "allow by mode never");
        // The network, asked for and allowed by a rule, is given to the run.
        let front = Scripted::new(Mode::Never, &["net:shell:ls"], None);
        let finished = run_call(&front, &shell_with("ls", true)).await;
        assert_eq!(finished.trace, LIVE);
        assert!(front.hooks.lock().unwrap().contains(&"run with network"));
        // Asked for and not allowed: refused, nothing runs.
        let front = Scripted::new(Mode::Never, &[], None);
        let finished = run_call(&front, &shell_with("ls", true)).await;
        assert_eq!(finished.trace, REFUSED);
    }

    #[tokio::test]
    async fn a_refused_call_runs_nothing_and_still_has_a_receipt() {
        // Nobody to ask.
        let front = Scripted::new(Mode::Always, &[], None);
        let finished = run_call(&front, &shell("touch x")).await;
        assert_eq!(finished.trace, REFUSED);
        assert_eq!(finished.outcome.status, ToolStatus::Denied);
        assert_eq!(*front.hooks.lock().unwrap(), ["ask", "receipted"]);
        let receipt = finished.outcome.receipt.as_ref().unwrap();
        assert_eq!(receipt.status, Some(ToolStatus::Denied));
        assert!(receipt.programs.is_empty());
        assert_eq!(
            approval_line(&finished),
            "ask by mode always; nobody to ask, refused"
        );
        // The operator says no.
        let no = Asked::Denied {
            via: "terminal".into(),
            at: "T".into(),
            note: Some("use make".into()),
        };
        let front = Scripted::new(Mode::Always, &[], Some(no));
        let finished = run_call(&front, &shell("touch x")).await;
        assert_eq!(finished.trace, REFUSED);
        assert!(finished.outcome.content.contains("use make"));
        assert_eq!(
            approval_line(&finished),
            "ask by mode always; denied by the operator via terminal at T"
        );
    }

    #[tokio::test]
    async fn a_yes_runs_the_call_and_its_receipt_says_who_and_how_far() {
        let yes = Asked::Allowed {
            via: "bridge".into(),
            at: "T".into(),
            reach: Reach::Once,
        };
        let front = Scripted::new(Mode::Always, &[], Some(yes));
        let finished = run_call(&front, &shell("touch x")).await;
        assert_eq!(finished.trace, LIVE);
        assert_eq!(
            approval_line(&finished),
            "ask by mode always; allowed by the operator via bridge at T (once)"
        );
        // A rule that allows it asks nobody.
        let front = Scripted::new(Mode::Always, &["shell:touch"], None);
        let finished = run_call(&front, &shell("touch x")).await;
        assert_eq!(finished.trace, LIVE);
        assert!(!front.hooks.lock().unwrap().contains(&"ask"));
        assert!(approval_line(&finished).starts_with("allow by rule --approve:1"));
    }

    #[tokio::test]
    async fn a_played_call_is_answered_from_its_recording_alone() {
        let mut front = Scripted::new(Mode::Always, &[], None);
        front.played = Some(ToolOutcome::ok("recorded".into()));
        let finished = run_call(&front, &shell("touch x")).await;
        assert_eq!(finished.trace, [Stage::Playback]);
        assert_eq!(finished.outcome.content, "recorded");
        assert!(front.hooks.lock().unwrap().is_empty());
    }

    #[test]
    fn the_stages_are_listed_once_each_with_a_name() {
        let names: Vec<&str> = STAGES.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "playback",
                "hooks-before",
                "approve",
                "checkpoint-before",
                "run",
                "checkpoint-after",
                "hooks-after",
                "receipt"
            ]
        );
        let refusal: Vec<Stage> = STAGES
            .into_iter()
            .filter(|s| s.runs_after_refusal())
            .collect();
        assert_eq!(refusal, [Stage::Receipt]);
    }
}

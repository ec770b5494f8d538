//! Running the tool calls of one answer: each read once and taken through
//! the call path, events around each call, live output, truncation for
//! the model (the event keeps the full output), in parallel when the
//! profile allows.

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use tokio::sync::mpsc;

use super::call_front::SessionFront;
use super::event_data::{self as ed, EventData};
use super::session::Session;
use super::turns::ToolResult;
use crate::jobs::{CallMode, run_call};
use crate::llm::ToolCall;
use crate::process::{OutputChunk, OutputStream};
use crate::tools::{
    CallPlace, PreparedCall, Receipt, ToolContext, ToolOutcome, ToolRegistry, ToolStatus, dispatch,
};

impl Session {
    /// Run `calls`, each result into its slot (call order) as soon as the
    /// call finishes, so an interrupted round keeps what finished.
    pub(super) async fn run_tool_round(
        self: &Arc<Self>,
        calls: &[ToolCall],
        slots: &Mutex<Vec<Option<ToolResult>>>,
    ) {
        let registry = self.tools();
        let place = CallPlace {
            workspace: &self.workspace,
            working_dir: &self.working_dir,
        };
        let prepared: Vec<PreparedCall> = calls
            .iter()
            .map(|c| PreparedCall::new(&c.id, &c.name, &c.arguments, &registry, place))
            .collect();
        let parallel = self.config.parallel_tool_calls
            && self.profile.info.parallel_tool_calls
            && calls.len() > 1;
        let run = |i: usize| {
            let (registry, prepared) = (&registry, &prepared);
            async move {
                let result = self.run_tool(&calls[i], &prepared[i], registry).await;
                slots.lock().expect("tool slots")[i] = Some(result);
            }
        };
        if parallel {
            // Writers of the same path wait for each other, in order.
            let deps = super::write_order::dependencies(&prepared);
            let (done_tx, done_rx): (Vec<_>, Vec<_>) = (0..calls.len())
                .map(|_| {
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    (Some(tx), rx.shared())
                })
                .unzip();
            let done_tx = Mutex::new(done_tx);
            let ordered = |i: usize| {
                let (deps, done_rx, done_tx, run) = (&deps, &done_rx, &done_tx, &run);
                async move {
                    for &j in &deps[i] {
                        let _ = done_rx[j].clone().await;
                    }
                    run(i).await;
                    if let Some(tx) = done_tx.lock().expect("tool order")[i].take() {
                        let _ = tx.send(());
                    }
                }
            };
            futures::future::join_all((0..calls.len()).map(ordered)).await;
        } else {
            for i in 0..calls.len() {
                run(i).await;
            }
        }
    }

    async fn run_tool(
        self: &Arc<Self>,
        call: &ToolCall,
        prepared: &PreparedCall,
        registry: &ToolRegistry,
    ) -> ToolResult {
        let mut span = self.tool_span(call);
        self.emit(EventData::ToolCallStart(ed::ToolCallStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
        let front = SessionFront {
            session: self,
            registry: registry.clone(),
            call,
            activity: Default::default(),
        };
        let finished = crate::telemetry::within(
            span.context(),
            Box::pin(crate::pipeline::run_call(&front, prepared)),
        )
        .await;
        let outcome = finished.outcome;
        super::traced::finish_tool_span(&mut span, call, &outcome);
        drop(span);
        self.charge_replayed_model_calls(&outcome);
        let truncated =
            self.config
                .truncation
                .apply(&call.name, outcome.output_limit, &outcome.content);
        self.emit(EventData::ToolCallEnd(ed::ToolCallEnded {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: outcome.content.clone(),
            is_error: outcome.is_error(),
            truncated: truncated.len() != outcome.content.len(),
            status: outcome.status,
            receipt: outcome.receipt.clone().map(Box::new),
            changes: finished.changes,
        }));
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: truncated,
            is_error: outcome.is_error(),
            receipt: outcome.receipt,
        }
    }

    /// Run `call` through the dispatcher (inline or as a job), its live
    /// output forwarded as events.
    pub(super) async fn dispatched(
        self: &Arc<Self>,
        registry: ToolRegistry,
        call: &PreparedCall,
        network: bool,
        activity: crate::plugin::ActivityLog,
    ) -> ToolOutcome {
        let (tx, mut rx) = mpsc::channel::<OutputChunk>(crate::process::LIVE_CHUNKS);
        let ctx = ToolContext {
            session_id: self.id.clone(),
            root_session_id: self.asking_root(),
            call_id: call.id.clone(),
            live_output: Some(tx),
            working_dir: Some(self.working_dir.clone()),
            detach: None,
            programs: Some(activity),
            background: false,
            network,
            spend: Some(self.spend.clone()),
            trace: crate::telemetry::current(),
        };
        let run = self.dispatch_call(registry, call.request(), ctx);
        tokio::pin!(run);
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(chunk) = rx.recv() => self.output_delta(&call.id, chunk),
            }
        };
        while let Ok(chunk) = rx.try_recv() {
            self.output_delta(&call.id, chunk);
        }
        outcome
    }

    /// Run the call inline, or (with jobs enabled) in dual mode.
    async fn dispatch_call(
        &self,
        registry: ToolRegistry,
        request: crate::tools::ToolCallRequest,
        ctx: ToolContext,
    ) -> ToolOutcome {
        let Some(jobs) = &self.jobs else {
            return dispatch(&registry, &request, &ctx).await;
        };
        let call_id = request.id.clone();
        // Who would run it as a job (its receipt at its start names it;
        // its programs are not known yet), taken only if it becomes one.
        let executor = registry.get(&request.name).map(|t| t.executor.clone());
        match run_call(&jobs.registry, registry, request, ctx, jobs.settings).await {
            Ok(CallMode::Inline(outcome)) => *outcome,
            Ok(CallMode::Background(record)) => {
                self.emit(EventData::JobStarted(ed::JobStarted {
                    job_id: record.job_id.clone(),
                    tool: record.tool_name.clone(),
                    call_id: call_id.clone(),
                }));
                let standing = executor.map_or_else(
                    || crate::tools::Standing::host(&record.tool_name),
                    |e| e.standing(&record.tool_name),
                );
                ToolOutcome {
                    receipt: Some(Receipt {
                        outcome: format!("background job {}", record.job_id),
                        ..Receipt::of(
                            &call_id,
                            &record.tool_name,
                            standing,
                            ToolStatus::Background,
                        )
                    }),
                    ..ToolOutcome::with_status(
                        ToolStatus::Background,
                        CallMode::background_result(&record),
                    )
                }
            }
            Err(err) => ToolOutcome::with_status(ToolStatus::Failed, err.to_string()),
        }
    }

    fn output_delta(&self, call_id: &str, chunk: OutputChunk) {
        let stream = match chunk.stream {
            OutputStream::Stdout => ed::Stream::Stdout,
            OutputStream::Stderr => ed::Stream::Stderr,
        };
        self.emit(EventData::ToolCallOutputDelta(ed::ToolOutputDelta {
            call_id: call_id.to_string(),
            stream,
            text: String::from_utf8_lossy(&chunk.bytes).into_owned(),
        }));
    }
}

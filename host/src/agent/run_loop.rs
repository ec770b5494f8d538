//! The agentic loop for one input: call the model (streaming its text as
//! events), run the tool calls it makes, feed the results back, drain
//! steering, watch for loops and limits, until the model answers with text
//! only.
//!
//! Whatever happens — an interrupt while the model streams or while tools
//! run, an answer cut off by the output limit, a provider error — the
//! history stays valid for every provider (see [`super::history`]) and the
//! session stays usable, except for the errors after which it cannot be
//! (authentication, exhausted rate limits). Every request is fitted to the
//! model's window first ([`super::context_fit`]).

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::event_data::{self as ed, EventData};
use super::history;
use super::session::{Session, SessionError, SessionState};
use super::turns::{ToolResult, TurnKind, to_messages};
use crate::llm::{
    ErrorKind, FinishReason, LlmError, Message, Request, Response, StreamEvent, ToolDefinition,
};
use crate::tools::ToolStatus;

/// Follows injected job messages so the model replies to them.
const JOBS_NUDGE: &str = "(The messages above report background jobs that finished. Continue with the task, taking their results into account.)";

/// The steering text injected when a loop is detected.
const LOOP_WARNING: &str = "You appear to be repeating the same tool calls without making progress. Stop and reconsider: try a different approach, or explain to the user what is blocking you.";

/// The result of a tool call the output limit cut off.
const CUT_OFF: &str = "Not executed: your answer reached the output token limit while this call's arguments were still being written, so they are incomplete. Make the call again with smaller arguments (for example, write a large file in several edits).";

/// How an input ended without an error.
enum Ended {
    Done,
    Interrupted,
}

impl Session {
    /// Run the loop for one input (None: a turn to react to finished jobs,
    /// or to retry after an error), stopped when `stop` is cancelled.
    pub(super) async fn process_input(
        self: &Arc<Self>,
        input: Option<&str>,
        stop: &CancellationToken,
    ) -> Result<(), SessionError> {
        let mut span = self.agent_span();
        let used_before = self.used();
        // On the heap: the loop's future is large, and each scope moves it.
        let work = Box::pin(self.process_input_now(input, stop));
        let result = crate::telemetry::within(
            span.context(),
            crate::llm::spend::charging(
                self.spend.clone(),
                super::turns::with_clock(self.turn_clock(), work),
            ),
        )
        .await;
        let failed = match &result {
            Err(SessionError::Llm(err)) => Some(err),
            _ => None,
        };
        self.finish_agent_span(&mut span, &self.used().since(&used_before), failed);
        result
    }

    async fn process_input_now(
        self: &Arc<Self>,
        input: Option<&str>,
        stop: &CancellationToken,
    ) -> Result<(), SessionError> {
        let cancel = stop.child_token();
        {
            let mut inner = self.lock();
            inner.state = SessionState::Processing;
            inner.current = Some(cancel.clone());
            inner.stopped_by = None;
            inner.spend_stop = None;
        }
        self.record(super::recording::Entry::Input {
            text: input.map(str::to_string),
        });
        self.checkpoint_input();
        // Counted, not read back from the history: compaction may shorten it.
        let used_before = self.used();
        let mut blocked = None;
        if let Some(input) = input {
            self.emit(EventData::UserInput(EventData::text(input)));
            let first = !self
                .hooks_started
                .swap(true, std::sync::atomic::Ordering::SeqCst);
            match self.hooks_before_input(input, first).await {
                super::session_hooks::Heard::Go(contexts) => self.push(TurnKind::User {
                    text: Self::with_hook_context(input, &contexts),
                }),
                super::session_hooks::Heard::Blocked(reason) => blocked = Some(reason),
            }
        }
        let result = match blocked {
            Some(reason) => {
                self.warn(&format!(
                    "a UserPromptSubmit hook blocked this input; the model did not see it: {reason}"
                ));
                Ok(Ended::Done)
            }
            None => {
                self.drain_steering();
                self.run_rounds(&cancel).await
            }
        };
        {
            let mut inner = self.lock();
            inner.current = None;
            if inner.state == SessionState::Processing {
                inner.state = SessionState::Idle;
            }
        }
        let _ = self.persist();
        match result {
            Err(err) => {
                self.fail(&err);
                Err(SessionError::Llm(err))
            }
            Ok(ended) => {
                if !self.cancel.is_cancelled() {
                    let interrupted = matches!(ended, Ended::Interrupted);
                    let usage = self.used().since(&used_before);
                    self.emit(EventData::ProcessingEnd(ed::ProcessingEnded {
                        interrupted,
                        usage,
                        context_window: self.context_window(),
                        largest_request: self.largest_request(),
                        spend: self.spend_report(),
                        spend_cap: self.spend_stopped(),
                    }));
                }
                Ok(())
            }
        }
    }

    async fn run_rounds(self: &Arc<Self>, cancel: &CancellationToken) -> Result<Ended, LlmError> {
        self.start_spending();
        let mut rounds = 0u32;
        let mut context_warned = false;
        // Refusals of the request for the model call being made.
        let mut refusals = 0u32;
        // Times Stop hooks sent the model back to work.
        let mut continued = 0u32;
        loop {
            if self.stop_requested(cancel) {
                return Ok(Ended::Interrupted);
            }
            self.inject_from_jobs();
            if let Some((limit, value)) = self.limit_reached(rounds) {
                self.lock().stopped_by = Some(limit);
                self.emit(EventData::TurnLimit(ed::TurnLimitReached { limit, value }));
                return Ok(Ended::Done);
            }
            // One estimate of the context per round, when anything needs it.
            let tokens = if !context_warned || self.memory.is_some() {
                self.estimated_tokens()
            } else {
                0
            };
            if !context_warned {
                context_warned = self.check_context(tokens);
            }
            self.compact_if_over_budget(tokens).await;
            let mut request = match self.next_request().await {
                Ok((request, _)) => request,
                Err(too_big) => return Err(self.too_big(too_big)),
            };
            // Waits while calls in flight (subagents') hold the room.
            let fitted = tokio::select! {
                fitted = self.fit_to_budget(&mut request) => fitted,
                _ = cancel.cancelled() => return Ok(Ended::Interrupted),
            };
            let hold = match fitted {
                Ok(hold) => hold,
                Err(reached) => {
                    self.stopped_by_cap(reached);
                    return Ok(Ended::Done);
                }
            };
            let mut partial = String::new();
            let mut in_flight = None;
            let told = self.model_call(&request);
            let response = tokio::select! {
                r = self.call_model(&request, &mut partial, &mut in_flight) => r,
                _ = cancel.cancelled() => {
                    if let Some(call) = in_flight {
                        self.record(call.finish(None, true));
                    }
                    // An answer that began was spent (judged by what the
                    // stream gave, which a replay gives alike).
                    if !partial.is_empty() {
                        hold.charge_unfinished(crate::llm::estimate::text_tokens(&partial));
                    }
                    self.keep_partial_answer(partial);
                    return Ok(Ended::Interrupted);
                }
            };
            if let Some(call) = in_flight {
                self.record(call.finish(response.as_ref().err(), false));
            }
            told.finish(response.as_ref());
            let response = match response {
                // Too long for the model: learn its window, compact
                // harder, and ask again.
                Err(err) if err.kind == ErrorKind::ContextLength => {
                    refusals += 1;
                    // Refused unread: nothing spent, and the summaries
                    // compacting asks for need the room.
                    drop(hold);
                    if self.answer_refusal(&err, &request, refusals).await {
                        continue;
                    }
                    return Err(err);
                }
                Err(err) => {
                    // A stream that broke after the answer began was
                    // spent; one refused before it began was not.
                    if !partial.is_empty() {
                        hold.charge_unfinished(crate::llm::estimate::text_tokens(&partial));
                    }
                    return Err(err);
                }
                Ok(response) => response,
            };
            refusals = 0;
            hold.charge(&response.usage);
            self.answered(&request, response.usage.input_tokens);
            self.lock().model_turns += 1;
            let cut_off = response.finish_reason == FinishReason::Length;
            let calls = response.tool_calls.clone();
            self.push(TurnKind::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
                reasoning: response.reasoning,
                usage: response.usage,
            });
            if cut_off {
                self.warn(&format!(
                    "the model's answer reached the output token limit{}",
                    if calls.is_empty() {
                        " and was cut off"
                    } else {
                        "; its unfinished tool calls were not run"
                    }
                ));
            }
            if calls.is_empty() {
                if !cancel.is_cancelled() && self.hooks_at_stop(continued).await {
                    continued += 1;
                    continue;
                }
                return Ok(Ended::Done);
            }
            rounds += 1;
            if cut_off {
                self.answer_cut_off_calls(&calls);
                continue;
            }
            let slots = Mutex::new(vec![None; calls.len()]);
            let finished = tokio::select! {
                () = self.run_tool_round(&calls, &slots) => true,
                _ = cancel.cancelled() => false,
            };
            let slots = slots.into_inner().expect("tool slots");
            if finished {
                let results = slots.into_iter().flatten().collect();
                self.push(TurnKind::ToolResults { results });
            } else {
                self.end_interrupted_round(&calls, slots);
                return Ok(Ended::Interrupted);
            }
            if let Some(reason) = self.hook_ended_turn() {
                self.warn(&format!("a hook ended the turn: {reason}"));
                return Ok(Ended::Done);
            }
            self.drain_steering();
            self.check_loops(&calls);
        }
    }

    /// An interrupted round keeps what finished; a call that started and
    /// was cut off is answered as interrupted with its receipt (the
    /// decision that let it start, the programs it ran); the repair before
    /// the next request answers the calls that never started.
    fn end_interrupted_round(
        &self,
        calls: &[crate::llm::ToolCall],
        slots: Vec<Option<ToolResult>>,
    ) {
        let mut unfinished = self
            .unfinished
            .lock()
            .map(|mut u| std::mem::take(&mut *u))
            .unwrap_or_default();
        let mut results = Vec::with_capacity(calls.len());
        for (call, slot) in calls.iter().zip(slots) {
            if let Some(result) = slot {
                results.push(result);
                continue;
            }
            let receipt = unfinished.remove(&call.id);
            self.emit(EventData::ToolCallEnd(ed::ToolCallEnded::cut_short(
                &call.id,
                &call.name,
                ToolStatus::Interrupted,
                history::INTERRUPTED,
                receipt.clone(),
            )));
            if let Some(receipt) = receipt {
                results.push(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: history::INTERRUPTED.to_string(),
                    is_error: true,
                    receipt: Some(receipt),
                });
            }
        }
        self.push(TurnKind::ToolResults { results });
        self.record_tools_interrupted();
        self.repair_history();
    }

    /// Make the history valid for every provider (see [`history::repair`]).
    pub(super) fn repair_history(&self) {
        let added = history::repair(&mut self.lock().history);
        if added > 0 {
            tracing::debug!("answered {added} unfinished tool calls as interrupted");
        }
    }

    /// An answer interrupted while streaming: keep the text that arrived.
    fn keep_partial_answer(&self, partial: String) {
        if partial.is_empty() {
            return;
        }
        self.emit(EventData::AssistantTextEnd(EventData::text(
            partial.clone(),
        )));
        self.push(TurnKind::Assistant {
            text: partial,
            tool_calls: Vec::new(),
            reasoning: None,
            usage: Default::default(),
        });
    }

    /// Answer tool calls that the output limit cut off, without running them.
    fn answer_cut_off_calls(&self, calls: &[crate::llm::ToolCall]) {
        let results = calls
            .iter()
            .map(|call| {
                self.emit(EventData::ToolCallEnd(ed::ToolCallEnded::not_run(
                    &call.id,
                    &call.name,
                    ToolStatus::CutOff,
                    CUT_OFF,
                )));
                ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: CUT_OFF.to_string(),
                    is_error: true,
                    receipt: None,
                }
            })
            .collect();
        self.push(TurnKind::ToolResults { results });
    }

    /// `(limit name, value)` if a limit stops the loop now.
    fn limit_reached(&self, rounds: u32) -> Option<(ed::TurnLimitKind, u32)> {
        let max_rounds = self.config.max_tool_rounds_per_input;
        if max_rounds > 0 && rounds >= max_rounds {
            return Some((ed::TurnLimitKind::MaxToolRoundsPerInput, max_rounds));
        }
        let max_turns = self.config.max_turns;
        if max_turns > 0 && self.lock().model_turns >= max_turns {
            return Some((ed::TurnLimitKind::MaxTurns, max_turns));
        }
        None
    }

    /// The request for the next model call, from a valid history, offering
    /// `tools`, and the index of the operator's latest input among its
    /// messages.
    pub(super) fn request(&self, tools: &[crate::plugin::ToolSpec]) -> (Request, Option<usize>) {
        self.repair_history();
        let mut messages = vec![Message::system(self.system_prompt())];
        let mut input = {
            let inner = self.lock();
            messages.extend(to_messages(&inner.history));
            super::context_fit::current_input(&inner.history)
        };
        // What compaction kept may start with the model's turn; every
        // provider wants the operator's first.
        if let Some(first) = messages
            .iter()
            .position(|m| !matches!(m, Message::System { .. }))
            && !matches!(messages[first], Message::User { .. })
        {
            messages.insert(first, Message::user(history::EARLIER_TURNS));
            input = input.map(|i| i + 1);
        }
        let tools = tools
            .iter()
            .cloned()
            .map(|t| ToolDefinition {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect();
        let request = Request {
            model: self.model(),
            messages,
            tools,
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            reasoning_effort: self.config.reasoning_effort.clone(),
            ..Request::default()
        };
        (request, input)
    }

    /// Stream one answer, emitting its text as it arrives (also kept in
    /// `partial`, for an interrupt; recorded in `in_flight` when the
    /// session is recorded).
    async fn call_model(
        &self,
        request: &Request,
        partial: &mut String,
        in_flight: &mut Option<super::recorder::InFlight>,
    ) -> Result<Response, LlmError> {
        // Every turn so far is committed before the model is asked; a
        // session another host has taken over is not driven from here.
        if let Err(
            lost @ (crate::store::StoreError::Leased { .. }
            | crate::store::StoreError::LeaseLost { .. }),
        ) = self.persist()
        {
            return Err(LlmError::new(
                crate::llm::ErrorKind::Configuration,
                "sandcrab",
                format!("the model was not asked: {lost}"),
            ));
        }
        *in_flight = self.recorder().map(|r| r.begin(request));
        let asked = std::time::Instant::now();
        let mut stream = self
            .awaiting_model(asked, self.client.stream(request))
            .await?;
        // The first event may be long in coming; the rest stream.
        let mut first = Some(self.awaiting_model(asked, stream.next()).await);
        loop {
            let item = match first.take() {
                Some(item) => item,
                None => stream.next().await,
            };
            let Some(item) = item else { break };
            let event = item?;
            // A stream already buffered yields event after event without
            // ever waiting: spend the task's budget so whoever reads the
            // events emitted (an editor's forwarder) runs in between,
            // instead of every event piling up unread.
            tokio::task::consume_budget().await;
            if let Some(call) = in_flight.as_mut() {
                call.event(&event);
            }
            match event {
                StreamEvent::TextStart => {
                    partial.clear();
                    self.emit(EventData::AssistantTextStart(Default::default()));
                }
                StreamEvent::TextDelta(delta) => {
                    partial.push_str(&delta);
                    self.emit(EventData::AssistantTextDelta(ed::TextDelta {
                        delta: delta.clone(),
                    }));
                }
                StreamEvent::TextEnd => self.emit(EventData::AssistantTextEnd(EventData::text(
                    partial.clone(),
                ))),
                StreamEvent::ReasoningDelta(delta) => {
                    self.emit(EventData::AssistantReasoningDelta(ed::TextDelta { delta }));
                }
                StreamEvent::Finish(response) => return Ok(response),
                _ => {}
            }
        }
        Err(LlmError::new(
            ErrorKind::Stream,
            self.client.provider(),
            "the stream ended without a final response",
        ))
    }

    /// Emit CONTEXT_WARNING above the threshold; true if emitted.
    fn check_context(&self, tokens: u64) -> bool {
        let window = self.context_window().max(1);
        let usage = tokens as f64 / window as f64;
        if usage > self.config.context_warning_threshold {
            self.emit(EventData::ContextWarning(ed::ContextUsage {
                usage_percent: usage,
                estimated_tokens: tokens,
                context_window: window,
            }));
            return true;
        }
        false
    }

    pub(super) fn drain_steering(&self) {
        for text in self.take_steering() {
            self.push(TurnKind::Steering { text: text.clone() });
            self.emit(EventData::SteeringInjected(EventData::text(text)));
        }
    }

    /// Add one synthetic assistant message per finished job, oldest first.
    fn inject_from_jobs(&self) {
        let messages = self.take_job_messages();
        if messages.is_empty() {
            return;
        }
        for text in messages {
            self.push(TurnKind::Assistant {
                text,
                tool_calls: Vec::new(),
                reasoning: None,
                usage: Default::default(),
            });
        }
        // Providers expect the conversation to end with a user turn.
        self.push(TurnKind::Steering {
            text: JOBS_NUDGE.to_string(),
        });
    }

    fn check_loops(&self, calls: &[crate::llm::ToolCall]) {
        let found = {
            let mut inner = self.lock();
            for call in calls {
                // Judged as the tool reads it: a call repeated once as an
                // object and once encoded is the same call.
                let arguments = crate::tools::read_arguments(&call.arguments)
                    .unwrap_or_else(|_| call.arguments.clone());
                inner.loops.record(&call.name, &arguments);
            }
            inner.loops.check()
        };
        if let Some(found) = found {
            self.emit(EventData::LoopDetection(ed::LoopDetected {
                pattern_length: found.pattern_length,
                calls: found.calls,
                pattern: found.pattern,
            }));
            self.push(TurnKind::Steering {
                text: LOOP_WARNING.to_string(),
            });
            self.emit(EventData::SteeringInjected(EventData::text(LOOP_WARNING)));
        }
    }

    /// Report a model error. The session closes only when going on cannot
    /// help: the key is refused, or the provider still rate-limits after
    /// the retries. Any other error leaves the session idle with its
    /// history, to retry or continue (an input too long for the model
    /// among them: the next one is fitted again).
    fn fail(&self, err: &LlmError) {
        if err.kind == ErrorKind::ContextLength {
            let window = self.context_window();
            self.emit(EventData::ContextWarning(ed::ContextUsage {
                usage_percent: 1.0,
                estimated_tokens: self.estimated_tokens(),
                context_window: window,
            }));
        }
        let closes = closes_session(err.kind);
        self.emit(EventData::Error(ed::ErrorReport {
            kind: format!("{:?}", err.kind),
            provider: err.provider.clone(),
            status: err.status,
            message: err.message.clone(),
            error: err.to_string(),
            closes_session: closes,
        }));
        if closes {
            self.close_on_error();
        }
    }
}

/// Errors after which the session cannot go on.
pub fn closes_session(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Authentication | ErrorKind::RateLimit)
}

//! The agentic loop for one input: call the model (streaming its text as
//! events), run the tool calls it makes, feed the results back, drain
//! steering, watch for loops and limits, until the model answers with text
//! only.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::events::EventKind;
use super::session::{Session, SessionError, SessionState};
use super::turns::{TurnKind, to_messages};
use crate::llm::{ErrorKind, LlmError, Message, Request, Response, StreamEvent, ToolDefinition};

/// Follows injected job messages so the model replies to them.
const JOBS_NUDGE: &str = "(The messages above report background jobs that finished. Continue with the task, taking their results into account.)";

/// The steering text injected when a loop is detected.
const LOOP_WARNING: &str = "You appear to be repeating the same tool calls without making progress. Stop and reconsider: try a different approach, or explain to the user what is blocking you.";

impl Session {
    /// Run the loop for one input (None: a turn to react to finished jobs).
    pub(super) async fn process_input(
        self: &Arc<Self>,
        input: Option<&str>,
    ) -> Result<(), SessionError> {
        let cancel = self.cancel.child_token();
        {
            let mut inner = self.lock();
            inner.state = SessionState::Processing;
            inner.current = Some(cancel.clone());
        }
        if let Some(input) = input {
            self.push(TurnKind::User {
                text: input.to_string(),
            });
            self.emit(EventKind::UserInput, json!({ "text": input }));
        }
        self.drain_steering();
        let result = self.run_rounds(&cancel).await;
        let interrupted = cancel.is_cancelled() && !self.cancel.is_cancelled();
        {
            let mut inner = self.lock();
            inner.current = None;
            if inner.state == SessionState::Processing {
                inner.state = SessionState::Idle;
            }
        }
        if let Err(err) = &result {
            self.fail(err);
            return Err(SessionError::Llm(err.clone()));
        }
        if !self.cancel.is_cancelled() {
            self.emit(
                EventKind::ProcessingEnd,
                json!({ "interrupted": interrupted }),
            );
        }
        Ok(())
    }

    async fn run_rounds(self: &Arc<Self>, cancel: &CancellationToken) -> Result<(), LlmError> {
        let mut rounds = 0u32;
        let mut context_warned = false;
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            self.inject_from_jobs();
            if let Some((limit, value)) = self.limit_reached(rounds) {
                self.emit(
                    EventKind::TurnLimit,
                    json!({ "limit": limit, "value": value }),
                );
                return Ok(());
            }
            if !context_warned {
                context_warned = self.check_context();
            }
            let response = tokio::select! {
                r = self.call_model() => r?,
                _ = cancel.cancelled() => return Ok(()),
            };
            self.lock().model_turns += 1;
            let calls = response.tool_calls.clone();
            self.push(TurnKind::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
                reasoning: response.reasoning,
                usage: response.usage,
            });
            if calls.is_empty() {
                return Ok(());
            }
            rounds += 1;
            let results = tokio::select! {
                r = self.run_tool_round(&calls) => r,
                _ = cancel.cancelled() => return Ok(()),
            };
            self.push(TurnKind::ToolResults { results });
            self.drain_steering();
            self.check_loops(&calls);
        }
    }

    /// `(limit name, value)` if a limit stops the loop now.
    fn limit_reached(&self, rounds: u32) -> Option<(&'static str, u32)> {
        let max_rounds = self.config.max_tool_rounds_per_input;
        if max_rounds > 0 && rounds >= max_rounds {
            return Some(("max_tool_rounds_per_input", max_rounds));
        }
        let max_turns = self.config.max_turns;
        if max_turns > 0 && self.lock().model_turns >= max_turns {
            return Some(("max_turns", max_turns));
        }
        None
    }

    /// The request for the next model call.
    fn request(&self) -> Request {
        let mut messages = vec![Message::system(self.system_prompt.clone())];
        messages.extend(to_messages(&self.lock().history));
        let tools = self
            .tools()
            .definitions()
            .into_iter()
            .map(|t| ToolDefinition {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect();
        Request {
            model: self.config.model.clone(),
            messages,
            tools,
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            reasoning_effort: self.config.reasoning_effort.clone(),
            ..Request::default()
        }
    }

    /// Stream one answer, emitting its text as it arrives.
    async fn call_model(&self) -> Result<Response, LlmError> {
        let request = self.request();
        let mut stream = self.client.stream(&request).await?;
        let mut text = String::new();
        while let Some(item) = stream.next().await {
            match item? {
                StreamEvent::TextStart => {
                    text.clear();
                    self.emit(EventKind::AssistantTextStart, json!({}));
                }
                StreamEvent::TextDelta(delta) => {
                    text.push_str(&delta);
                    self.emit(EventKind::AssistantTextDelta, json!({ "delta": delta }));
                }
                StreamEvent::TextEnd => {
                    self.emit(EventKind::AssistantTextEnd, json!({ "text": text }))
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

    /// Estimated tokens (characters / 4) of everything sent to the model.
    pub fn estimated_tokens(&self) -> u64 {
        let history: usize = to_messages(&self.lock().history)
            .iter()
            .map(Message::char_len)
            .sum();
        ((self.system_prompt.len() + history) / 4) as u64
    }

    /// Emit CONTEXT_WARNING above the threshold; true if emitted.
    fn check_context(&self) -> bool {
        let window = self.profile.info.context_window.max(1);
        let tokens = self.estimated_tokens();
        let usage = tokens as f64 / window as f64;
        if usage > self.config.context_warning_threshold {
            self.emit(
                EventKind::ContextWarning,
                json!({ "usage_percent": usage, "estimated_tokens": tokens, "context_window": window }),
            );
            return true;
        }
        false
    }

    fn drain_steering(&self) {
        let messages: Vec<String> = self.lock().steering.drain(..).collect();
        for text in messages {
            self.push(TurnKind::Steering { text: text.clone() });
            self.emit(EventKind::SteeringInjected, json!({ "text": text }));
        }
    }

    /// Add one synthetic assistant message per finished job, oldest first.
    fn inject_from_jobs(&self) {
        let Some(jobs) = &self.jobs else {
            return;
        };
        let messages = jobs.registry.drain_messages(&self.id);
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
                inner.loops.record(&call.name, &call.arguments);
            }
            inner.loops.check()
        };
        if let Some(found) = found {
            self.emit(
                EventKind::LoopDetection,
                json!({ "pattern_length": found.pattern_length, "calls": found.calls, "pattern": found.pattern }),
            );
            self.push(TurnKind::Steering {
                text: LOOP_WARNING.to_string(),
            });
            self.emit(EventKind::SteeringInjected, json!({ "text": LOOP_WARNING }));
        }
    }

    /// Report an unrecoverable model error and close the session.
    fn fail(&self, err: &LlmError) {
        if err.kind == ErrorKind::ContextLength {
            let window = self.profile.info.context_window;
            self.emit(
                EventKind::ContextWarning,
                json!({ "usage_percent": 1.0, "estimated_tokens": self.estimated_tokens(), "context_window": window }),
            );
        }
        self.emit(
            EventKind::Error,
            json!({
                "kind": format!("{:?}", err.kind),
                "provider": err.provider,
                "status": err.status,
                "message": err.message,
                "error": err.to_string(),
            }),
        );
        self.close_on_error();
    }
}

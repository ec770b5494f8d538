//! A client that replays scripted answers: for tests and benchmarks of
//! everything above the wire (the agent loop, jobs, compaction). Streams
//! are produced through the same event model the real adapters emit.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::client::{EventStream, LlmClient};
use super::error::LlmError;
use super::types::{FinishReason, Request, Response, StreamEvent, ToolCall, Usage};

/// One scripted step.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer with this response.
    Respond(Response),
    /// Fail with this error.
    Fail(LlmError),
    /// Wait, then take the next step.
    Delay(Duration),
}

/// Replays steps in order; when they run out, repeats the last answer if
/// asked to, otherwise fails.
pub struct ScriptedClient {
    steps: Mutex<VecDeque<Step>>,
    repeat_last: bool,
    last: Mutex<Option<Step>>,
    requests: Mutex<Vec<Request>>,
}

impl ScriptedClient {
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        ScriptedClient {
            steps: Mutex::new(steps.into_iter().collect()),
            repeat_last: false,
            last: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Keep answering with the last step when the script runs out.
    pub fn repeating(mut self) -> Self {
        self.repeat_last = true;
        self
    }

    /// Add a step at the end.
    pub fn push(&self, step: Step) {
        self.steps.lock().expect("script lock").push_back(step);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("script lock").clone()
    }

    async fn next(&self, request: &Request) -> Result<Response, LlmError> {
        self.requests
            .lock()
            .expect("script lock")
            .push(request.clone());
        loop {
            let step = {
                let mut steps = self.steps.lock().expect("script lock");
                match steps.pop_front() {
                    Some(step) => Some(step),
                    None if self.repeat_last => self.last.lock().expect("script lock").clone(),
                    None => None,
                }
            };
            match step {
                Some(Step::Delay(d)) => tokio::time::sleep(d).await,
                Some(step @ Step::Respond(_)) | Some(step @ Step::Fail(_)) => {
                    *self.last.lock().expect("script lock") = Some(step.clone());
                    return match step {
                        Step::Respond(r) => Ok(r),
                        Step::Fail(e) => Err(e),
                        Step::Delay(_) => unreachable!(),
                    };
                }
                None => {
                    return Err(LlmError::new(
                        super::error::ErrorKind::Configuration,
                        "scripted",
                        "the script has no answer left",
                    ));
                }
            }
        }
    }
}

#[async_trait]
impl LlmClient for ScriptedClient {
    fn provider(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &Request) -> Result<Response, LlmError> {
        self.next(request).await
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        let response = self.next(request).await?;
        Ok(Box::pin(futures::stream::iter(
            events_of(response).into_iter().map(Ok),
        )))
    }
}

/// The stream events a provider would send for `response`.
pub fn events_of(response: Response) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    if let Some(r) = &response.reasoning {
        events.push(StreamEvent::ReasoningDelta(r.text.clone()));
    }
    if !response.text.is_empty() {
        events.push(StreamEvent::TextStart);
        let mid = response.text.floor_char_boundary(response.text.len() / 2);
        for part in [&response.text[..mid], &response.text[mid..]] {
            if !part.is_empty() {
                events.push(StreamEvent::TextDelta(part.to_string()));
            }
        }
        events.push(StreamEvent::TextEnd);
    }
    for call in &response.tool_calls {
        events.push(StreamEvent::ToolCallStart {
            id: call.id.clone(),
            name: call.name.clone(),
        });
        events.push(StreamEvent::ToolCallDelta {
            id: call.id.clone(),
            arguments: call.arguments.to_string(),
        });
        events.push(StreamEvent::ToolCallEnd(call.clone()));
    }
    events.push(StreamEvent::Finish(response));
    events
}

/// A text-only answer.
pub fn text(text: &str) -> Step {
    Step::Respond(Response {
        id: "scripted".into(),
        model: "scripted".into(),
        text: text.to_string(),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
        finish_reason: FinishReason::Stop,
        ..Response::default()
    })
}

/// An answer that calls tools: `(id, name, arguments)`.
pub fn tool_calls(calls: &[(&str, &str, serde_json::Value)]) -> Step {
    Step::Respond(Response {
        id: "scripted".into(),
        model: "scripted".into(),
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ToolCall::new(*id, *name, args.clone()))
            .collect(),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
        finish_reason: FinishReason::ToolCalls,
        ..Response::default()
    })
}

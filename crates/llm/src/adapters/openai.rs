//! OpenAI Responses API: `POST {base}/v1/responses`.
//!
//! The requests are stateless (`store: false`), so a reasoning model's
//! reasoning survives a tool round only when its encrypted reasoning items
//! are asked for (`include: ["reasoning.encrypted_content"]`) and sent back
//! in `input`, as returned, before the calls they led to.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{
    Adapter, StreamDecoder, Summary, arguments_text, merge_options, parse_data, str_at,
    stream_error, u64_at,
};
use crate::error::{ErrorKind, LlmError};
use crate::sse::SseEvent;
use crate::types::{
    FinishReason, Message, Reasoning, ReasoningPart, Request, Response, StreamEvent, ToolCall,
    ToolChoice, Usage, parse_arguments,
};

/// Whether `model` reasons (its reasoning items must be carried across
/// rounds): o-series, gpt-5 and codex models.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    m.starts_with('o') && m[1..].starts_with(|c: char| c.is_ascii_digit())
        || m.starts_with("gpt-5")
        || m.contains("codex")
}

const PROVIDER: &str = "openai";

/// The Responses API adapter.
pub struct OpenAiResponses;

impl Adapter for OpenAiResponses {
    fn endpoint(&self, root: &str, _model: &str, _stream: bool) -> String {
        format!("{root}/v1/responses")
    }

    fn headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        super::bearer(api_key)
    }

    fn build_body(&self, request: &Request, stream: bool) -> Value {
        let mut body = json!({
            "model": request.model,
            "input": input(&request.messages),
            "stream": stream,
            "store": false,
        });
        if let Some(system) = request.system_text() {
            body["instructions"] = json!(system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
                .collect();
            body["tool_choice"] = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Named(name) => json!({"type": "function", "name": name}),
            };
        }
        if let Some(n) = request.max_tokens {
            body["max_output_tokens"] = json!(n);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(effort) = &request.reasoning_effort {
            body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        }
        if request.reasoning_effort.is_some() || is_reasoning_model(&request.model) {
            body["include"] = json!(["reasoning.encrypted_content"]);
        }
        merge_options(&mut body, request);
        body
    }

    fn parse_response(&self, body: &Value) -> Result<Response, LlmError> {
        if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(PROVIDER, error));
        }
        let mut response = Response {
            id: str_at(body, "/id").to_string(),
            model: str_at(body, "/model").to_string(),
            usage: usage(&body["usage"]),
            finish_reason: status_reason(body),
            ..Response::default()
        };
        for item in body["output"].as_array().into_iter().flatten() {
            match str_at(item, "/type") {
                "message" => {
                    for part in item["content"].as_array().into_iter().flatten() {
                        if str_at(part, "/type") == "output_text" {
                            response.text.push_str(str_at(part, "/text"));
                        }
                    }
                }
                "function_call" => response.tool_calls.push(ToolCall::new(
                    str_at(item, "/call_id"),
                    str_at(item, "/name"),
                    parse_arguments(str_at(item, "/arguments")),
                )),
                "reasoning" => {
                    let r = response.reasoning.get_or_insert_with(Reasoning::default);
                    for part in item["summary"].as_array().into_iter().flatten() {
                        r.text.push_str(str_at(part, "/text"));
                    }
                    r.parts.push(ReasoningPart::Item { item: item.clone() });
                }
                _ => {}
            }
        }
        Ok(response)
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(Decoder::default())
    }
}

/// Unified messages as Responses `input` items (system goes to
/// `instructions`).
fn input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message {
            Message::System { .. } => {}
            Message::User { text } => items
                .push(json!({"role": "user", "content": [{"type": "input_text", "text": text}]})),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                for part in reasoning.iter().flat_map(|r| &r.parts) {
                    if let ReasoningPart::Item { item } = part {
                        items.push(item.clone());
                    }
                }
                if !text.is_empty() {
                    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}));
                }
                for call in tool_calls {
                    items.push(json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments_text(&call.arguments)}));
                }
            }
            Message::ToolResult {
                call_id, content, ..
            } => items.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": content}),
            ),
        }
    }
    items
}

fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "/input_tokens"),
        output_tokens: u64_at(u, "/output_tokens"),
        cached_tokens: u64_at(u, "/input_tokens_details/cached_tokens"),
        reasoning_tokens: u64_at(u, "/output_tokens_details/reasoning_tokens"),
        cache_write_tokens: 0,
        cost_micros: None,
    }
}

fn status_reason(response: &Value) -> FinishReason {
    match (
        str_at(response, "/status"),
        str_at(response, "/incomplete_details/reason"),
    ) {
        ("incomplete", "max_output_tokens") => FinishReason::Length,
        ("incomplete", "content_filter") => FinishReason::ContentFilter,
        ("incomplete", other) => FinishReason::Other(other.to_string()),
        _ => FinishReason::Stop,
    }
}

#[derive(Default)]
struct Decoder {
    summary: Summary,
    /// Function calls by item id: (call id, name, arguments so far).
    calls: HashMap<String, (String, String, String)>,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let data = parse_data(PROVIDER, &event.data)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let mut out = Vec::new();
        match kind {
            "response.created" | "response.in_progress" => {
                self.summary.id = str_at(&data, "/response/id").to_string();
                self.summary.model = str_at(&data, "/response/model").to_string();
            }
            "response.output_item.added" => {
                let item = &data["item"];
                if str_at(item, "/type") == "function_call" {
                    let (call_id, name) = (
                        str_at(item, "/call_id").to_string(),
                        str_at(item, "/name").to_string(),
                    );
                    out.push(StreamEvent::ToolCallStart {
                        id: call_id.clone(),
                        name: name.clone(),
                    });
                    self.calls.insert(
                        str_at(item, "/id").to_string(),
                        (call_id, name, String::new()),
                    );
                }
            }
            "response.output_text.delta" => {
                out.push(StreamEvent::TextDelta(str_at(&data, "/delta").to_string()))
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => out.push(
                StreamEvent::ReasoningDelta(str_at(&data, "/delta").to_string()),
            ),
            "response.function_call_arguments.delta" => {
                let item_id = str_at(&data, "/item_id");
                let delta = str_at(&data, "/delta");
                let Some((call_id, _, args)) = self.calls.get_mut(item_id) else {
                    return Err(LlmError::new(
                        ErrorKind::Stream,
                        PROVIDER,
                        format!("arguments for unknown function call item {item_id}"),
                    ));
                };
                args.push_str(delta);
                out.push(StreamEvent::ToolCallDelta {
                    id: call_id.clone(),
                    arguments: delta.to_string(),
                });
            }
            "response.function_call_arguments.done" => {
                if let Some((_, _, args)) = self.calls.get_mut(str_at(&data, "/item_id")) {
                    *args = str_at(&data, "/arguments").to_string();
                }
            }
            "response.output_item.done" => {
                let item = &data["item"];
                if str_at(item, "/type") == "reasoning" {
                    out.push(StreamEvent::ReasoningPart(ReasoningPart::Item {
                        item: item.clone(),
                    }));
                }
                if str_at(item, "/type") == "function_call"
                    && let Some((call_id, name, args)) = self.calls.remove(str_at(item, "/id"))
                {
                    let final_args = item
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or(&args);
                    out.push(StreamEvent::ToolCallEnd(ToolCall::new(
                        call_id,
                        name,
                        parse_arguments(final_args),
                    )));
                }
            }
            "response.completed" | "response.incomplete" => {
                // Calls still open were cut off: report them with what
                // arrived (the loop never runs a cut-off call).
                for (_, (call_id, name, args)) in std::mem::take(&mut self.calls) {
                    out.push(StreamEvent::ToolCallEnd(ToolCall::new(
                        call_id,
                        name,
                        parse_arguments(&args),
                    )));
                }
                let response = &data["response"];
                self.summary.usage = usage(&response["usage"]);
                self.summary.finish_reason = status_reason(response);
                if self.summary.id.is_empty() {
                    self.summary.id = str_at(response, "/id").to_string();
                    self.summary.model = str_at(response, "/model").to_string();
                }
                self.done = true;
            }
            "response.failed" => {
                let error = data
                    .pointer("/response/error")
                    .cloned()
                    .unwrap_or(json!({"message": "the response failed"}));
                return Err(stream_error(PROVIDER, &error));
            }
            "error" => return Err(stream_error(PROVIDER, data.get("error").unwrap_or(&data))),
            _ => {}
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn complete_at_eof(&self) -> bool {
        self.done
    }

    fn summary(&mut self) -> Summary {
        std::mem::take(&mut self.summary)
    }
}

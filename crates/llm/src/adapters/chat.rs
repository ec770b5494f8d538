//! OpenAI-compatible Chat Completions: `POST {base}/v1/chat/completions`
//! (Ollama, llama.cpp server, vLLM, OpenRouter).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    Adapter, StreamDecoder, Summary, arguments_text, merge_options, parse_data, str_at,
    stream_error, u64_at,
};
use crate::error::LlmError;
use crate::sse::SseEvent;
use crate::types::{
    FinishReason, Message, Reasoning, Request, Response, StreamEvent, ToolCall, ToolChoice, Usage,
    parse_arguments,
};

const PROVIDER: &str = "openai-compatible";

/// The Chat Completions adapter.
pub struct ChatCompletions;

impl Adapter for ChatCompletions {
    fn endpoint(&self, root: &str, _model: &str, _stream: bool) -> String {
        format!("{root}/v1/chat/completions")
    }

    fn headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        super::bearer(api_key)
    }

    fn build_body(&self, request: &Request, stream: bool) -> Value {
        let mut body = json!({
            "model": request.model,
            "messages": messages(&request.messages),
            "stream": stream,
        });
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            body["tool_choice"] = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
            };
        }
        if let Some(n) = request.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(effort) = &request.reasoning_effort {
            body["reasoning_effort"] = json!(effort);
        }
        merge_options(&mut body, request);
        body
    }

    fn parse_response(&self, body: &Value) -> Result<Response, LlmError> {
        if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(PROVIDER, error));
        }
        let message = &body["choices"][0]["message"];
        let reasoning = message
            .get("reasoning_content")
            .or_else(|| message.get("reasoning"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(|r| Reasoning {
                text: r.to_string(),
                ..Reasoning::default()
            });
        let tool_calls = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                ToolCall::new(
                    call_id(str_at(c, "/id")),
                    str_at(c, "/function/name"),
                    match c.pointer("/function/arguments") {
                        Some(Value::String(raw)) => parse_arguments(raw),
                        Some(other) => other.clone(),
                        None => json!({}),
                    },
                )
            })
            .collect();
        Ok(Response {
            id: str_at(body, "/id").to_string(),
            model: str_at(body, "/model").to_string(),
            text: str_at(message, "/content").to_string(),
            tool_calls,
            reasoning,
            usage: usage(&body["usage"]),
            finish_reason: finish_reason(str_at(body, "/choices/0/finish_reason")),
        })
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(Decoder::default())
    }
}

fn messages(input: &[Message]) -> Vec<Value> {
    input
        .iter()
        .map(|m| match m {
            Message::System { text } => json!({"role": "system", "content": text}),
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls, .. } => {
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(&c.arguments)}}))
                        .collect();
                }
                msg
            }
            Message::ToolResult { call_id, content, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        })
        .collect()
}

/// The server's call id, or a fresh unique one when it sent none (some
/// local servers do not): ids must not repeat across a conversation.
fn call_id(given: &str) -> String {
    if given.is_empty() {
        format!("call_{}", uuid::Uuid::new_v4().simple())
    } else {
        given.to_string()
    }
}

/// The cost a server reports with the usage (OpenRouter's `cost`, in US
/// dollars), in millionths; a negative, absurd or non-numeric one is none.
fn reported_cost(u: &Value) -> Option<u64> {
    let dollars = u.get("cost")?.as_f64()?;
    (dollars.is_finite() && (0.0..1.0e6).contains(&dollars))
        .then(|| (dollars * 1_000_000.0).round() as u64)
}

fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "/prompt_tokens"),
        output_tokens: u64_at(u, "/completion_tokens"),
        cached_tokens: u64_at(u, "/prompt_tokens_details/cached_tokens"),
        reasoning_tokens: u64_at(u, "/completion_tokens_details/reasoning_tokens"),
        cache_write_tokens: 0,
        cost_micros: reported_cost(u),
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

#[derive(Default)]
struct Decoder {
    summary: Summary,
    /// Tool calls being assembled, by their `index`: (id, name, arguments).
    calls: BTreeMap<u64, (String, String, String)>,
    finished: bool,
    done: bool,
}

impl Decoder {
    fn close_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for (_, (id, name, args)) in std::mem::take(&mut self.calls) {
            out.push(StreamEvent::ToolCallEnd(ToolCall::new(
                id,
                name,
                parse_arguments(&args),
            )));
        }
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let mut out = Vec::new();
        if event.data.trim() == "[DONE]" {
            self.close_calls(&mut out);
            self.done = true;
            return Ok(out);
        }
        let chunk = parse_data(PROVIDER, &event.data)?;
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(PROVIDER, error));
        }
        if self.summary.id.is_empty() {
            self.summary.id = str_at(&chunk, "/id").to_string();
            self.summary.model = str_at(&chunk, "/model").to_string();
        }
        if chunk.get("usage").is_some_and(|u| !u.is_null()) {
            self.summary.usage = usage(&chunk["usage"]);
        }
        // A usage-only chunk has no choices.
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(out);
        };
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(r) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                out.push(StreamEvent::ReasoningDelta(r.to_string()));
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            out.push(StreamEvent::TextDelta(text.to_string()));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(self.calls.len() as u64);
            let entry = self
                .calls
                .entry(index)
                .or_insert_with(|| (call_id(str_at(call, "/id")), String::new(), String::new()));
            if let Some(name) = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                && entry.1.is_empty()
            {
                entry.1 = name.to_string();
                out.push(StreamEvent::ToolCallStart {
                    id: entry.0.clone(),
                    name: entry.1.clone(),
                });
            }
            if let Some(args) = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                entry.2.push_str(args);
                out.push(StreamEvent::ToolCallDelta {
                    id: entry.0.clone(),
                    arguments: args.to_string(),
                });
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.summary.finish_reason = finish_reason(reason);
            self.finished = true;
            self.close_calls(&mut out);
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn complete_at_eof(&self) -> bool {
        self.finished || self.done
    }

    fn summary(&mut self) -> Summary {
        std::mem::take(&mut self.summary)
    }
}

//! Anthropic Messages API: `POST {base}/v1/messages`.
//!
//! Thinking blocks come back each with its own signature and redacted
//! thinking as opaque data; both are kept as [`ReasoningPart`]s and sent
//! back verbatim at the start of the assistant turn, as the API requires
//! when a tool round continues. Prompt caching: the system prompt, the tool
//! definitions and the conversation so far each end with a `cache_control`
//! breakpoint, so every round reads the unchanged prefix from the cache.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{
    Adapter, StreamDecoder, Summary, arguments_object, merge_options, parse_data, str_at,
    stream_error, u64_at,
};
use crate::error::{ErrorKind, LlmError};
use crate::sse::SseEvent;
use crate::types::{
    FinishReason, Message, Reasoning, ReasoningPart, Request, Response, StreamEvent, ToolCall,
    ToolChoice, Usage, parse_arguments,
};

const PROVIDER: &str = "anthropic";
/// The API version header value.
pub const API_VERSION: &str = "2023-06-01";

/// The output limit used when the request sets none: the model's own
/// maximum where known, else a conservative 8192.
/// The least thinking budget the API takes.
const MIN_THINKING: u32 = 1024;

/// The thinking budget beside an answer of `max_tokens`: the answer's
/// limit grows to hold `wanted` and an answer, but never above `ceiling`
/// (what the window leaves), where the budget shrinks to fit inside it;
/// none when not even the least budget fits.
fn thinking_fit(wanted: u32, max_tokens: &mut u32, ceiling: Option<u32>) -> Option<u32> {
    // Grown, but not above the ceiling (nor below what was asked).
    let ceiling = ceiling.unwrap_or(u32::MAX).max(*max_tokens);
    *max_tokens = (*max_tokens).max(wanted + 4096).min(ceiling);
    let budget = wanted.min(max_tokens.saturating_sub(MIN_THINKING));
    (budget >= MIN_THINKING).then_some(budget)
}

pub fn default_max_tokens(model: &str) -> u32 {
    let m = model.to_ascii_lowercase();
    if m.contains("opus-4") {
        32_000
    } else if m.contains("sonnet-4") || m.contains("3-7-sonnet") || m.contains("haiku-4") {
        64_000
    } else {
        8192
    }
}

/// The Anthropic adapter.
pub struct Anthropic;

fn thinking_budget(effort: &str) -> u32 {
    match effort {
        "low" => 2048,
        "high" => 24_576,
        _ => 8192,
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

impl Adapter for Anthropic {
    fn endpoint(&self, root: &str, _model: &str, _stream: bool) -> String {
        format!("{root}/v1/messages")
    }

    fn headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(key) = api_key {
            headers.push(("x-api-key", key.to_string()));
        }
        headers
    }

    fn build_body(&self, request: &Request, stream: bool) -> Value {
        let mut max_tokens = request
            .max_tokens
            .unwrap_or_else(|| default_max_tokens(&request.model));
        let mut messages = messages(&request.messages);
        // Cache the conversation so far: the next round re-reads it.
        if let Some(last) = messages
            .last_mut()
            .and_then(|m| m["content"].as_array_mut())
            .and_then(|blocks| blocks.last_mut())
        {
            last["cache_control"] = ephemeral();
        }
        let mut body = json!({
            "model": request.model,
            "messages": messages,
            "stream": stream,
        });
        if let Some(system) = request.system_text() {
            body["system"] =
                json!([{"type": "text", "text": system, "cache_control": ephemeral()}]);
        }
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = ephemeral();
            }
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
            };
        }
        let thinking = request.reasoning_effort.as_ref().and_then(|effort| {
            thinking_fit(
                thinking_budget(effort),
                &mut max_tokens,
                request.answer_ceiling,
            )
        });
        if let Some(budget) = thinking {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        } else if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        body["max_tokens"] = json!(max_tokens);
        merge_options(&mut body, request);
        body
    }

    fn parse_response(&self, body: &Value) -> Result<Response, LlmError> {
        if body.get("type").and_then(Value::as_str) == Some("error") {
            return Err(stream_error(PROVIDER, &body["error"]));
        }
        let mut response = Response {
            id: str_at(body, "/id").to_string(),
            model: str_at(body, "/model").to_string(),
            usage: usage(&body["usage"]),
            finish_reason: finish_reason(str_at(body, "/stop_reason")),
            ..Response::default()
        };
        for block in body["content"].as_array().into_iter().flatten() {
            match str_at(block, "/type") {
                "text" => response.text.push_str(str_at(block, "/text")),
                "tool_use" => response.tool_calls.push(ToolCall::new(
                    str_at(block, "/id"),
                    str_at(block, "/name"),
                    block.get("input").cloned().unwrap_or(json!({})),
                )),
                "thinking" | "redacted_thinking" => {
                    let r = response.reasoning.get_or_insert_with(Reasoning::default);
                    r.text.push_str(str_at(block, "/thinking"));
                    r.parts.extend(reasoning_part(block));
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

/// A thinking or redacted-thinking block as state to send back.
fn reasoning_part(block: &Value) -> Option<ReasoningPart> {
    match str_at(block, "/type") {
        "thinking" => Some(ReasoningPart::Thinking {
            thinking: str_at(block, "/thinking").to_string(),
            signature: str_at(block, "/signature").to_string(),
        }),
        "redacted_thinking" => Some(ReasoningPart::RedactedThinking {
            data: str_at(block, "/data").to_string(),
        }),
        _ => None,
    }
}

/// Unified messages as Anthropic `messages` (system excluded; tool results
/// as user `tool_result` blocks; consecutive same-role turns merged).
fn messages(input: &[Message]) -> Vec<Value> {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for message in input {
        let (role, blocks) = match message {
            Message::System { .. } => continue,
            Message::User { text } if text.is_empty() => continue,
            Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut blocks = Vec::new();
                for part in reasoning.iter().flat_map(|r| &r.parts) {
                    match part {
                        ReasoningPart::Thinking {
                            thinking,
                            signature,
                        } => blocks.push(
                            json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                        ),
                        ReasoningPart::RedactedThinking { data } => {
                            blocks.push(json!({"type": "redacted_thinking", "data": data}))
                        }
                        ReasoningPart::Item { .. } => {}
                    }
                }
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(&call.arguments)}));
                }
                ("assistant", blocks)
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": if content.is_empty() { "(no output)" } else { content }, "is_error": is_error}),
                ],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            // Tool results lead the user turn that answers the tool uses.
            Some((last, existing)) if last == role => {
                if blocks[0]["type"] == "tool_result" {
                    let at = existing
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    existing.splice(at..at, blocks);
                } else {
                    existing.extend(blocks);
                }
            }
            _ => out.push((role.to_string(), blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "/input_tokens")
            + u64_at(u, "/cache_read_input_tokens")
            + u64_at(u, "/cache_creation_input_tokens"),
        output_tokens: u64_at(u, "/output_tokens"),
        cached_tokens: u64_at(u, "/cache_read_input_tokens"),
        reasoning_tokens: 0,
        cache_write_tokens: u64_at(u, "/cache_creation_input_tokens"),
        cost_micros: None,
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" | "" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// A content block being streamed.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Thinking {
        text: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    Other,
}

#[derive(Default)]
struct Decoder {
    summary: Summary,
    blocks: HashMap<u64, Block>,
    stopped: bool,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let data = parse_data(PROVIDER, &event.data)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let index = u64_at(&data, "/index");
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let m = &data["message"];
                self.summary.id = str_at(m, "/id").to_string();
                self.summary.model = str_at(m, "/model").to_string();
                self.summary.usage = usage(&m["usage"]);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                let b = match str_at(block, "/type") {
                    "text" => {
                        let text = str_at(block, "/text");
                        if !text.is_empty() {
                            out.push(StreamEvent::TextDelta(text.to_string()));
                        }
                        Block::Text
                    }
                    "tool_use" => {
                        let (id, name) = (
                            str_at(block, "/id").to_string(),
                            str_at(block, "/name").to_string(),
                        );
                        out.push(StreamEvent::ToolCallStart {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        Block::Tool {
                            id,
                            name,
                            json: String::new(),
                        }
                    }
                    "thinking" => Block::Thinking {
                        text: str_at(block, "/thinking").to_string(),
                        signature: str_at(block, "/signature").to_string(),
                    },
                    "redacted_thinking" => Block::Redacted {
                        data: str_at(block, "/data").to_string(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, b);
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match (str_at(delta, "/type"), self.blocks.get_mut(&index)) {
                    ("text_delta", _) => {
                        out.push(StreamEvent::TextDelta(str_at(delta, "/text").to_string()))
                    }
                    ("thinking_delta", block) => {
                        let part = str_at(delta, "/thinking");
                        if let Some(Block::Thinking { text, .. }) = block {
                            text.push_str(part);
                        }
                        out.push(StreamEvent::ReasoningDelta(part.to_string()));
                    }
                    ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                        signature.push_str(str_at(delta, "/signature"))
                    }
                    ("input_json_delta", Some(Block::Tool { id, json, .. })) => {
                        let part = str_at(delta, "/partial_json");
                        json.push_str(part);
                        out.push(StreamEvent::ToolCallDelta {
                            id: id.clone(),
                            arguments: part.to_string(),
                        });
                    }
                    ("input_json_delta", _) => {
                        return Err(LlmError::new(
                            ErrorKind::Stream,
                            PROVIDER,
                            format!(
                                "input_json_delta for block {index}, which is not a tool_use block"
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::Tool { id, name, json }) => {
                    out.push(StreamEvent::ToolCallEnd(ToolCall::new(
                        id,
                        name,
                        parse_arguments(&json),
                    )));
                }
                Some(Block::Thinking { text, signature }) => {
                    out.push(StreamEvent::ReasoningPart(ReasoningPart::Thinking {
                        thinking: text,
                        signature,
                    }))
                }
                Some(Block::Redacted { data }) => out.push(StreamEvent::ReasoningPart(
                    ReasoningPart::RedactedThinking { data },
                )),
                _ => {}
            },
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.summary.finish_reason = finish_reason(reason);
                    self.stopped = true;
                }
                if let Some(n) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.summary.usage.output_tokens = n;
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(stream_error(PROVIDER, &data["error"])),
            _ => {} // ping and future event types
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn complete_at_eof(&self) -> bool {
        self.stopped
    }

    fn summary(&mut self) -> Summary {
        std::mem::take(&mut self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_grows_the_answer_only_as_far_as_the_window_leaves() {
        // No ceiling: the answer grows to hold the budget and an answer.
        let mut max = 8192;
        assert_eq!(thinking_fit(24_576, &mut max, None), Some(24_576));
        assert_eq!(max, 24_576 + 4096);
        // A small window: the budget shrinks inside what is left.
        let mut max = 3000;
        assert_eq!(thinking_fit(8192, &mut max, Some(3000)), Some(1976));
        assert_eq!(max, 3000);
        // Not even the least budget fits: no thinking.
        let mut max = 1500;
        assert_eq!(thinking_fit(8192, &mut max, Some(1500)), None);
    }
}

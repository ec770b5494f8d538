//! Google Gemini: `POST {base}/v1beta/models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse` (no end sentinel: the chunk carrying a
//! finish reason ends the answer).
//!
//! Thought signatures come on individual parts (each function call, and
//! sometimes text); each is kept with its part and sent back on it. Tool
//! schemas are reduced to the OpenAPI subset Gemini accepts.

use serde_json::{Map, Value, json};

use super::{
    Adapter, StreamDecoder, Summary, arguments_object, merge_options, parse_data, str_at,
    stream_error, u64_at,
};
use crate::error::{ErrorKind, LlmError};
use crate::sse::SseEvent;
use crate::types::{
    FinishReason, Message, Reasoning, Request, Response, StreamEvent, ToolCall, ToolChoice, Usage,
};

const PROVIDER: &str = "gemini";

/// The Gemini adapter.
pub struct Gemini;

fn thinking_budget(effort: &str) -> u32 {
    match effort {
        "low" => 1024,
        "high" => 24_576,
        _ => 8192,
    }
}

impl Adapter for Gemini {
    fn endpoint(&self, root: &str, model: &str, stream: bool) -> String {
        if stream {
            format!("{root}/v1beta/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{root}/v1beta/models/{model}:generateContent")
        }
    }

    fn headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        api_key
            .map(|k| vec![("x-goog-api-key", k.to_string())])
            .unwrap_or_default()
    }

    fn build_body(&self, request: &Request, _stream: bool) -> Value {
        let mut body = json!({ "contents": contents(&request.messages) });
        if let Some(system) = request.system_text() {
            body["systemInstruction"] = json!({"parts": [{"text": system}]});
        }
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    let mut decl = json!({"name": t.name, "description": t.description});
                    if let Some(parameters) = super::gemini_schema::parameters(&t.parameters) {
                        decl["parameters"] = parameters;
                    }
                    decl
                })
                .collect();
            body["tools"] = json!([{"functionDeclarations": declarations}]);
            body["toolConfig"] = json!({"functionCallingConfig": match &request.tool_choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            }});
        }
        let mut generation = Map::new();
        if let Some(n) = request.max_tokens {
            generation.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(t) = request.temperature {
            generation.insert("temperature".into(), json!(t));
        }
        if let Some(effort) = &request.reasoning_effort {
            generation.insert(
                "thinkingConfig".into(),
                json!({"thinkingBudget": thinking_budget(effort), "includeThoughts": true}),
            );
        }
        if !generation.is_empty() {
            body["generationConfig"] = Value::Object(generation);
        }
        merge_options(&mut body, request);
        body
    }

    fn parse_response(&self, body: &Value) -> Result<Response, LlmError> {
        if let Some(error) = body.get("error") {
            return Err(stream_error(PROVIDER, error));
        }
        check_blocked(body)?;
        let mut decoder = Decoder::default();
        let events = decoder.chunk(body);
        let mut response = Response::default();
        for event in events {
            match event {
                StreamEvent::TextDelta(t) => response.text.push_str(&t),
                StreamEvent::ReasoningDelta(t) => response
                    .reasoning
                    .get_or_insert_with(Reasoning::default)
                    .text
                    .push_str(&t),
                StreamEvent::ToolCallEnd(call) => response.tool_calls.push(call),
                _ => {}
            }
        }
        let summary = decoder.summary();
        response.id = summary.id;
        response.model = summary.model;
        response.usage = summary.usage;
        response.finish_reason = summary.finish_reason;
        if let Some(sig) = summary.signature {
            response
                .reasoning
                .get_or_insert_with(Reasoning::default)
                .signature = Some(sig);
        }
        Ok(response)
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(Decoder::default())
    }
}

fn contents(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, parts) = match message {
            Message::System { .. } => continue,
            Message::User { text } => ("user", vec![json!({"text": text})]),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    let mut part = json!({"text": text});
                    if let Some(sig) = reasoning.as_ref().and_then(|r| r.signature.as_ref()) {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                for call in tool_calls {
                    let mut part = json!({"functionCall": {"name": call.name, "args": arguments_object(&call.arguments)}});
                    if let Some(sig) = &call.signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                ("model", parts)
            }
            Message::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let response = if *is_error {
                    json!({"error": content})
                } else {
                    json!({"output": content})
                };
                (
                    "user",
                    vec![json!({"functionResponse": {"name": name, "response": response}})],
                )
            }
        };
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => out.push((role, parts)),
        }
    }
    out.into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

fn check_blocked(body: &Value) -> Result<(), LlmError> {
    match body
        .pointer("/promptFeedback/blockReason")
        .and_then(Value::as_str)
    {
        Some(reason) => Err(LlmError::new(
            ErrorKind::InvalidRequest,
            PROVIDER,
            format!("the prompt was blocked ({reason})"),
        )),
        None => Ok(()),
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_string()),
    }
}

#[derive(Default)]
struct Decoder {
    summary: Summary,
    calls: usize,
    finished: bool,
}

impl Decoder {
    /// The events of one GenerateContentResponse (a stream chunk or a whole
    /// response).
    fn chunk(&mut self, chunk: &Value) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if let Some(id) = chunk.get("responseId").and_then(Value::as_str) {
            self.summary.id = id.to_string();
        }
        if let Some(model) = chunk.get("modelVersion").and_then(Value::as_str) {
            self.summary.model = model.to_string();
        }
        if let Some(u) = chunk.get("usageMetadata") {
            self.summary.usage = Usage {
                input_tokens: u64_at(u, "/promptTokenCount"),
                output_tokens: u64_at(u, "/candidatesTokenCount")
                    + u64_at(u, "/thoughtsTokenCount"),
                cached_tokens: u64_at(u, "/cachedContentTokenCount"),
                reasoning_tokens: u64_at(u, "/thoughtsTokenCount"),
                cache_write_tokens: 0,
                cost_micros: None,
            };
        }
        let candidate = &chunk["candidates"][0];
        for part in candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let signature = part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(call) = part.get("functionCall") {
                self.calls += 1;
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!(
                            "gemini-call-{}",
                            &uuid::Uuid::new_v4().simple().to_string()[..12]
                        )
                    });
                let name = str_at(call, "/name").to_string();
                let args = call.get("args").cloned().unwrap_or(json!({}));
                out.push(StreamEvent::ToolCallStart {
                    id: id.clone(),
                    name: name.clone(),
                });
                out.push(StreamEvent::ToolCallDelta {
                    id: id.clone(),
                    arguments: args.to_string(),
                });
                out.push(StreamEvent::ToolCallEnd(ToolCall {
                    id,
                    name,
                    arguments: args,
                    signature,
                }));
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                if signature.is_some() && self.summary.signature.is_none() {
                    self.summary.signature = signature;
                }
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    out.push(StreamEvent::ReasoningDelta(text.to_string()));
                } else if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text.to_string()));
                }
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.summary.finish_reason = finish_reason(reason);
            self.finished = true;
        }
        out
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let chunk = parse_data(PROVIDER, &event.data)?;
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(PROVIDER, error));
        }
        check_blocked(&chunk)?;
        Ok(self.chunk(&chunk))
    }

    fn done(&self) -> bool {
        false
    }

    fn complete_at_eof(&self) -> bool {
        self.finished
    }

    fn summary(&mut self) -> Summary {
        std::mem::take(&mut self.summary)
    }
}

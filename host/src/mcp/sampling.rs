//! A server asks sandcrab's model (MCP sampling): off unless the operator
//! allows it for that server (`[mcp.servers.NAME] sampling = true`), and
//! then only while the server answers a call of one conversation, whose
//! receipt records the model call (who asked, the model, the tokens;
//! never the prompt or the answer). A request is bounded: its messages'
//! bytes and the tokens it may take.
//!
//! The specification marks sampling deprecated (SEP-2577) for a later
//! revision; servers of today's revisions still send it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use serde_json::{Value, json};

use crate::llm::{LlmClient, Message, Request};
use crate::plugin::ModelUse;

/// Most tokens one sampling answer may take.
pub const MAX_SAMPLING_TOKENS: u32 = 4096;
/// Most bytes of a sampling request's messages and system prompt.
pub const MAX_SAMPLING_BYTES: usize = 256 * 1024;
/// Most model calls a server may make while it answers one call.
pub const MAX_SAMPLES_PER_CALL: usize = 8;

/// The model servers may ask, once the front end has one: shared by the
/// servers of one agent.
#[derive(Default)]
pub struct ModelSlot {
    model: Mutex<Option<(Arc<dyn LlmClient>, String)>>,
}

impl ModelSlot {
    /// Answer sampling with `model` of `client` from now on.
    pub fn set(&self, client: Arc<dyn LlmClient>, model: &str) {
        if let Ok(mut slot) = self.model.lock() {
            *slot = Some((client, model.to_string()));
        }
    }

    fn get(&self) -> Option<(Arc<dyn LlmClient>, String)> {
        self.model.lock().ok().and_then(|slot| slot.clone())
    }
}

/// The model's answer to `params` from server `server`, for the call of
/// `caller`'s that it answers: recorded in that call's receipt, counted
/// against its session's caps, told under its span; given up, and
/// recorded as such, when that call `ended`.
pub async fn answer(
    server: &str,
    slot: &ModelSlot,
    caller: &super::elicit::Caller,
    ended: &tokio_util::sync::CancellationToken,
    params: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let activity = caller.activity.as_ref();
    let asker = format!("MCP server {server}");
    let refuse = |why: String| ErrorData::invalid_request(why, None);
    let Some((client, model)) = slot.get() else {
        return Err(refuse(
            "sandcrab has no model to answer with here (nothing is running a model)".into(),
        ));
    };
    let made = activity
        .and_then(|a| a.lock().ok().map(|a| a.model_calls.len()))
        .unwrap_or(0);
    if made >= MAX_SAMPLES_PER_CALL {
        return Err(refuse(format!(
            "a server makes at most {MAX_SAMPLES_PER_CALL} model calls while it answers one call"
        )));
    }
    let mut request = request(&model, &params).map_err(refuse)?;
    // The session's caps hold for what its servers ask the model too.
    let hold = match &caller.spend {
        Some(ledger) => {
            tokio::select! {
                fitted = ledger.fit_now(&mut request) => {
                    fitted.map_err(|reached| refuse(reached.message))?
                }
                _ = ended.cancelled() => {
                    return Err(refuse("the call it was for ended first".into()));
                }
            }
        }
        None => crate::llm::spend::Hold::none(),
    };
    let started = Instant::now();
    let conversation = match caller.root_session_id.as_str() {
        "" => caller.session_id.as_str(),
        root => root,
    };
    let told = crate::telemetry::genai::ModelCall::start(
        client.provider(),
        conversation,
        &request,
        caller.trace,
    );
    // A model call still running when the call ends is stopped.
    let answered = tokio::select! {
        answered = client.complete(&request) => Some(answered),
        _ = ended.cancelled() => None,
    };
    if let Some(answer) = &answered {
        told.finish(answer.as_ref());
    }
    let mut used = ModelUse {
        asker,
        model: model.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
        ..Default::default()
    };
    let result = match answered {
        None => {
            // Sent: the provider counts what it read.
            let charged = hold.charge_unfinished(0);
            used.input_tokens = charged.input_tokens;
            used.refused = Some("the call it was for ended first".into());
            Err(ErrorData::internal_error(
                "the call ended before the model answered".to_string(),
                None,
            ))
        }
        Some(Ok(response)) => {
            // The receipt keeps what was charged: a replay charges it.
            let charged = hold.charge(&response.usage);
            used.input_tokens = charged.input_tokens;
            used.cached_tokens = charged.cached_tokens;
            used.output_tokens = charged.output_tokens;
            used.cost_micros = charged.cost_micros;
            let stop = match response.finish_reason {
                crate::llm::FinishReason::Length => "maxTokens",
                _ => "endTurn",
            };
            serde_json::from_value(json!({
                "model": if response.model.is_empty() { model } else { response.model },
                "stopReason": stop,
                "role": "assistant",
                "content": {"type": "text", "text": response.text},
            }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
        }
        Some(Err(e)) => {
            used.refused = Some(e.to_string());
            Err(ErrorData::internal_error(
                format!("the model did not answer: {e}"),
                None,
            ))
        }
    };
    if let Some(activity) = activity
        && let Ok(mut activity) = activity.lock()
    {
        activity.model_calls.push(used);
    }
    result
}

/// The model request `params` ask for, bounded.
fn request(model: &str, params: &CreateMessageRequestParams) -> Result<Request, String> {
    let mut messages = Vec::new();
    let mut bytes = 0;
    if let Some(system) = &params.system_prompt {
        bytes += system.len();
        messages.push(Message::system(system.clone()));
    }
    for message in &params.messages {
        let message = serde_json::to_value(message).unwrap_or_default();
        let text = text_of(&message["content"]);
        bytes += text.len();
        messages.push(match message["role"].as_str() {
            Some("assistant") => Message::assistant(text),
            _ => Message::user(text),
        });
    }
    if bytes > MAX_SAMPLING_BYTES {
        return Err(format!(
            "the request holds {bytes} bytes of messages; sandcrab takes at most {MAX_SAMPLING_BYTES}"
        ));
    }
    if !messages.iter().any(|m| matches!(m, Message::User { .. })) {
        return Err("the request holds no user message".into());
    }
    Ok(Request {
        model: model.to_string(),
        messages,
        max_tokens: Some(params.max_tokens.clamp(1, MAX_SAMPLING_TOKENS)),
        temperature: params.temperature,
        ..Default::default()
    })
}

/// The text of a sampling message's content (one block or several).
fn text_of(content: &Value) -> String {
    let blocks = match content {
        Value::Array(blocks) => blocks.as_slice(),
        one => std::slice::from_ref(one),
    };
    blocks
        .iter()
        .filter_map(super::prompts::block_text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> CreateMessageRequestParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_request_is_bounded_in_bytes_and_tokens() {
        let asked = params(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "systemPrompt": "be brief",
            "maxTokens": 1_000_000
        }));
        let made = request("m", &asked).unwrap();
        assert_eq!(made.max_tokens, Some(MAX_SAMPLING_TOKENS));
        assert_eq!(made.messages.len(), 2);
        let huge = params(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "x".repeat(MAX_SAMPLING_BYTES + 1)}}],
            "maxTokens": 10
        }));
        assert!(request("m", &huge).unwrap_err().contains("at most"));
        let none = params(json!({"messages": [], "maxTokens": 10}));
        assert!(request("m", &none).is_err());
    }
}

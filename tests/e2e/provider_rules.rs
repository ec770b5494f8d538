//! What each real provider API rejects, for the loopback server's strict
//! mode: a conversation must be valid the way the real API checks it, or
//! the request gets the provider's 400. The rules here are the ones that
//! break agents in practice:
//!
//! - every tool call answered by exactly one result, right after it
//!   (Anthropic `tool_use`/`tool_result`, Responses `function_call`/
//!   `function_call_output`, Chat Completions `tool_calls`/`tool`, Gemini
//!   `functionCall`/`functionResponse`);
//! - opaque reasoning state sent back verbatim: Anthropic thinking blocks
//!   with the signature issued for that exact text, redacted thinking data,
//!   Responses reasoning items (encrypted content), Gemini thought
//!   signatures on the parts that carried them;
//! - Anthropic: with thinking on, an assistant turn with tool use starts
//!   with its thinking; text blocks are not empty;
//! - Gemini: function declarations use only the schema subset Gemini
//!   accepts.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use sandcrab::llm::ProviderKind;
use serde_json::Value;

/// Opaque reasoning state the server handed out, which later requests must
/// carry back unchanged.
#[derive(Debug, Clone, Default)]
pub struct Issued {
    /// Anthropic: thinking text by signature.
    pub thinking: BTreeMap<String, String>,
    /// Anthropic redacted thinking data; Responses encrypted reasoning;
    /// Gemini thought signatures.
    pub tokens: BTreeSet<String>,
}

impl Issued {
    /// Record what a reply the server sends hands out (its body text).
    pub fn note_reply(&mut self, kind: ProviderKind, body: &str) {
        // Streamed thinking blocks: text and signature by block index.
        let mut open: BTreeMap<u64, (String, String)> = BTreeMap::new();
        for data in body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .chain(std::iter::once(body))
        {
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            match kind {
                ProviderKind::Anthropic => {
                    collect_anthropic(&v, self);
                    let index = v["index"].as_u64().unwrap_or(0);
                    match (
                        v["type"].as_str(),
                        v.pointer("/delta/type").and_then(Value::as_str),
                    ) {
                        (Some("content_block_start"), _)
                            if v["content_block"]["type"] == "thinking" =>
                        {
                            open.insert(index, Default::default());
                        }
                        (Some("content_block_delta"), Some("thinking_delta")) => {
                            if let Some(b) = open.get_mut(&index) {
                                b.0.push_str(v["delta"]["thinking"].as_str().unwrap_or(""));
                            }
                        }
                        (Some("content_block_delta"), Some("signature_delta")) => {
                            if let Some(b) = open.get_mut(&index) {
                                b.1.push_str(v["delta"]["signature"].as_str().unwrap_or(""));
                            }
                        }
                        (Some("content_block_stop"), _) => {
                            if let Some((text, sig)) = open.remove(&index) {
                                self.thinking.insert(sig, text);
                            }
                        }
                        _ => {}
                    }
                }
                ProviderKind::OpenAi => collect_strings(&v, "encrypted_content", &mut self.tokens),
                ProviderKind::Gemini => collect_strings(&v, "thoughtSignature", &mut self.tokens),
                ProviderKind::OpenAiCompatible => {}
            }
        }
    }
}

fn collect_anthropic(v: &Value, issued: &mut Issued) {
    // Whole messages (non-streamed) and streamed thinking blocks; test
    // transcripts stream a block's thinking and signature in one block.
    if let Some(blocks) = v["content"].as_array() {
        for b in blocks {
            note_anthropic_block(b, issued);
        }
    }
    note_anthropic_block(&v["content_block"], issued);
    if let Some(sig) = v.pointer("/delta/signature").and_then(Value::as_str) {
        issued.tokens.insert(sig.to_string());
    }
}

fn note_anthropic_block(b: &Value, issued: &mut Issued) {
    match b["type"].as_str() {
        Some("thinking") => {
            if let Some(sig) = b["signature"].as_str().filter(|s| !s.is_empty()) {
                issued.thinking.insert(
                    sig.to_string(),
                    b["thinking"].as_str().unwrap_or("").to_string(),
                );
            }
        }
        Some("redacted_thinking") => {
            issued
                .tokens
                .insert(b["data"].as_str().unwrap_or("").to_string());
        }
        _ => {}
    }
}

fn collect_strings(v: &Value, key: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                if k == key
                    && let Some(s) = val.as_str()
                {
                    out.insert(s.to_string());
                }
                collect_strings(val, key, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, key, out)),
        _ => {}
    }
}

/// Check `body` the way the real API would; the error message if it would
/// be rejected with 400.
pub fn check(kind: ProviderKind, body: &Value, issued: &Issued) -> Result<(), String> {
    let text = body.to_string();
    for token in &issued.tokens {
        if !text.contains(&format!("\"{token}\"")) {
            return Err(format!(
                "reasoning state {token:.24}… issued earlier is missing from the conversation (it must be sent back unchanged)"
            ));
        }
    }
    match kind {
        ProviderKind::Anthropic => anthropic(body, issued),
        ProviderKind::OpenAi => responses(body),
        ProviderKind::OpenAiCompatible => chat(body),
        ProviderKind::Gemini => gemini(body),
    }
}

fn anthropic(body: &Value, issued: &Issued) -> Result<(), String> {
    if body["max_tokens"].as_u64().is_none() {
        return Err("max_tokens: Field required".into());
    }
    let thinking_on = body["thinking"]["type"] == "enabled";
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    if messages.first().map(|m| &m["role"]) != Some(&Value::from("user")) {
        return Err("messages: first message must use the \"user\" role".into());
    }
    let mut breakpoints = 0;
    count_cache_control(body, &mut breakpoints);
    if breakpoints > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let content = m["content"]
            .as_array()
            .ok_or_else(|| format!("messages.{i}.content: expected a list of blocks"))?;
        if content.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        for (j, b) in content.iter().enumerate() {
            if b["type"] == "text" && b["text"].as_str().unwrap_or("").is_empty() {
                return Err(format!(
                    "messages.{i}.content.{j}.text: text content blocks must be non-empty"
                ));
            }
            if b["type"] == "thinking" {
                let sig = b["signature"].as_str().unwrap_or("");
                match issued.thinking.get(sig) {
                    Some(text) if text == b["thinking"].as_str().unwrap_or("") => {}
                    _ => {
                        return Err(format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        ));
                    }
                }
            }
        }
        if m["role"] != "assistant" {
            continue;
        }
        let uses: Vec<&str> = content
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str())
            .collect();
        if uses.is_empty() {
            continue;
        }
        if thinking_on && i + 1 == messages.len() - 1 {
            let first = content[0]["type"].as_str().unwrap_or("");
            if first != "thinking" && first != "redacted_thinking" {
                return Err(format!(
                    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
                ));
            }
        }
        let next = messages.get(i + 1).ok_or_else(|| {
            format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}", uses.join(", "))
        })?;
        let results: Vec<&str> = next["content"]
            .as_array()
            .into_iter()
            .flatten()
            .take_while(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        let missing: Vec<&&str> = uses.iter().filter(|u| !results.contains(u)).collect();
        if next["role"] != "user" || !missing.is_empty() {
            return Err(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                i + 1,
                missing.iter().map(|s| **s).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let prev_uses: Vec<&str> = i
            .checked_sub(1)
            .and_then(|p| messages[p]["content"].as_array())
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str())
            .collect();
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                let id = b["tool_use_id"].as_str().unwrap_or("");
                if !prev_uses.contains(&id) {
                    return Err(format!(
                        "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
            }
        }
    }
    Ok(())
}

fn count_cache_control(v: &Value, n: &mut usize) {
    match v {
        Value::Object(map) => {
            if map.contains_key("cache_control") {
                *n += 1;
            }
            map.values().for_each(|x| count_cache_control(x, n));
        }
        Value::Array(items) => items.iter().for_each(|x| count_cache_control(x, n)),
        _ => {}
    }
}

fn responses(body: &Value) -> Result<(), String> {
    let input = body["input"]
        .as_array()
        .ok_or("Missing required parameter: 'input'.")?;
    let mut open: Vec<String> = Vec::new();
    let mut seen_reasoning = false;
    for item in input {
        match item["type"].as_str() {
            Some("function_call") => open.push(item["call_id"].as_str().unwrap_or("").to_string()),
            Some("function_call_output") => {
                let id = item["call_id"].as_str().unwrap_or("");
                match open.iter().position(|o| o == id) {
                    Some(p) => {
                        open.remove(p);
                    }
                    None => {
                        return Err(format!(
                            "No tool call found for function call output with call_id {id}."
                        ));
                    }
                }
            }
            Some("reasoning") => {
                seen_reasoning = true;
                if item["encrypted_content"].as_str().is_none() {
                    return Err(
                        "Reasoning items must carry encrypted_content when store is false.".into(),
                    );
                }
            }
            _ => {
                if !open.is_empty() {
                    return Err(format!(
                        "No tool output found for function call {}.",
                        open[0]
                    ));
                }
            }
        }
    }
    if let Some(id) = open.first() {
        return Err(format!("No tool output found for function call {id}."));
    }
    let include = body["include"].to_string();
    if body["store"] == false
        && body["reasoning"].is_object()
        && !include.contains("reasoning.encrypted_content")
    {
        return Err("with store=false, reasoning models need include: [\"reasoning.encrypted_content\"] to continue across turns".into());
    }
    let _ = seen_reasoning;
    Ok(())
}

fn chat(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("messages is required")?;
    let mut pending: Vec<String> = Vec::new();
    let mut ids = BTreeSet::new();
    for m in messages {
        match m["role"].as_str() {
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                match pending.iter().position(|p| p == id) {
                    Some(p) => {
                        pending.remove(p);
                    }
                    None => return Err("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into()),
                }
            }
            role => {
                if !pending.is_empty() {
                    return Err(format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                        pending.join(", ")
                    ));
                }
                if role == Some("assistant") {
                    for call in m["tool_calls"].as_array().into_iter().flatten() {
                        let id = call["id"].as_str().unwrap_or("").to_string();
                        if !ids.insert(id.clone()) {
                            return Err(format!(
                                "Duplicate tool call id '{id}' in the conversation."
                            ));
                        }
                        pending.push(id);
                    }
                }
            }
        }
    }
    if !pending.is_empty() {
        return Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            pending.join(", ")
        ));
    }
    Ok(())
}

fn gemini(body: &Value) -> Result<(), String> {
    for (t, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        for (f, decl) in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(params) = decl.get("parameters") {
                gemini_schema(
                    params,
                    &format!("tools[{t}].function_declarations[{f}].parameters"),
                )?;
            }
        }
    }
    let contents = body["contents"].as_array().ok_or("contents is required")?;
    for (i, c) in contents.iter().enumerate() {
        let calls = c["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p.get("functionCall").is_some())
            .count();
        if calls == 0 {
            continue;
        }
        let responses = contents
            .get(i + 1)
            .and_then(|n| n["parts"].as_array())
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p.get("functionResponse").is_some())
                    .count()
            })
            .unwrap_or(0);
        if responses != calls {
            return Err("Please ensure that function response turn comes immediately after a function call turn. And the number of function response parts should be equal to number of function call parts of the function call turn.".into());
        }
    }
    Ok(())
}

/// The OpenAPI subset Gemini's function declarations accept.
fn gemini_schema(schema: &Value, at: &str) -> Result<(), String> {
    const KNOWN: &[&str] = &[
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    ];
    let Some(map) = schema.as_object() else {
        return Err(format!("Invalid value at '{at}': expected an object"));
    };
    for (k, v) in map {
        if !KNOWN.contains(&k.as_str()) {
            return Err(format!(
                "Invalid JSON payload received. Unknown name \"{k}\" at '{at}': Cannot find field."
            ));
        }
        match k.as_str() {
            "type" => {
                let t = v
                    .as_str()
                    .ok_or_else(|| format!("Invalid value at '{at}.type'"))?;
                if ![
                    "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "string",
                    "number", "integer", "boolean", "array", "object",
                ]
                .contains(&t)
                {
                    return Err(format!("Invalid value at '{at}.type' ({t})"));
                }
            }
            "format" => {
                let f = v.as_str().unwrap_or("");
                if !["enum", "date-time", "int32", "int64", "float", "double"].contains(&f) {
                    return Err(format!(
                        "Invalid value at '{at}.format': format \"{f}\" is not supported"
                    ));
                }
            }
            "properties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| format!("Invalid value at '{at}.properties'"))?;
                for (name, s) in props {
                    gemini_schema(s, &format!("{at}.properties[{name}]"))?;
                }
            }
            "items" => gemini_schema(v, &format!("{at}.items"))?,
            "anyOf" => {
                for (n, s) in v.as_array().into_iter().flatten().enumerate() {
                    gemini_schema(s, &format!("{at}.any_of[{n}]"))?;
                }
            }
            "enum" if v.as_array().into_iter().flatten().any(|e| !e.is_string()) => {
                return Err(format!(
                    "Invalid value at '{at}.enum': only strings are allowed"
                ));
            }
            _ => {}
        }
    }
    let is_object = matches!(
        map.get("type").and_then(Value::as_str),
        Some("OBJECT" | "object")
    );
    if is_object
        && map
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
    {
        return Err(format!(
            "{at}.properties: should be non-empty for OBJECT type"
        ));
    }
    if let Some(required) = map.get("required").and_then(Value::as_array) {
        let props = map.get("properties").and_then(Value::as_object);
        for r in required {
            let r = r.as_str().unwrap_or("");
            if !props.is_some_and(|p| p.contains_key(r)) {
                return Err(format!("{at}.required[{r}]: property is not defined"));
            }
        }
    }
    Ok(())
}

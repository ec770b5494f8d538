//! Provider transcripts in each wire format, for the LLM and agent tests:
//! the same logical answers (text, a tool call with streamed arguments,
//! two parallel tool calls, reasoning) as each provider really sends them.

#![allow(dead_code)]

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::mock_llm::{Reply, sse};

/// A logical answer to script.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Text in pieces.
    Text(Vec<&'static str>),
    /// Tool calls: (id, name, argument JSON text in fragments).
    Tools(Vec<(String, String, Vec<String>)>),
    /// Reasoning, then text.
    Reasoned(&'static str, &'static str),
    /// Reasoning with the opaque state each provider requires back
    /// (Anthropic: two signed thinking blocks around a redacted one;
    /// Responses: an encrypted reasoning item; Gemini: a thought signature
    /// on each function call), then tool calls.
    ThinkingTools(Vec<(String, String, Vec<String>)>),
    /// Tool calls cut off by the output limit: the last call's arguments
    /// are incomplete JSON.
    CutOff(Vec<(String, String, Vec<String>)>),
}

/// A token unique to this process and call, for opaque reasoning state.
fn token(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One tool call with its arguments split in fragments.
pub fn tool(id: &str, name: &str, args: Value) -> (String, String, Vec<String>) {
    let text = args.to_string();
    let mid = text.len() / 2;
    let mid = (mid..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    (
        id.to_string(),
        name.to_string(),
        vec![text[..mid].to_string(), text[mid..].to_string()],
    )
}

/// Usage every transcript reports: 10 in (2 cached), 5 out.
pub const USAGE: (u64, u64, u64) = (10, 5, 2);

/// The streamed reply of `answer` in `kind`'s format.
pub fn stream(kind: ProviderKind, answer: &Answer) -> Reply {
    Reply::sse(match kind {
        ProviderKind::Anthropic => anthropic(answer),
        ProviderKind::OpenAi => openai(answer),
        ProviderKind::OpenAiCompatible => chat(answer),
        ProviderKind::Gemini => gemini(answer),
    })
}

fn anthropic(answer: &Answer) -> String {
    let mut ev = vec![
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":8,"cache_read_input_tokens":2,"output_tokens":1}}}),
        ),
        ("ping", json!({"type":"ping"})),
    ];
    let mut stop = "end_turn";
    let mut index = 0;
    let text_block = |ev: &mut Vec<(&str, Value)>, parts: &[&str], index: &mut u64| {
        ev.push(("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}})));
        for p in parts {
            ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":p}})));
        }
        ev.push((
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        ));
        *index += 1;
    };
    match answer {
        Answer::Text(parts) => text_block(&mut ev, parts, &mut index),
        Answer::Reasoned(thought, text) => {
            ev.push(("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})));
            ev.push(("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":thought}})));
            ev.push(("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-abc"}})));
            ev.push((
                "content_block_stop",
                json!({"type":"content_block_stop","index":0}),
            ));
            index = 1;
            text_block(&mut ev, &[text], &mut index);
        }
        Answer::ThinkingTools(calls) => {
            stop = "tool_use";
            let thinking = |ev: &mut Vec<(&str, Value)>, index: u64, thought: &str| {
                ev.push(("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"thinking","thinking":""}})));
                ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"thinking_delta","thinking":thought}})));
                ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"signature_delta","signature":token("sig")}})));
                ev.push((
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":index}),
                ));
            };
            // The issued state is noted from these events by the strict
            // server; thinking text and signature come in one block each.
            thinking(&mut ev, 0, "First, look at the file.");
            ev.push(("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":token("redacted")}})));
            ev.push((
                "content_block_stop",
                json!({"type":"content_block_stop","index":1}),
            ));
            thinking(&mut ev, 2, "Then change it.");
            index = 3;
            for (id, name, fragments) in calls {
                ev.push(("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}})));
                for f in fragments {
                    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":f}})));
                }
                ev.push((
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":index}),
                ));
                index += 1;
            }
        }
        Answer::CutOff(calls) => {
            stop = "max_tokens";
            for (id, name, fragments) in calls {
                ev.push(("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}})));
                for f in fragments {
                    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":f}})));
                }
                ev.push((
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":index}),
                ));
                index += 1;
            }
        }
        Answer::Tools(calls) => {
            stop = "tool_use";
            for (id, name, fragments) in calls {
                ev.push(("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}})));
                for f in fragments {
                    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":f}})));
                }
                ev.push((
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":index}),
                ));
                index += 1;
            }
        }
    }
    ev.push(("message_delta", json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":5}})));
    ev.push(("message_stop", json!({"type":"message_stop"})));
    sse(&ev)
}

fn openai(answer: &Answer) -> String {
    let usage = json!({"input_tokens":10,"output_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":0}});
    let mut ev = vec![(
        "response.created",
        json!({"type":"response.created","response":{"id":"resp_1","model":"gpt-test","status":"in_progress","output":[]}}),
    )];
    let text_item = |ev: &mut Vec<(&str, Value)>, parts: &[&str], index: u64| {
        ev.push(("response.output_item.added", json!({"type":"response.output_item.added","output_index":index,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}})));
        for p in parts {
            ev.push(("response.output_text.delta", json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":index,"content_index":0,"delta":p})));
        }
        let text: String = parts.concat();
        ev.push(("response.output_item.done", json!({"type":"response.output_item.done","output_index":index,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":text}]}})));
    };
    match answer {
        Answer::Text(parts) => text_item(&mut ev, parts, 0),
        Answer::Reasoned(thought, text) => {
            ev.push(("response.output_item.added", json!({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}})));
            ev.push(("response.reasoning_summary_text.delta", json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":thought})));
            text_item(&mut ev, &[text], 1);
        }
        Answer::ThinkingTools(calls) | Answer::CutOff(calls) => {
            let cut = matches!(answer, Answer::CutOff(_));
            let offset = if cut {
                0
            } else {
                let item = json!({"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look, then change."}],"encrypted_content":token("enc")});
                ev.push(("response.output_item.added", json!({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}})));
                ev.push(("response.reasoning_summary_text.delta", json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Look, then change."})));
                ev.push((
                    "response.output_item.done",
                    json!({"type":"response.output_item.done","output_index":0,"item":item}),
                ));
                1
            };
            for (i, (id, name, fragments)) in calls.iter().enumerate() {
                let item_id = format!("fc_{i}");
                let out = i + offset;
                ev.push(("response.output_item.added", json!({"type":"response.output_item.added","output_index":out,"item":{"type":"function_call","id":item_id,"call_id":id,"name":name,"arguments":""}})));
                for f in fragments {
                    ev.push(("response.function_call_arguments.delta", json!({"type":"response.function_call_arguments.delta","item_id":item_id,"output_index":out,"delta":f})));
                }
                let args: String = fragments.concat();
                if !cut {
                    ev.push(("response.function_call_arguments.done", json!({"type":"response.function_call_arguments.done","item_id":item_id,"output_index":out,"arguments":args})));
                    ev.push(("response.output_item.done", json!({"type":"response.output_item.done","output_index":out,"item":{"type":"function_call","id":item_id,"call_id":id,"name":name,"arguments":args}})));
                }
            }
            if cut {
                ev.push(("response.incomplete", json!({"type":"response.incomplete","response":{"id":"resp_1","model":"gpt-test","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":usage}})));
                return sse(&ev);
            }
        }
        Answer::Tools(calls) => {
            for (i, (id, name, fragments)) in calls.iter().enumerate() {
                let item_id = format!("fc_{i}");
                ev.push(("response.output_item.added", json!({"type":"response.output_item.added","output_index":i,"item":{"type":"function_call","id":item_id,"call_id":id,"name":name,"arguments":""}})));
                for f in fragments {
                    ev.push(("response.function_call_arguments.delta", json!({"type":"response.function_call_arguments.delta","item_id":item_id,"output_index":i,"delta":f})));
                }
                let args: String = fragments.concat();
                ev.push(("response.function_call_arguments.done", json!({"type":"response.function_call_arguments.done","item_id":item_id,"output_index":i,"arguments":args})));
                ev.push(("response.output_item.done", json!({"type":"response.output_item.done","output_index":i,"item":{"type":"function_call","id":item_id,"call_id":id,"name":name,"arguments":args}})));
            }
        }
    }
    ev.push(("response.completed", json!({"type":"response.completed","response":{"id":"resp_1","model":"gpt-test","status":"completed","output":[],"usage":usage}})));
    sse(&ev)
}

pub fn chat(answer: &Answer) -> String {
    let chunk = |delta: Value, finish: Value| json!({"id":"chatcmpl-1","object":"chat.completion.chunk","model":"local-test","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    let mut ev = vec![(
        "",
        chunk(json!({"role":"assistant","content":""}), Value::Null),
    )];
    let finish = match answer {
        Answer::Text(parts) => {
            for p in parts {
                ev.push(("", chunk(json!({"content":p}), Value::Null)));
            }
            "stop"
        }
        Answer::Reasoned(thought, text) => {
            ev.push(("", chunk(json!({"reasoning_content":thought}), Value::Null)));
            ev.push(("", chunk(json!({"content":text}), Value::Null)));
            "stop"
        }
        Answer::Tools(calls) | Answer::ThinkingTools(calls) | Answer::CutOff(calls) => {
            if matches!(answer, Answer::ThinkingTools(_)) {
                ev.push((
                    "",
                    chunk(
                        json!({"reasoning_content":"Look, then change."}),
                        Value::Null,
                    ),
                ));
            }
            for (i, (id, name, fragments)) in calls.iter().enumerate() {
                ev.push(("", chunk(json!({"tool_calls":[{"index":i,"id":id,"type":"function","function":{"name":name,"arguments":""}}]}), Value::Null)));
                for f in fragments {
                    ev.push((
                        "",
                        chunk(
                            json!({"tool_calls":[{"index":i,"function":{"arguments":f}}]}),
                            Value::Null,
                        ),
                    ));
                }
            }
            if matches!(answer, Answer::CutOff(_)) {
                "length"
            } else {
                "tool_calls"
            }
        }
    };
    ev.push(("", chunk(json!({}), json!(finish))));
    ev.push(("", json!({"id":"chatcmpl-1","object":"chat.completion.chunk","model":"local-test","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":2}}})));
    let mut text = sse(&ev);
    text.push_str("data: [DONE]\n\n");
    text
}

fn gemini(answer: &Answer) -> String {
    let usage = json!({"promptTokenCount":10,"candidatesTokenCount":5,"cachedContentTokenCount":2,"totalTokenCount":15});
    let chunk = |parts: Value| json!({"candidates":[{"content":{"role":"model","parts":parts},"index":0}],"responseId":"gem-1","modelVersion":"gemini-test"});
    let mut chunks: Vec<Value> = match answer {
        Answer::Text(parts) => parts.iter().map(|p| chunk(json!([{"text":p}]))).collect(),
        Answer::Reasoned(thought, text) => vec![
            chunk(json!([{"text":thought,"thought":true}])),
            chunk(json!([{"text":text}])),
        ],
        Answer::Tools(calls) => vec![chunk(Value::Array(
            calls
                .iter()
                .map(|(_, name, fragments)| {
                    let args: Value = serde_json::from_str(&fragments.concat()).unwrap();
                    json!({"functionCall":{"name":name,"args":args}})
                })
                .collect(),
        ))],
        Answer::ThinkingTools(calls) => vec![
            chunk(json!([{"text":"Look, then change.","thought":true}])),
            chunk(Value::Array(
                calls
                    .iter()
                    .map(|(_, name, fragments)| {
                        let args: Value = serde_json::from_str(&fragments.concat()).unwrap();
                        json!({"functionCall":{"name":name,"args":args},"thoughtSignature":token("gsig")})
                    })
                    .collect(),
            )),
        ],
        // Gemini stops before emitting a call it cannot finish.
        Answer::CutOff(_) => vec![chunk(json!([{"text":"I will now call"}]))],
    };
    let cut = matches!(answer, Answer::CutOff(_));
    let last = chunks.last_mut().unwrap();
    last["candidates"][0]["finishReason"] = json!(if cut { "MAX_TOKENS" } else { "STOP" });
    last["usageMetadata"] = usage;
    sse(&chunks.into_iter().map(|c| ("", c)).collect::<Vec<_>>())
}

/// The complete (non-streamed) JSON reply of `answer` in `kind`'s format.
pub fn complete(kind: ProviderKind, answer: &Answer) -> Reply {
    type Calls = Vec<(String, String, Value)>;
    let (text, calls, thought): (String, Calls, Option<&str>) = match answer {
        Answer::Text(parts) => (parts.concat(), vec![], None),
        Answer::Reasoned(t, text) => (text.to_string(), vec![], Some(*t)),
        Answer::ThinkingTools(_) | Answer::CutOff(_) => {
            unimplemented!("complete() replies for reasoning state and cut-offs are not needed")
        }
        Answer::Tools(calls) => (
            String::new(),
            calls
                .iter()
                .map(|(id, n, f)| {
                    (
                        id.clone(),
                        n.clone(),
                        serde_json::from_str(&f.concat()).unwrap(),
                    )
                })
                .collect(),
            None,
        ),
    };
    let body = match kind {
        ProviderKind::Anthropic => {
            let mut content = vec![];
            if let Some(t) = thought {
                content.push(json!({"type":"thinking","thinking":t,"signature":"sig-abc"}));
            }
            if !text.is_empty() {
                content.push(json!({"type":"text","text":text}));
            }
            for (id, name, args) in &calls {
                content.push(json!({"type":"tool_use","id":id,"name":name,"input":args}));
            }
            json!({"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":content,
                "stop_reason": if calls.is_empty() {"end_turn"} else {"tool_use"},
                "usage":{"input_tokens":8,"cache_read_input_tokens":2,"output_tokens":5}})
        }
        ProviderKind::OpenAi => {
            let mut output = vec![];
            if let Some(t) = thought {
                output.push(json!({"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":t}]}));
            }
            if !text.is_empty() {
                output.push(json!({"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]}));
            }
            for (id, name, args) in &calls {
                output.push(json!({"type":"function_call","id":"fc","call_id":id,"name":name,"arguments":args.to_string()}));
            }
            json!({"id":"resp_1","object":"response","model":"gpt-test","status":"completed","output":output,
                "usage":{"input_tokens":10,"output_tokens":5,"input_tokens_details":{"cached_tokens":2}}})
        }
        ProviderKind::OpenAiCompatible => {
            let mut message = json!({"role":"assistant","content": if text.is_empty() { Value::Null } else { json!(text) }});
            if let Some(t) = thought {
                message["reasoning_content"] = json!(t);
            }
            if !calls.is_empty() {
                message["tool_calls"] = calls.iter().map(|(id, name, args)| json!({"id":id,"type":"function","function":{"name":name,"arguments":args.to_string()}})).collect();
            }
            json!({"id":"chatcmpl-1","object":"chat.completion","model":"local-test","choices":[{"index":0,"message":message,
                "finish_reason": if calls.is_empty() {"stop"} else {"tool_calls"}}],
                "usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":2}}})
        }
        ProviderKind::Gemini => {
            let mut parts = vec![];
            if let Some(t) = thought {
                parts.push(json!({"text":t,"thought":true}));
            }
            if !text.is_empty() {
                parts.push(json!({"text":text}));
            }
            for (_, name, args) in &calls {
                parts.push(json!({"functionCall":{"name":name,"args":args}}));
            }
            json!({"candidates":[{"content":{"role":"model","parts":parts},"finishReason":"STOP","index":0}],
                "usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"cachedContentTokenCount":2},
                "responseId":"gem-1","modelVersion":"gemini-test"})
        }
    };
    Reply::json(200, body)
}

/// An error body with `message` in `kind`'s format.
pub fn error_body(kind: ProviderKind, status: u16, message: &str) -> Value {
    match kind {
        ProviderKind::Anthropic => {
            json!({"type":"error","error":{"type":"some_error","message":message}})
        }
        ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => {
            json!({"error":{"message":message,"type":"some_error","code":null}})
        }
        ProviderKind::Gemini => {
            json!({"error":{"code":status,"message":message,"status":"SOME_STATUS"}})
        }
    }
}

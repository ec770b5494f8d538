//! Token counts of what is sent, estimated before sending: a byte count
//! divided by a ratio below any tokenizer's average for code, JSON and
//! English (3 bytes per token, where BPE tokenizers average 3.5–4.5), so
//! the estimate is rarely low; the host corrects it with what a refusal
//! says the real count was.

use crate::types::{Message, Request, ToolDefinition};

/// Bytes per token assumed.
pub const BYTES_PER_TOKEN: u64 = 3;

/// What each message costs beyond its text (role markers, separators).
const MESSAGE_OVERHEAD: u64 = 8;

/// Estimated tokens of `text`.
pub fn text_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Estimated tokens of one message.
pub fn message_tokens(message: &Message) -> u64 {
    let tokens = match message {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            // Names and arguments travel as JSON.
            (message.char_len() as u64 + 16 * tool_calls.len() as u64).div_ceil(BYTES_PER_TOKEN)
        }
        _ => (message.char_len() as u64).div_ceil(BYTES_PER_TOKEN),
    };
    tokens + MESSAGE_OVERHEAD
}

/// Estimated tokens of the tool definitions (sent as JSON schemas).
pub fn tools_tokens(tools: &[ToolDefinition]) -> u64 {
    tools
        .iter()
        .map(|t| {
            let schema = serde_json::to_string(&t.parameters).map_or(0, |s| s.len());
            ((t.name.len() + t.description.len() + schema) as u64).div_ceil(BYTES_PER_TOKEN)
                + MESSAGE_OVERHEAD
        })
        .sum()
}

/// Estimated tokens of everything `request` sends (not the answer).
pub fn request_tokens(request: &Request) -> u64 {
    request.messages.iter().map(message_tokens).sum::<u64>() + tools_tokens(&request.tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn everything_sent_counts_and_the_estimate_is_not_below_four_bytes_a_token() {
        let text = "fn main() { println!(\"hello\"); }\n".repeat(100);
        let bare = Request {
            messages: vec![Message::user(text.clone())],
            ..Request::default()
        };
        let tokens = request_tokens(&bare);
        assert!(tokens >= text.len() as u64 / 3, "{tokens}");
        let with_tools = Request {
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a file. ".repeat(50),
                parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
            }],
            ..bare.clone()
        };
        assert!(request_tokens(&with_tools) > tokens + 200);
        let with_system = Request {
            messages: vec![Message::system("x".repeat(3000)), Message::user(text)],
            ..bare
        };
        assert_eq!(
            request_tokens(&with_system),
            tokens + 1000 + MESSAGE_OVERHEAD
        );
    }
}

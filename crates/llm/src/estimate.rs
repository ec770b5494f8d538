//! Token counts of what is sent, estimated before sending: a byte count
//! divided by a ratio below any tokenizer's average for code, JSON and
//! English (3 bytes per token, where BPE tokenizers average 3.5–4.5), so
//! the estimate is rarely low; the host corrects it with what a refusal
//! says the real count was.

use crate::types::{Message, Reasoning, ReasoningPart, Request, ToolDefinition};

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
    (sent_bytes(message) as u64).div_ceil(BYTES_PER_TOKEN) + MESSAGE_OVERHEAD
}

/// The bytes of `message` an adapter sends: its text, its calls as JSON,
/// and of its reasoning only the state sent back (Anthropic's signed
/// thinking, OpenAI's encrypted items, Gemini's signatures); the readable
/// reasoning text alone is never sent.
fn sent_bytes(message: &Message) -> usize {
    match message {
        Message::System { text } | Message::User { text } => text.len(),
        Message::ToolResult { content, .. } => content.len(),
        Message::Assistant {
            text,
            tool_calls,
            reasoning,
        } => {
            let calls: usize = tool_calls
                .iter()
                .map(|c| {
                    // Names and arguments travel as JSON.
                    16 + c.name.len()
                        + c.arguments.to_string().len()
                        + c.signature.as_ref().map_or(0, String::len)
                })
                .sum();
            text.len() + calls + reasoning.as_ref().map_or(0, reasoning_bytes)
        }
    }
}

/// The reasoning state an adapter sends back.
pub fn reasoning_bytes(reasoning: &Reasoning) -> usize {
    let parts: usize = reasoning
        .parts
        .iter()
        .map(|part| match part {
            ReasoningPart::Thinking {
                thinking,
                signature,
            } => thinking.len() + signature.len(),
            ReasoningPart::RedactedThinking { data } => data.len(),
            ReasoningPart::Item { item } => item.to_string().len(),
        })
        .sum();
    parts + reasoning.signature.as_ref().map_or(0, String::len)
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

    #[test]
    fn reasoning_counts_as_far_as_it_is_sent_back() {
        let answer = |reasoning| Message::Assistant {
            text: "done".into(),
            tool_calls: Vec::new(),
            reasoning: Some(reasoning),
        };
        let plain = message_tokens(&Message::assistant("done"));
        // Readable reasoning text alone (chat, Gemini) is not sent.
        let readable = answer(Reasoning {
            text: "thinking ".repeat(1000),
            ..Reasoning::default()
        });
        assert_eq!(message_tokens(&readable), plain);
        // Signed thinking (Anthropic) is sent back whole.
        let signed = answer(Reasoning {
            text: "thinking ".repeat(1000),
            signature: None,
            parts: vec![ReasoningPart::Thinking {
                thinking: "thinking ".repeat(1000),
                signature: "s".repeat(300),
            }],
        });
        assert_eq!(message_tokens(&signed), plain + 3100);
    }
}

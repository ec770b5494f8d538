//! The LLM client: one request/response/stream model and four wire
//! adapters (Anthropic Messages, OpenAI Responses, OpenAI-compatible Chat
//! Completions, Gemini), over real HTTP with retries and streaming.

pub mod adapters;
pub mod body;
mod client;
mod config;
mod error;
pub mod estimate;
pub mod local;
pub mod refusal;
pub mod retry;
pub mod scripted;
pub mod spend;
pub mod sse;
mod transport;
mod types;

pub use client::{EventStream, HttpClient, LlmClient, StubClient, client_for};
pub use config::{ProviderConfig, ProviderKind, is_loopback, keyed_http};
pub use error::{ErrorKind, LlmError};
pub use retry::RetryPolicy;
pub use types::{
    FinishReason, Message, Reasoning, ReasoningPart, Request, Response, StreamEvent, ToolCall,
    ToolChoice, ToolDefinition, Usage, parse_arguments,
};

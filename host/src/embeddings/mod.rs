//! Embeddings for memory by meaning: the `[embeddings]` settings, a client
//! for the two wire formats (OpenAI-compatible `/v1/embeddings` — llama.cpp's
//! server, Ollama, vLLM, OpenAI — and Gemini `embedContent`), the vectors'
//! storage form, and reciprocal rank fusion of two rankings.

mod client;
pub mod fuse;
pub mod vector;

pub use client::{EmbedError, Embedder};

use serde::Deserialize;

/// Which wire format the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbeddingProvider {
    /// `POST {base_url}/v1/embeddings` (`{model, input}` → `data[].embedding`).
    OpenaiCompatible,
    /// `POST {base_url}/v1beta/models/{model}:embedContent`.
    Gemini,
}

/// `[embeddings]` (trusted configuration only). Absent: memory is searched
/// by words alone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    pub provider: EmbeddingProvider,
    /// e.g. `http://127.0.0.1:8080` (llama.cpp), `http://127.0.0.1:11434`
    /// (Ollama), `https://api.openai.com`.
    pub base_url: String,
    pub model: String,
    /// The vectors' length; an endpoint answering another is an error.
    pub dimensions: usize,
    /// The variable holding the API key (none for a local server).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Texts per request (default 32).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// One request's time limit in ms (default 10000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The proxy its requests go through (default: none; the
    /// environment's proxy variables are not read).
    #[serde(default)]
    pub proxy: Option<String>,
}

//! The client interface the agent uses, the HTTP implementation over the
//! adapters, and the stub used when no provider is configured.

use std::sync::Arc;

use async_trait::async_trait;

use super::adapters::{self, Adapter};
use super::config::{ProviderConfig, ProviderKind};
use super::error::{ErrorKind, LlmError};
use super::transport::Transport;
use super::types::{Request, Response};

pub use super::types::EventStream;

/// A model provider.
#[async_trait]
pub trait LlmClient: Send + Sync {
    /// Provider id, for messages.
    fn provider(&self) -> &str;
    /// One complete answer.
    async fn complete(&self, request: &Request) -> Result<Response, LlmError>;
    /// A streamed answer.
    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError>;
}

/// Talks to a provider over HTTP through its wire adapter.
pub struct HttpClient {
    transport: Transport,
    adapter: Box<dyn Adapter>,
}

impl HttpClient {
    /// A client for `config`.
    pub fn new(config: ProviderConfig) -> Result<Self, LlmError> {
        let adapter = adapters::for_kind(config.kind);
        let transport = Transport::new(config)?;
        Ok(HttpClient { transport, adapter })
    }
}

#[async_trait]
impl LlmClient for HttpClient {
    fn provider(&self) -> &str {
        self.transport.config().kind.id()
    }

    async fn complete(&self, request: &Request) -> Result<Response, LlmError> {
        self.transport
            .complete(self.adapter.as_ref(), request)
            .await
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        self.transport.stream(self.adapter.as_ref(), request).await
    }
}

/// Used when no provider is configured: every call fails with a
/// configuration error that says how to fix it. Never panics.
pub struct StubClient {
    provider: String,
    message: String,
}

impl StubClient {
    /// A stub for `kind`, whose key variables are missing.
    pub fn unconfigured(kind: ProviderKind) -> Self {
        let vars = kind.key_vars().join(" or ");
        StubClient {
            provider: kind.id().to_string(),
            message: format!(
                "LLM provider not configured: set {vars} (or choose another provider with --provider)"
            ),
        }
    }

    fn error(&self) -> LlmError {
        LlmError::new(
            ErrorKind::Configuration,
            &self.provider,
            self.message.clone(),
        )
    }
}

#[async_trait]
impl LlmClient for StubClient {
    fn provider(&self) -> &str {
        &self.provider
    }

    async fn complete(&self, _: &Request) -> Result<Response, LlmError> {
        Err(self.error())
    }

    async fn stream(&self, _: &Request) -> Result<EventStream, LlmError> {
        Err(self.error())
    }
}

/// The client for `config`: HTTP when it can work, the stub when a
/// required key is missing.
pub fn client_for(config: ProviderConfig) -> Arc<dyn LlmClient> {
    if config.kind.requires_key() && config.api_key.is_none() {
        return Arc::new(StubClient::unconfigured(config.kind));
    }
    let kind = config.kind;
    match HttpClient::new(config) {
        Ok(client) => Arc::new(client),
        Err(err) => {
            tracing::error!("{err}");
            Arc::new(StubClient {
                provider: kind.id().to_string(),
                message: err.message,
            })
        }
    }
}

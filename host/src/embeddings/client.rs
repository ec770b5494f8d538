//! The embedding endpoint: texts in, vectors out, checked (count,
//! dimension, numbers) before anyone stores or compares them.

use std::time::Duration;

use serde_json::{Value, json};

use super::{EmbeddingProvider, EmbeddingsConfig};

/// Why texts got no vectors.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("the embedding endpoint {url} could not be reached: {message}")]
    Unreachable { url: String, message: String },
    #[error("the embedding endpoint {url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the embedding endpoint {url} answered something that is not embeddings: {why}")]
    Malformed { url: String, why: String },
    #[error(
        "the embedding endpoint {url} answered vectors of {got} dimensions, but [embeddings] dimensions = {expected}: set dimensions = {got} (and run `sandcrab sessions reindex`) or choose the model that makes {expected}"
    )]
    Dimensions {
        url: String,
        expected: usize,
        got: usize,
    },
    #[error("[embeddings] api_key_env = {0}, which is not set")]
    NoKey(String),
    #[error("[embeddings] {0}")]
    Config(String),
    #[error("the embedding endpoint {url} answered more than {limit} bytes")]
    TooLarge { url: String, limit: usize },
}

impl EmbedError {
    /// The endpoint refused what it was given (a text too long for it,
    /// say) rather than failing: worth trying the texts one by one.
    pub fn refused_input(&self) -> bool {
        matches!(self, EmbedError::Status { status, .. } if (400..500).contains(status) && *status != 401 && *status != 403 && *status != 404 && *status != 429)
    }
}

/// A client of one configured endpoint.
#[derive(Debug, Clone)]
pub struct Embedder {
    config: EmbeddingsConfig,
    http: reqwest::Client,
    key: Option<String>,
}

impl Embedder {
    /// A client for `config`, its key read from `env`.
    pub fn new(
        config: EmbeddingsConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, EmbedError> {
        if config.dimensions == 0 {
            return Err(EmbedError::Config("dimensions must be more than 0".into()));
        }
        let url = reqwest::Url::parse(&config.base_url).map_err(|e| {
            EmbedError::Config(format!("base_url '{}' is not a URL: {e}", config.base_url))
        })?;
        let key = match &config.api_key_env {
            Some(var) => Some(env(var).ok_or_else(|| EmbedError::NoKey(var.clone()))?),
            None => None,
        };
        match url.scheme() {
            "https" => {}
            "http" if key.is_none() || crate::llm::is_loopback(url.host()) => {}
            "http" => {
                return Err(EmbedError::Config(format!(
                    "refusing to send the API key over plain http to {}: use https, or a loopback address for a local server",
                    url.host_str().unwrap_or("?")
                )));
            }
            other => {
                return Err(EmbedError::Config(format!(
                    "base_url '{}' has scheme '{other}'; use http or https",
                    config.base_url
                )));
            }
        }
        let http = crate::llm::keyed_http(config.proxy.as_deref())
            .map_err(EmbedError::Config)?
            .timeout(Duration::from_millis(config.timeout_ms.unwrap_or(10_000)))
            .build()
            .map_err(|e| EmbedError::Unreachable {
                url: config.base_url.clone(),
                message: e.to_string(),
            })?;
        Ok(Embedder { config, http, key })
    }

    /// The model vectors are made with (stored beside each vector).
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The vectors' length.
    pub fn dimensions(&self) -> usize {
        self.config.dimensions
    }

    /// Texts per request.
    pub fn batch_size(&self) -> usize {
        self.config.batch_size.unwrap_or(32).max(1)
    }

    /// One vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size()) {
            match self.config.provider {
                EmbeddingProvider::OpenaiCompatible => out.extend(self.openai(chunk).await?),
                EmbeddingProvider::Gemini => {
                    for text in chunk {
                        out.push(self.gemini(text).await?);
                    }
                }
            }
        }
        Ok(out)
    }

    fn base(&self) -> &str {
        self.config.base_url.trim_end_matches('/')
    }

    async fn openai(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let base = self.base();
        let url = if base.ends_with("/v1") {
            format!("{base}/embeddings")
        } else {
            format!("{base}/v1/embeddings")
        };
        let mut request = self
            .http
            .post(&url)
            .json(&json!({"model": self.config.model, "input": texts}));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let body = self.send(&url, request).await?;
        let malformed = |why: &str| EmbedError::Malformed {
            url: url.clone(),
            why: why.to_string(),
        };
        let data = body["data"]
            .as_array()
            .ok_or_else(|| malformed("no `data` array"))?;
        if data.len() != texts.len() {
            return Err(malformed(&format!(
                "{} vectors for {} texts",
                data.len(),
                texts.len()
            )));
        }
        let mut vectors = vec![Vec::new(); texts.len()];
        for (position, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map_or(position, |i| i as usize);
            let slot = vectors
                .get_mut(index)
                .ok_or_else(|| malformed("an `index` out of range"))?;
            if !slot.is_empty() {
                return Err(malformed("two vectors for the same `index`"));
            }
            *slot = self.numbers(&url, &item["embedding"])?;
        }
        Ok(vectors)
    }

    async fn gemini(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let model = self.config.model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{model}:embedContent", self.base());
        let mut request = self.http.post(&url).json(&json!({
            "model": format!("models/{model}"),
            "content": {"parts": [{"text": text}]},
            "outputDimensionality": self.config.dimensions,
        }));
        if let Some(key) = &self.key {
            request = request.header("x-goog-api-key", key);
        }
        let body = self.send(&url, request).await?;
        self.numbers(&url, &body["embedding"]["values"])
    }

    async fn send(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Value, EmbedError> {
        let response = request.send().await.map_err(|e| EmbedError::Unreachable {
            url: url.to_string(),
            message: e.to_string(),
        })?;
        let status = response.status();
        // Room for the vectors asked for as JSON text, and then some: an
        // endpoint cannot make the host hold more.
        let limit = (1 << 20) + self.batch_size() * self.config.dimensions * 32;
        let bytes = crate::llm::body::read_capped(response, limit)
            .await
            .map_err(|e| match e {
                crate::llm::body::BodyError::TooLarge { .. } => EmbedError::TooLarge {
                    url: url.to_string(),
                    limit,
                },
                crate::llm::body::BodyError::Transport(e) => EmbedError::Unreachable {
                    url: url.to_string(),
                    message: e.to_string(),
                },
            })?;
        if !status.is_success() {
            return Err(EmbedError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: String::from_utf8_lossy(&bytes).chars().take(300).collect(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| EmbedError::Malformed {
            url: url.to_string(),
            why: format!("not JSON ({e})"),
        })
    }

    /// A JSON array of numbers as a vector of the configured length.
    fn numbers(&self, url: &str, value: &Value) -> Result<Vec<f32>, EmbedError> {
        let items = value.as_array().ok_or_else(|| EmbedError::Malformed {
            url: url.to_string(),
            why: "a vector that is not an array".into(),
        })?;
        let vector: Option<Vec<f32>> = items
            .iter()
            .map(|n| n.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect();
        let vector = vector.ok_or_else(|| EmbedError::Malformed {
            url: url.to_string(),
            why: "a vector holds something that is not a finite number".into(),
        })?;
        if vector.len() != self.config.dimensions {
            return Err(EmbedError::Dimensions {
                url: url.to_string(),
                expected: self.config.dimensions,
                got: vector.len(),
            });
        }
        Ok(vector)
    }
}

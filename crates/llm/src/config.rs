//! Which provider to talk to, where, and with which key.

use std::time::Duration;

use super::retry::RetryPolicy;

/// The wire format spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API.
    OpenAi,
    /// OpenAI-compatible Chat Completions (Ollama, llama.cpp, vLLM, OpenRouter).
    OpenAiCompatible,
    /// Google Gemini generateContent.
    Gemini,
}

impl ProviderKind {
    /// Every kind.
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
        ProviderKind::Gemini,
    ];

    /// The id used in config files and on the command line.
    pub fn id(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompatible => "openai-compatible",
            ProviderKind::Gemini => "gemini",
        }
    }

    /// Environment variables holding the API key, in order of preference.
    pub fn key_vars(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Anthropic => &["ANTHROPIC_API_KEY"],
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => &["OPENAI_API_KEY"],
            ProviderKind::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }

    /// Environment variable overriding the base URL.
    pub fn base_url_var(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => "OPENAI_BASE_URL",
            ProviderKind::Gemini => "GEMINI_BASE_URL",
        }
    }

    /// The public endpoint (a local Ollama for openai-compatible).
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::OpenAi => "https://api.openai.com",
            ProviderKind::OpenAiCompatible => "http://127.0.0.1:11434",
            ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        }
    }

    /// Whether calls need a key (local OpenAI-compatible servers do not).
    pub fn requires_key(self) -> bool {
        !matches!(self, ProviderKind::OpenAiCompatible)
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.id() == s)
            .ok_or_else(|| {
                format!(
                    "unknown provider '{s}' (expected anthropic, openai, gemini or openai-compatible)"
                )
            })
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// Everything needed to reach a provider.
#[derive(Clone, PartialEq)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub api_key: Option<String>,
    /// Without the API version path (`/v1`, `/v1beta` are added).
    pub base_url: String,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    /// Longest wait for the first bytes of an answer (a local model on a
    /// CPU may think for minutes before its first token).
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks of a streamed answer.
    pub read_timeout: Duration,
    /// The proxy requests go through: only one the operator configured
    /// for sandcrab (`[llm] proxy`), never `HTTP_PROXY` and its kin from
    /// the environment (a key meant for a loopback server would reach
    /// whatever they name, over plain http).
    pub proxy: Option<String>,
}

/// What every request sandcrab sends on the operator's behalf says it is
/// (servers can log and count it).
pub const USER_AGENT: &str = concat!("sandcrab/", env!("CARGO_PKG_VERSION"));

/// An HTTP client for requests that carry an operator's key: through
/// `proxy` when the operator named one for sandcrab, else straight to the
/// server (the environment's proxy variables are not read), never
/// following a redirect (it would carry the key wherever it points).
pub fn keyed_http(proxy: Option<&str>) -> Result<reqwest::ClientBuilder, String> {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none());
    match proxy {
        None => Ok(builder),
        Some(url) => {
            let proxy = reqwest::Proxy::all(url)
                .map_err(|e| format!("[llm] proxy '{url}' is not a proxy URL: {e}"))?;
            Ok(builder.proxy(proxy))
        }
    }
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("base_url", &self.base_url)
            .field("retry", &self.retry)
            .finish()
    }
}

impl ProviderConfig {
    /// `kind` with defaults: no key, the default base URL, standard
    /// retries, 10 s to connect, 300 s to the first bytes, 30 s between
    /// chunks.
    pub fn new(kind: ProviderKind) -> Self {
        ProviderConfig {
            kind,
            api_key: None,
            base_url: kind.default_base_url().to_string(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(300),
            read_timeout: Duration::from_secs(30),
            proxy: None,
        }
    }

    /// Key and base URL from the environment (`lookup` reads a variable);
    /// `base_url` (flag or config) wins over the environment.
    pub fn from_env(
        kind: ProviderKind,
        base_url: Option<&str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let mut config = ProviderConfig::new(kind);
        config.api_key = kind
            .key_vars()
            .iter()
            .find_map(|var| lookup(var).filter(|v| !v.trim().is_empty()));
        if let Some(url) = base_url
            .map(str::to_string)
            .or_else(|| lookup(kind.base_url_var()).filter(|v| !v.is_empty()))
        {
            config.base_url = url;
        }
        config
    }

    /// Refuse to send a key in the clear: with a key, the base URL must be
    /// `https://`, or `http://` to a loopback address.
    pub fn check_key_transport(&self) -> Result<(), String> {
        if self.api_key.is_none() {
            return Ok(());
        }
        let url = reqwest::Url::parse(&self.base_url)
            .map_err(|e| format!("base URL '{}' is not a URL: {e}", self.base_url))?;
        match url.scheme() {
            "https" => Ok(()),
            "http" if is_loopback(url.host()) => Ok(()),
            "http" => Err(format!(
                "refusing to send the {} API key over plain http to {}: use https, or a loopback address for a local server",
                self.kind,
                url.host_str().unwrap_or("?")
            )),
            other => Err(format!(
                "base URL '{}' has scheme '{other}'; use https",
                self.base_url
            )),
        }
    }

    /// The base URL without a trailing slash or API version segment.
    pub fn root(&self) -> String {
        let mut url = self.base_url.trim_end_matches('/').to_string();
        for suffix in ["/v1beta", "/v1"] {
            if let Some(stripped) = url.strip_suffix(suffix) {
                url = stripped.to_string();
                break;
            }
        }
        url
    }
}

/// Whether `host` is this machine (`localhost` or a loopback address).
pub fn is_loopback(host: Option<url::Host<&str>>) -> bool {
    match host {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_go_only_over_https_or_to_loopback() {
        let with = |url: &str| {
            let mut c = ProviderConfig::new(ProviderKind::Anthropic);
            c.api_key = Some("k".into());
            c.base_url = url.into();
            c.check_key_transport()
        };
        assert!(with("https://api.anthropic.com").is_ok());
        assert!(with("http://127.0.0.1:8080").is_ok());
        assert!(with("http://localhost:8080").is_ok());
        assert!(with("http://[::1]:8080").is_ok());
        let err = with("http://10.0.0.2:8080").unwrap_err();
        assert!(
            err.contains("plain http") && err.contains("10.0.0.2"),
            "{err}"
        );
        assert!(with("http://localhost.evil.example").is_err());
        assert!(with("ftp://x").is_err());
        let mut keyless = ProviderConfig::new(ProviderKind::OpenAiCompatible);
        keyless.base_url = "http://10.0.0.2:11434".into();
        assert!(
            keyless.check_key_transport().is_ok(),
            "no key, nothing to leak"
        );
    }
}

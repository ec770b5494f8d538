//! `[summarization]`: which model summarizes and how compaction behaves.
//!
//! ```toml
//! [summarization]
//! provider = "openai-compatible"   # absent: the main model
//! name = "qwen2.5-7b"
//! base_url = "http://127.0.0.1:8080/v1"
//! api_key_env = "SUMMARY_KEY"       # or api_key (only in your own config)
//! chunk_size = 20
//! keep_recent = 5
//! max_summary_tokens = 1024
//! clip_first = 2
//! clip_last = 2
//! buffer = 2
//! context_budget = 0.8
//! prompt = "…{persona}…{existing_summary}…{messages}…"
//! ```

use serde::{Deserialize, Serialize};

/// The `[summarization]` table with defaults applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SummarizationConfig {
    /// Provider of the summarizing model (absent: the main provider).
    pub provider: Option<String>,
    /// Its model name (absent: the main model).
    pub name: Option<String>,
    pub base_url: Option<String>,
    /// A literal key (trusted configuration only; prefer `api_key_env`).
    /// Never serialized: a recording of the settings must not hold it.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    /// Turns per summarized chunk.
    pub chunk_size: usize,
    /// Most recent turns kept verbatim.
    pub keep_recent: usize,
    /// Output limit of one summary.
    pub max_summary_tokens: u32,
    /// Oldest batches shown in the summary message.
    pub clip_first: usize,
    /// Newest batches shown in the summary message.
    pub clip_last: usize,
    /// Batches allowed beyond `clip_first + clip_last` before the oldest
    /// are folded into a deeper one.
    pub buffer: usize,
    /// Compact when the estimated context exceeds this share of the window.
    pub context_budget: f64,
    /// A prompt template replacing the summarizer plugin's.
    pub prompt: Option<String>,
}

impl Default for SummarizationConfig {
    fn default() -> Self {
        SummarizationConfig {
            provider: None,
            name: None,
            base_url: None,
            api_key: None,
            api_key_env: None,
            chunk_size: 20,
            keep_recent: 5,
            max_summary_tokens: 1024,
            clip_first: 2,
            clip_last: 2,
            buffer: 2,
            context_budget: 0.8,
            prompt: None,
        }
    }
}

/// A `[summarization]` table that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("[summarization]: {0}")]
pub struct ConfigError(String);

impl SummarizationConfig {
    /// Parse the table (empty: every default); unknown keys and bad values
    /// are errors naming the key.
    pub fn from_table(table: &toml::Table) -> Result<Self, ConfigError> {
        let config: SummarizationConfig = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError(e.message().to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Values the types admit but compaction cannot use.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.chunk_size == 0 {
            return Err(ConfigError("chunk_size must be at least 1".into()));
        }
        if !(self.context_budget > 0.0 && self.context_budget <= 1.0) {
            return Err(ConfigError(format!(
                "context_budget must be above 0 and at most 1 (it is {})",
                self.context_budget
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SummarizationConfig, ConfigError> {
        SummarizationConfig::from_table(&toml::from_str(text).unwrap())
    }

    #[test]
    fn ac6_1_model_fields_are_accepted() {
        let c = parse(
            "provider = \"openai-compatible\"\nname = \"small\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key = \"k\"\napi_key_env = \"K\"\n",
        )
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("openai-compatible"));
        assert_eq!(c.name.as_deref(), Some("small"));
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
        assert_eq!(c.api_key.as_deref(), Some("k"));
        assert_eq!(c.api_key_env.as_deref(), Some("K"));
    }

    #[test]
    fn ac6_2_compaction_fields_default_sensibly() {
        let c = parse("provider = \"anthropic\"\nname = \"m\"\n").unwrap();
        assert_eq!(
            (
                c.chunk_size,
                c.keep_recent,
                c.max_summary_tokens,
                c.clip_first,
                c.clip_last
            ),
            (20, 5, 1024, 2, 2)
        );
        assert_eq!(c.buffer, 2);
        assert_eq!(c.context_budget, 0.8);
    }

    #[test]
    fn ac6_5_an_absent_block_means_the_main_model_with_defaults() {
        let c = SummarizationConfig::from_table(&toml::Table::new()).unwrap();
        assert_eq!(c, SummarizationConfig::default());
        assert!(c.provider.is_none() && c.name.is_none());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let err = parse("chunk_sise = 3\n").unwrap_err().to_string();
        assert!(err.contains("chunk_sise"), "{err}");
        let err = parse("context_budget = 1.5\n").unwrap_err().to_string();
        assert!(err.contains("context_budget"), "{err}");
        let err = parse("chunk_size = 0\n").unwrap_err().to_string();
        assert!(err.contains("chunk_size"), "{err}");
    }
}

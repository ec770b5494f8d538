//! Which model summarizes for compaction, and with which prompt: the
//! `[summarization]` table's provider/model when set, else the main
//! client and model; the table's `prompt` when set, else the summarizer
//! plugin's.

use std::sync::Arc;

use super::build_error::BuildError;
use crate::compaction::{LlmSummarizer, PromptSource, SummarizationConfig};
use crate::llm::{LlmClient, ProviderConfig, ProviderKind, client_for};
use crate::plugin::PluginHost;

/// Used when no summarizer plugin is loaded and no prompt is configured.
const FALLBACK_PROMPT: &str = "Summarize this part of a conversation between a user and {persona} so the work can continue from the summary alone. Earlier summary:\n{existing_summary}\n\nMessages:\n{messages}\n\nKeep goals, decisions, files and commands with their results, open errors and next steps. Reply with the summary only.";

/// The summarizer for `summarization`, falling back to `main`/`main_model`.
pub fn summarizer(
    summarization: &SummarizationConfig,
    main: &Arc<dyn LlmClient>,
    main_model: &str,
    persona: String,
    host: &PluginHost,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<LlmSummarizer, BuildError> {
    let dedicated = summarization.provider.is_some()
        || summarization.base_url.is_some()
        || summarization.api_key.is_some()
        || summarization.api_key_env.is_some();
    let client = if dedicated {
        let kind: ProviderKind = match &summarization.provider {
            Some(id) => id
                .parse()
                .map_err(|e| BuildError::Config(format!("[summarization] provider: {e}")))?,
            None => main
                .provider()
                .parse()
                .map_err(|e| BuildError::Config(format!("[summarization] provider: {e}")))?,
        };
        let mut config = ProviderConfig::from_env(kind, summarization.base_url.as_deref(), env);
        if let Some(var) = &summarization.api_key_env {
            config.api_key = Some(env(var).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                BuildError::Config(format!(
                    "[summarization] api_key_env names {var}, which is not set"
                ))
            })?);
        }
        if let Some(key) = &summarization.api_key {
            config.api_key = Some(key.clone());
        }
        config
            .check_key_transport()
            .map_err(|e| BuildError::Config(format!("[summarization]: {e}")))?;
        client_for(config)
    } else {
        main.clone()
    };
    let prompt = match (&summarization.prompt, host.summarizer()) {
        (Some(template), _) => PromptSource::Template(template.clone()),
        (None, Some(plugin)) => PromptSource::Plugin(plugin.clone()),
        (None, None) => PromptSource::Template(FALLBACK_PROMPT.to_string()),
    };
    Ok(LlmSummarizer {
        client,
        model: summarization
            .name
            .clone()
            .unwrap_or_else(|| main_model.to_string()),
        max_tokens: summarization.max_summary_tokens,
        persona,
        prompt,
    })
}

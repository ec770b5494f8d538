//! The [`Summarizer`] that asks a model: the prompt comes from
//! `[summarization] prompt` when set, else from the summarizer plugin.

use std::sync::Arc;

use super::compactor::Summarizer;
use super::entry::Entry;
use super::prompt::interpolate_prompt;
use crate::llm::{LlmClient, Message, Request};
use crate::plugin::{LoadedPlugin, SummaryMessage};

/// Where the prompt comes from.
pub enum PromptSource {
    /// `[summarization] prompt`, with placeholders.
    Template(String),
    /// A summarizer plugin's `render`.
    Plugin(Arc<LoadedPlugin>),
}

/// Summarizes with `client`/`model`.
pub struct LlmSummarizer {
    pub client: Arc<dyn LlmClient>,
    pub model: String,
    pub max_tokens: u32,
    /// Who the agent is (`{persona}`).
    pub persona: String,
    pub prompt: PromptSource,
}

impl LlmSummarizer {
    async fn render(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        match &self.prompt {
            PromptSource::Template(template) => {
                let text: Vec<String> = messages
                    .iter()
                    .map(|m| format!("[{}] {}", m.role, m.text))
                    .collect();
                Ok(interpolate_prompt(
                    template,
                    &self.persona,
                    existing,
                    &text.join("\n"),
                ))
            }
            PromptSource::Plugin(plugin) => {
                let messages: Vec<SummaryMessage> = messages
                    .iter()
                    .map(|m| SummaryMessage {
                        role: m.role.clone(),
                        content: m.text.clone(),
                    })
                    .collect();
                plugin
                    .render_summary_prompt(&self.persona, existing, &messages)
                    .await
                    .map_err(|e| format!("the summarizer plugin failed: {e}"))
            }
        }
    }
}

#[async_trait::async_trait]
impl Summarizer for LlmSummarizer {
    async fn summarize(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        let prompt = self.render(existing, messages).await?;
        let mut request = Request {
            model: self.model.clone(),
            messages: vec![Message::user(prompt)],
            max_tokens: Some(self.max_tokens),
            ..Request::default()
        };
        // A summary is spend of the session it is made for.
        let hold = match crate::llm::spend::charged() {
            Some(ledger) => ledger
                .fit_now(&mut request)
                .await
                .map_err(|reached| format!("not summarized: {}", reached.message))?,
            None => crate::llm::spend::Hold::none(),
        };
        let told = crate::telemetry::genai::ModelCall::start(
            self.client.provider(),
            "",
            &request,
            crate::telemetry::current(),
        );
        let answered = self.client.complete(&request).await;
        told.finish(answered.as_ref());
        let response = answered.map_err(|e| format!("the summarizing model failed: {e}"))?;
        hold.charge(&response.usage);
        let text = response.text.trim().to_string();
        if text.is_empty() {
            return Err("the summarizing model answered with no text".into());
        }
        Ok(text)
    }
}

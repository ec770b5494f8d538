//! The default summarization prompt: folds the previous summary and a chunk
//! of messages into one prompt for the summarizing model.

use sandcrab_sdk::prelude::*;
use sandcrab_sdk::{Message, Summarizer};

struct Default;

impl Summarizer for Default {
    fn render(persona: String, existing_summary: String, messages: Vec<Message>) -> String {
        let mut prompt = String::new();
        prompt.push_str("You are compressing the history of a conversation between a user and an AI agent so the agent can continue the work with a shorter context.\n\n");
        if !persona.trim().is_empty() {
            prompt.push_str(&format!("The agent: {}\n\n", persona.trim()));
        }
        if !existing_summary.trim().is_empty() {
            prompt.push_str("Summary of the conversation so far:\n<summary>\n");
            prompt.push_str(existing_summary.trim());
            prompt.push_str("\n</summary>\n\n");
        }
        prompt.push_str("New messages to fold into the summary:\n<messages>\n");
        for m in &messages {
            prompt.push_str(&format!("[{}] {}\n", m.role, m.content.trim()));
        }
        prompt.push_str("</messages>\n\n");
        prompt.push_str("Write one updated summary that keeps: the user's goals and constraints, decisions made and why, files created or changed (with paths), commands run and their important results, errors still open, and what remains to do. Keep names (of people, hosts, services, branches), numbers, dates, versions and settings exactly as written: the summary is searched for them later. Be specific and factual; drop chit-chat. Reply with the summary only.");
        prompt
    }
}

export_summarizer!(Default);

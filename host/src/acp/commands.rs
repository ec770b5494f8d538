//! The slash commands an editor offers in a sandcrab session, and what
//! each does when a prompt is one.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::agent::Session;

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Summarize and archive the older part of the conversation now.
    Compact,
    /// Switch the model (same provider); None: say which is in use.
    Model(Option<String>),
}

/// Name, description and input hint of each command.
const COMMANDS: [(&str, &str, Option<&str>); 2] = [
    (
        "compact",
        "Summarize and archive the older part of the conversation now (memory_read finds it later)",
        None,
    ),
    (
        "model",
        "Switch to another model of the same provider, or say which one is in use",
        Some("a model name"),
    ),
];

/// The commands as ACP's `availableCommands`: sandcrab's own, then the
/// MCP servers' `prompts`.
pub fn advertised(prompts: &[crate::mcp::PromptCommand]) -> Vec<Value> {
    let own = COMMANDS.iter().map(|(name, description, hint)| match hint {
        Some(hint) => {
            json!({"name": name, "description": description, "input": {"hint": hint}})
        }
        None => json!({"name": name, "description": description}),
    });
    let served = prompts.iter().map(|p| {
        let description = p.summary();
        match p.hint() {
            hint if hint.is_empty() => json!({"name": p.name(), "description": description}),
            hint => json!({"name": p.name(), "description": description, "input": {"hint": hint}}),
        }
    });
    own.chain(served).collect()
}

impl Command {
    /// The command a prompt is, if it is one.
    pub fn parse(prompt: &str) -> Option<Command> {
        let rest = prompt.trim().strip_prefix('/')?;
        let (name, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let argument = Some(argument.trim().to_string()).filter(|a| !a.is_empty());
        match name {
            "compact" => Some(Command::Compact),
            "model" => Some(Command::Model(argument)),
            _ => None,
        }
    }

    /// Run it on `session`; what to tell the editor.
    pub async fn run(&self, session: &Arc<Session>) -> String {
        match self {
            Command::Compact => {
                let stats = session.compact_on_request().await;
                if stats.messages_compressed == 0 {
                    "Nothing to compact yet.".into()
                } else {
                    format!(
                        "Compacted {} messages: about {} tokens before, {} after.",
                        stats.messages_compressed,
                        stats.tokens_estimate_before,
                        stats.tokens_estimate_after
                    )
                }
            }
            Command::Model(None) => format!("The model is {}.", session.model()),
            Command::Model(Some(name)) if !Session::valid_model_name(name) => {
                "A model name is one word of printable ASCII.".into()
            }
            Command::Model(Some(name)) => {
                session.set_model(name);
                format!(
                    "The model is {name} from the next request on (its context window: {} tokens).",
                    session.context_window()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_commands_are_commands() {
        assert_eq!(Command::parse(" /compact "), Some(Command::Compact));
        assert_eq!(
            Command::parse("/model gpt-5"),
            Some(Command::Model(Some("gpt-5".into())))
        );
        assert_eq!(Command::parse("/model"), Some(Command::Model(None)));
        assert_eq!(Command::parse("/etc/passwd is odd"), None);
        assert_eq!(Command::parse("compact"), None);
        assert_eq!(advertised(&[]).len(), COMMANDS.len());
    }
}

//! A server's prompts, offered to the operator as slash commands
//! `/mcp__SERVER__PROMPT [ARGUMENT…]` (Claude Code's spelling): listed
//! from the servers that declare prompts, and rendered (`prompts/get`)
//! into the message the operator sends. A server is untrusted: how many
//! prompts it offers, how long their descriptions are and how many bytes
//! a rendered prompt holds are all bounded.

use rmcp::model::GetPromptRequestParams;
use serde_json::Value;

use super::McpServers;
use super::servers::McpServer;

/// What starts a prompt's command.
pub const PREFIX: &str = "/mcp__";
/// Most prompts offered from one server.
pub const MAX_PROMPTS: usize = 64;
/// Most bytes of a rendered prompt (more is cut, and says so).
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// One prompt of one server, as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCommand {
    pub server: String,
    pub prompt: String,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    pub name: String,
    pub required: bool,
}

/// Why a prompt command gave no message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PromptError {
    #[error("no MCP server '{server}' has a prompt '{prompt}' (/help lists the prompts)")]
    Unknown { server: String, prompt: String },
    #[error("{command} needs its argument '{name}': {usage}")]
    Missing {
        command: String,
        name: String,
        usage: String,
    },
    #[error("{command} takes no argument '{name}': {usage}")]
    Unexpected {
        command: String,
        name: String,
        usage: String,
    },
    #[error("MCP server '{server}': {message}")]
    Server { server: String, message: String },
}

impl PromptCommand {
    /// The command, without its slash: `mcp__SERVER__PROMPT`.
    pub fn name(&self) -> String {
        format!("{}{}__{}", &PREFIX[1..], self.server, self.prompt)
    }

    /// Its arguments as typed: `NAME` required, `[NAME]` optional.
    pub fn hint(&self) -> String {
        self.arguments
            .iter()
            .map(|a| match a.required {
                true => a.name.clone(),
                false => format!("[{}]", a.name),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// What it is, for a list of commands: its description and its server.
    pub fn summary(&self) -> String {
        match self.description.is_empty() {
            true => format!("MCP server {}'s prompt", self.server),
            false => format!("{} (MCP server {})", self.description, self.server),
        }
    }

    fn usage(&self) -> String {
        format!("/{} {}", self.name(), self.hint())
            .trim()
            .to_string()
    }

    /// The arguments `typed` gives: `name=value` words by name, the
    /// others in the declared order (the last takes the rest of the line).
    fn bind(&self, typed: &str) -> Result<serde_json::Map<String, Value>, PromptError> {
        let mut bound = serde_json::Map::new();
        let mut positional = Vec::new();
        for word in typed.split_whitespace() {
            // `name=value` before the first word in order; after it, the
            // words are text (the last argument may hold an `=`).
            match word.split_once('=') {
                Some((name, value))
                    if positional.is_empty()
                        && !value.is_empty()
                        && !bound.contains_key(name)
                        && self.arguments.iter().any(|a| a.name == name) =>
                {
                    bound.insert(name.to_string(), Value::String(value.to_string()));
                }
                _ => positional.push(word),
            }
        }
        let open: Vec<&PromptArgument> = self
            .arguments
            .iter()
            .filter(|a| !bound.contains_key(&a.name))
            .collect();
        for (i, argument) in open.iter().enumerate() {
            if i >= positional.len() {
                break;
            }
            let value = if i + 1 == open.len() {
                positional[i..].join(" ")
            } else {
                positional[i].to_string()
            };
            bound.insert(argument.name.clone(), Value::String(value));
        }
        if positional.len() > open.len() && open.is_empty() {
            return Err(PromptError::Unexpected {
                command: format!("/{}", self.name()),
                name: positional[0].to_string(),
                usage: self.usage(),
            });
        }
        if let Some(missing) = self
            .arguments
            .iter()
            .find(|a| a.required && !bound.contains_key(&a.name))
        {
            return Err(PromptError::Missing {
                command: format!("/{}", self.name()),
                name: missing.name.clone(),
                usage: self.usage(),
            });
        }
        Ok(bound)
    }
}

impl McpServers {
    /// Every prompt of the servers that declare prompts, as commands; a
    /// server that cannot be reached is a warning.
    pub async fn prompts(&self) -> (Vec<PromptCommand>, Vec<String>) {
        let listed = futures::future::join_all(self.iter().map(|s| prompts_of(s))).await;
        let mut commands = Vec::new();
        let mut warnings = Vec::new();
        for found in listed {
            match found {
                Ok(found) => commands.extend(found),
                Err(warning) => warnings.push(warning),
            }
        }
        (commands, warnings)
    }

    /// The message of prompt command `input` (`/mcp__SERVER__PROMPT
    /// ARGS`); None when `input` is no prompt command.
    pub async fn render_prompt(&self, input: &str) -> Option<Result<String, PromptError>> {
        let rest = input.trim().strip_prefix(PREFIX)?;
        let (command, typed) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        // The server is the configured one the command starts with (its
        // name may hold `__` too).
        let found = self.iter().find(|s| {
            command
                .strip_prefix(s.name())
                .is_some_and(|r| r.starts_with("__"))
        });
        let Some(found) = found else {
            let (server, prompt) = command.split_once("__")?;
            return Some(Err(PromptError::Unknown {
                server: server.to_string(),
                prompt: prompt.to_string(),
            }));
        };
        let server = found.name();
        let prompt = &command[server.len() + 2..];
        let unknown = || PromptError::Unknown {
            server: server.to_string(),
            prompt: prompt.to_string(),
        };
        let listed = match prompts_of(found).await {
            Ok(listed) => listed,
            Err(message) => {
                return Some(Err(PromptError::Server {
                    server: server.to_string(),
                    message,
                }));
            }
        };
        let Some(command) = listed.into_iter().find(|c| c.prompt == prompt) else {
            return Some(Err(unknown()));
        };
        Some(match command.bind(typed) {
            Ok(arguments) => get(found, &command, arguments).await,
            Err(e) => Err(e),
        })
    }
}

/// The prompts of `server`, when it declares prompts.
async fn prompts_of(server: &McpServer) -> Result<Vec<PromptCommand>, String> {
    let peer = server.peer().await.map_err(|e| e.to_string())?;
    let declares = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.prompts.is_some());
    if !declares {
        return Ok(Vec::new());
    }
    let listed = tokio::time::timeout(server.call_timeout(), peer.list_all_prompts())
        .await
        .map_err(|_| format!("MCP server '{}': prompts/list timed out", server.name()))?;
    let listed = match listed {
        Ok(listed) => listed,
        Err(e) => return Err(server.refused("prompts/list", e).await.to_string()),
    };
    Ok(listed
        .into_iter()
        .filter(|p| plain_name(&p.name))
        .take(MAX_PROMPTS)
        .map(|p| PromptCommand {
            server: server.name().to_string(),
            description: super::resources::clip_line(&p.description.unwrap_or_default()),
            arguments: p
                .arguments
                .unwrap_or_default()
                .into_iter()
                .filter(|a| plain_name(&a.name))
                .map(|a| PromptArgument {
                    name: a.name,
                    required: a.required.unwrap_or(false),
                })
                .collect(),
            prompt: p.name,
        })
        .collect())
}

/// Prompt `command` of `server` with `arguments`, rendered.
async fn get(
    server: &McpServer,
    command: &PromptCommand,
    arguments: serde_json::Map<String, Value>,
) -> Result<String, PromptError> {
    let failed = |message: String| PromptError::Server {
        server: server.name().to_string(),
        message,
    };
    let peer = server.peer().await.map_err(|e| failed(e.to_string()))?;
    let params = GetPromptRequestParams::new(&command.prompt).with_arguments(arguments);
    let got = tokio::time::timeout(server.call_timeout(), peer.get_prompt(params))
        .await
        .map_err(|_| failed("prompts/get timed out".into()))?;
    let got = match got {
        Ok(got) => got,
        Err(e) => return Err(failed(server.refused("prompts/get", e).await.to_string())),
    };
    let got = serde_json::to_value(&got).unwrap_or_default();
    Ok(render(&got["messages"]))
}

/// The messages of a prompt as one message: their text, embedded text
/// resources included, other content named; cut at [`MAX_PROMPT_BYTES`].
pub fn render(messages: &Value) -> String {
    let mut parts = Vec::new();
    for message in messages.as_array().into_iter().flatten() {
        let Some(part) = block_text(&message["content"]) else {
            continue;
        };
        match message["role"].as_str() {
            Some("assistant") => parts.push(format!("(assistant) {part}")),
            _ => parts.push(part),
        }
    }
    let whole = parts.join("\n\n");
    if whole.len() <= MAX_PROMPT_BYTES {
        return whole;
    }
    format!(
        "{}\n[prompt cut at {MAX_PROMPT_BYTES} of {} bytes]",
        &whole[..whole.floor_char_boundary(MAX_PROMPT_BYTES)],
        whole.len()
    )
}

/// One content block a server sent (of a prompt's or a sampling
/// request's message) as text: text as it is, an embedded text resource
/// its text, anything else named (None: not a block).
pub(super) fn block_text(block: &Value) -> Option<String> {
    Some(match block["type"].as_str()? {
        "text" => block["text"].as_str().unwrap_or_default().to_string(),
        "resource" => match block["resource"]["text"].as_str() {
            Some(text) => text.to_string(),
            None => format!(
                "[binary resource {}]",
                block["resource"]["uri"].as_str().unwrap_or("?")
            ),
        },
        "resource_link" => format!("[resource {}]", block["uri"].as_str().unwrap_or("?")),
        other => format!("[{other} content]"),
    })
}

/// A name that can be typed as one word of a command.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> PromptCommand {
        PromptCommand {
            server: "git".into(),
            prompt: "review".into(),
            description: String::new(),
            arguments: vec![
                PromptArgument {
                    name: "branch".into(),
                    required: true,
                },
                PromptArgument {
                    name: "focus".into(),
                    required: false,
                },
            ],
        }
    }

    #[test]
    fn arguments_bind_by_name_or_in_order_and_the_last_takes_the_rest() {
        let bound = review().bind("main security and speed").unwrap();
        assert_eq!(bound["branch"], "main");
        assert_eq!(bound["focus"], "security and speed");
        let bound = review().bind("focus=tests dev").unwrap();
        assert_eq!(bound["branch"], "dev");
        assert_eq!(bound["focus"], "tests");
        // After the first word in order, `name=` is text.
        let bound = review().bind("dev look at focus=x").unwrap();
        assert_eq!(bound["focus"], "look at focus=x");
        let missing = review().bind("").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "/mcp__git__review needs its argument 'branch': /mcp__git__review branch [focus]"
        );
    }

    #[test]
    fn a_prompt_without_arguments_refuses_words() {
        let bare = PromptCommand {
            arguments: Vec::new(),
            ..review()
        };
        assert!(bare.bind("").unwrap().is_empty());
        assert!(matches!(
            bare.bind("extra"),
            Err(PromptError::Unexpected { .. })
        ));
    }

    #[test]
    fn a_rendered_prompt_is_bounded() {
        let huge = "x".repeat(MAX_PROMPT_BYTES * 2);
        let messages = serde_json::json!([
            {"role": "user", "content": {"type": "text", "text": "first"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "a://b", "text": huge}}},
        ]);
        let rendered = render(&messages);
        assert!(rendered.starts_with("first\n\n"));
        assert!(rendered.len() < MAX_PROMPT_BYTES + 100);
        assert!(rendered.ends_with(&format!("of {} bytes]", 7 + MAX_PROMPT_BYTES * 2)));
    }
}

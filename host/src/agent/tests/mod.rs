//! Loop tests with a scripted in-memory model client, one module per phase
//! of the coding-agent-loop test plan.

mod errors;
mod lifecycle;
mod looping;
mod memory;
mod steering;
mod subagents;

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Event, EventKind, Profile, Session, SessionConfig, SessionParts};
use crate::llm::scripted::{ScriptedClient, Step};
use crate::plugin::{ProfileInfo, ToolSpec};
use crate::tools::{FnTool, ToolRegistry};

pub fn profile(window: u64) -> Arc<Profile> {
    Arc::new(Profile {
        info: ProfileInfo {
            id: "anthropic".into(),
            default_model: "test-model".into(),
            context_window: window,
            parallel_tool_calls: true,
            tool_names: vec!["echo".into()],
            project_doc_files: vec![],
            max_output_tokens: 0,
        },
        base_instructions: "You are a test agent.".into(),
    })
}

/// A registry with `echo` (returns its `text`) and `fail` (errors "boom").
pub fn tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let schema = json!({"type":"object","properties":{"text":{"type":"string"}}});
    r.register(
        ToolSpec {
            name: "echo".into(),
            description: "Echo text".into(),
            parameters: schema.clone(),
            traits: Default::default(),
        },
        Arc::new(FnTool(|args: Value, _| async move {
            Ok(format!("echo: {}", args["text"].as_str().unwrap_or("")))
        })),
    );
    r.register(
        ToolSpec {
            name: "fail".into(),
            description: "Always fails".into(),
            parameters: schema,
            traits: Default::default(),
        },
        Arc::new(FnTool(|_, _| async { Err("boom".to_string()) })),
    );
    r
}

pub struct Harness {
    pub session: Arc<Session>,
    pub client: Arc<ScriptedClient>,
    /// The session's subagents.
    pub children: Arc<super::Subagents>,
}

pub fn harness(steps: Vec<Step>, configure: impl FnOnce(&mut SessionConfig)) -> Harness {
    harness_with(ScriptedClient::new(steps), configure, 200_000)
}

pub fn harness_with(
    client: ScriptedClient,
    configure: impl FnOnce(&mut SessionConfig),
    window: u64,
) -> Harness {
    let client = Arc::new(client);
    let mut config = SessionConfig::new("test-model");
    configure(&mut config);
    let children = super::Subagents::new();
    let session = Session::new(SessionParts {
        children: Some(children.clone()),
        ..SessionParts::new(
            client.clone(),
            profile(window),
            tools().into(),
            config,
            std::env::temp_dir(),
        )
    });
    Harness {
        session,
        client,
        children,
    }
}

/// Every event emitted so far (the stream is drained without waiting).
pub fn drain(events: &mut super::EventStream) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

pub fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind()).collect()
}

use futures::FutureExt;

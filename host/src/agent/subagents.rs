//! Subagents: child sessions with their own history, sharing the workspace
//! and sandbox, driven by the tools `spawn_agent`, `send_input`, `wait` and
//! `close_agent`. Depth is limited by `max_subagent_depth`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::session::{Session, SessionError, SessionParts, SessionState};
use crate::plugin::ToolSpec;
use crate::tools::{FnTool, ToolRegistry};

/// A running child.
struct Child {
    session: Arc<Session>,
    task: Option<JoinHandle<Result<(), SessionError>>>,
    failed: bool,
}

/// The children of one session.
#[derive(Default)]
pub struct Subagents {
    children: tokio::sync::Mutex<HashMap<String, Child>>,
}

#[derive(Deserialize)]
struct SpawnArgs {
    task: String,
    working_dir: Option<String>,
    model: Option<String>,
    max_turns: Option<u32>,
}

#[derive(Deserialize)]
struct InputArgs {
    agent_id: String,
    message: String,
}

#[derive(Deserialize)]
struct AgentArgs {
    agent_id: String,
}

impl Subagents {
    /// Add the four subagent tools to `tools`, acting for `parent`.
    pub fn register_tools(tools: &mut ToolRegistry, parent: Weak<Session>) {
        let schema = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
        let p = parent.clone();
        tools.register(
            ToolSpec {
                name: "spawn_agent".into(),
                description: "Start a subagent: a separate agent with its own conversation that works on `task` in the same workspace and sandbox. Returns its agent_id at once; use wait to get its result.".into(),
                parameters: schema(
                    json!({
                        "task": {"type": "string", "description": "What the subagent should do, self-contained"},
                        "working_dir": {"type": "string", "description": "Directory inside the workspace to work in"},
                        "model": {"type": "string", "description": "Model to use (default: the parent's)"},
                        "max_turns": {"type": "integer", "minimum": 1, "description": "Most model turns the subagent may take"}
                    }),
                    &["task"],
                ),
            },
            Arc::new(FnTool(move |args, _| spawn(p.clone(), args))),
        );
        let p = parent.clone();
        tools.register(
            ToolSpec {
                name: "send_input".into(),
                description:
                    "Send another message to a subagent; it is processed after its current work."
                        .into(),
                parameters: schema(
                    json!({"agent_id": {"type": "string"}, "message": {"type": "string"}}),
                    &["agent_id", "message"],
                ),
            },
            Arc::new(FnTool(move |args, _| send_input(p.clone(), args))),
        );
        let p = parent.clone();
        tools.register(
            ToolSpec {
                name: "wait".into(),
                description: "Wait until a subagent has finished its work; returns {output, success, turns_used}.".into(),
                parameters: schema(json!({"agent_id": {"type": "string"}}), &["agent_id"]),
            },
            Arc::new(FnTool(move |args, _| wait(p.clone(), args))),
        );
        tools.register(
            ToolSpec {
                name: "close_agent".into(),
                description: "Stop a subagent and discard it.".into(),
                parameters: schema(json!({"agent_id": {"type": "string"}}), &["agent_id"]),
            },
            Arc::new(FnTool(move |args, _| close(parent.clone(), args))),
        );
    }

    /// Abort every child (the parent is closing).
    pub fn close_all(&self) -> futures::future::BoxFuture<'_, ()> {
        // Boxed: a child's abort closes its own children in turn.
        Box::pin(async move {
            let children: Vec<Child> = self.children.lock().await.drain().map(|(_, c)| c).collect();
            for child in children {
                child.session.abort().await;
            }
        })
    }

    /// A child session by id (for inspection).
    pub async fn get(&self, agent_id: &str) -> Option<Arc<Session>> {
        self.children
            .lock()
            .await
            .get(agent_id)
            .map(|c| c.session.clone())
    }
}

fn parse<T: for<'de> Deserialize<'de>>(args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))
}

fn parent_of(weak: &Weak<Session>) -> Result<Arc<Session>, String> {
    weak.upgrade()
        .ok_or_else(|| "the parent session has ended".to_string())
}

async fn spawn(parent: Weak<Session>, args: Value) -> Result<String, String> {
    let parent = parent_of(&parent)?;
    let args: SpawnArgs = parse(args)?;
    let max = parent.config.max_subagent_depth;
    if parent.depth >= max {
        return Err(format!(
            "subagent depth limit reached: this agent is at depth {} and max_subagent_depth is {max}",
            parent.depth
        ));
    }
    let working_dir = match &args.working_dir {
        Some(dir) => Some(inside_workspace(&parent.workspace, dir)?),
        None => Some(parent.working_dir.clone()),
    };
    let mut config = parent.config.clone();
    if let Some(model) = args.model {
        config.model = model;
    }
    if let Some(max_turns) = args.max_turns {
        config.max_turns = max_turns;
    }
    let repo = match &working_dir {
        Some(dir) => super::repo_facts::read(&parent.workspace, dir).await,
        None => None,
    };
    let child = Session::new(SessionParts {
        client: parent.client.clone(),
        profile: parent.profile.clone(),
        tools: parent.base_tools.clone(),
        config,
        workspace: parent.workspace.clone(),
        working_dir,
        depth: parent.depth + 1,
        repo,
        jobs: parent.jobs.clone(),
    });
    let agent_id = child.id().to_string();
    let task = start(&child, args.task);
    parent.subagents.children.lock().await.insert(
        agent_id.clone(),
        Child {
            session: child,
            task: Some(task),
            failed: false,
        },
    );
    Ok(json!({"agent_id": agent_id, "status": "running"}).to_string())
}

fn start(child: &Arc<Session>, input: String) -> JoinHandle<Result<(), SessionError>> {
    let child = child.clone();
    tokio::spawn(async move { child.submit(&input).await })
}

async fn send_input(parent: Weak<Session>, args: Value) -> Result<String, String> {
    let parent = parent_of(&parent)?;
    let args: InputArgs = parse(args)?;
    let mut children = parent.subagents.children.lock().await;
    let child = children
        .get_mut(&args.agent_id)
        .ok_or_else(|| unknown(&args.agent_id))?;
    if child.session.state() == SessionState::Closed {
        return Err(format!("subagent {} is closed", args.agent_id));
    }
    let busy = child.task.as_ref().is_some_and(|t| !t.is_finished());
    if busy {
        child.session.follow_up(&args.message);
    } else {
        if let Some(done) = child.task.take() {
            child.failed |= !matches!(done.await, Ok(Ok(())));
        }
        child.task = Some(start(&child.session, args.message));
    }
    Ok(json!({"agent_id": args.agent_id, "status": "running"}).to_string())
}

async fn wait(parent: Weak<Session>, args: Value) -> Result<String, String> {
    let parent = parent_of(&parent)?;
    let args: AgentArgs = parse(args)?;
    let (session, task) = {
        let mut children = parent.subagents.children.lock().await;
        let child = children
            .get_mut(&args.agent_id)
            .ok_or_else(|| unknown(&args.agent_id))?;
        (child.session.clone(), child.task.take())
    };
    let mut success = true;
    if let Some(task) = task {
        success = matches!(task.await, Ok(Ok(())));
    }
    {
        let mut children = parent.subagents.children.lock().await;
        if let Some(child) = children.get_mut(&args.agent_id) {
            child.failed |= !success;
            success = !child.failed;
        }
    }
    success &= session.state() != SessionState::Closed;
    Ok(json!({
        "agent_id": args.agent_id,
        "output": session.last_assistant_text().unwrap_or_default(),
        "success": success,
        "turns_used": session.model_turns(),
    })
    .to_string())
}

async fn close(parent: Weak<Session>, args: Value) -> Result<String, String> {
    let parent = parent_of(&parent)?;
    let args: AgentArgs = parse(args)?;
    let child = parent
        .subagents
        .children
        .lock()
        .await
        .remove(&args.agent_id)
        .ok_or_else(|| unknown(&args.agent_id))?;
    child.session.abort().await;
    Ok(json!({"agent_id": args.agent_id, "status": "closed"}).to_string())
}

fn unknown(agent_id: &str) -> String {
    format!("no subagent with id '{agent_id}' (it may have been closed)")
}

fn inside_workspace(workspace: &std::path::Path, dir: &str) -> Result<PathBuf, String> {
    let joined = workspace.join(dir);
    let real = joined
        .canonicalize()
        .map_err(|e| format!("working_dir '{dir}' cannot be used: {e}"))?;
    if !real.starts_with(workspace) || !real.is_dir() {
        return Err(format!(
            "working_dir '{dir}' must be a directory inside the workspace"
        ));
    }
    Ok(real)
}

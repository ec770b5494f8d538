//! Subagents: child sessions with their own history, sharing the workspace
//! and sandbox, driven by the tools `spawn_agent`, `send_input`, `wait` and
//! `close_agent`. Depth is limited by `max_subagent_depth`, the number of
//! live children by `max_subagents`, and what the model may ask of a child
//! (its model, its turns) by the operator's settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};
use tokio::task::JoinHandle;

use super::session::{
    HostTools, Session, SessionChildren, SessionError, SessionParts, SessionState,
};
use crate::plugin::ToolSpec;
use crate::tools::{FnTool, ToolExecutor, ToolRegistry};

/// The names of the subagent tools.
pub const TOOL_NAMES: &[&str] = &["spawn_agent", "send_input", "wait", "close_agent"];

/// How long a child's background jobs may keep its result waiting.
const CHILD_JOBS_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The input a child is processing.
type Work = JoinHandle<Result<(), SessionError>>;

/// What a subagent tool does.
type ToolFn =
    fn(Arc<Subagents>, Weak<Session>, Value) -> BoxFuture<'static, Result<String, String>>;

/// A child and the work it is doing.
struct Child {
    session: Arc<Session>,
    /// The input being processed (taken by the first `wait`).
    task: Arc<Mutex<Option<Work>>>,
    /// The result of the current input, once known (every `wait` returns
    /// the same one).
    result: Arc<OnceCell<Value>>,
    /// An earlier input of this child failed.
    failed: bool,
}

/// The children of one session.
#[derive(Default)]
pub struct Subagents {
    children: Mutex<HashMap<String, Child>>,
}

#[derive(Deserialize)]
struct SpawnArgs {
    task: String,
    working_dir: Option<String>,
    model: Option<String>,
    max_turns: Option<u32>,
    /// Run the child to completion as a background job: its result arrives
    /// as the job's message.
    #[serde(default)]
    run_in_background: bool,
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
    /// No children yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Subagents::default())
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

impl HostTools for Subagents {
    fn register(self: Arc<Self>, tools: &mut ToolRegistry, parent: Weak<Session>) {
        for (spec, executor) in self.tools(parent) {
            tools.register(spec, executor);
        }
    }
}

impl Subagents {
    /// The tools that act on the children of `parent`.
    fn tools(self: Arc<Self>, parent: Weak<Session>) -> Vec<(ToolSpec, Arc<dyn ToolExecutor>)> {
        let schema = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
        let tool = |f: ToolFn| -> Arc<dyn ToolExecutor> {
            let (me, parent) = (self.clone(), parent.clone());
            Arc::new(FnTool(move |args, ctx: crate::tools::ToolContext| {
                // The call's span goes with it, into a job too.
                crate::telemetry::within(ctx.trace, f(me.clone(), parent.clone(), args))
            }))
        };
        vec![
            (
                ToolSpec {
                    name: "spawn_agent".into(),
                    description: "Start a subagent: a separate agent with its own conversation that works on `task` in the same workspace and sandbox (in `working_dir`, if given: its tools resolve relative paths and run commands there). Returns its agent_id at once; use wait to get its result. With run_in_background, the call becomes a background job instead and the subagent's result arrives as the job's message when it is done.".into(),
                    parameters: schema(
                        json!({
                            "task": {"type": "string", "description": "What the subagent should do, self-contained"},
                            "working_dir": {"type": "string", "description": "Directory inside the workspace to work in"},
                            "model": {"type": "string", "description": "Model to use (default: the parent's; only models the operator allows)"},
                            "max_turns": {"type": "integer", "minimum": 1, "description": "Most model turns the subagent may take (capped by the operator)"},
                            "run_in_background": {"type": "boolean", "description": "Run the subagent to completion as a background job"}
                        }),
                        &["task"],
                    ),
                    traits: crate::plugin::ToolTraits {
                        background: true,
                        // A subagent's report: its beginning and its end.
                        output_limit: Some(crate::plugin::TruncationLimits::new(
                            20_000,
                            crate::plugin::TruncateMode::HeadTail,
                            None,
                        )),
                        ..Default::default()
                    },
                },
                tool(|me, parent, args| Box::pin(async move { me.spawn(parent, args).await })),
            ),
            (
                ToolSpec {
                    name: "send_input".into(),
                    description: "Send another message to a subagent; it is processed after its current work.".into(),
                    parameters: schema(
                        json!({"agent_id": {"type": "string"}, "message": {"type": "string"}}),
                        &["agent_id", "message"],
                    ),
                    traits: Default::default(),
                },
                tool(|me, _, args| Box::pin(async move { me.send_input(args).await })),
            ),
            (
                ToolSpec {
                    name: "wait".into(),
                    description: "Wait until a subagent has finished its work (its background jobs included); returns {output, success, turns_used}. Waiting again returns the same result.".into(),
                    parameters: schema(json!({"agent_id": {"type": "string"}}), &["agent_id"]),
                    traits: Default::default(),
                },
                tool(|me, _, args| Box::pin(async move { me.wait(args).await })),
            ),
            (
                ToolSpec {
                    name: "close_agent".into(),
                    description: "Stop a subagent and discard it.".into(),
                    parameters: schema(json!({"agent_id": {"type": "string"}}), &["agent_id"]),
                    traits: Default::default(),
                },
                tool(|me, _, args| Box::pin(async move { me.close(args).await })),
            ),
        ]
    }
}

impl SessionChildren for Subagents {
    fn close_all(&self) -> BoxFuture<'_, ()> {
        // Boxed: a child's abort closes its own children in turn.
        Box::pin(async move {
            let children: Vec<Child> = self.children.lock().await.drain().map(|(_, c)| c).collect();
            for child in children {
                child.session.abort().await;
            }
        })
    }
}

fn parse<T: for<'de> Deserialize<'de>>(args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))
}

impl Subagents {
    async fn spawn(&self, parent: Weak<Session>, args: Value) -> Result<String, String> {
        let parent = parent
            .upgrade()
            .ok_or_else(|| "the parent session has ended".to_string())?;
        let args: SpawnArgs = parse(args)?;
        let config = &parent.config;
        let max = config.max_subagent_depth;
        if parent.depth >= max {
            return Err(format!(
                "subagent depth limit reached: this agent is at depth {} and max_subagent_depth is {max}",
                parent.depth
            ));
        }
        let live = self
            .children
            .lock()
            .await
            .values()
            .filter(|c| c.session.state() != SessionState::Closed)
            .count();
        if live >= config.max_subagents {
            return Err(format!(
                "{live} subagents are already open (the limit is {}); wait for one and close it first",
                config.max_subagents
            ));
        }
        let working_dir = match &args.working_dir {
            Some(dir) => inside_workspace(&parent.workspace, &parent.working_dir, dir)?,
            None => parent.working_dir.clone(),
        };
        let mut child_config = config.clone();
        // The mode the operator chose for this conversation holds for its
        // subagents too.
        child_config.approvals.mode = parent.approval_mode();
        if let Some(model) = args.model.filter(|m| *m != config.model) {
            if !config.subagent_models.contains(&model) {
                return Err(format!(
                    "model '{model}' is not allowed for subagents (the operator allows: {})",
                    if config.subagent_models.is_empty() {
                        "only the parent's model".to_string()
                    } else {
                        config.subagent_models.join(", ")
                    }
                ));
            }
            child_config.model = model;
        }
        child_config.max_turns = child_turns(config, args.max_turns);
        let repo = super::repo_facts::read(&parent.workspace, &working_dir).await;
        // The same model has the same window: the child starts from what
        // the parent learned of it (and learns on its own from there).
        let window = (child_config.model == parent.model()).then(|| Arc::new(parent.window.copy()));
        let child = Session::new(SessionParts {
            working_dir: Some(working_dir),
            window,
            depth: parent.depth + 1,
            root: Some(parent.root_id.clone()),
            repo,
            jobs: parent.jobs.clone(),
            children: Some(Subagents::new()),
            spend: Some(parent.child_ledger()),
            ..SessionParts::new(
                parent.client.clone(),
                parent.profile.clone(),
                parent.catalog.clone(),
                child_config,
                parent.workspace.clone(),
            )
        });
        parent.share_checkpoints_with(&child);
        if let Ok(mut hangs) = child.trace_parent.lock() {
            *hangs = crate::telemetry::current();
        }
        let agent_id = child.id().to_string();
        if args.run_in_background {
            // This call is a background job: run the child to completion
            // here, inside the job (its model calls count as the job's).
            let finished = run_to_end(&child, &args.task).await;
            let result = child_result(&child, finished.is_ok());
            self.children.lock().await.insert(
                agent_id,
                Child {
                    session: child,
                    task: Arc::new(Mutex::new(None)),
                    result: Arc::new(OnceCell::new_with(Some(result.clone()))),
                    failed: finished.is_err(),
                },
            );
            return match finished {
                Ok(()) => Ok(result.to_string()),
                Err(e) => Err(format!("the subagent failed: {e}; {result}")),
            };
        }
        let task = start(&child, args.task);
        self.children.lock().await.insert(
            agent_id.clone(),
            Child {
                session: child,
                task: Arc::new(Mutex::new(Some(task))),
                result: Arc::new(OnceCell::new()),
                failed: false,
            },
        );
        Ok(json!({"agent_id": agent_id, "status": "running"}).to_string())
    }

    async fn send_input(&self, args: Value) -> Result<String, String> {
        let args: InputArgs = parse(args)?;
        let mut children = self.children.lock().await;
        let child = children
            .get_mut(&args.agent_id)
            .ok_or_else(|| unknown(&args.agent_id))?;
        if child.session.state() == SessionState::Closed {
            return Err(format!("subagent {} is closed", args.agent_id));
        }
        let mut task = child.task.lock().await;
        let busy = task.as_ref().is_some_and(|t| !t.is_finished())
            || (task.is_none() && child.result.get().is_none());
        if busy {
            child.session.follow_up(&args.message);
        } else {
            if let Some(done) = task.take() {
                child.failed |= !matches!(done.await, Ok(Ok(())));
            }
            if child.result.get().is_some_and(|r| r["success"] == false) {
                child.failed = true;
            }
            *task = Some(start(&child.session, args.message));
            drop(task);
            child.result = Arc::new(OnceCell::new());
        }
        Ok(json!({"agent_id": args.agent_id, "status": "running"}).to_string())
    }

    async fn wait(&self, args: Value) -> Result<String, String> {
        let args: AgentArgs = parse(args)?;
        let (session, task, result, failed) = {
            let children = self.children.lock().await;
            let child = children
                .get(&args.agent_id)
                .ok_or_else(|| unknown(&args.agent_id))?;
            (
                child.session.clone(),
                child.task.clone(),
                child.result.clone(),
                child.failed,
            )
        };
        let value = result
            .get_or_init(|| async move {
                let success = match task.lock().await.take() {
                    Some(handle) => matches!(handle.await, Ok(Ok(()))),
                    None => true,
                };
                child_result(&session, success && !failed)
            })
            .await;
        Ok(value.to_string())
    }

    async fn close(&self, args: Value) -> Result<String, String> {
        let args: AgentArgs = parse(args)?;
        let child = self
            .children
            .lock()
            .await
            .remove(&args.agent_id)
            .ok_or_else(|| unknown(&args.agent_id))?;
        child.session.abort().await;
        Ok(json!({"agent_id": args.agent_id, "status": "closed"}).to_string())
    }
}

/// The child's turn limit: what the model asked for, never more than the
/// operator's cap for subagents (or the parent's own limit).
fn child_turns(config: &super::SessionConfig, asked: Option<u32>) -> u32 {
    let cap = match (config.subagent_max_turns, config.max_turns) {
        (0, parent) => parent,
        (cap, 0) => cap,
        (cap, parent) => cap.min(parent),
    };
    match (asked, cap) {
        (Some(a), 0) => a,
        (Some(a), cap) => a.min(cap),
        (None, cap) => cap,
    }
}

/// Run `input` on the child, then wait for its background jobs: a child
/// has finished only when its jobs have (and it has seen their results).
async fn run_to_end(child: &Arc<Session>, input: &str) -> Result<(), SessionError> {
    child.submit(input).await?;
    child.settle(CHILD_JOBS_WAIT).await?;
    Ok(())
}

/// [`run_to_end`] on its own task.
fn start(child: &Arc<Session>, input: String) -> Work {
    let child = child.clone();
    tokio::spawn(async move { run_to_end(&child, &input).await })
}

/// What `wait` (and a background spawn) reports about a child.
fn child_result(child: &Session, success: bool) -> Value {
    json!({
        "agent_id": child.id(),
        "output": child.last_assistant_text().unwrap_or_default(),
        "success": success && child.state() != SessionState::Closed,
        "turns_used": child.model_turns(),
        "stopped_by_spend_cap": child.spend_stopped().map(|reached| reached.message),
    })
}

fn unknown(agent_id: &str) -> String {
    format!("no subagent with id '{agent_id}' (it may have been closed)")
}

/// `dir` (relative to the parent's working directory, or absolute) as a
/// real directory inside the workspace.
fn inside_workspace(
    workspace: &std::path::Path,
    base: &std::path::Path,
    dir: &str,
) -> Result<PathBuf, String> {
    let joined = base.join(dir);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_caps_what_the_model_asks_for() {
        let mut c = super::super::SessionConfig::new("m");
        assert_eq!(child_turns(&c, Some(500)), 500, "no cap set");
        c.subagent_max_turns = 20;
        assert_eq!(child_turns(&c, Some(500)), 20);
        assert_eq!(child_turns(&c, Some(5)), 5);
        assert_eq!(child_turns(&c, None), 20);
        c.max_turns = 10;
        assert_eq!(
            child_turns(&c, Some(500)),
            10,
            "never more than the parent may"
        );
    }
}

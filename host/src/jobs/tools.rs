//! The agent-facing job tools: `list_jobs`, `inspect_job`, `cancel_job`,
//! `retry_job`. All are scoped to the calling thread (session).

use std::sync::Arc;

use serde_json::{Value, json};

use super::record::{Actor, JobStatus};
use super::registry::JobRegistry;
use crate::plugin::ToolSpec;
use crate::tools::{FnTool, ToolRegistry};

/// The names of the job tools.
pub const TOOL_NAMES: &[&str] = &["list_jobs", "inspect_job", "cancel_job", "retry_job"];

/// Register the job tools for `jobs` in `tools`.
pub fn register(tools: &mut ToolRegistry, jobs: &Arc<JobRegistry>) {
    let id_schema = json!({"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"], "additionalProperties": false});
    let j = jobs.clone();
    tools.register(
        ToolSpec {
            name: "list_jobs".into(),
            description: "List this conversation's background jobs. By default only running and pending_cancel jobs; pass statuses to choose (running, pending_cancel, completed, failed, cancelled, timed_out).".into(),
            parameters: json!({"type": "object", "properties": {"statuses": {"type": "array", "items": {"type": "string", "enum": ["running", "pending_cancel", "completed", "failed", "cancelled", "timed_out"]}}}, "additionalProperties": false}),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |args: Value, ctx: crate::tools::ToolContext| {
            let j = j.clone();
            async move {
                let statuses: Option<Vec<JobStatus>> = match args.get("statuses").and_then(Value::as_array) {
                    Some(list) => Some(
                        list.iter()
                            .map(|s| s.as_str().unwrap_or_default().parse())
                            .collect::<Result<_, String>>()?,
                    ),
                    None => None,
                };
                let jobs = j.list(&ctx.session_id, statuses.as_deref());
                Ok(json!({"jobs": jobs.iter().map(summary).collect::<Vec<_>>()}).to_string())
            }
        })),
    );
    let j = jobs.clone();
    tools.register(
        ToolSpec {
            name: "inspect_job".into(),
            description: "The full record of one of this conversation's background jobs, including its output once finished.".into(),
            parameters: id_schema.clone(),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |args: Value, ctx: crate::tools::ToolContext| {
            let j = j.clone();
            async move {
                let id = args["job_id"].as_str().unwrap_or_default();
                let record = j.inspect(&ctx.session_id, id).map_err(|e| e.to_string())?;
                Ok(serde_json::to_string(&record).unwrap_or_default())
            }
        })),
    );
    let j = jobs.clone();
    tools.register(
        ToolSpec {
            name: "cancel_job".into(),
            description: "Ask a running background job to stop (best effort: it becomes pending_cancel, and may still complete).".into(),
            parameters: id_schema.clone(),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |args: Value, ctx: crate::tools::ToolContext| {
            let j = j.clone();
            async move {
                let id = args["job_id"].as_str().unwrap_or_default();
                let record = j.cancel(&ctx.session_id, id, Actor::Agent).map_err(|e| e.to_string())?;
                Ok(json!({"job_id": record.job_id, "status": record.status}).to_string())
            }
        })),
    );
    let j = jobs.clone();
    tools.register(
        ToolSpec {
            name: "retry_job".into(),
            description: "Not supported: start the tool call again instead.".into(),
            parameters: id_schema,
            traits: Default::default(),
        },
        Arc::new(FnTool(
            move |args: Value, ctx: crate::tools::ToolContext| {
                let j = j.clone();
                async move {
                    let id = args["job_id"].as_str().unwrap_or_default();
                    j.retry(&ctx.session_id, id)
                        .map(|_| String::new())
                        .map_err(|e| e.to_string())
                }
            },
        )),
    );
}

fn summary(r: &super::record::JobRecord) -> Value {
    json!({"job_id": r.job_id, "tool": r.tool_name, "status": r.status, "started_at": r.started_at, "completed_at": r.completed_at})
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_are_those_registered() {
        let mut tools = crate::tools::ToolRegistry::new();
        let jobs = super::JobRegistry::new(Default::default());
        super::register(&mut tools, &jobs);
        let mut names = super::TOOL_NAMES.to_vec();
        names.sort();
        assert_eq!(tools.names(), names);
    }
}

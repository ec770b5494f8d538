//! Dispatch a tool call. It never fails and never panics: an unknown tool,
//! arguments that are not JSON or do not fit the schema, an executor error
//! or panic all become error results the model can read.

use futures::FutureExt;

use super::receipt::{Receipt, Standing};
use super::registry::{ToolContext, ToolRegistry};
use super::status::{ToolError, ToolStatus};
use crate::plugin::CallActivity;

/// A tool call as the model made it.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    /// The arguments: a JSON object (or what the model produced, read by
    /// [`super::read_arguments`]).
    pub arguments: serde_json::Value,
}

/// What a call produced (full, untruncated), and its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    /// How the call ended.
    pub status: ToolStatus,
    /// How much of the output the tool said the model should see.
    pub output_limit: Option<crate::plugin::TruncationLimits>,
    /// Who ran it under which grants, and the programs it started (every
    /// call [`dispatch`] runs has one).
    pub receipt: Option<Receipt>,
}

impl ToolOutcome {
    pub fn ok(content: String) -> Self {
        ToolOutcome::with_status(ToolStatus::Ok, content)
    }

    /// An outcome that ended with `status`.
    pub fn with_status(status: ToolStatus, content: String) -> Self {
        ToolOutcome {
            content,
            status,
            output_limit: None,
            receipt: None,
        }
    }

    /// Whether the model sees it as an error.
    pub fn is_error(&self) -> bool {
        self.status.is_error()
    }

    /// Whether the tool stopped its work for lack of time.
    pub fn timed_out(&self) -> bool {
        self.status == ToolStatus::TimedOut
    }

    fn with_receipt(
        mut self,
        call: &ToolCallRequest,
        standing: Standing,
        activity: CallActivity,
    ) -> Self {
        self.receipt =
            Some(Receipt::of(&call.id, &call.name, standing, self.status).with_activity(activity));
        self
    }
}

/// Run one tool call; the outcome carries its receipt.
pub async fn dispatch(
    registry: &ToolRegistry,
    call: &ToolCallRequest,
    ctx: &ToolContext,
) -> ToolOutcome {
    // The caller's log when it keeps one (an interrupted call's receipt
    // still lists its programs), else the call's own.
    let log = ctx.programs.clone().unwrap_or_default();
    let mut ctx = ctx.clone();
    ctx.programs = Some(log.clone());
    let mut outcome = run(registry, call, &ctx).await;
    let standing = registry.standing(&call.name);
    let activity = log.lock().map(|a| a.clone()).unwrap_or_default();
    // The tool saw "access denied"; the model reads why.
    if outcome.is_error() && !activity.files_refused.is_empty() {
        outcome.content.push_str(&format!(
            "\n[sandcrab refused: {}]",
            activity.files_refused.join("; ")
        ));
    }
    let output_limit = registry
        .get(&call.name)
        .and_then(|t| t.spec.traits.output_limit);
    ToolOutcome {
        output_limit,
        ..outcome.with_receipt(call, standing, activity)
    }
}

async fn run(registry: &ToolRegistry, call: &ToolCallRequest, ctx: &ToolContext) -> ToolOutcome {
    let Some(tool) = registry.get(&call.name) else {
        let names = registry.names();
        let guess = sandcrab_core::spelling::closest(&call.name, names.iter().map(String::as_str))
            .map(|name| format!("did you mean {name}? "))
            .unwrap_or_default();
        return ToolOutcome::with_status(
            ToolStatus::UnknownTool,
            format!(
                "Unknown tool: {} ({guess}available tools: {})",
                call.name,
                names.join(", ")
            ),
        );
    };
    let args = match super::prepared::read_arguments(&call.arguments) {
        Ok(args) => args,
        Err(why) => {
            return ToolOutcome::with_status(
                ToolStatus::InvalidArguments,
                format!("Invalid arguments for {}: {why}", call.name),
            );
        }
    };
    match &tool.validator {
        Ok(validator) => {
            let problems: Vec<String> = validator
                .iter_errors(&args)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("{}: {e}", at.trim_start_matches('/'))
                    }
                })
                .collect();
            if !problems.is_empty() {
                return ToolOutcome::with_status(
                    ToolStatus::InvalidArguments,
                    format!(
                        "Invalid arguments for {}: {}",
                        call.name,
                        problems.join("; ")
                    ),
                );
            }
        }
        Err(why) => return ToolOutcome::with_status(ToolStatus::Failed, why.clone()),
    }
    let run = std::panic::AssertUnwindSafe(tool.executor.execute(args, ctx)).catch_unwind();
    match run.await {
        Ok(Ok(output)) if output.timed_out => {
            ToolOutcome::with_status(ToolStatus::TimedOut, output.text)
        }
        Ok(Ok(output)) => ToolOutcome::ok(output.text),
        Ok(Err(ToolError { status, message })) => ToolOutcome::with_status(status, message),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            ToolOutcome::with_status(
                ToolStatus::Failed,
                format!("Tool {} failed: {what}", call.name),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::plugin::ToolSpec;
    use crate::tools::FnTool;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: json!({
                "type": "object",
                "properties": { "message": { "type": "string" } },
                "required": ["message"],
                "additionalProperties": false
            }),
            traits: Default::default(),
        }
    }

    /// A tool whose executor refuses, as a sandbox would.
    struct Refuses;

    #[async_trait::async_trait]
    impl crate::tools::ToolExecutor for Refuses {
        async fn execute(
            &self,
            _args: serde_json::Value,
            _ctx: &ToolContext,
        ) -> Result<crate::plugin::ToolOutput, ToolError> {
            Err(ToolError::new(ToolStatus::Denied, "not in the workspace"))
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        r.register(
            spec("my_tool"),
            Arc::new(FnTool(|args: serde_json::Value, _| async move {
                Ok(args["message"].as_str().unwrap_or_default().to_string())
            })),
        );
        r.register(
            spec("boom"),
            Arc::new(FnTool(|_, _| async { Err("boom".to_string()) })),
        );
        r.register(spec("refuses"), Arc::new(Refuses));
        r.register(
            spec("panics"),
            Arc::new(FnTool(|_, _| async { panic!("executor exploded") })),
        );
        r
    }

    async fn call(r: &ToolRegistry, name: &str, args: serde_json::Value) -> ToolOutcome {
        let call = ToolCallRequest {
            id: "c1".into(),
            name: name.into(),
            arguments: args,
        };
        dispatch(r, &call, &ToolContext::default()).await
    }

    #[tokio::test]
    async fn custom_tool_returns_its_output() {
        let out = call(&registry(), "my_tool", json!({"message": "hello"})).await;
        assert_eq!((out.content.as_str(), out.is_error()), ("hello", false));
        let receipt = out.receipt.expect("every dispatched call has a receipt");
        assert_eq!(
            (receipt.tool.as_str(), receipt.outcome.as_str()),
            ("my_tool", "ok")
        );
        assert_eq!(
            receipt.standing.principal.kind,
            crate::tools::receipt::PrincipalKind::Host
        );
    }

    #[tokio::test]
    async fn unknown_tool_is_an_error_result() {
        let out = call(&registry(), "nonexistent_tool", json!({})).await;
        assert!(out.is_error());
        assert!(
            out.content.starts_with("Unknown tool: nonexistent_tool"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn executor_failure_and_panic_are_error_results() {
        let out = call(&registry(), "boom", json!({"message": "x"})).await;
        assert!(out.is_error() && out.content.contains("boom"));
        let out = call(&registry(), "panics", json!({"message": "x"})).await;
        assert!(
            out.is_error() && out.content.contains("executor exploded"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn each_failure_keeps_its_status_to_the_receipt() {
        let r = registry();
        let cases = [
            ("nonexistent_tool", json!({}), ToolStatus::UnknownTool),
            (
                "my_tool",
                json!({"message": 5}),
                ToolStatus::InvalidArguments,
            ),
            ("my_tool", json!("{not json"), ToolStatus::InvalidArguments),
            ("refuses", json!({"message": "x"}), ToolStatus::Denied),
            ("boom", json!({"message": "x"}), ToolStatus::Failed),
            ("panics", json!({"message": "x"}), ToolStatus::Failed),
            ("my_tool", json!({"message": "x"}), ToolStatus::Ok),
        ];
        for (tool, args, want) in cases {
            let out = call(&r, tool, args).await;
            assert_eq!(out.status, want, "{tool}: {}", out.content);
            let receipt = out.receipt.expect("a receipt");
            assert_eq!(receipt.status, Some(want), "{tool}");
            assert_eq!(receipt.outcome, want.outcome(), "{tool}");
        }
    }

    #[tokio::test]
    async fn invalid_arguments_name_the_field() {
        let r = registry();
        let out = call(&r, "my_tool", json!({"message": 5})).await;
        assert!(out.is_error());
        assert!(
            out.content
                .starts_with("Invalid arguments for my_tool: message:"),
            "{}",
            out.content
        );
        let out = call(&r, "my_tool", json!({})).await;
        assert!(
            out.content.contains("\"message\" is a required property"),
            "{}",
            out.content
        );
        let out = call(&r, "my_tool", json!({"message": "x", "extra": 1})).await;
        assert!(out.content.contains("extra"), "{}", out.content);
        let out = call(&r, "my_tool", json!("{not json")).await;
        assert!(out.content.contains("not valid JSON"), "{}", out.content);
        let out = call(&r, "my_tool", json!("{\"message\": \"from text\"}")).await;
        assert_eq!((out.content.as_str(), out.is_error()), ("from text", false));
    }

    #[tokio::test]
    async fn latest_registration_wins() {
        let mut r = registry();
        r.register(
            spec("my_tool"),
            Arc::new(FnTool(|_, _| async { Ok("replacement".to_string()) })),
        );
        assert_eq!(r.len(), 4);
        let out = call(&r, "my_tool", json!({"message": "hello"})).await;
        assert_eq!(out.content, "replacement");
    }
}

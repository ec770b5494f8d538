//! [`ToolServer`]: sandcrab's tools served to any MCP client. Every call
//! goes through the same dispatch as the agent's (schema validation, the
//! plugin's policy and sandbox), is truncated like the model's view of it
//! (the full output rides along in `structuredContent`), and fails as a
//! tool result with `isError`, never as a protocol error.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use tokio::sync::mpsc;

use crate::plugin::ToolSpec;
use crate::process::{LIVE_CHUNKS, OutputChunk};
use crate::tools::{
    ToolCallRequest, ToolCatalog, ToolContext, ToolOutcome, TruncationPolicy, dispatch,
};

/// How often a long call tells the client it is still running when it
/// prints nothing.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// An MCP server over the tools of a [`ToolCatalog`].
#[derive(Clone)]
pub struct ToolServer {
    catalog: ToolCatalog,
    truncation: Arc<TruncationPolicy>,
    /// The operator's approval rules, and the workspace their paths are
    /// in. A call that needs approval is put to the client (elicitation);
    /// a client that cannot answer gets a refusal naming what would allow
    /// it.
    approvals: Arc<(crate::approvals::Approvals, std::path::PathBuf)>,
    /// The session its calls belong to: one per MCP client (per MCP
    /// session over HTTP, per connection over stdio), so a reused plugin
    /// instance is never handed from one client to another.
    session: Arc<str>,
}

impl ToolServer {
    /// Serve the tools `catalog` holds (now and after every reload),
    /// truncating outputs by `truncation`.
    pub fn new(catalog: ToolCatalog, truncation: TruncationPolicy) -> Self {
        ToolServer {
            catalog,
            truncation: Arc::new(truncation),
            approvals: Arc::default(),
            session: new_session(),
        }
    }

    /// This server for a new client: the same tools and rules, a session
    /// of its own.
    pub fn for_new_client(&self) -> Self {
        ToolServer {
            session: new_session(),
            ..self.clone()
        }
    }

    /// The session its calls belong to.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Decide every call by `approvals` (paths relative to `workspace`).
    pub fn with_approvals(
        mut self,
        approvals: crate::approvals::Approvals,
        workspace: std::path::PathBuf,
    ) -> Self {
        self.approvals = Arc::new((approvals, workspace));
        self
    }

    /// Run one call to completion, cancellation or the client's departure.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let registry = self.catalog.snapshot();
        let name = request.name.to_string();
        if registry.get(&name).is_none() {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool '{name}' (tools/list names the {} tools served)",
                    registry.len()
                ),
                None,
            ));
        }
        let call = ToolCallRequest {
            id: format!("mcp-{}", request_id(&context)),
            name: name.clone(),
            arguments: request
                .arguments
                .map(serde_json::Value::Object)
                .unwrap_or(serde_json::Value::Null),
        };
        let (approvals, workspace) = &*self.approvals;
        let traits = registry.get(&name).map(|t| &t.spec.traits);
        let subject =
            crate::approvals::call_subject(&name, &call.arguments, traits, workspace, workspace);
        let network = matches!(
            subject,
            crate::approvals::Subject::Call { network: true, .. }
        );
        let verdict = approvals.decide(&subject);
        let mut approval = crate::approvals::receipt_line(&verdict, approvals.mode);
        match verdict.decision {
            crate::approvals::Decision::Allow => {}
            crate::approvals::Decision::Deny => {
                let text = crate::approvals::refusal(&subject, &verdict);
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
            }
            crate::approvals::Decision::Ask => {
                let sandbox = registry.standing(&name).mode;
                let what = crate::approvals::describe_call(&subject);
                match super::ask::ask_client(&context.peer, &name, &what, &approval, &sandbox).await
                {
                    super::ask::Asked::Allowed { at } => {
                        approval = format!(
                            "{approval}; allowed by the operator via mcp client at {at} (once)"
                        );
                    }
                    super::ask::Asked::Denied { note, .. } => {
                        let text = crate::approvals::operator_denial(note.as_deref());
                        return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
                    }
                    super::ask::Asked::CannotAsk => {
                        let text = crate::approvals::refusal(&subject, &verdict);
                        return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
                    }
                }
            }
        }
        let progress = context.meta.get_progress_token();
        let (live_tx, live_rx) = mpsc::channel(LIVE_CHUNKS);
        let ctx = ToolContext {
            session_id: self.session.to_string(),
            call_id: call.id.clone(),
            live_output: progress.is_some().then_some(live_tx),
            working_dir: None,
            detach: None,
            programs: None,
            background: false,
            network,
        };
        let reporter = progress
            .map(|token| tokio::spawn(report_progress(context.peer.clone(), token, live_rx)));
        let outcome = tokio::select! {
            outcome = dispatch(&registry, &call, &ctx) => Some(outcome),
            () = context.ct.cancelled() => None,
        };
        // Dropping the call's future above stopped its guest and programs.
        drop(ctx);
        if let Some(reporter) = reporter {
            reporter.abort();
        }
        match outcome {
            Some(mut outcome) => {
                if let Some(receipt) = &mut outcome.receipt {
                    receipt.approvals.insert(0, approval);
                }
                Ok(self.result(&name, outcome))
            }
            None => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "{name} was cancelled by the client"
            ))])),
        }
    }

    /// The MCP result of `outcome`: the text the model would see, and the
    /// whole output in `structuredContent` when that text was cut.
    fn result(&self, tool: &str, outcome: ToolOutcome) -> CallToolResult {
        let shown = self
            .truncation
            .apply(tool, outcome.output_limit, &outcome.content);
        let mut result = if outcome.is_error() {
            CallToolResult::error(vec![ContentBlock::text(shown.clone())])
        } else {
            CallToolResult::success(vec![ContentBlock::text(shown.clone())])
        };
        if shown != outcome.content || outcome.timed_out() {
            result.structured_content = Some(serde_json::json!({
                "truncated": shown != outcome.content,
                "timed_out": outcome.timed_out(),
                "full_output": outcome.content,
            }));
        }
        // The call's receipt rides in `_meta`, where protocol metadata goes.
        if let Some(receipt) = outcome.receipt
            && let Ok(value) = serde_json::to_value(&receipt)
        {
            let mut meta = serde_json::Map::new();
            meta.insert(RECEIPT_META.into(), value);
            result.meta = Some(rmcp::model::MetaObject(meta));
        }
        result
    }
}

/// The `_meta` key of a call's receipt in an MCP tool result.
pub const RECEIPT_META: &str = "sandcrab/receipt";

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("sandcrab", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "sandcrab's sandboxed tools: each runs as a WebAssembly component confined to what the operator granted.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .catalog
            .snapshot()
            .definitions()
            .iter()
            .map(mcp_tool)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(Into::into)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tokio::spawn(announce_changes(self.catalog.clone(), context.peer));
    }
}

/// The MCP definition of a tool.
pub fn mcp_tool(spec: &ToolSpec) -> Tool {
    let schema = match &spec.parameters {
        serde_json::Value::Object(map) => map.clone(),
        _ => serde_json::Map::from_iter([("type".to_string(), "object".into())]),
    };
    Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(schema),
    )
}

/// Send `notifications/tools/list_changed` to `peer` every time the
/// catalog is republished, until the client goes away.
async fn announce_changes(catalog: ToolCatalog, peer: Peer<RoleServer>) {
    let mut changes = catalog.subscribe();
    changes.mark_unchanged();
    while changes.changed().await.is_ok() {
        if peer.notify_tool_list_changed().await.is_err() {
            return;
        }
    }
}

/// Forward a call's live output to the client as progress messages, and
/// say the call is still running when it prints nothing for a while.
async fn report_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut live: mpsc::Receiver<OutputChunk>,
) {
    let mut step = 0.0;
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        let message = tokio::select! {
            chunk = live.recv() => match chunk {
                Some(chunk) => String::from_utf8_lossy(&chunk.bytes).into_owned(),
                None => return,
            },
            _ = tick.tick() => "still running".to_string(),
        };
        step += 1.0;
        let note = ProgressNotificationParam::new(token.clone(), step).with_message(message);
        if peer.notify_progress(note).await.is_err() {
            return;
        }
    }
}

fn request_id(context: &RequestContext<RoleServer>) -> String {
    match serde_json::to_value(&context.id) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "call".into(),
    }
}

fn new_session() -> Arc<str> {
    format!("mcp-{}", uuid::Uuid::new_v4()).into()
}

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

use crate::approvals::{ApprovalRecord, Subject};
use crate::pipeline::{Asked, CallFront, Judgement};
use crate::plugin::ToolSpec;
use crate::process::{LIVE_CHUNKS, OutputChunk};
use crate::tools::{
    CallPlace, PreparedCall, ToolCatalog, ToolContext, ToolOutcome, ToolStatus, TruncationPolicy,
    dispatch,
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
    /// The operator's hooks: its guards judge a client's calls as they
    /// judge the agent's.
    hooks: crate::hooks::Hooks,
    /// The least severe log message this client asked for
    /// (`logging/setLevel`; None: none sent).
    log_level: Arc<std::sync::Mutex<Option<LogLevel>>>,
}

/// How severe a log message sent to a client is, in the protocol's order.
#[allow(deprecated)]
type LogLevel = rmcp::model::LoggingLevel;

/// `level`'s place in the protocol's order (debug lowest).
#[allow(deprecated)]
fn severity(level: LogLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
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
            hooks: Default::default(),
            log_level: Arc::default(),
        }
    }

    /// Run `hooks` at every call (PreToolUse, PermissionRequest,
    /// PostToolUse).
    pub fn with_hooks(mut self, hooks: crate::hooks::Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// This server for a new client: the same tools and rules, a session
    /// of its own.
    pub fn for_new_client(&self) -> Self {
        ToolServer {
            session: new_session(),
            log_level: Arc::default(),
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

    /// Run one call to completion, cancellation or the client's departure,
    /// through the call path every front end shares.
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
        let raw = request
            .arguments
            .map(serde_json::Value::Object)
            .unwrap_or(serde_json::Value::Null);
        let (_, workspace) = &*self.approvals;
        let place = CallPlace {
            workspace,
            working_dir: workspace,
        };
        let id = format!("mcp-{}", request_id(&context));
        let call = PreparedCall::new(&id, &name, &raw, &registry, place);
        let front = ClientFront {
            server: self,
            registry,
            context: &context,
        };
        let finished = crate::pipeline::run_call(&front, &call).await;
        Ok(self.result(&name, finished.outcome))
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

/// One client's call on its way through the call path: judged by the
/// operator's rules, the client asked (elicitation), run with its live
/// output as progress, stopped when the client cancels.
struct ClientFront<'a> {
    server: &'a ToolServer,
    registry: crate::tools::ToolRegistry,
    context: &'a RequestContext<RoleServer>,
}

#[async_trait::async_trait]
impl CallFront for ClientFront<'_> {
    fn workspace(&self) -> &std::path::Path {
        &self.server.approvals.1
    }

    fn judge(&self, subject: &Subject) -> Judgement {
        Judgement::by_rules(&self.server.approvals.0, subject, None)
    }

    /// What the operator is told about a call (a hook that failed open)
    /// reaches the client too, as a warning log message, when it asked
    /// for messages that severe.
    #[allow(deprecated)]
    fn warn(&self, message: &str) {
        tracing::warn!("{message}");
        let wanted = self.server.log_level.lock().ok().and_then(|l| *l);
        let warning = rmcp::model::LoggingLevel::Warning;
        if wanted.is_some_and(|level| severity(warning) >= severity(level)) {
            let peer = self.context.peer.clone();
            let note = rmcp::model::LoggingMessageNotificationParam::new(
                warning,
                serde_json::Value::String(message.to_string()),
            )
            .with_logger("sandcrab");
            tokio::spawn(async move {
                let _ = peer.notify_logging_message(note).await;
            });
        }
    }

    fn hooks(&self) -> Option<crate::pipeline::HookScene<'_>> {
        Some(crate::pipeline::HookScene {
            hooks: &self.server.hooks,
            facts: crate::hooks::Facts {
                session_id: &self.server.session,
                cwd: &self.server.approvals.1,
                permission_mode: crate::hooks::permission_mode(self.server.approvals.0.mode),
            },
        })
    }

    async fn ask(
        &self,
        call: &PreparedCall,
        subject: &Subject,
        judged: &ApprovalRecord,
    ) -> Option<Asked> {
        let what = crate::approvals::describe_call(subject);
        super::ask::ask_client(
            &self.context.peer,
            &call.name,
            &what,
            &judged.verdict_line(),
            &call.standing.mode.to_string(),
        )
        .await
    }

    async fn run(&self, call: &PreparedCall, network: bool) -> ToolOutcome {
        let progress = self.context.meta.get_progress_token();
        let (live_tx, live_rx) = mpsc::channel(LIVE_CHUNKS);
        let ctx = ToolContext {
            session_id: self.server.session.to_string(),
            root_session_id: String::new(),
            call_id: call.id.clone(),
            live_output: progress.is_some().then_some(live_tx),
            working_dir: None,
            detach: None,
            programs: None,
            background: false,
            network,
            spend: None,
            trace: None,
        };
        let reporter = progress
            .map(|token| tokio::spawn(report_progress(self.context.peer.clone(), token, live_rx)));
        let request = call.request();
        let outcome = tokio::select! {
            outcome = dispatch(&self.registry, &request, &ctx) => outcome,
            () = self.context.ct.cancelled() => ToolOutcome::with_status(
                ToolStatus::Interrupted,
                format!("{} was cancelled by the client", call.name),
            ),
        };
        // Dropping the call's future above stopped its guest and programs.
        drop(ctx);
        if let Some(reporter) = reporter {
            reporter.abort();
        }
        outcome
    }
}

/// The `_meta` key of a call's receipt in an MCP tool result.
pub const RECEIPT_META: &str = "sandcrab/receipt";

impl ServerHandler for ToolServer {
    // Logging is deprecated by SEP-2577 but still in the protocol versions
    // clients speak (and in the conformance suite).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
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

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(request.level);
        }
        Ok(())
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

//! Every attribute and metric name sandcrab exports, in one list: the
//! OpenTelemetry GenAI semantic conventions' where they name the thing,
//! `sandcrab.*` for what only sandcrab knows (which rule allowed a call).

// GenAI semantic conventions (gen-ai spans and metrics).
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const RESPONSE_ID: &str = "gen_ai.response.id";
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub const AGENT_NAME: &str = "gen_ai.agent.name";
pub const AGENT_ID: &str = "gen_ai.agent.id";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
pub const TOKEN_TYPE: &str = "gen_ai.token.type";
pub const ERROR_TYPE: &str = "error.type";

// Content, exported only when the operator turns its capture on.
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";

// The operation names.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
pub const OP_CHAT: &str = "chat";
pub const OP_EXECUTE_TOOL: &str = "execute_tool";

// sandcrab's own, from the call's receipt.
pub const PRINCIPAL_KIND: &str = "sandcrab.principal.kind";
pub const PRINCIPAL_NAME: &str = "sandcrab.principal.name";
/// Who signed the plugin that ran the call (`NAME (SHA256:…)`).
pub const PRINCIPAL_SIGNER: &str = "sandcrab.principal.signer";
pub const SANDBOX_MODE: &str = "sandcrab.sandbox.mode";
pub const VERDICT: &str = "sandcrab.verdict";
pub const RULE: &str = "sandcrab.rule";
pub const TOOL_STATUS: &str = "sandcrab.tool.status";
pub const PROGRAMS_STARTED: &str = "sandcrab.programs.started";
pub const PROGRAMS_REFUSED: &str = "sandcrab.programs.refused";
pub const HTTP_REQUESTS: &str = "sandcrab.http.requests";
pub const DENIALS: &str = "sandcrab.denials";
pub const SESSION_DEPTH: &str = "sandcrab.session.depth";
pub const STOPPED_BY: &str = "sandcrab.stopped_by";

// Metrics.
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub const METRIC_TOOL_CALLS: &str = "sandcrab.tool.calls";
pub const METRIC_DENIALS: &str = "sandcrab.tool.denials";
pub const METRIC_DROPPED: &str = "sandcrab.telemetry.dropped_spans";

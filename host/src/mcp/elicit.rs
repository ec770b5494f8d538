//! A configured MCP server's questions (elicitation) reach the operator:
//! each form becomes a request in the session's approvals queue — the
//! chat prompt, the bridge, the editor over ACP — with the server named
//! as the asker and its schema's defaults shown. A yes accepts it with
//! the values given (the defaults fill the rest), a no declines it, and a
//! question nobody answers is cancelled. Where nobody can be asked
//! (`run`), it is declined.

use std::sync::{Arc, Mutex};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleClient};

use crate::approvals::{FormQuestion, PermissionQueue, PermissionRequest, Scope, ScopeOffer};

/// The tool name an elicitation carries in the queue, receipts and events.
pub const ELICITATION: &str = "elicitation";

/// Who may be asked, and for which call: shared by every server of one
/// agent, set once the front end has its queue.
#[derive(Default)]
pub struct Asking {
    queue: Mutex<Option<Arc<PermissionQueue>>>,
}

impl Asking {
    /// Put questions to `queue` from now on.
    pub fn set(&self, queue: Arc<PermissionQueue>) {
        if let Ok(mut q) = self.queue.lock() {
            *q = Some(queue);
        }
    }

    fn queue(&self) -> Option<Arc<PermissionQueue>> {
        self.queue.lock().ok().and_then(|q| q.clone())
    }
}

/// The call a server is answering (the last one sent it): the session
/// and call its questions belong to.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub session_id: String,
    pub call_id: String,
}

/// The client side of one server's connection: it declares form
/// elicitation and puts each form to the operator.
#[derive(Clone)]
pub struct Elicitor {
    server: String,
    asking: Arc<Asking>,
    caller: Arc<Mutex<Caller>>,
}

impl Elicitor {
    pub fn new(server: &str, asking: Arc<Asking>, caller: Arc<Mutex<Caller>>) -> Self {
        Elicitor {
            server: server.to_string(),
            asking,
            caller,
        }
    }

    async fn ask(
        &self,
        message: &str,
        schema: serde_json::Value,
    ) -> Result<ElicitResult, ErrorData> {
        let asker = format!("MCP server {}", self.server);
        let form = FormQuestion::from_schema(&asker, message, &schema).map_err(|e| {
            ErrorData::invalid_params(format!("sandcrab cannot ask this form: {e}"), None)
        })?;
        let Some(queue) = self.asking.queue() else {
            tracing::warn!(
                "{asker} asked a question and nobody here can answer it (no chat, bridge or editor): declined"
            );
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let caller = self.caller.lock().map(|c| c.clone()).unwrap_or_default();
        let request = PermissionRequest {
            id: String::new(),
            session_id: caller.session_id,
            root_session_id: String::new(),
            call_id: caller.call_id,
            tool: ELICITATION.into(),
            arguments: serde_json::json!({"server": self.server}),
            from: asker.clone(),
            preview: form.preview(),
            diff: None,
            sandbox: "none (a question, nothing runs)".into(),
            network: false,
            reason: format!("{asker} asks for information while it answers a call"),
            scopes: vec![ScopeOffer {
                scope: Scope::Once,
                allows: "accept this form with the values given (its defaults fill the rest)"
                    .into(),
                rule: None,
            }],
            form: Some(Box::new(form)),
        };
        let answer = queue.submit(request).answer().await;
        let action = match (answer.allow, answer.by.as_str()) {
            (true, _) => ElicitationAction::Accept,
            // Nobody chose: the question was dismissed, not refused.
            (false, "timeout" | "withdrawn" | "queue limit") => ElicitationAction::Cancel,
            (false, _) => ElicitationAction::Decline,
        };
        let mut result = ElicitResult::new(action);
        if let (ElicitationAction::Accept, Some(content)) = (&result.action, answer.content) {
            result.content = Some(serde_json::Value::Object(content));
        }
        Ok(result)
    }
}

impl ClientHandler for Elicitor {
    fn get_info(&self) -> ClientConfig {
        let mut form = FormElicitationCapability::new();
        form.schema_validation = Some(true);
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(form);
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        // The handshake is `initialize`: offer the newest version that has
        // one (a later revision replaced it, and servers and the
        // conformance suite refuse it there).
        ClientConfig::new(
            capabilities,
            Implementation::new("sandcrab", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                self.ask(&message, schema).await
            }
            // Only forms are declared: a URL to open is not followed.
            _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }
}

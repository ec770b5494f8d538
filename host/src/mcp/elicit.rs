//! A configured MCP server's questions (elicitation) reach the operator:
//! each form becomes a request in the session's approvals queue — the
//! chat prompt, the bridge, the editor over ACP — with the server named
//! as the asker and its schema's defaults shown. A yes accepts it with
//! the values given (the defaults fill the rest), a no declines it, and a
//! question nobody answers is cancelled. Where nobody can be asked
//! (`run`), it is declined.

use std::sync::{Arc, Mutex};

use rmcp::handler::client::ClientHandler;
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleClient};
use tokio_util::sync::CancellationToken;

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

/// A call a server is answering: the session and call its questions
/// belong to.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub session_id: String,
    /// The top-level conversation, when the call is a subagent's (empty:
    /// the session is its own).
    pub root_session_id: String,
    pub call_id: String,
    /// What the call did, for its receipt (the model calls made for it).
    pub activity: Option<crate::plugin::ActivityLog>,
    /// The calling session's spend, which model calls made for the call
    /// count against.
    pub spend: Option<std::sync::Arc<crate::llm::spend::Ledger>>,
    /// The call's span, passed to the server as `traceparent` in `_meta`.
    pub trace: Option<crate::telemetry::SpanContext>,
}

/// The calls a server is answering now, each with a token cancelled when
/// it ends; and whether one of its forms is being asked.
#[derive(Default)]
pub struct InFlight {
    calls: Mutex<Vec<(u64, Caller, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
    asking: std::sync::atomic::AtomicBool,
    /// One of its model calls (sampling) runs.
    sampling: std::sync::atomic::AtomicBool,
}

/// A call in flight; it leaves (and its questions are withdrawn) when
/// dropped.
pub struct CallGuard {
    in_flight: Arc<InFlight>,
    id: u64,
}

impl InFlight {
    /// `caller`'s call starts.
    pub fn enter(self: &Arc<Self>, caller: Caller) -> CallGuard {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((id, caller, CancellationToken::new()));
        }
        CallGuard {
            in_flight: self.clone(),
            id,
        }
    }

    /// Whose a form is: the call in flight, when every call in flight is
    /// of one session (the latest of them); why not otherwise.
    fn owner(&self) -> Result<(Caller, CancellationToken), &'static str> {
        let calls = self.calls.lock().map_err(|_| "its calls cannot be told")?;
        let Some((_, latest, ended)) = calls.last() else {
            return Err("none of its calls is running");
        };
        if calls
            .iter()
            .any(|(_, c, _)| c.session_id != latest.session_id)
        {
            return Err(
                "calls of several conversations are running, and a form does not say whose it is",
            );
        }
        Ok((latest.clone(), ended.clone()))
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.in_flight.calls.lock() {
            calls.retain(|(id, _, ended)| {
                let this = *id == self.id;
                if this {
                    ended.cancel();
                }
                !this
            });
        }
    }
}

/// The client side of one server's connection: it declares form
/// elicitation and puts each form to the operator, and, where the
/// operator allows the server sampling, answers its model requests.
#[derive(Clone)]
pub struct Elicitor {
    server: String,
    asking: Arc<Asking>,
    in_flight: Arc<InFlight>,
    /// Some: the server may sample, with this model.
    sampling: Option<Arc<super::sampling::ModelSlot>>,
}

impl Elicitor {
    pub fn new(server: &str, asking: Arc<Asking>, in_flight: Arc<InFlight>) -> Self {
        Elicitor {
            server: server.to_string(),
            asking,
            in_flight,
            sampling: None,
        }
    }

    /// Let the server sample with the model `model` holds (None: off).
    pub fn sampling(mut self, model: Option<Arc<super::sampling::ModelSlot>>) -> Self {
        self.sampling = model;
        self
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
        // A form belongs to a call of the server's that is running, and
        // is asked one at a time.
        let (caller, ended) = match self.in_flight.owner() {
            Ok(owner) => owner,
            Err(why) => {
                tracing::warn!("{asker} asked a question while {why}: declined");
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            }
        };
        if self
            .in_flight
            .asking
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tracing::warn!("{asker} asked a second question while one waits: declined");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        let _asked = Raised(&self.in_flight.asking);
        let request = PermissionRequest {
            id: String::new(),
            session_id: caller.session_id,
            root_session_id: caller.root_session_id,
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
        let ticket = queue.submit(request);
        // The call ending withdraws its question (the ticket is dropped).
        let answer = tokio::select! {
            answer = ticket.answer() => answer,
            _ = ended.cancelled() => return Ok(ElicitResult::new(ElicitationAction::Cancel)),
        };
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

/// A flag of [`InFlight`] (a form asked, a model call running), raised
/// while this lives.
struct Raised<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
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
        if self.sampling.is_some() {
            capabilities.sampling = Some(Default::default());
        }
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

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(model) = &self.sampling else {
            return Err(ErrorData::invalid_request(
                format!(
                    "sampling is off for MCP server {0}: the operator allows it with [mcp.servers.{0}] sampling = true",
                    self.server
                ),
                None,
            ));
        };
        // A model call belongs to a call of the server's that is running:
        // its receipt records it.
        let (caller, ended) = self.in_flight.owner().map_err(|why| {
            ErrorData::invalid_request(format!("no model call while {why}"), None)
        })?;
        // One at a time.
        if self
            .in_flight
            .sampling
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(ErrorData::invalid_request(
                "one model call at a time: another is running".to_string(),
                None,
            ));
        }
        let _sampling = Raised(&self.in_flight.sampling);
        super::sampling::answer(&self.server, model, &caller, &ended, params).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(session: &str, call: &str) -> Caller {
        Caller {
            session_id: session.into(),
            call_id: call.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_form_belongs_to_the_running_call_of_one_conversation_only() {
        let in_flight = Arc::new(InFlight::default());
        assert!(in_flight.owner().is_err(), "no call runs");
        let first = in_flight.enter(caller("a", "c1"));
        let second = in_flight.enter(caller("a", "c2"));
        let (owner, _) = in_flight.owner().unwrap();
        assert_eq!(owner.call_id, "c2");
        let other = in_flight.enter(caller("b", "c3"));
        assert!(in_flight.owner().is_err(), "two conversations' calls run");
        drop(other);
        drop(second);
        let (owner, ended) = in_flight.owner().unwrap();
        assert_eq!(owner.call_id, "c1");
        assert!(!ended.is_cancelled());
        drop(first);
        assert!(ended.is_cancelled(), "the call's end withdraws its form");
        assert!(in_flight.owner().is_err());
    }
}

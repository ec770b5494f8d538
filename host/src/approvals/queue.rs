//! Requests waiting for the operator: each call that needs approval gets
//! its own request with an unguessable id; only the operator's channel
//! (the bridge token holder) answers, through [`PermissionQueue::answer`].
//! A request nobody answers is denied when its time runs out, and one
//! whose call is interrupted is withdrawn.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandcrab_core::approval::Scope;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot, watch};

/// A yes, and exactly what it allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeOffer {
    pub scope: Scope,
    /// In words: `this call`, or the rule a wider yes adds and how far.
    pub allows: String,
    /// The rule a wider yes adds, as an `--approve` value (`shell:git
    /// push`); None for a yes for this call.
    pub rule: Option<String>,
}

/// One call waiting for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRequest {
    pub id: String,
    /// The session asking (a subagent's own id when a subagent asks).
    pub session_id: String,
    /// The top-level session a subagent asking belongs to: the
    /// conversation the operator sees (empty: the asking session is one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root_session_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// Who asks: `agent`, or `subagent ID`.
    pub from: String,
    /// What the call would do, in a line or a few (the command, the path).
    pub preview: String,
    /// For a file edit, the change it would make (a unified diff).
    pub diff: Option<String>,
    /// The sandbox the call would run under.
    pub sandbox: String,
    /// The call asks for the network: a yes gives it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Why it asks (the rule, or the mode).
    pub reason: String,
    /// What each possible yes allows.
    pub scopes: Vec<ScopeOffer>,
    /// Not a call but a form to fill (an MCP server's elicitation): a yes
    /// accepts it, with the values the operator gives and its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Box<super::form::FormQuestion>>,
}

/// The operator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub allow: bool,
    pub scope: Scope,
    /// Shown to the model with a denial.
    pub note: Option<String>,
    /// Who answered, through what (`bridge`, `chat`, `mcp`, or
    /// `timeout`).
    pub by: String,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// A yes to a form: the values given (checked, and completed with
    /// the form's defaults, by the queue).
    pub content: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Longest note the model is shown.
pub const MAX_NOTE_CHARS: usize = 2_000;

/// Most requests waiting at once: a model that fires a hundred parallel
/// calls does not bury the operator; the calls beyond are denied.
pub const MAX_WAITING: usize = 16;

/// No request with that id is waiting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no permission request {0} is waiting (answered, timed out, or withdrawn)")]
pub struct UnknownRequest(pub String);

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error(transparent)]
    Unknown(#[from] UnknownRequest),
    /// A yes to a form whose values do not fit it (the request still
    /// waits: answer it again).
    #[error("the answer does not fit the form of request {id}: {why}")]
    Form {
        id: String,
        why: super::form::FormError,
    },
}

type Waiting = BTreeMap<String, (PermissionRequest, oneshot::Sender<Answer>)>;

/// What happens in a queue, for whoever shows it (the bridge): every
/// request, whichever session or subagent asked, and how each ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueEvent {
    Required(Box<PermissionRequest>),
    Resolved {
        id: String,
        session_id: String,
        call_id: String,
        allow: bool,
        scope: Scope,
        /// `bridge`, `chat`, `timeout`, `withdrawn`, `queue limit`, …
        by: String,
    },
}

/// The requests waiting for the operator.
#[derive(Debug)]
pub struct PermissionQueue {
    waiting: Mutex<Waiting>,
    timeout: Duration,
    count: watch::Sender<usize>,
    events: broadcast::Sender<QueueEvent>,
}

impl PermissionQueue {
    /// A queue whose requests are denied after `timeout`.
    pub fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(PermissionQueue {
            waiting: Mutex::new(BTreeMap::new()),
            timeout,
            count: watch::channel(0).0,
            events: broadcast::channel(256).0,
        })
    }

    /// Every request and every end of one, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<QueueEvent> {
        self.events.subscribe()
    }

    fn resolved(&self, request: &PermissionRequest, allow: bool, scope: Scope, by: &str) {
        let _ = self.events.send(QueueEvent::Resolved {
            id: request.id.clone(),
            session_id: request.session_id.clone(),
            call_id: request.call_id.clone(),
            allow,
            scope,
            by: by.to_string(),
        });
    }

    /// How many requests wait, now and as it changes.
    pub fn waiting(&self) -> watch::Receiver<usize> {
        self.count.subscribe()
    }

    /// The requests waiting, oldest first.
    pub fn pending(&self) -> Vec<PermissionRequest> {
        let waiting = self.lock();
        let mut list: Vec<PermissionRequest> = waiting.values().map(|(r, _)| r.clone()).collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// Put `request` in the queue (its `id` is set here); wait for the
    /// answer with [`Ticket::answer`]. Dropping the ticket withdraws the
    /// request.
    pub fn submit(self: &Arc<Self>, mut request: PermissionRequest) -> Ticket {
        request.id = format!(
            "{:013}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default(),
            uuid::Uuid::new_v4().simple()
        );
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.lock();
            if waiting.len() >= MAX_WAITING {
                // Answered at once: the sender goes with the refusal.
                let _ = tx.send(Answer {
                    allow: false,
                    scope: Scope::Once,
                    note: Some(format!(
                        "{MAX_WAITING} requests are already waiting for the operator; ask again after they are answered"
                    )),
                    by: "queue limit".into(),
                    at: crate::time::now_rfc3339(),
                    content: None,
                });
                let _ = self
                    .events
                    .send(QueueEvent::Required(Box::new(request.clone())));
                self.resolved(&request, false, Scope::Once, "queue limit");
                return Ticket {
                    queue: self.clone(),
                    request,
                    rx: Some(rx),
                };
            }
            waiting.insert(request.id.clone(), (request.clone(), tx));
        }
        self.count_changed();
        let _ = self
            .events
            .send(QueueEvent::Required(Box::new(request.clone())));
        Ticket {
            queue: self.clone(),
            request,
            rx: Some(rx),
        }
    }

    /// Answer request `id`. A yes to a form must fit it: its content is
    /// then the values given with the defaults filling the rest.
    pub fn answer(&self, id: &str, mut answer: Answer) -> Result<(), AnswerError> {
        let (request, tx) = {
            let mut waiting = self.lock();
            let (request, _) = waiting
                .get(id)
                .ok_or_else(|| UnknownRequest(id.to_string()))?;
            if let Some(form) = &request.form {
                answer.content = match answer.allow {
                    true => Some(form.fill(answer.content.as_ref()).map_err(|why| {
                        AnswerError::Form {
                            id: id.to_string(),
                            why,
                        }
                    })?),
                    false => None,
                };
            }
            waiting.remove(id).expect("present under the lock")
        };
        self.count_changed();
        self.resolved(&request, answer.allow, answer.scope, &answer.by);
        if let Some(note) = &mut answer.note {
            *note = note.chars().take(MAX_NOTE_CHARS).collect();
        }
        tx.send(answer)
            .map_err(|_| UnknownRequest(id.to_string()).into())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count_changed(&self) {
        let n = self.lock().len();
        self.count.send_replace(n);
    }
}

/// A request in the queue.
pub struct Ticket {
    queue: Arc<PermissionQueue>,
    request: PermissionRequest,
    rx: Option<oneshot::Receiver<Answer>>,
}

impl Ticket {
    /// The request, with its id.
    pub fn request(&self) -> &PermissionRequest {
        &self.request
    }

    /// The operator's answer; a denial when the queue's time runs out.
    pub async fn answer(mut self) -> Answer {
        let rx = self.rx.take().expect("answered once");
        match tokio::time::timeout(self.queue.timeout, rx).await {
            Ok(Ok(answer)) => answer,
            _ => {
                // Timed out: it leaves the queue now, as a denial.
                if self.queue.lock().remove(&self.request.id).is_some() {
                    self.queue.count_changed();
                    self.queue
                        .resolved(&self.request, false, Scope::Once, "timeout");
                }
                Answer {
                    allow: false,
                    scope: Scope::Once,
                    note: Some(format!(
                        "nobody answered within {} s",
                        self.queue.timeout.as_secs()
                    )),
                    by: "timeout".into(),
                    at: crate::time::now_rfc3339(),
                    content: None,
                }
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Dropped while waiting: the call was interrupted.
        if self.queue.lock().remove(&self.request.id).is_some() {
            self.queue.count_changed();
            self.queue
                .resolved(&self.request, false, Scope::Once, "withdrawn");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> PermissionRequest {
        PermissionRequest {
            id: String::new(),
            session_id: "s".into(),
            root_session_id: "s".into(),
            call_id: "c".into(),
            tool: "shell".into(),
            arguments: serde_json::json!({"command": "ls"}),
            from: "agent".into(),
            preview: "ls".into(),
            diff: None,
            sandbox: "workspace-write".into(),
            network: false,
            reason: "ask by mode on-risk".into(),
            scopes: Vec::new(),
            form: None,
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_asker_and_clears_the_request() {
        let queue = PermissionQueue::new(Duration::from_secs(30));
        let ticket = queue.submit(request());
        let id = ticket.request().id.clone();
        assert_eq!(queue.pending()[0].id, id);
        assert_eq!(*queue.waiting().borrow(), 1);
        let asker = tokio::spawn(ticket.answer());
        assert!(queue.answer("nope", answer(true)).is_err());
        queue.answer(&id, answer(true)).unwrap();
        let got = asker.await.unwrap();
        assert!(got.allow);
        assert!(queue.pending().is_empty());
        assert!(queue.answer(&id, answer(false)).is_err(), "answered once");
    }

    #[tokio::test]
    async fn requests_beyond_the_limit_are_denied_at_once() {
        let queue = PermissionQueue::new(Duration::from_secs(30));
        let tickets: Vec<Ticket> = (0..MAX_WAITING).map(|_| queue.submit(request())).collect();
        assert_eq!(queue.pending().len(), MAX_WAITING);
        let late = queue.submit(request()).answer().await;
        assert!(!late.allow && late.by == "queue limit", "{late:?}");
        assert_eq!(queue.pending().len(), MAX_WAITING);
        drop(tickets);
        assert!(queue.pending().is_empty());
    }

    #[tokio::test]
    async fn nobody_answering_is_a_denial_and_a_dropped_asker_withdraws() {
        let queue = PermissionQueue::new(Duration::from_millis(50));
        let got = queue.submit(request()).answer().await;
        assert!(!got.allow && got.by == "timeout");
        assert!(queue.pending().is_empty());
        let slow = PermissionQueue::new(Duration::from_secs(30));
        let asking = slow.submit(request()).answer();
        let _ = tokio::time::timeout(Duration::from_millis(20), asking).await;
        assert!(
            slow.pending().is_empty(),
            "withdrawn when its call stopped waiting"
        );
        assert_eq!(*slow.waiting().borrow(), 0);
    }

    fn answer(allow: bool) -> Answer {
        Answer {
            allow,
            scope: Scope::Once,
            note: None,
            by: "bridge".into(),
            at: "2026-11-24T00:00:00.000Z".into(),
            content: None,
        }
    }
}

//! Questions to the editor: every call the approval rules ask about is
//! put to it as `session/request_permission`, in the conversation it
//! belongs to (a subagent's question in its top-level session), after the
//! updates that show the call; the answer goes back to the queue.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::oneshot;

use super::agent::Agent;
use crate::approvals::{PermissionRequest, QueueEvent};

impl Agent {
    /// Put every call that waits for approval to the editor, one task
    /// each; a request that ended meanwhile (answered, timed out,
    /// withdrawn) is not asked, or its question is dropped.
    pub(super) async fn ask_editor(self: Arc<Self>) {
        let mut events = self.queue.subscribe();
        // Request id → the JSON-RPC id of its question.
        let questions: Arc<std::sync::Mutex<HashMap<String, String>>> = Default::default();
        let mut put: HashSet<String> = HashSet::new();
        loop {
            let waiting = match events.recv().await {
                Ok(QueueEvent::Required(request)) => vec![*request],
                Ok(QueueEvent::Resolved { id, .. }) => {
                    put.remove(&id);
                    let question = questions.lock().ok().and_then(|mut q| q.remove(&id));
                    if let (Some(question), Ok(mut asked)) = (question, self.asked.lock()) {
                        asked.remove(&question);
                    }
                    continue;
                }
                // Missed events: what waits now is what to ask.
                Err(RecvError::Lagged(_)) => self.queue.pending(),
                Err(RecvError::Closed) => return,
            };
            let pending: HashSet<String> = self.queue.pending().into_iter().map(|r| r.id).collect();
            for request in waiting {
                if !pending.contains(&request.id) || !put.insert(request.id.clone()) {
                    continue;
                }
                let agent = self.clone();
                let questions = questions.clone();
                tokio::spawn(async move { agent.put_question(request, questions).await });
            }
        }
    }

    /// Ask the editor about `request` and answer the queue with what it
    /// said (a denial for anything but an offered option).
    async fn put_question(
        &self,
        request: PermissionRequest,
        questions: Arc<std::sync::Mutex<HashMap<String, String>>>,
    ) {
        let root = if request.root_session_id.is_empty() {
            &request.session_id
        } else {
            &request.root_session_id
        };
        let driven = self.sessions.lock().await.get(root).cloned();
        // The call shows in the editor before the question about it.
        if let Some(driven) = &driven {
            driven.flush().await;
        }
        let params = super::permission::params(root, &request);
        let question = format!("sandcrab-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        if let Ok(mut q) = questions.lock() {
            q.insert(request.id.clone(), question.clone());
        }
        let outcome = self
            .ask(&question, "session/request_permission", params)
            .await;
        let answer = super::permission::answer(outcome.as_ref().map_err(Clone::clone), &request);
        if let Err(crate::approvals::AnswerError::Form { why, .. }) =
            self.queue.answer(&request.id, answer)
        {
            // A yes to a form the defaults cannot fill: an editor gives
            // no values, so it is declined, saying why.
            let note = format!("the editor cannot fill this form: {why}");
            let _ = self
                .queue
                .answer(&request.id, super::permission::deny(Some(note)));
        }
    }

    /// Send request `id` to the editor and wait for its answer (an error
    /// when it answers with one, the question is dropped, or it goes
    /// away).
    async fn ask(&self, id: &str, method: &str, params: Value) -> Result<Value, String> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(id.to_string(), tx);
        }
        let sent = self
            .out
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        if !sent {
            return Err("the editor is gone".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the question was withdrawn or the editor is gone".into()))
    }

    /// The editor answered request `id` (an answer to nothing asked, or
    /// a second answer, is dropped).
    pub(super) fn answered(&self, id: &Value, outcome: Result<Value, Value>) {
        let Some(id) = id.as_str() else { return };
        let waiting = self.asked.lock().ok().and_then(|mut a| a.remove(id));
        if let Some(tx) = waiting {
            let _ = tx.send(outcome.map_err(|e| e.to_string()));
        }
    }
}

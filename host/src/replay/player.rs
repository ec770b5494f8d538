//! A recording played back: the one cursor behind the replay's model
//! client, its tools, its summarizer and its steering/jobs/interrupts.
//! Each asks for the entry the live session took at the same point; a
//! request the host builds is compared with the recorded one, and the
//! first difference stops the replay.

use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use serde_json::Value;

use super::diff::first_difference;
use crate::agent::Session;
use crate::agent::playback::{Playback, Played};
use crate::agent::recording::{Entry, InterruptPoint, ModelCall, RecordedMessage, request_rest};
use crate::compaction::{Entry as CompactionEntry, Summarizer};
use crate::llm::{
    ErrorKind, EventStream, LlmClient, LlmError, Request, Response, StreamEvent, ToolCall,
};
use crate::tools::{FnTool, ToolRegistry};

/// Where a replay left the recording.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The host did something else than the recording says.
    Diverged(Divergence),
    /// `--until` was reached.
    Until(u64),
}

/// The first difference between the recording and the replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The model call it was found at (1-based; 0: before the first).
    pub model_call: u64,
    /// The request field, or what the host did.
    pub field: String,
    pub recorded: String,
    pub now: String,
}

/// The recording, and how far the replay has come.
pub struct Player {
    entries: Vec<Entry>,
    provider: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Entries taken (or passed over).
    taken: Vec<bool>,
    /// Nothing before this is left to take.
    next: usize,
    model_calls: u64,
    tool_answers: u64,
    /// The messages of the last recorded request, as recorded.
    last_messages: Vec<RecordedMessage>,
    /// The messages of the last request the host built (they matched).
    last_built: Vec<crate::llm::Message>,
    /// The current tool round was interrupted.
    round_interrupted: bool,
    /// The session's recorded clock reads, in order.
    clock: std::collections::VecDeque<String>,
    until: Option<u64>,
    stop: Option<Stop>,
    session: Option<Weak<Session>>,
}

impl Player {
    /// Play `entries` (the first is the session's start).
    pub fn new(entries: Vec<Entry>, provider: &str, until: Option<u64>) -> Arc<Player> {
        // Clock reads are answered in order, wherever they were recorded.
        let taken = entries
            .iter()
            .map(|e| matches!(e, Entry::Clock { .. }))
            .collect();
        let clock = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Clock { reads } => Some(reads.iter().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        Arc::new(Player {
            entries,
            provider: provider.to_string(),
            state: Mutex::new(State {
                taken,
                until,
                clock,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session being replayed (interrupts go to it).
    pub fn drive(&self, session: &Arc<Session>) {
        self.lock().session = Some(Arc::downgrade(session));
    }

    /// Why the replay stopped early, if it did.
    pub fn stop(&self) -> Option<Stop> {
        self.lock().stop.clone()
    }

    /// Model calls and tool answers played so far.
    pub fn counts(&self) -> (u64, u64) {
        let state = self.lock();
        (state.model_calls, state.tool_answers)
    }

    /// Record the first divergence (later ones follow from it).
    pub fn diverge(
        &self,
        field: impl Into<String>,
        recorded: impl Into<String>,
        now: impl Into<String>,
    ) {
        let mut state = self.lock();
        if state.stop.is_none() {
            state.stop = Some(Stop::Diverged(Divergence {
                model_call: state.model_calls,
                field: field.into(),
                recorded: recorded.into(),
                now: now.into(),
            }));
        }
    }

    /// The next entry the driver takes (tool answers of the session's own
    /// tools, which ran again, are passed over); None at the end.
    pub fn next_for_driver(&self) -> Option<(usize, Entry)> {
        let mut state = self.lock();
        let at = self.peek(&mut state)?;
        for i in state.next..=at {
            state.taken[i] = true;
        }
        Some((at, self.entries[at].clone()))
    }

    /// The first entry not taken that is not a tool answer.
    fn peek(&self, state: &mut State) -> Option<usize> {
        while state.next < self.entries.len() && state.taken[state.next] {
            state.next += 1;
        }
        (state.next..self.entries.len())
            .find(|&i| !state.taken[i] && !matches!(self.entries[i], Entry::Tool(_)))
    }

    /// Take the next entry if `wanted` says it is the one. Taking a
    /// model call passes over the tool answers before it that nobody took
    /// (the session's own tools ran again instead).
    fn take_if<T>(&self, wanted: impl Fn(&Entry) -> Option<T>) -> Option<T> {
        let mut state = self.lock();
        let at = self.peek(&mut state)?;
        let found = wanted(&self.entries[at])?;
        if matches!(self.entries[at], Entry::Model(_)) {
            for i in state.next..at {
                state.taken[i] = true;
            }
        }
        state.taken[at] = true;
        Some(found)
    }

    /// What the next entry is, for a divergence report.
    fn describe_next(&self) -> String {
        let mut state = self.lock();
        match self.peek(&mut state) {
            Some(at) => describe(&self.entries[at]),
            None => "the end of the recording".to_string(),
        }
    }

    /// The host did `what` where the recording has something else next.
    fn host_did_instead(&self, what: &str) {
        let next = self.describe_next();
        self.diverge("what the host did next", next, what);
    }

    /// The recorded answer to the request the host built now.
    fn model_call(&self, request: &Request) -> Result<ModelCall, LlmError> {
        if let Some(stop) = self.stop() {
            return Err(stopped(&self.provider, &stop));
        }
        let call = self.take_if(|e| match e {
            Entry::Model(call) => Some((**call).clone()),
            _ => None,
        });
        let Some(call) = call else {
            self.host_did_instead("a model request");
            return Err(stopped(&self.provider, &self.stop().expect("set")));
        };
        {
            let mut state = self.lock();
            if state.until.is_some_and(|until| state.model_calls >= until) {
                let until = state.model_calls;
                state.stop = Some(Stop::Until(until));
                return Err(stopped(&self.provider, &Stop::Until(until)));
            }
            state.model_calls += 1;
            state.round_interrupted = false;
            let kept = call.request.kept.min(state.last_messages.len());
            state.last_messages.truncate(kept);
            state
                .last_messages
                .extend(call.request.messages.iter().cloned());
        }
        self.compare(request, &call);
        match self.stop() {
            Some(stop) => Err(stopped(&self.provider, &stop)),
            None => Ok(call),
        }
    }

    /// Compare the request built now with the recorded one. Messages the
    /// previous request already had, unchanged, matched then.
    fn compare(&self, request: &Request, call: &ModelCall) {
        let differs = {
            let mut state = self.lock();
            let differs = first_message_difference(
                &state.last_messages,
                &state.last_built,
                call.request.kept,
                &request.messages,
            )
            .or_else(|| {
                first_difference("", &call.request.rest, &request_rest(request))
                    .map(|(field, a, b)| (field, a.to_string(), b.to_string()))
            });
            if differs.is_none() {
                state.last_built = request.messages.clone();
            }
            differs
        };
        if let Some((field, recorded, now)) = differs {
            self.diverge(field, recorded, now);
        }
    }

    /// Interrupt the session being replayed, as the operator did.
    fn interrupt(&self) {
        let session = self.lock().session.as_ref().and_then(Weak::upgrade);
        if let Some(session) = session {
            session.interrupt();
        }
    }
}

/// Where the messages built now first differ from the recorded ones:
/// the field and both values. The first `kept` of them, when equal to
/// what was `built` for the previous request, matched then.
fn first_message_difference(
    recorded: &[RecordedMessage],
    built: &[crate::llm::Message],
    kept: usize,
    now: &[crate::llm::Message],
) -> Option<(String, String, String)> {
    for (i, (was, now)) in recorded.iter().zip(now).enumerate() {
        if i < kept && built.get(i) == Some(now) {
            continue;
        }
        let differs = match was {
            RecordedMessage::Digest { digest } => (*digest != RecordedMessage::digest_of(now))
                .then(|| {
                    (
                        format!("messages[{i}]"),
                        format!("digest {digest}"),
                        serde_json::to_string(now).unwrap_or_default(),
                    )
                }),
            RecordedMessage::Full(was) => {
                first_difference(&format!("messages[{i}]"), &to_value(was), &to_value(now))
                    .map(|(path, a, b)| (path, a.to_string(), b.to_string()))
            }
        };
        if differs.is_some() {
            return differs;
        }
    }
    (recorded.len() != now.len()).then(|| {
        (
            "messages (how many)".to_string(),
            recorded.len().to_string(),
            now.len().to_string(),
        )
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A short name of an entry, for reports.
pub fn describe(entry: &Entry) -> String {
    match entry {
        Entry::Start(_) => "a session start".into(),
        Entry::Input { text: Some(t) } => format!("the input {}", Value::from(t.as_str())),
        Entry::Input { text: None } => "a turn without input".into(),
        Entry::Steering { .. } => "steering".into(),
        Entry::Jobs { .. } => "finished jobs' messages".into(),
        Entry::Tools { .. } => "a change of the tools offered".into(),
        Entry::Model(_) => "a model request".into(),
        Entry::Tool(a) => format!("the answer of tool call {} ({})", a.call_id, a.name),
        Entry::Summary { .. } => "a summary for compaction".into(),
        Entry::CapRaised { .. } => "a spend cap raised".into(),
        Entry::Compact => "a compaction the operator asked for".into(),
        Entry::Clock { .. } => "clock reads".into(),
        Entry::Interrupt { .. } => "an interrupt".into(),
        Entry::Stopped { .. } => "the end of recording (size cap)".into(),
        Entry::Forked { .. } => "a fork's origin".into(),
        Entry::Hooked { event, .. } => format!("the answer of the {event} hooks"),
    }
}

fn stopped(provider: &str, stop: &Stop) -> LlmError {
    let message = match stop {
        Stop::Until(n) => format!("replay stopped after model call {n} (--until)"),
        Stop::Diverged(d) => format!(
            "replay diverged at model call {}: {}",
            d.model_call, d.field
        ),
    };
    LlmError::new(ErrorKind::Configuration, provider, message)
}

impl Playback for Player {
    fn now(&self) -> String {
        // Past the recorded reads (a replay going further than the
        // recording did): the system clock.
        self.lock()
            .clock
            .pop_front()
            .unwrap_or_else(crate::time::now_rfc3339)
    }

    fn steering(&self) -> Vec<String> {
        self.take_if(|e| match e {
            Entry::Steering { texts } => Some(texts.clone()),
            _ => None,
        })
        .unwrap_or_default()
    }

    fn hooked(&self, event: &str) -> Option<crate::hooks::HookAnswer> {
        self.take_if(|e| match e {
            Entry::Hooked { event: at, answer } if at == event => Some(answer.clone()),
            _ => None,
        })
    }

    fn job_messages(&self) -> Vec<String> {
        self.take_if(|e| match e {
            Entry::Jobs { messages } => Some(messages.clone()),
            _ => None,
        })
        .unwrap_or_default()
    }

    fn interrupted_before_round(&self) -> bool {
        self.take_if(|e| match e {
            Entry::Interrupt {
                at: InterruptPoint::Round,
            } => Some(()),
            _ => None,
        })
        .is_some()
    }

    fn tools(&self) -> Option<ToolRegistry> {
        let specs = self.take_if(|e| match e {
            Entry::Tools { tools } => Some(tools.clone()),
            _ => None,
        })?;
        let mut registry = ToolRegistry::new();
        for spec in specs {
            // Never run: the replay answers every plugin call itself.
            registry.register(
                spec,
                Arc::new(FnTool(|_, _| async {
                    Err::<String, String>("a replay runs no tool".into())
                })),
            );
        }
        Some(registry)
    }

    fn tool_outcome(&self, call: &ToolCall) -> Played {
        let mut state = self.lock();
        let mut at = state.next;
        while at < self.entries.len() {
            if !state.taken[at] {
                match &self.entries[at] {
                    Entry::Tool(answer) if answer.call_id == call.id => {
                        state.taken[at] = true;
                        state.tool_answers += 1;
                        if answer.name != call.name {
                            drop(state);
                            self.diverge(
                                format!("tool call {}", call.id),
                                answer.name.clone(),
                                call.name.clone(),
                            );
                        }
                        return Played::Outcome(Box::new(answer.to_outcome()));
                    }
                    Entry::Tool(_) | Entry::Summary { .. } => {}
                    Entry::Interrupt {
                        at: InterruptPoint::Tools,
                    } => {
                        state.taken[at] = true;
                        state.round_interrupted = true;
                        break;
                    }
                    _ => break,
                }
            }
            at += 1;
        }
        if state.round_interrupted {
            drop(state);
            self.interrupt();
            return Played::Interrupt;
        }
        drop(state);
        let next = self.describe_next();
        self.diverge(
            format!("tool call {} ({})", call.id, call.name),
            next,
            "a call the recording has no answer for",
        );
        Played::Outcome(Box::new(crate::tools::ToolOutcome::with_status(
            crate::tools::ToolStatus::Failed,
            "replay: the recording has no answer for this call".into(),
        )))
    }
}

/// The replay's model: answers from the recording.
pub struct ReplayClient(pub Arc<Player>);

#[async_trait]
impl LlmClient for ReplayClient {
    fn provider(&self) -> &str {
        &self.0.provider
    }

    async fn complete(&self, request: &Request) -> Result<Response, LlmError> {
        let call = self.0.model_call(request)?;
        if let Some(error) = &call.error {
            return Err(error.to_error());
        }
        call.events
            .iter()
            .find_map(|e| match &e.event {
                StreamEvent::Finish(r) => Some(r.clone()),
                _ => None,
            })
            .ok_or_else(|| LlmError::new(ErrorKind::Stream, &self.0.provider, "no answer recorded"))
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        let call = self.0.model_call(request)?;
        if call.events.is_empty()
            && let Some(error) = &call.error
        {
            return Err(error.to_error());
        }
        let mut items: Vec<Result<StreamEvent, LlmError>> =
            call.events.into_iter().map(|e| Ok(e.event)).collect();
        if let Some(error) = &call.error {
            items.push(Err(error.to_error()));
        }
        let events = futures::stream::iter(items);
        if call.interrupted {
            // The operator interrupted after these events: so does the
            // replay, and the answer never finishes.
            let player = self.0.clone();
            let cut = futures::stream::once(async move {
                player.interrupt();
                std::future::pending::<Result<StreamEvent, LlmError>>().await
            });
            return Ok(Box::pin(futures::StreamExt::chain(events, cut)));
        }
        Ok(Box::pin(events))
    }
}

/// The replay's summarizer: answers from the recording.
pub struct ReplaySummarizer(pub Arc<Player>);

#[async_trait]
impl Summarizer for ReplaySummarizer {
    async fn summarize(&self, _: &str, _: &[CompactionEntry]) -> Result<String, String> {
        let result = self.0.take_if(|e| match e {
            Entry::Summary { result, charges } => Some((result.clone(), charges.clone())),
            _ => None,
        });
        match result {
            Some((result, charges)) => {
                // What the summary cost the session, as it did then.
                if let Some(ledger) = crate::llm::spend::charged() {
                    for charge in &charges {
                        ledger.charge_recorded(charge);
                    }
                }
                result
            }
            None => {
                self.0.host_did_instead("a summary for compaction");
                Err("replay: the recording has no summary here".into())
            }
        }
    }
}

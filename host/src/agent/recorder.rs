//! Writing a session's flight recording: entries are kept in order and
//! handed to the store with the turns they belong to, in the same
//! transaction (see [`super::memory::SessionMemory::save`]). Requests are
//! kept as the change from the previous one, so a long session's
//! recording grows with its history, not with its square. Past the size
//! cap one `stopped` entry says where recording ended.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::recording::{
    Entry, ModelCall, RecordedMessage, RecordedRequest, RecordingMode, TimedEvent, request_rest,
};
use crate::compaction::{Entry as CompactionEntry, Summarizer};
use crate::llm::{Message, Request, StreamEvent};
use crate::plugin::ToolSpec;
use crate::store::NewRecord;

/// `[store] recording` and its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordingSettings {
    pub mode: RecordingMode,
    /// Most bytes of recording kept per session (uncompressed JSON).
    pub cap_bytes: u64,
}

impl Default for RecordingSettings {
    fn default() -> Self {
        RecordingSettings {
            mode: RecordingMode::Full,
            cap_bytes: 256 * 1024 * 1024,
        }
    }
}

/// One session's recorder.
pub struct Recorder {
    settings: RecordingSettings,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Entries not handed to the store yet.
    pending: Vec<NewRecord>,
    /// Bytes recorded so far (stored and pending).
    bytes: u64,
    stopped: bool,
    /// The messages of the last recorded request.
    last_messages: Vec<Message>,
    /// The tools of the last `tools` entry.
    last_tools: Option<Vec<ToolSpec>>,
    /// Clock reads not recorded yet (they go before the next entry).
    clock_reads: Vec<String>,
}

/// A model call being recorded: the request, then events as they arrive.
pub struct InFlight {
    started: std::time::Instant,
    request: RecordedRequest,
    events: Vec<TimedEvent>,
    mode: RecordingMode,
}

impl InFlight {
    /// Keep one event the adapter yielded.
    pub fn event(&mut self, event: &StreamEvent) {
        if self.mode == RecordingMode::Digests && !matches!(event, StreamEvent::Finish(_)) {
            return;
        }
        self.events.push(TimedEvent {
            ms: self.started.elapsed().as_millis() as u64,
            event: event.clone(),
        });
    }

    /// The finished entry.
    pub fn finish(self, error: Option<&crate::llm::LlmError>, interrupted: bool) -> Entry {
        Entry::Model(Box::new(ModelCall {
            request: self.request,
            events: self.events,
            error: error.map(Into::into),
            interrupted,
        }))
    }
}

impl Recorder {
    /// A recorder for a session that already kept `bytes` of recording.
    pub fn new(settings: RecordingSettings, bytes: u64) -> Option<Arc<Recorder>> {
        (settings.mode != RecordingMode::Off).then(|| {
            Arc::new(Recorder {
                settings,
                state: Mutex::new(State {
                    bytes,
                    ..State::default()
                }),
            })
        })
    }

    /// The mode it records in.
    pub fn mode(&self) -> RecordingMode {
        self.settings.mode
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep one clock read of the session's.
    pub fn clock_read(&self, at: &str) {
        let mut state = self.lock();
        if !state.stopped {
            state.clock_reads.push(at.to_string());
        }
    }

    /// Keep `entry` (nothing once the cap was reached), after the clock
    /// reads that came before it.
    pub fn record(&self, entry: Entry) {
        let mut state = self.lock();
        self.flush_clock(&mut state);
        self.push(&mut state, entry);
    }

    /// Keep the clock reads so far as one entry.
    fn flush_clock(&self, state: &mut State) {
        if !state.clock_reads.is_empty() {
            let reads = std::mem::take(&mut state.clock_reads);
            self.push(state, Entry::Clock { reads });
        }
    }

    fn push(&self, state: &mut State, entry: Entry) {
        if state.stopped {
            return;
        }
        let body = serde_json::to_string(&entry).expect("recording entries serialize");
        let size = body.len() as u64;
        if state.bytes + size > self.settings.cap_bytes {
            state.stopped = true;
            let stop = Entry::Stopped {
                bytes: state.bytes,
                cap: self.settings.cap_bytes,
            };
            let body = serde_json::to_string(&stop).expect("recording entries serialize");
            state.pending.push(NewRecord {
                kind: stop.kind().into(),
                body,
            });
            return;
        }
        state.bytes += size;
        state.pending.push(NewRecord {
            kind: entry.kind().into(),
            body,
        });
    }

    /// The entries to store now (the clock reads so far included).
    pub fn take(&self) -> Vec<NewRecord> {
        let mut state = self.lock();
        self.flush_clock(&mut state);
        std::mem::take(&mut state.pending)
    }

    /// Put back entries the store could not take (they go first).
    pub fn restore(&self, mut records: Vec<NewRecord>) {
        let mut state = self.lock();
        records.append(&mut state.pending);
        state.pending = records;
    }

    /// Record `tools` when they differ from the last recorded ones.
    pub fn tools(&self, tools: &[ToolSpec]) {
        {
            let mut state = self.lock();
            if state.last_tools.as_deref() == Some(tools) {
                return;
            }
            state.last_tools = Some(tools.to_vec());
        }
        self.record(Entry::Tools {
            tools: tools.to_vec(),
        });
    }

    /// Begin recording a model call for `request`.
    pub fn begin(&self, request: &Request) -> InFlight {
        let mut state = self.lock();
        let kept = state
            .last_messages
            .iter()
            .zip(&request.messages)
            .take_while(|(a, b)| a == b)
            .count();
        let messages = request.messages[kept..]
            .iter()
            .map(|m| match self.settings.mode {
                RecordingMode::Digests => RecordedMessage::Digest {
                    digest: RecordedMessage::digest_of(m),
                },
                _ => RecordedMessage::Full(m.clone()),
            })
            .collect();
        state.last_messages.truncate(kept);
        state
            .last_messages
            .extend_from_slice(&request.messages[kept..]);
        InFlight {
            started: std::time::Instant::now(),
            request: RecordedRequest {
                kept,
                messages,
                rest: request_rest(request),
            },
            events: Vec::new(),
            mode: self.settings.mode,
        }
    }
}

/// A session's recorder for `settings` (None: recording is off), resuming
/// after `recorded_bytes`, and its compactor, whose summaries it records.
pub fn recorded_compactor(
    settings: RecordingSettings,
    recorded_bytes: u64,
    summarizer: Arc<dyn Summarizer>,
    store: Arc<dyn crate::store::Store>,
    summarization: crate::compaction::SummarizationConfig,
) -> (Option<Arc<Recorder>>, Arc<crate::compaction::Compactor>) {
    let recorder = Recorder::new(settings, recorded_bytes);
    let summarizer: Arc<dyn Summarizer> = match &recorder {
        Some(recorder) => Arc::new(RecordingSummarizer {
            inner: summarizer,
            recorder: recorder.clone(),
        }),
        None => summarizer,
    };
    let compactor = Arc::new(crate::compaction::Compactor::new(
        summarizer,
        store,
        summarization,
    ));
    (recorder, compactor)
}

/// The summarizer of a recorded session: what it answers is recorded.
pub struct RecordingSummarizer {
    pub inner: Arc<dyn Summarizer>,
    pub recorder: Arc<Recorder>,
}

#[async_trait]
impl Summarizer for RecordingSummarizer {
    async fn summarize(
        &self,
        existing_summary: &str,
        messages: &[CompactionEntry],
    ) -> Result<String, String> {
        let (result, charges) =
            crate::llm::spend::noting(self.inner.summarize(existing_summary, messages)).await;
        self.recorder.record(Entry::Summary {
            result: result.clone(),
            charges,
        });
        result
    }
}

//! `sandcrab replay`: a stored session re-run offline. The host's own
//! logic — the loop, request building, history repair, truncation,
//! compaction — runs again; everything from outside — the model, the
//! tools, the summarizer, the operator's steering and interrupts, jobs
//! finishing, the machine the prompt describes — comes from the session's
//! recording. No network, no program, no file write (compaction writes to
//! a store in memory). Every request the host builds is compared with the
//! recorded one; the first difference stops the replay and is reported
//! with the model call, the field and both values.

pub mod diff;
pub mod fork;
mod player;

use std::path::PathBuf;
use std::sync::Arc;

pub use player::{Divergence, Stop};
use player::{Player, ReplayClient, ReplaySummarizer, describe};

use crate::agent::recording::{Entry, Start, UnreadableEntry, read_entry};
use crate::agent::{Profile, Session, SessionInfo, SessionMemory, SessionParts, Turn};
use crate::compaction::Compactor;
use crate::plugin::ProfileInfo;
use crate::store::{SessionRecord, SqliteStore, Store, StoreError};
use crate::tools::{ToolCatalog, ToolRegistry};

/// How far to replay.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayOptions {
    /// Stop after this many model calls.
    pub until: Option<u64>,
}

/// What a replay found.
#[derive(Debug, Clone)]
pub struct Report {
    pub inputs: u64,
    pub model_calls: u64,
    pub tool_answers: u64,
    /// Starts in the recording (1 + resumes).
    pub starts: u64,
    /// Where it stopped early (None: it ran the whole recording and every
    /// request matched).
    pub stop: Option<Stop>,
    /// The recording ended at its size cap (what followed was not
    /// recorded).
    pub recording_capped: bool,
    /// The replayed session's history where it stopped.
    pub history: Vec<Turn>,
    /// The first start entry (what the session began with).
    pub start: Option<Box<Start>>,
    /// Why spend caps stopped inputs, in order (the recorded caps hold in
    /// the replay, so they stop it where they stopped the session).
    pub spend_stops: Vec<String>,
}

/// Why a session cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "session {0} has no recording: it was saved by a sandcrab without recordings, or with [store] recording = \"off\""
    )]
    NotRecorded(String),
    #[error(transparent)]
    Unreadable(#[from] UnreadableEntry),
    #[error("recording entry {0}: the recording does not begin with the session's start")]
    NoStart(u64),
}

/// Replay session `id` of `store`.
pub async fn replay(
    store: &dyn Store,
    id: &str,
    options: ReplayOptions,
) -> Result<Report, ReplayError> {
    let record = store
        .session(id)?
        .ok_or_else(|| StoreError::UnknownSession(id.to_string()))?;
    let stored = store.records(id)?;
    if stored.is_empty() {
        return Err(ReplayError::NotRecorded(id.to_string()));
    }
    let entries = stored
        .iter()
        .map(|r| read_entry(r.seq, &r.kind, &r.body))
        .collect::<Result<Vec<_>, _>>()?;
    let player = Player::new(entries, &record.provider, options.until);
    // Compaction writes here, not to the user's store.
    let scratch: Arc<dyn Store> = Arc::new(SqliteStore::in_memory()?);
    let mut session: Option<Arc<Session>> = None;
    // The scratch session a start continues (a resume, or a fork's
    // starting history).
    let mut resume: Option<String> = None;
    let (mut inputs, mut starts, mut capped) = (0, 0, false);
    let mut first_start = None;
    let mut spend_stops = Vec::new();
    while player.stop().is_none() {
        let Some((at, entry)) = player.next_for_driver() else {
            break;
        };
        match entry {
            Entry::Start(start) => {
                starts += 1;
                let next = start_session(&player, &record, &start, &scratch, resume.as_deref())?;
                first_start.get_or_insert(start);
                resume = Some(next.id().to_string());
                session = Some(next);
            }
            Entry::Input { text } => {
                let Some(session) = &session else {
                    return Err(ReplayError::NoStart(at as u64 + 1));
                };
                inputs += 1;
                // Errors are the recorded ones, or the replay's stop.
                let _ = session.process_one(text.as_deref()).await;
                if let Some(reached) = session.spend_stopped() {
                    spend_stops.push(reached.message);
                }
            }
            Entry::Forked { turns, .. } => {
                let id = uuid::Uuid::new_v4().to_string();
                scratch.create_session(&SessionRecord {
                    id: id.clone(),
                    turns: 0,
                    host: String::new(),
                    ..record.clone()
                })?;
                let stored: Vec<_> = turns.iter().map(crate::agent::memory::stored).collect();
                scratch.append_turns(&id, &stored)?;
                resume = Some(id);
            }
            Entry::CapRaised { cap, by } => {
                if let Some(session) = &session {
                    session.raise_cap(cap, by);
                }
            }
            Entry::Compact => {
                if let Some(session) = &session {
                    session.compact().await;
                }
            }
            Entry::Stopped { .. } => {
                capped = true;
                break;
            }
            other => player.diverge(
                "what the host did next",
                describe(&other),
                "waiting for the next input",
            ),
        }
    }
    let (model_calls, tool_answers) = player.counts();
    Ok(Report {
        inputs,
        model_calls,
        tool_answers,
        starts,
        stop: player.stop(),
        recording_capped: capped,
        history: session.map(|s| s.history()).unwrap_or_default(),
        start: first_start,
        spend_stops,
    })
}

/// A session as the recorded start describes it, answering from `player`;
/// a later start (the session was resumed, or began as a fork) continues
/// the scratch session `resume` as a resume does.
fn start_session(
    player: &Arc<Player>,
    record: &SessionRecord,
    start: &Start,
    scratch: &Arc<dyn Store>,
    resume: Option<&str>,
) -> Result<Arc<Session>, StoreError> {
    let settings = &start.settings;
    let profile = Profile {
        info: ProfileInfo {
            id: start.profile.id.clone(),
            default_model: settings.model.clone(),
            context_window: start.profile.context_window,
            parallel_tool_calls: start.profile.parallel_tool_calls,
            tool_names: Vec::new(),
            project_doc_files: Vec::new(),
            max_output_tokens: 0,
        },
        base_instructions: start.profile.base_instructions.clone(),
    };
    let config = settings.to_config();
    let memory = match &settings.summarization {
        None => None,
        Some(summarization) => {
            let compactor = Arc::new(Compactor::new(
                Arc::new(ReplaySummarizer(player.clone())),
                scratch.clone(),
                summarization.clone(),
            ));
            Some(match resume {
                Some(id) => SessionMemory::resume(scratch.clone(), compactor, id)?,
                None => SessionMemory::create(
                    scratch.clone(),
                    compactor,
                    &SessionInfo {
                        workspace: record.workspace.clone(),
                        provider: record.provider.clone(),
                        profile: record.profile.clone(),
                        model: settings.model.clone(),
                    },
                )?,
            })
        }
    };
    let host_tools: Vec<Arc<dyn crate::agent::HostTools>> = if memory.is_some() {
        vec![Arc::new(crate::agent::session_memory::tools::MemoryTools)]
    } else {
        Vec::new()
    };
    let session = Session::new(SessionParts {
        working_dir: Some(PathBuf::from(&start.world.working_dir)),
        memory,
        host_tools,
        world: Some(start.world.clone()),
        playback: Some(player.clone()),
        window: Some(Arc::new(crate::agent::window::Window::restored(
            start.profile.context_window,
            start.profile.window_source,
            start.profile.window_ratio,
        ))),
        ..SessionParts::new(
            Arc::new(ReplayClient(player.clone())),
            Arc::new(profile),
            ToolCatalog::new(ToolRegistry::new()),
            config,
            PathBuf::from(&record.workspace),
        )
    });
    session.retain_own_tools(&start.own_tools);
    // Nobody watches a replay's events.
    drop(session.events());
    player.drive(&session);
    Ok(session)
}

#[cfg(test)]
mod tests;

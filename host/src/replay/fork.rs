//! `sandcrab replay ID --fork-at N`: a new, normal session that starts
//! from the state session ID had after model call N (replayed offline, so
//! the state is the host's, not a copy of stored rows), optionally with
//! another model or provider. Its recording begins with where it came
//! from; `chat --resume NEW` continues it live.

use super::{ReplayError, ReplayOptions, Stop, replay};
use crate::agent::recording::{Entry, ForkOrigin};
use crate::agent::{Turn, TurnKind};
use crate::store::{NewRecord, SessionRecord, Store};

/// The new session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forked {
    pub id: String,
    pub turns: usize,
    pub workspace: String,
}

/// Why a fork was not made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(
        "the replay diverged at model call {at} ({field}) before reaching model call {wanted}: the state there would not be the recorded one (see `sandcrab replay {id}`)"
    )]
    Diverged {
        id: String,
        at: u64,
        field: String,
        wanted: u64,
    },
    #[error("session {id} has {calls} recorded model calls: --fork-at takes 1 to {calls}")]
    OutOfRange { id: String, calls: u64 },
}

/// What the fork changes.
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    pub model: Option<String>,
    pub provider: Option<String>,
    /// Where the fork goes on (None: the source's workspace). A session
    /// imported from another machine names a folder of that machine.
    pub workspace: Option<String>,
}

/// Fork session `id` of `store` after model call `at`.
pub async fn fork(
    store: &dyn Store,
    id: &str,
    at: u64,
    options: &ForkOptions,
) -> Result<Forked, ForkError> {
    let report = replay(store, id, ReplayOptions { until: Some(at) }).await?;
    match &report.stop {
        Some(Stop::Until(_)) => {}
        Some(Stop::Diverged(d)) => {
            return Err(ForkError::Diverged {
                id: id.to_string(),
                at: d.model_call,
                field: d.field.clone(),
                wanted: at,
            });
        }
        None if report.model_calls == at && at > 0 => {}
        None => {
            return Err(ForkError::OutOfRange {
                id: id.to_string(),
                calls: report.model_calls,
            });
        }
    }
    let source = store
        .session(id)?
        .ok_or_else(|| crate::store::StoreError::UnknownSession(id.to_string()))?;
    let head = store.chain(id)?.last().map_or_else(
        || crate::store::chain::GENESIS.to_string(),
        |l| l.hash.clone(),
    );
    // The summary of compacted history is rebuilt from archival memory in
    // a live session; the fork keeps it as a system turn of its own.
    let turns: Vec<Turn> = report
        .history
        .into_iter()
        .map(|t| {
            if t.id == crate::agent::memory::SUMMARY_TURN_ID {
                Turn::new(t.kind)
            } else {
                t
            }
        })
        .collect();
    let now = crate::time::now_rfc3339();
    let new_id = uuid::Uuid::new_v4().to_string();
    let model = options.model.clone().unwrap_or_else(|| {
        report
            .start
            .as_ref()
            .map_or(source.model.clone(), |s| s.settings.model.clone())
    });
    let workspace = options
        .workspace
        .clone()
        .unwrap_or_else(|| source.workspace.clone());
    store.create_session(&SessionRecord {
        id: new_id.clone(),
        workspace: workspace.clone(),
        provider: options.provider.clone().unwrap_or(source.provider.clone()),
        profile: source.profile.clone(),
        model,
        title: None,
        created_at: now.clone(),
        updated_at: now,
        state: crate::store::StoredState::Closed,
        turns: 0,
        host: String::new(),
    })?;
    let origin = Entry::Forked {
        origin: ForkOrigin {
            session: id.to_string(),
            model_call: at,
            head,
        },
        turns: turns.clone(),
    };
    let record = NewRecord {
        kind: origin.kind().into(),
        body: serde_json::to_string(&origin).expect("entries serialize"),
    };
    let stored: Vec<_> = turns.iter().map(crate::agent::memory::stored).collect();
    store.append(&new_id, &stored, &[record])?;
    let title = turns.iter().find_map(|t| match &t.kind {
        TurnKind::User { text } => Some(format!(
            "fork: {}",
            text.chars().take(60).collect::<String>()
        )),
        _ => None,
    });
    if let Some(title) = title {
        store.update_session(&new_id, Some(&title), None)?;
    }
    Ok(Forked {
        id: new_id,
        turns: crate::agent::inputs(&turns),
        workspace,
    })
}

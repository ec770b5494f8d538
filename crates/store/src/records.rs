//! What the store keeps, as plain records: sessions, turns, recording
//! entries, archival blocks, what a compaction writes.

use serde::{Deserialize, Serialize};

/// How much is recorded (`[store] recording`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordingMode {
    /// Requests as they changed, every streamed event with its time.
    #[default]
    Full,
    /// Requests as digests of their messages, the final answer only.
    Digests,
    /// Nothing (the session cannot be replayed).
    Off,
}

impl std::str::FromStr for RecordingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(RecordingMode::Full),
            "digests" => Ok(RecordingMode::Digests),
            "off" => Ok(RecordingMode::Off),
            other => Err(format!(
                "recording = \"{other}\": use \"full\", \"digests\" or \"off\""
            )),
        }
    }
}

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    /// The workspace it worked in (host path).
    pub workspace: String,
    pub provider: String,
    pub profile: String,
    pub model: String,
    /// The first user input, shortened (set when it arrives).
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
    pub state: StoredState,
    /// The operator's inputs stored now (an input and all the model did
    /// for it is one turn; compacted turns are gone).
    pub turns: u64,
    /// The host that last took it (empty: not known).
    pub host: String,
}

/// One turn as stored: its id, time, kind, and the whole turn as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTurn {
    pub id: String,
    pub timestamp: String,
    /// `user`, `assistant`, `tool_results`, `steering` or `system`.
    pub kind: String,
    pub body: String,
}

/// One entry of a session's flight recording, as stored: its place, its
/// kind and its JSON (compressed in the database, plain here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Its place in the recording (1 for the first).
    pub seq: u64,
    pub kind: String,
    pub body: String,
}

/// A recording entry to append (the store numbers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub kind: String,
    pub body: String,
}

/// A block of archival memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivalBlock {
    pub id: i64,
    pub conversation_id: String,
    pub label: String,
    pub content: String,
    pub created_at: String,
}

/// A block to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBlock {
    pub label: String,
    pub content: String,
}

/// What one compaction writes, all or nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionWrite {
    /// Turns now summarized.
    pub delete_turns: Vec<String>,
    /// New summary batches.
    pub add_blocks: Vec<NewBlock>,
    /// Batches folded into a deeper one.
    pub delete_blocks: Vec<i64>,
}

/// Whether a stored session goes on: written as `active` or `closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredState {
    /// Its host may go on with it.
    Active,
    /// It ended here (imported, forked from a replay): resumed, it goes on
    /// as a new conversation of this host.
    Closed,
}

impl StoredState {
    /// The word the store keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            StoredState::Active => "active",
            StoredState::Closed => "closed",
        }
    }

    /// The state a database row holds: a word no sandcrab writes (a
    /// hand-edited row) reads as closed — nothing goes on with a session
    /// whose state is not known, and one odd row never hides the others.
    pub fn of_row(word: &str) -> Self {
        word.parse().unwrap_or(StoredState::Closed)
    }
}

impl std::fmt::Display for StoredState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for StoredState {
    type Err = String;

    fn from_str(word: &str) -> Result<Self, String> {
        match word {
            "active" => Ok(StoredState::Active),
            "closed" => Ok(StoredState::Closed),
            other => Err(format!(
                "a session's state is 'active' or 'closed', not '{other}'"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StoredState;

    /// The words the store and exports have always held; any other is
    /// named in the error.
    #[test]
    fn a_sessions_state_is_one_of_two_words() {
        for state in [StoredState::Active, StoredState::Closed] {
            assert_eq!(state.as_str().parse::<StoredState>(), Ok(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{state}\""));
        }
        assert!(
            "paused"
                .parse::<StoredState>()
                .unwrap_err()
                .contains("'paused'")
        );
        assert_eq!(StoredState::of_row("active"), StoredState::Active);
        assert_eq!(StoredState::of_row("paused"), StoredState::Closed);
    }
}

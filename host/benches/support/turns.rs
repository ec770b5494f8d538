//! What the store benchmarks write: a session's description and realistic
//! turns.

use sandcrab::agent::{SessionInfo, Turn, TurnKind};
use sandcrab::store::StoredTurn;

/// A session of the Anthropic profile in `/w`.
pub fn info() -> SessionInfo {
    SessionInfo {
        workspace: "/w".into(),
        provider: "anthropic".into(),
        profile: "anthropic".into(),
        model: "m".into(),
    }
}

/// A realistic turn: about 600 bytes of text.
pub fn turn(i: usize) -> StoredTurn {
    let t = Turn::new(TurnKind::User {
        text: format!(
            "turn {i}: {}",
            "some words about the work at hand ".repeat(18)
        ),
    });
    StoredTurn {
        id: t.id.clone(),
        timestamp: t.timestamp.clone(),
        kind: "user".into(),
        body: serde_json::to_string(&t).unwrap(),
    }
}

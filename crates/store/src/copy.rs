//! `sandcrab store copy`: move a history from one store to another (a
//! SQLite file into the team's PostgreSQL) session by session, each as it
//! was — turns, recording, hash chain, summaries — verified before it is
//! written, and idempotent: a session already there is left alone.

use super::export::SessionExport;
use super::{Store, StoreError};

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Sessions written to the destination.
    pub copied: Vec<String>,
    /// Sessions the destination already had.
    pub present: Vec<String>,
    /// Sessions not copied, and why (their chain does not verify).
    pub refused: Vec<(String, String)>,
}

/// Copy every session of `from` into `to`; `progress` hears of each.
pub fn copy(
    from: &dyn Store,
    to: &dyn Store,
    progress: &mut dyn FnMut(&str, &str),
) -> Result<CopyReport, StoreError> {
    let mut report = CopyReport::default();
    // Oldest first, so the destination lists them in the same order.
    let mut sessions = from.sessions(None)?;
    sessions.reverse();
    for session in sessions {
        let export = SessionExport::of(from, &session.id)?;
        let title = export.session.title.as_deref();
        if let Err(broken) =
            super::chain::verify(&export.links, &export.turns, &export.records, title)
        {
            progress(&session.id, "refused: its chain does not verify");
            report.refused.push((session.id, broken.to_string()));
            continue;
        }
        match to.import_session(&export) {
            Ok(()) => {
                progress(&session.id, "copied");
                report.copied.push(session.id);
            }
            Err(StoreError::Exists(id)) => {
                progress(&id, "already there");
                report.present.push(id);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}

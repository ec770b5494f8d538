//! One session as one self-contained file of JSON lines — its record, its
//! turns (receipts inside), its hash chain and its summary batches, and
//! the chain head last — so it can be carried to another machine, loaded
//! there (`sandcrab sessions import`) and verified to be the same.
//!
//! ```text
//! {"record":"session","format":1,"id":"…","workspace":"…",…}
//! {"record":"turn","id":"…","timestamp":"…","kind":"user","body":"{…}"}
//! {"record":"link","seq":1,"kind":"turn","subject":"…","digest":"…","detail":"","hash":"…"}
//! {"record":"recording","seq":1,"kind":"start","body":"{…}"}
//! {"record":"summary","label":"compaction-batch-…","content":"…"}
//! {"record":"end","head":"…"}
//! ```

use serde::{Deserialize, Serialize};

use super::chain::{self, Link};
use super::{NewBlock, SessionRecord, Store, StoreError, StoredRecord, StoredTurn};

/// The format this sandcrab writes and reads.
pub const FORMAT: u32 = 1;

/// A whole session, as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionExport {
    pub session: SessionRecord,
    pub turns: Vec<StoredTurn>,
    pub links: Vec<Link>,
    /// The flight recording (see `agent::recording`).
    pub records: Vec<StoredRecord>,
    pub summaries: Vec<NewBlock>,
}

/// One line of the file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Session {
        format: u32,
        id: String,
        workspace: String,
        provider: String,
        profile: String,
        model: String,
        title: Option<String>,
        created_at: String,
        updated_at: String,
        state: crate::StoredState,
    },
    Turn {
        id: String,
        timestamp: String,
        kind: String,
        body: String,
    },
    Link {
        seq: u64,
        kind: String,
        subject: String,
        digest: String,
        detail: String,
        hash: String,
    },
    Recording {
        seq: u64,
        kind: String,
        body: String,
    },
    Summary {
        label: String,
        content: String,
    },
    End {
        head: String,
    },
}

/// Why a file cannot be imported: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("the file ends early: no end record (it was cut)")]
    Truncated,
    #[error("the session's chain does not verify: {0}")]
    Broken(chain::Broken),
    #[error("the end record's head {claimed} is not the chain's head {actual}")]
    Head { claimed: String, actual: String },
    #[error(
        "{0} turns were stored before the session had a chain, so nothing vouches for them; such a session cannot be imported"
    )]
    Unchained(usize),
}

impl SessionExport {
    /// This session as it is taken in here: foreign until proven. It gets
    /// a fresh id (the file's id is kept as its origin, never used as a
    /// name), the `workspace` the operator named (the file's claim is kept
    /// as its origin only), times no later than `now` (so a file cannot
    /// make itself the latest session for ever), closed, no host; and the
    /// chain gets a link that signs what the file claimed.
    pub fn into_local(mut self, workspace: &std::path::Path, now: &str) -> SessionExport {
        let claimed = self.session.clone();
        let s = &mut self.session;
        s.id = uuid::Uuid::new_v4().to_string();
        s.workspace = workspace.display().to_string();
        // RFC 3339 UTC with the same precision compares as text.
        let clamp = |t: &mut String| {
            if t.as_str() > now || !crate::time::is_canonical(t) {
                *t = now.to_string();
            }
        };
        clamp(&mut s.created_at);
        clamp(&mut s.updated_at);
        if s.updated_at < s.created_at {
            s.updated_at = s.created_at.clone();
        }
        s.state = crate::StoredState::Closed;
        s.host = String::new();
        let detail = serde_json::json!({
            "id": claimed.id,
            "workspace": claimed.workspace,
            "created_at": claimed.created_at,
            "updated_at": claimed.updated_at,
            "head": self.head(),
            "imported_at": now,
        })
        .to_string();
        let tail = self
            .links
            .last()
            .map(|l| (l.seq, l.hash.clone()))
            .unwrap_or((0, chain::GENESIS.to_string()));
        self.links
            .push(chain::import_link(tail, &claimed.id, &detail));
        self
    }

    /// Session `id` of `store`, whole.
    pub fn of(store: &dyn Store, id: &str) -> Result<SessionExport, StoreError> {
        let session = store
            .session(id)?
            .ok_or_else(|| StoreError::UnknownSession(id.to_string()))?;
        let summaries = store
            .archival(id, "")?
            .into_iter()
            .map(|b| NewBlock {
                label: b.label,
                content: b.content,
            })
            .collect();
        Ok(SessionExport {
            session,
            turns: store.turns(id)?,
            links: store.chain(id)?,
            records: store.records(id)?,
            summaries,
        })
    }

    /// The file, one JSON object per line.
    pub fn to_jsonl(&self) -> String {
        let s = &self.session;
        let mut lines = vec![Line::Session {
            format: FORMAT,
            id: s.id.clone(),
            workspace: s.workspace.clone(),
            provider: s.provider.clone(),
            profile: s.profile.clone(),
            model: s.model.clone(),
            title: s.title.clone(),
            created_at: s.created_at.clone(),
            updated_at: s.updated_at.clone(),
            state: s.state,
        }];
        lines.extend(self.turns.iter().map(|t| Line::Turn {
            id: t.id.clone(),
            timestamp: t.timestamp.clone(),
            kind: t.kind.clone(),
            body: t.body.clone(),
        }));
        lines.extend(self.links.iter().map(|l| Line::Link {
            seq: l.seq,
            kind: l.kind.clone(),
            subject: l.subject.clone(),
            digest: l.digest.clone(),
            detail: l.detail.clone(),
            hash: l.hash.clone(),
        }));
        lines.extend(self.records.iter().map(|r| Line::Recording {
            seq: r.seq,
            kind: r.kind.clone(),
            body: r.body.clone(),
        }));
        lines.extend(self.summaries.iter().map(|b| Line::Summary {
            label: b.label.clone(),
            content: b.content.clone(),
        }));
        lines.push(Line::End { head: self.head() });
        let mut out = String::new();
        for line in lines {
            let json = serde_json::to_string(&line).expect("a line serializes");
            out.push_str(&crate::terminal_safe::json_text(&json));
            out.push('\n');
        }
        out
    }

    /// The chain's head ([`chain::GENESIS`] for none).
    pub fn head(&self) -> String {
        self.links
            .last()
            .map(|l| l.hash.clone())
            .unwrap_or_else(|| chain::GENESIS.to_string())
    }

    /// Read a file written by [`SessionExport::to_jsonl`], checking that its
    /// chain verifies against its turns and ends at the head it claims.
    pub fn from_jsonl(text: &str) -> Result<SessionExport, ImportError> {
        let mut session = None;
        let (mut turns, mut links, mut summaries) = (Vec::new(), Vec::new(), Vec::new());
        let mut records = Vec::new();
        let mut head = None;
        for (i, raw) in text.lines().enumerate() {
            let at = |message: String| ImportError::Line {
                line: i + 1,
                message,
            };
            if raw.trim().is_empty() {
                continue;
            }
            if head.is_some() {
                return Err(at("a record after the end record".into()));
            }
            let line: Line = serde_json::from_str(raw).map_err(|e| at(e.to_string()))?;
            match line {
                Line::Session {
                    format,
                    id,
                    workspace,
                    provider,
                    profile,
                    model,
                    title,
                    created_at,
                    updated_at,
                    state,
                } => {
                    if i != 0 {
                        return Err(at("the session record must come first".into()));
                    }
                    if format != FORMAT {
                        return Err(at(format!(
                            "format {format}: this sandcrab reads format {FORMAT} (export it again with a sandcrab of the same version)"
                        )));
                    }
                    session = Some(SessionRecord {
                        id,
                        workspace,
                        provider,
                        profile,
                        model,
                        title,
                        created_at,
                        updated_at,
                        state,
                        turns: 0,
                        host: String::new(),
                    });
                }
                _ if session.is_none() => {
                    return Err(at("the first record must be the session".into()));
                }
                Line::Turn {
                    id,
                    timestamp,
                    kind,
                    body,
                } => turns.push(StoredTurn {
                    id,
                    timestamp,
                    kind,
                    body,
                }),
                Line::Link {
                    seq,
                    kind,
                    subject,
                    digest,
                    detail,
                    hash,
                } => links.push(Link {
                    seq,
                    kind,
                    subject,
                    digest,
                    detail,
                    hash,
                }),
                Line::Recording { seq, kind, body } => {
                    records.push(StoredRecord { seq, kind, body })
                }
                Line::Summary { label, content } => summaries.push(NewBlock { label, content }),
                Line::End { head: claimed } => head = Some(claimed),
            }
        }
        let (Some(mut session), Some(claimed)) = (session, head) else {
            return Err(ImportError::Truncated);
        };
        let verified = chain::verify(&links, &turns, &records, session.title.as_deref())
            .map_err(ImportError::Broken)?;
        if verified.unchained_before > 0 {
            return Err(ImportError::Unchained(verified.unchained_before));
        }
        session.turns = turns.len() as u64;
        let export = SessionExport {
            session,
            turns,
            links,
            records,
            summaries,
        };
        let actual = export.head();
        if claimed != actual {
            return Err(ImportError::Head { claimed, actual });
        }
        Ok(export)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionStore;

    #[test]
    fn a_session_goes_out_and_comes_back_the_same_and_edits_are_refused() {
        let store = crate::SqliteStore::in_memory().unwrap();
        let record = SessionRecord {
            id: "s1".into(),
            workspace: "/w".into(),
            provider: "anthropic".into(),
            profile: "anthropic".into(),
            model: "m".into(),
            title: Some("hi".into()),
            created_at: "2026-11-24T00:00:00.000Z".into(),
            updated_at: "2026-11-24T00:00:00.000Z".into(),
            state: crate::StoredState::Closed,
            turns: 0,
            host: String::new(),
        };
        store.create_session(&record).unwrap();
        let turns: Vec<StoredTurn> = (0..3)
            .map(|i| StoredTurn {
                id: format!("t{i}"),
                timestamp: "2026-11-24T00:00:00.000Z".into(),
                kind: "user".into(),
                // A bidi override and a C1 control inside, as a model could write.
                body: format!("{{\"text\":\"turn {i} \u{202e}x\u{85}\"}}"),
            })
            .collect();
        store.append_turns("s1", &turns).unwrap();
        let file = SessionExport::of(&store, "s1").unwrap().to_jsonl();
        assert!(!file.contains('\u{202e}'), "printable as it is");
        let back = SessionExport::from_jsonl(&file).unwrap();
        assert_eq!(back.turns, turns);
        let other = crate::SqliteStore::in_memory().unwrap();
        other.import_session(&back).unwrap();
        let again = SessionExport::of(&other, "s1").unwrap();
        assert_eq!(again.head(), back.head());
        assert!(
            chain::verify(
                &other.chain("s1").unwrap(),
                &other.turns("s1").unwrap(),
                &[],
                Some("hi")
            )
            .is_ok()
        );
        assert!(matches!(
            other.import_session(&back),
            Err(StoreError::Exists(_))
        ));
        // One character of one turn changed in the file: refused, naming it.
        let edited = file.replacen("turn 1", "turn 9", 1);
        assert!(matches!(
            SessionExport::from_jsonl(&edited).unwrap_err(),
            ImportError::Broken(chain::Broken::Changed { seq: 2, .. })
        ));
        // Cut short: refused.
        let cut: String = file.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            SessionExport::from_jsonl(&cut).unwrap_err(),
            ImportError::Truncated
        );
        // Turns no link vouches for (the chain dropped, the head reset):
        // refused, not taken in unverified.
        let unchained: String = file
            .lines()
            .filter(|l| !l.starts_with("{\"record\":\"link\""))
            .map(|l| {
                if l.starts_with("{\"record\":\"end\"") {
                    format!("{{\"record\":\"end\",\"head\":\"{}\"}}\n", chain::GENESIS)
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        assert_eq!(
            SessionExport::from_jsonl(&unchained).unwrap_err(),
            ImportError::Unchained(3)
        );
    }

    #[test]
    fn an_import_is_foreign_until_proven_a_new_id_its_workspace_and_no_future() {
        let store = crate::SqliteStore::in_memory().unwrap();
        let record = SessionRecord {
            id: "/home/victim/ws/.cp".into(),
            workspace: "/claimed".into(),
            provider: "anthropic".into(),
            profile: "anthropic".into(),
            model: "m".into(),
            title: None,
            created_at: "2999-01-01T00:00:00.000Z".into(),
            updated_at: "not a time".into(),
            state: crate::StoredState::Active,
            turns: 0,
            host: "elsewhere".into(),
        };
        store.create_session(&record).unwrap();
        let turn = StoredTurn {
            id: "t1".into(),
            timestamp: "2026-11-24T00:00:00.000Z".into(),
            kind: "user".into(),
            body: "{}".into(),
        };
        store.append_turns(&record.id, &[turn]).unwrap();
        let file = SessionExport::of(&store, &record.id).unwrap().to_jsonl();
        let now = "2026-11-26T10:00:00.000Z";
        let local = SessionExport::from_jsonl(&file)
            .unwrap()
            .into_local(std::path::Path::new("/mine"), now);
        let s = &local.session;
        assert!(crate::is_session_id(&s.id), "{}", s.id);
        assert_eq!(s.workspace, "/mine");
        assert_eq!((s.created_at.as_str(), s.updated_at.as_str()), (now, now));
        assert_eq!((s.state.as_str(), s.host.as_str()), ("closed", ""));
        // The claims are signed into the chain, which still verifies.
        let last = local.links.last().unwrap();
        assert_eq!(last.kind, chain::IMPORT);
        assert!(last.detail.contains("/home/victim/ws/.cp") && last.detail.contains("/claimed"));
        chain::verify(&local.links, &local.turns, &local.records, None).unwrap();
    }
}

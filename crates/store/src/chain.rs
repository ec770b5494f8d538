//! Tamper evidence: every session keeps a hash chain beside its turns.
//! Each stored turn (receipts ride inside tool results), and the title
//! when it is set, adds a link —
//! its digest, hashed with the previous link's hash — written in the same
//! transaction as the turn. A compaction, which deletes turns by design,
//! adds a signed-off link naming every turn it removed (with the digest
//! the chain holds for it) and the summary batches that replaced them,
//! so the chain still verifies afterwards. [`verify`] recomputes it all
//! and names the first record that does not match.
//!
//! The hashes are BLAKE3 over length-prefixed fields. They prove that
//! nothing was changed *since* the chain head you noted (`sessions show`
//! prints it); someone who can rewrite the database can also rewrite the
//! chain. So a host with a chain key (a secret of [`crate::kept`]) also
//! seals each head it writes ([`Sealer`]): a chain rewritten and re-chained
//! by someone without the key no longer ends where the host sealed it,
//! and `sessions verify` says which of the two it checked.

use std::collections::HashMap;

use super::{NewBlock, StoredRecord, StoredTurn};

/// The hash before the first link.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a link vouches for.
pub const TURN: &str = "turn";
/// A compaction's sign-off.
pub const COMPACTION: &str = "compaction";
/// The session's title (set once, from the first input).
pub const TITLE: &str = "title";
/// An entry of the session's flight recording.
pub const RECORD: &str = "record";
/// The session came from elsewhere (`sessions import`): where from, and
/// what its file claimed, signed into the chain.
pub const IMPORT: &str = "import";

/// One link of a session's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its place in the chain (1 for the first).
    pub seq: u64,
    /// [`TURN`] or [`COMPACTION`].
    pub kind: String,
    /// The turn's id, or the compaction's label.
    pub subject: String,
    /// The digest of what it vouches for.
    pub digest: String,
    /// For a compaction: what it removed and added (JSON); empty for a
    /// turn.
    pub detail: String,
    /// The chain hash up to and including this link.
    pub hash: String,
}

/// A host's seal on a session's chain head: its chain key over the
/// session and the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    pub head: String,
    /// The host that sealed it.
    pub host: String,
    pub mac: String,
}

/// What seals the chains a host writes: its chain key and its name.
#[derive(Clone)]
pub struct Sealer {
    key: [u8; 32],
    host: String,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Sealer").field("host", &self.host).finish()
    }
}

/// What a seal says about a chain that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealCheck {
    /// It ends where this host sealed it, under this host's key.
    Sealed,
    /// This host sealed it at `sealed_head`, and it does not end there
    /// now: it was rewritten, or written on by someone without the key.
    Moved { sealed_head: String },
    /// The seal names this host and does not verify under its key: forged.
    Forged,
    /// Another host sealed it, with a key this host does not hold.
    OtherHost { host: String },
    /// No seal: written before seals, by a host without a key, or the seal
    /// was removed.
    Unsealed,
}

impl Sealer {
    /// A sealer with `key`, for the host named `host`.
    pub fn new(key: [u8; 32], host: &str) -> Self {
        Sealer {
            key,
            host: host.to_string(),
        }
    }

    fn mac(&self, session: &str, head: &str) -> String {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        for field in ["sandcrab chain seal v1", session, head] {
            hasher.update(&(field.len() as u64).to_le_bytes());
            hasher.update(field.as_bytes());
        }
        hasher.finalize().to_hex().to_string()
    }

    /// This host's seal on `session`'s chain ending at `head`.
    pub fn seal(&self, session: &str, head: &str) -> Seal {
        Seal {
            head: head.to_string(),
            host: self.host.clone(),
            mac: self.mac(session, head),
        }
    }

    /// What `seal` says about `session`'s chain ending at `head`.
    pub fn check(&self, session: &str, head: &str, seal: Option<&Seal>) -> SealCheck {
        let Some(seal) = seal else {
            return SealCheck::Unsealed;
        };
        let ours = blake3::Hash::from_hex(&seal.mac).is_ok_and(|mac| {
            mac == blake3::Hash::from_hex(self.mac(session, &seal.head)).expect("hex")
        });
        match (ours, seal.host == self.host) {
            (true, _) if seal.head == head => SealCheck::Sealed,
            (true, _) => SealCheck::Moved {
                sealed_head: seal.head.clone(),
            },
            (false, true) => SealCheck::Forged,
            (false, false) => SealCheck::OtherHost {
                host: seal.host.clone(),
            },
        }
    }
}

/// Where a chain does not match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error(
        "link {seq} ({kind} {subject}) does not follow from the links before it: the chain itself was edited"
    )]
    Link {
        seq: u64,
        kind: String,
        subject: String,
    },
    #[error("turn {turn} (link {seq}) was changed after it was stored")]
    Changed { seq: u64, turn: String },
    #[error("turn {turn} (link {seq}) is gone, and no compaction removed it")]
    Missing { seq: u64, turn: String },
    #[error("turn {turn} is not in the chain: it was added outside sandcrab")]
    Unchained { turn: String },
    #[error("the session's title was changed after it was set (link {seq})")]
    Title { seq: u64 },
    #[error("recording entry {record} (link {seq}) was changed after it was stored")]
    RecordChanged { seq: u64, record: u64 },
    #[error("recording entry {record} (link {seq}) is gone")]
    RecordMissing { seq: u64, record: u64 },
    #[error("recording entry {record} is not in the chain: it was added outside sandcrab")]
    RecordUnchained { record: u64 },
}

impl Broken {
    /// The link it was found at (a turn outside the chain: after all).
    fn at(&self) -> u64 {
        match self {
            Broken::Link { seq, .. }
            | Broken::Changed { seq, .. }
            | Broken::Missing { seq, .. } => *seq,
            Broken::Title { seq }
            | Broken::RecordChanged { seq, .. }
            | Broken::RecordMissing { seq, .. } => *seq,
            Broken::Unchained { .. } | Broken::RecordUnchained { .. } => u64::MAX,
        }
    }
}

/// A chain that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Links checked.
    pub links: usize,
    /// The hash of the last link ([`GENESIS`] for none).
    pub head: String,
    /// Turns stored before this session had a chain (not verifiable).
    pub unchained_before: usize,
}

fn hasher_with(fields: &[&str]) -> blake3::Hasher {
    let mut hasher = blake3::Hasher::new();
    for field in fields {
        hasher.update(&(field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hasher
}

fn digest_of(fields: &[&str]) -> String {
    hasher_with(fields).finalize().to_hex().to_string()
}

/// The digest of a session's title.
pub fn title_digest(title: &str) -> String {
    digest_of(&[TITLE, title])
}

/// The digest of a stored turn: every field.
pub fn turn_digest(turn: &StoredTurn) -> String {
    digest_of(&[&turn.id, &turn.timestamp, &turn.kind, &turn.body])
}

/// The chain subject of a recording entry.
pub fn record_subject(record: &StoredRecord) -> String {
    format!("record {}", record.seq)
}

/// The digest of a recording entry: its place, kind and JSON.
pub fn record_digest(record: &StoredRecord) -> String {
    digest_of(&[RECORD, &record.seq.to_string(), &record.kind, &record.body])
}

/// The detail of a compaction that removed `removed` (turn id, the
/// digest the chain holds for it) and added `added`.
fn compaction_detail(removed: &[(String, String)], added: &[NewBlock]) -> String {
    let added: Vec<(String, String)> = added
        .iter()
        .map(|b| (b.label.clone(), digest_of(&[&b.label, &b.content])))
        .collect();
    serde_json::json!({"removed": removed, "added": added}).to_string()
}

/// The digest of a compaction's detail.
fn detail_digest(detail: &str) -> String {
    digest_of(&[detail])
}

/// The link that signs off a compaction: what it removed and what it
/// added, in one place for every store.
pub struct SignOff {
    subject: String,
    digest: String,
    detail: String,
}

impl SignOff {
    /// The sign-off of a compaction that removed `removed` (turn id, the
    /// digest the chain holds for it) and added `added`.
    pub fn compaction(removed: &[(String, String)], added: &[NewBlock]) -> SignOff {
        let detail = compaction_detail(removed, added);
        SignOff {
            subject: format!("compaction of {} turns", removed.len()),
            digest: detail_digest(&detail),
            detail,
        }
    }

    /// As an item to add to the chain (kind, subject, digest, detail).
    pub fn item(&self) -> (&str, &str, String, &str) {
        (COMPACTION, &self.subject, self.digest.clone(), &self.detail)
    }
}

/// The link that records an import: `detail` (JSON) says where the
/// session came from and what its file claimed.
pub fn import_link(tail: (u64, String), origin_id: &str, detail: &str) -> Link {
    let subject = format!("import of {origin_id}");
    let digest = detail_digest(detail);
    extend(tail, [(IMPORT, subject.as_str(), digest, detail)])
        .pop()
        .expect("one item, one link")
}

/// The chain hash of a link after `prev`.
pub fn link_hash(prev: &str, kind: &str, subject: &str, digest: &str) -> String {
    digest_of(&[prev, kind, subject, digest])
}

/// The links that follow a chain ending at `tail` (its place and hash;
/// `(0, GENESIS)` for none), one per `(kind, subject, digest, detail)`.
pub fn extend<'a>(
    tail: (u64, String),
    items: impl IntoIterator<Item = (&'a str, &'a str, String, &'a str)>,
) -> Vec<Link> {
    let (mut seq, mut prev) = tail;
    let mut links = Vec::new();
    for (kind, subject, digest, detail) in items {
        seq += 1;
        let hash = link_hash(&prev, kind, subject, &digest);
        links.push(Link {
            seq,
            kind: kind.into(),
            subject: subject.into(),
            digest,
            detail: detail.into(),
            hash: hash.clone(),
        });
        prev = hash;
    }
    links
}

/// The links of one append: a link per turn, then per recording entry.
pub fn append_items<'a>(
    turns: &'a [StoredTurn],
    records: &'a [StoredRecord],
    subjects: &'a [String],
) -> impl Iterator<Item = (&'a str, &'a str, String, &'a str)> {
    turns
        .iter()
        .map(|t| (TURN, t.id.as_str(), turn_digest(t), ""))
        .chain(
            records
                .iter()
                .zip(subjects)
                .map(|(r, subject)| (RECORD, subject.as_str(), record_digest(r), "")),
        )
}

/// Check `links` (in order) against the session's stored `turns` and
/// recording `records` (in order) and its `title`: the first record that
/// does not match, or what verified.
pub fn verify(
    links: &[Link],
    turns: &[StoredTurn],
    records: &[StoredRecord],
    title: Option<&str>,
) -> Result<Verified, Broken> {
    let mut problems: Vec<Broken> = Vec::new();
    let mut prev = GENESIS.to_string();
    // Turn id → (link, digest) for every turn the chain vouches for.
    let mut vouched: HashMap<&str, (u64, &str)> = HashMap::new();
    let mut removed: HashMap<String, String> = HashMap::new();
    // Recording entry subject → (link, digest).
    let mut recorded: HashMap<&str, (u64, &str)> = HashMap::new();
    for link in links {
        let signed = link.kind == COMPACTION || link.kind == IMPORT;
        let detail_ok = !signed || detail_digest(&link.detail) == link.digest;
        if !detail_ok || link_hash(&prev, &link.kind, &link.subject, &link.digest) != link.hash {
            problems.push(Broken::Link {
                seq: link.seq,
                kind: link.kind.clone(),
                subject: link.subject.clone(),
            });
        }
        prev = link.hash.clone();
        match link.kind.as_str() {
            TURN => {
                vouched.insert(&link.subject, (link.seq, &link.digest));
            }
            RECORD => {
                recorded.insert(&link.subject, (link.seq, &link.digest));
            }
            TITLE => {
                if title.map(title_digest).as_deref() != Some(link.digest.as_str()) {
                    problems.push(Broken::Title { seq: link.seq });
                }
            }
            IMPORT => {}
            COMPACTION => {
                let parsed: serde_json::Value =
                    serde_json::from_str(&link.detail).unwrap_or_default();
                for pair in parsed["removed"].as_array().into_iter().flatten() {
                    if let (Some(id), Some(digest)) = (pair[0].as_str(), pair[1].as_str()) {
                        removed.insert(id.to_string(), digest.to_string());
                    }
                }
            }
            _ => problems.push(Broken::Link {
                seq: link.seq,
                kind: link.kind.clone(),
                subject: link.subject.clone(),
            }),
        }
    }
    let stored: HashMap<&str, &StoredTurn> = turns.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut unchained_before = 0;
    let mut seen_chained = false;
    for turn in turns {
        match vouched.get(turn.id.as_str()) {
            Some(&(seq, digest)) => {
                seen_chained = true;
                if turn_digest(turn) != digest {
                    problems.push(Broken::Changed {
                        seq,
                        turn: turn.id.clone(),
                    });
                }
            }
            // Stored before the session had a chain: older than every
            // chained turn.
            None if !seen_chained => unchained_before += 1,
            None => problems.push(Broken::Unchained {
                turn: turn.id.clone(),
            }),
        }
    }
    for (id, &(seq, digest)) in &vouched {
        if stored.contains_key(id) {
            continue;
        }
        // Gone: only a compaction that names it, with the same digest,
        // may have removed it.
        if removed.get(*id).map(String::as_str) != Some(digest) {
            problems.push(Broken::Missing {
                seq,
                turn: id.to_string(),
            });
        }
    }
    let mut records_seen = std::collections::HashSet::new();
    for record in records {
        let subject = record_subject(record);
        match recorded.get(subject.as_str()) {
            Some(&(seq, digest)) => {
                records_seen.insert(seq);
                if record_digest(record) != digest {
                    problems.push(Broken::RecordChanged {
                        seq,
                        record: record.seq,
                    });
                }
            }
            None => problems.push(Broken::RecordUnchained { record: record.seq }),
        }
    }
    for (subject, &(seq, _)) in &recorded {
        if !records_seen.contains(&seq) {
            let record = subject
                .strip_prefix("record ")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            problems.push(Broken::RecordMissing { seq, record });
        }
    }
    match problems.into_iter().min_by_key(Broken::at) {
        Some(first) => Err(first),
        None => Ok(Verified {
            links: links.len(),
            head: prev,
            unchained_before,
        }),
    }
}

#[cfg(test)]
mod seal_tests {
    use super::*;

    #[test]
    fn a_seal_holds_for_its_head_and_tells_a_rewrite_a_forgery_and_another_host() {
        let mine = Sealer::new([7; 32], "here");
        let seal = mine.seal("s1", "h1");
        assert_eq!(mine.check("s1", "h1", Some(&seal)), SealCheck::Sealed);
        assert_eq!(
            mine.check("s1", "h2", Some(&seal)),
            SealCheck::Moved {
                sealed_head: "h1".into()
            }
        );
        // Moved to another session: not this one's.
        assert_eq!(mine.check("s2", "h1", Some(&seal)), SealCheck::Forged);
        let forged = Seal {
            mac: Sealer::new([8; 32], "here").seal("s1", "h2").mac,
            head: "h2".into(),
            host: "here".into(),
        };
        assert_eq!(mine.check("s1", "h2", Some(&forged)), SealCheck::Forged);
        let theirs = Sealer::new([9; 32], "there").seal("s1", "h1");
        assert_eq!(
            mine.check("s1", "h1", Some(&theirs)),
            SealCheck::OtherHost {
                host: "there".into()
            }
        );
        assert_eq!(mine.check("s1", "h1", None), SealCheck::Unsealed);
        assert!(!format!("{mine:?}").contains('7'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, body: &str) -> StoredTurn {
        StoredTurn {
            id: id.into(),
            timestamp: "2026-11-24T00:00:00.000Z".into(),
            kind: "user".into(),
            body: body.into(),
        }
    }

    /// The links sandcrab would write for `turns`.
    fn chain(turns: &[StoredTurn]) -> Vec<Link> {
        let mut prev = GENESIS.to_string();
        turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let digest = turn_digest(t);
                let hash = link_hash(&prev, TURN, &t.id, &digest);
                prev = hash.clone();
                Link {
                    seq: i as u64 + 1,
                    kind: TURN.into(),
                    subject: t.id.clone(),
                    digest,
                    detail: String::new(),
                    hash,
                }
            })
            .collect()
    }

    #[test]
    fn an_untouched_chain_verifies_and_any_change_is_named() {
        let turns: Vec<StoredTurn> = (0..5).map(|i| turn(&format!("t{i}"), "hello")).collect();
        let links = chain(&turns);
        let ok = verify(&links, &turns, &[], None).unwrap();
        assert_eq!((ok.links, ok.head.clone()), (5, links[4].hash.clone()));
        // One byte of one turn.
        let mut edited = turns.clone();
        edited[2].body = "hellO".into();
        assert_eq!(
            verify(&links, &edited, &[], None).unwrap_err(),
            Broken::Changed {
                seq: 3,
                turn: "t2".into()
            }
        );
        // A turn deleted, one added, the chain edited.
        assert!(matches!(
            verify(&links, &turns[..4], &[], None).unwrap_err(),
            Broken::Missing { seq: 5, .. }
        ));
        let mut more = turns.clone();
        more.push(turn("planted", "x"));
        assert!(matches!(
            verify(&links, &more, &[], None).unwrap_err(),
            Broken::Unchained { .. }
        ));
        let mut forged = links.clone();
        forged[1].digest = turn_digest(&turn("t1", "forged"));
        assert!(matches!(
            verify(&forged, &turns, &[], None).unwrap_err(),
            Broken::Link { seq: 2, .. }
        ));
    }

    #[test]
    fn a_compaction_signs_off_what_it_removed() {
        let turns: Vec<StoredTurn> = (0..4).map(|i| turn(&format!("t{i}"), "x")).collect();
        let mut links = chain(&turns);
        let removed: Vec<(String, String)> = links[..2]
            .iter()
            .map(|l| (l.subject.clone(), l.digest.clone()))
            .collect();
        let detail = compaction_detail(
            &removed,
            &[NewBlock {
                label: "summary".into(),
                content: "what happened".into(),
            }],
        );
        let digest = detail_digest(&detail);
        let hash = link_hash(&links[3].hash, COMPACTION, "compaction 1", &digest);
        links.push(Link {
            seq: 5,
            kind: COMPACTION.into(),
            subject: "compaction 1".into(),
            digest,
            detail,
            hash,
        });
        assert!(verify(&links, &turns[2..], &[], None).is_ok());
        // Removing one more than it signed off is not.
        assert!(matches!(
            verify(&links, &turns[3..], &[], None).unwrap_err(),
            Broken::Missing { seq: 3, .. }
        ));
    }

    #[test]
    fn turns_from_before_the_chain_are_counted_not_failed() {
        let old: Vec<StoredTurn> = (0..3).map(|i| turn(&format!("o{i}"), "x")).collect();
        let new: Vec<StoredTurn> = (0..2).map(|i| turn(&format!("n{i}"), "y")).collect();
        let links = chain(&new);
        let all: Vec<StoredTurn> = old.iter().chain(&new).cloned().collect();
        assert_eq!(verify(&links, &all, &[], None).unwrap().unchained_before, 3);
    }
}

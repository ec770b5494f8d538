//! `sandcrab sessions list|show|verify|export|import|delete`: the saved
//! conversations.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::agent::{Turn, TurnKind};
use crate::config::Config;
use crate::store::{SessionStore, Store};

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Saved sessions of every workspace and every host sharing the
    /// store, most recent first, with the host that last drove each and
    /// its state (`driven by HOST` while a host holds it).
    List {
        /// Only this workspace's (the current directory's, or --workspace's).
        #[arg(long)]
        here: bool,
        /// Every workspace's (the default; kept for older scripts).
        #[arg(long, hide = true, conflicts_with = "here")]
        all: bool,
        #[command(flatten)]
        place: Place,
    },
    /// A saved session's transcript.
    Show {
        /// The session: its id, or the start of it no other id has.
        id: String,
        /// Show each tool call's receipt: who ran it, under which grants
        /// and where each came from, its programs and their confinement.
        #[arg(long)]
        receipts: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Recompute a saved session's hash chain: every turn (and the
    /// receipts in it) and every compaction since the session began.
    /// Names the first record that does not match and exits 1.
    Verify {
        /// The session: its id, or the start of it no other id has.
        id: String,
        #[command(flatten)]
        place: Place,
    },
    /// Write a saved session as one self-contained file of JSON lines
    /// (turns, receipts, hash chain, summaries) to standard output.
    Export {
        /// The session: its id, or the start of it no other id has.
        id: String,
        #[command(flatten)]
        place: Place,
    },
    /// Load a session written by `export` (on this or another machine):
    /// refused unless its chain verifies. It gets a new id and belongs to
    /// the workspace named here (`-w`, default: the current directory);
    /// the file's own id, workspace and times are kept as its origin.
    Import {
        /// The exported file (`-`: standard input).
        file: PathBuf,
        #[command(flatten)]
        place: Place,
    },
    /// Make the vectors `[embeddings]` needs for archived summaries that
    /// have none or were made by another model or length (all sessions,
    /// or one), so `memory_read` finds them by meaning.
    Reindex {
        /// Only this session.
        id: Option<String>,
        #[command(flatten)]
        place: Place,
    },
    /// Delete a saved session (its turns and archived summaries).
    Delete {
        /// The session's whole id.
        id: String,
        #[command(flatten)]
        place: Place,
    },
}

/// Where: the workspace and the configuration naming the store.
#[derive(Debug, Args)]
pub struct Place {
    /// Workspace directory (default: the current directory).
    #[arg(short, long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Configuration file (default: ~/.config/sandcrab/config.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl Place {
    fn config(&self) -> anyhow::Result<Config> {
        let workspace = super::setup::resolve_workspace(self.workspace.as_deref())?;
        Ok(Config::load(&workspace, self.config.as_deref())?.config)
    }

    /// The workspace given with `-w`, resolved (None: none was given).
    pub(super) fn given_workspace(&self) -> anyhow::Result<Option<PathBuf>> {
        self.workspace
            .as_deref()
            .map(|dir| super::setup::resolve_workspace(Some(dir)))
            .transpose()
    }

    pub(super) fn open(&self) -> anyhow::Result<(PathBuf, Arc<dyn Store>)> {
        let workspace = super::setup::resolve_workspace(self.workspace.as_deref())?;
        let loaded = Config::load(&workspace, self.config.as_deref())?;
        Ok((workspace, open_store(&loaded.config)?))
    }
}

/// The session store the configuration names (`[store] url`, else
/// `[store] path`, else the user's data directory).
pub fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let location = config
        .store
        .location()
        .map_err(anyhow::Error::msg)?
        .context("no data directory (set HOME or XDG_DATA_HOME, or [store] path)")?;
    Ok(crate::store::open(&location, &config.store.options())?)
}

/// `sessions list`: one line per session (its id first).
fn list(store: &dyn Store, workspace: Option<String>) -> anyhow::Result<ExitCode> {
    let sessions = store.sessions(workspace.as_deref())?;
    if sessions.is_empty() {
        errln!(
            "no saved sessions{}",
            if workspace.is_some() {
                " in this workspace (without --here or -w: every workspace's)"
            } else {
                ""
            }
        );
    }
    let leases: std::collections::HashMap<String, crate::store::LeaseInfo> = store
        .leases()?
        .into_iter()
        .filter(|l| l.binds())
        .map(|l| (l.session.clone(), l))
        .collect();
    let safe = super::terminal::sanitize;
    for s in sessions {
        let state = match leases.get(&s.id) {
            Some(l) => format!("driven by {} (pid {})", safe(&l.host), l.pid),
            None => s.state.to_string(),
        };
        outln!(
            "{}  {}  {:>10}  {}  {}  {}{}",
            s.id,
            s.updated_at,
            super::terminal::count(s.turns, "turn"),
            if s.host.is_empty() {
                "-".to_string()
            } else {
                safe(&s.host).into_owned()
            },
            state,
            safe(s.title.as_deref().unwrap_or("(untitled)")),
            if workspace.is_none() {
                format!("  [{}]", safe(&s.workspace))
            } else {
                String::new()
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `sessions reindex`: backfill vectors, with the count and the rate.
async fn reindex(id: Option<String>, place: Place) -> anyhow::Result<ExitCode> {
    let config = place.config()?;
    let Some(settings) = config.embeddings.clone() else {
        anyhow::bail!(
            "no [embeddings] in the configuration: memory is searched by words alone (add [embeddings] provider, base_url, model, dimensions to search by meaning)"
        );
    };
    let store = open_store(&config)?;
    let id = id.map(|id| store.resolve_id(&id)).transpose()?;
    let embedder = crate::embeddings::Embedder::new(settings, |v| std::env::var(v).ok())?;
    let (model, dims) = (embedder.model().to_string(), embedder.dimensions());
    let semantic = crate::agent::recall::Semantic::new(embedder);
    let started = std::time::Instant::now();
    let done = semantic.backfill(store.as_ref(), id.as_deref()).await?;
    let made = done.made;
    if done.skipped > 0 {
        errln!(
            "{} summaries the endpoint refused were skipped (the first: {})",
            done.skipped,
            done.first_refusal.as_deref().unwrap_or_default()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    outln!(
        "{made} archived summaries embedded with {model} ({dims} dimensions) in {secs:.2} s{}",
        if made > 0 && secs > 0.0 {
            format!(" ({:.0} per second)", made as f64 / secs)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn run(cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SessionsCommand::Reindex { id, place } => reindex(id, place).await,
        SessionsCommand::List {
            here,
            all: _,
            place,
        } => {
            // Naming a workspace means that workspace's.
            let here = here || place.workspace.is_some();
            let (workspace, store) = place.open()?;
            list(
                store.as_ref(),
                here.then(|| workspace.display().to_string()),
            )
        }
        SessionsCommand::Show {
            id,
            receipts,
            place,
        } => {
            let (_, store) = place.open()?;
            let id = store.resolve_id(&id)?;
            let record = store
                .session(&id)?
                .ok_or_else(|| crate::store::StoreError::UnknownSession(id.clone()))?;
            outln!(
                "session {} — {} / {} in {}, {}, updated {}",
                record.id,
                record.provider,
                record.model,
                record.workspace,
                super::terminal::count(record.turns, "turn"),
                record.updated_at
            );
            let links = store.chain(&id)?;
            match links.last() {
                Some(last) => outln!(
                    "chain head {} ({} links; `sandcrab sessions verify {id}` checks it)",
                    last.hash,
                    links.len()
                ),
                None => outln!("no hash chain (stored before sandcrab kept one)"),
            }
            let summaries = store.archival(&id, &crate::compaction::batch_label_prefix(&id))?;
            if !summaries.is_empty() {
                outln!(
                    "\n({} summary batches of earlier, compacted turns)",
                    summaries.len()
                );
            }
            for stored in store.turns(&id)? {
                match serde_json::from_str::<Turn>(&stored.body) {
                    Ok(turn) => print_turn(&turn, receipts),
                    Err(_) => outln!("\n[{}] (unreadable turn)", stored.timestamp),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Verify { id, place } => {
            let (_, store) = place.open()?;
            let id = store.resolve_id(&id)?;
            let Some(record) = store.session(&id)? else {
                return Err(crate::store::StoreError::UnknownSession(id).into());
            };
            let turns = store.turns(&id)?;
            let records = store.records(&id)?;
            let links = store.chain(&id)?;
            match crate::store::chain::verify(&links, &turns, &records, record.title.as_deref()) {
                Ok(ok) => {
                    outln!(
                        "session {id}: the chain verifies — {} links, head {}{}",
                        ok.links,
                        ok.head,
                        if ok.unchained_before > 0 {
                            format!(
                                " ({} earlier turns were stored before the chain existed and are not covered)",
                                ok.unchained_before
                            )
                        } else {
                            String::new()
                        }
                    );
                    let seal = store.seal(&id)?;
                    let check = store
                        .sealer()
                        .map(|sealer| sealer.check(&id, &ok.head, seal.as_ref()));
                    use crate::store::chain::SealCheck;
                    match check {
                        Some(SealCheck::Sealed) => outln!(
                            "  keyed: the chain ends where this host sealed it with its chain key, so it was not rewritten and re-chained since by anyone without that key"
                        ),
                        Some(SealCheck::Moved { sealed_head }) => {
                            errln!(
                                "session {id}: the chain does not end where this host sealed it (head {sealed_head}): it was rewritten, or written on without this host's key"
                            );
                            return Ok(ExitCode::FAILURE);
                        }
                        Some(SealCheck::Forged) => {
                            errln!(
                                "session {id}: its seal names this host and does not verify under this host's key: it was forged"
                            );
                            return Ok(ExitCode::FAILURE);
                        }
                        Some(SealCheck::OtherHost { host }) => outln!(
                            "  unkeyed here: host {} sealed it with a key this host does not hold; what this proves is that nothing was changed since you noted that head",
                            super::terminal::sanitize(&host)
                        ),
                        Some(SealCheck::Unsealed) | None => outln!(
                            "  unkeyed: no seal of this host's (written before seals, by a host without a chain key, or its seal was removed); what this proves is that nothing was changed since you noted that head"
                        ),
                    }
                    for origin in links
                        .iter()
                        .filter(|l| l.kind == crate::store::chain::IMPORT)
                    {
                        let claimed: serde_json::Value =
                            serde_json::from_str(&origin.detail).unwrap_or_default();
                        outln!(
                            "  imported at {}: its file's id was {}, its head {}, its claimed workspace {}",
                            claimed["imported_at"].as_str().unwrap_or("?"),
                            super::terminal::sanitize(claimed["id"].as_str().unwrap_or("?")),
                            super::terminal::sanitize(claimed["head"].as_str().unwrap_or("?")),
                            super::terminal::sanitize(claimed["workspace"].as_str().unwrap_or("?")),
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(broken) => {
                    errln!("session {id}: the chain does not verify: {broken}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        SessionsCommand::Export { id, place } => {
            let (_, store) = place.open()?;
            let id = store.resolve_id(&id)?;
            let export = crate::store::export::SessionExport::of(store.as_ref(), &id)?;
            super::terminal::write_out(&export.to_jsonl());
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Import { file, place } => {
            let (workspace, store) = place.open()?;
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?
            };
            let export = crate::store::export::SessionExport::from_jsonl(&text)
                .with_context(|| format!("{} cannot be imported", file.display()))?;
            let origin = export.session.id.clone();
            let export = export.into_local(&workspace, &crate::time::now_rfc3339());
            store.import_session(&export)?;
            outln!(
                "imported session {} as {} in {} ({}, chain head {})",
                super::terminal::sanitize(&origin),
                export.session.id,
                super::terminal::sanitize(&workspace.display().to_string()),
                super::terminal::count(
                    export.turns.iter().filter(|t| t.kind == "user").count() as u64,
                    "turn"
                ),
                export.head()
            );
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Delete { id, place } => {
            let (_, store) = place.open()?;
            // Deleting takes the whole id: a start of one is too easy to
            // get wrong for what cannot be undone.
            let whole = store.resolve_id(&id)?;
            if whole != id {
                anyhow::bail!(
                    "'{id}' is the start of session {whole}: give the whole id to delete it"
                );
            }
            if !store.delete_session(&id)? {
                return Err(crate::store::StoreError::UnknownSession(id).into());
            }
            if let Some(root) = crate::checkpoint::default_root()
                && let Err(err) = crate::checkpoint::remove_session(&root, &id)
            {
                errln!("warning: the session's file checkpoints were not removed: {err}");
            }
            outln!("deleted session {id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Every tool call's receipt in a stored session, in order.
pub fn receipts(store: &dyn SessionStore, id: &str) -> anyhow::Result<Vec<crate::tools::Receipt>> {
    let id = store.resolve_id(id)?;
    let mut out = Vec::new();
    for stored in store.turns(&id)? {
        if let Ok(Turn {
            kind: TurnKind::ToolResults { results },
            ..
        }) = serde_json::from_str::<Turn>(&stored.body)
        {
            out.extend(results.into_iter().filter_map(|r| r.receipt));
        }
    }
    Ok(out)
}

fn print_turn(turn: &Turn, receipts: bool) {
    let clean = |t: &str| super::terminal::sanitize(t).into_owned();
    match &turn.kind {
        TurnKind::User { text } => outln!("\n[{}] user:\n{}", turn.timestamp, clean(text)),
        TurnKind::Steering { text } => {
            outln!("\n[{}] steering:\n{}", turn.timestamp, clean(text))
        }
        TurnKind::System { text } => outln!("\n[{}] system:\n{}", turn.timestamp, clean(text)),
        TurnKind::Assistant {
            text, tool_calls, ..
        } => {
            outln!("\n[{}] assistant:", turn.timestamp);
            if !text.is_empty() {
                outln!("{}", clean(text));
            }
            for call in tool_calls {
                outln!("→ {} {}", call.name, clean(&call.arguments.to_string()));
            }
        }
        TurnKind::ToolResults { results } => {
            for r in results {
                let first: String = r.content.lines().take(3).collect::<Vec<_>>().join("\n");
                outln!(
                    "← {}{}: {}",
                    r.name,
                    if r.is_error { " (error)" } else { "" },
                    clean(&first)
                );
                if let (true, Some(receipt)) = (receipts, &r.receipt) {
                    outln!(
                        "  receipt: {}",
                        super::terminal::json_pretty(receipt).replace('\n', "\n  ")
                    );
                }
            }
        }
    }
}

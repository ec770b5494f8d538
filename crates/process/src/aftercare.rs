//! What is looked at around every confined program that may write: the
//! git metadata of its workspace and the kept paths absent as it starts
//! (see [`crate::kept::Census`], [`crate::kept::Absent`]), counted before
//! it runs and swept once it has ended (its PID namespace gone, nothing of
//! it still runs). A program whose call is dropped (an interrupted call, a
//! cancelled background job) is swept too, on a thread of its own; when
//! sandcrab is stopped by a signal, every program still running is killed
//! and swept first ([`stop_and_sweep_all`]); and sandcrab waits for the
//! sweeps begun before it exits ([`wait_for_sweeps`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::confine::Confinement;
use crate::kept::{Absent, Alone, Census, ProtectionKind};

/// What is swept after one program.
#[derive(Debug, Default)]
struct Counts {
    id: u64,
    census: Option<(Census, PathBuf)>,
    absent: Absent,
    /// The program's process group, once it runs.
    group: Option<i32>,
}

type Shared = Arc<Mutex<Option<Counts>>>;

/// The counts of every program not swept yet, by a number of its own.
static RUNNING: Mutex<BTreeMap<u64, Shared>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The workspace of every program counted and not swept yet, by its
/// number: while one is there, what another program's count finds beneath
/// it may be its, not judged yet. Held while counting and sweeping, so
/// that each sees the others.
static COUNTED: Mutex<BTreeMap<u64, PathBuf>> = Mutex::new(BTreeMap::new());
/// Sweeps not done yet, and what wakes whoever waits for them.
static PENDING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// The counts taken before one program.
#[derive(Debug)]
pub struct Aftercare {
    id: u64,
    counts: Shared,
    /// The git metadata found, to cover for the program.
    protected: Vec<(PathBuf, ProtectionKind)>,
}

impl Aftercare {
    /// Count before a program under `confinement` (blocking file system
    /// work: call it off the runtime's threads). Refused when the
    /// workspace cannot be counted whole: what a program made in it could
    /// not all be seen.
    pub fn before(confinement: &Confinement) -> Result<Aftercare, String> {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let census = match confinement.census_root() {
            Some(root) => {
                let mut counted = lock(&COUNTED);
                let census = Census::before_program(&root, alone(&counted, id, &root));
                if !census.complete {
                    return Err(format!(
                        "{} cannot be counted whole (more than {} folders, or a git folder of more than 4,096 names), so the git metadata a program would make there cannot all be checked: programs are refused. Work in a smaller folder, or lift the protection of git metadata with [policy] protected_paths (without \"**/.git\")",
                        root.display(),
                        crate::kept::MAX_CENSUS_FOLDERS
                    ));
                }
                counted.insert(id, root.clone());
                Some((census, root))
            }
            None => None,
        };
        let protected = census
            .as_ref()
            .map(|(c, _)| c.protected())
            .unwrap_or_default();
        let counts = Arc::new(Mutex::new(Some(Counts {
            id,
            census,
            absent: confinement.absent_kept(),
            group: None,
        })));
        lock(&RUNNING).insert(id, counts.clone());
        *lock(&PENDING.0) += 1;
        Ok(Aftercare {
            id,
            counts,
            protected,
        })
    }

    /// The git metadata counted, each with how the program finds it.
    pub fn protected(&self) -> &[(PathBuf, ProtectionKind)] {
        &self.protected
    }

    /// The program runs as process group `group` (killed first if
    /// sandcrab is stopped).
    pub fn running_as(&self, group: Option<i32>) {
        if let Some(counts) = lock(&self.counts).as_mut() {
            counts.group = group;
        }
    }

    /// Sweep after the program ended: a note for each thing taken out.
    pub fn after(self) -> Vec<String> {
        let counts = self.take();
        counts.map(sweep).unwrap_or_default()
    }

    /// The counts, once (None: swept already, by a signal's sweep).
    fn take(&self) -> Option<Counts> {
        lock(&RUNNING).remove(&self.id);
        let counts = lock(&self.counts).take();
        if counts.is_some() {
            done();
        }
        counts
    }
}

impl Drop for Aftercare {
    /// A program whose call went away: swept on a thread of its own (it
    /// was killed with its call), still counted as pending until done.
    fn drop(&mut self) {
        lock(&RUNNING).remove(&self.id);
        let Some(counts) = lock(&self.counts).take() else {
            return;
        };
        std::thread::spawn(move || {
            // Give the killed program's namespace a moment to go.
            std::thread::sleep(Duration::from_millis(50));
            sweep(counts);
            done();
        });
    }
}

/// Take out what the counted program made: a note for each thing.
fn sweep(mut counts: Counts) -> Vec<String> {
    let quarantine = crate::user_files::data_dir().map(|d| d.join("quarantine"));
    let mut notes: Vec<String> = counts
        .absent
        .sweep(quarantine.as_deref())
        .iter()
        .map(ToString::to_string)
        .collect();
    if let Some((census, root)) = counts.census.take() {
        let mut counted = lock(&COUNTED);
        let after = census.sweep(
            &root,
            quarantine.as_deref(),
            alone(&counted, counts.id, &root),
        );
        counted.remove(&counts.id);
        drop(counted);
        notes.extend(after.swept.iter().map(ToString::to_string));
        if !after.complete {
            notes.push(format!(
                "{} can no longer be counted whole: the git metadata programs make there cannot all be checked, so no further program runs in it until it is smaller",
                root.display()
            ));
        }
    }
    for note in &notes {
        tracing::warn!("{note}");
    }
    notes
}

/// Whether program `id` is alone in `root`: no other program counted and
/// not swept yet works in it, beneath it or above it.
fn alone(counted: &BTreeMap<u64, PathBuf>, id: u64, root: &std::path::Path) -> Alone {
    let overlaps = counted
        .iter()
        .any(|(other, at)| *other != id && (at.starts_with(root) || root.starts_with(at)));
    if overlaps { Alone::No } else { Alone::Yes }
}

fn done() {
    let mut pending = lock(&PENDING.0);
    *pending = pending.saturating_sub(1);
    PENDING.1.notify_all();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sandcrab is being stopped (a signal): kill every program still running
/// and sweep what each made, before it exits.
pub fn stop_and_sweep_all() {
    let running: Vec<Shared> = std::mem::take(&mut *lock(&RUNNING)).into_values().collect();
    let mut all: Vec<Counts> = running.iter().filter_map(|c| lock(c).take()).collect();
    for counts in &all {
        if let Some(group) = counts.group {
            // SAFETY: kill(2) on a process group sandcrab started.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
    }
    if !all.is_empty() {
        // The namespaces end with their init.
        std::thread::sleep(Duration::from_millis(100));
    }
    for counts in all.drain(..) {
        sweep(counts);
        done();
    }
}

/// Wait (at most `limit`) until every sweep begun has been done: before
/// sandcrab exits, so a program cut off at the end is swept too.
pub fn wait_for_sweeps(limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut pending = lock(&PENDING.0);
    while *pending > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!("{} sweeps after programs were not done in time", *pending);
            return;
        }
        pending = PENDING
            .1
            .wait_timeout(pending, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}

//! What is looked at around every confined program that may write: the
//! git metadata of its workspace and the kept paths absent as it starts
//! (see [`crate::kept::Census`], [`crate::kept::Absent`]), counted before
//! it runs and swept once it has ended (its PID namespace gone, nothing of
//! it still runs). A program whose call is dropped (an interrupted call, a
//! cancelled background job) is swept too, on a thread of its own, and
//! sandcrab waits for those sweeps before it exits
//! ([`wait_for_sweeps`]).

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::confine::Confinement;
use crate::kept::{Absent, Census};

/// The counts taken before one program.
#[derive(Debug, Default)]
pub struct Aftercare {
    census: Option<(Census, PathBuf)>,
    absent: Absent,
    /// Counted among the sweeps not done yet.
    pending: bool,
}

/// Sweeps not done yet, and what wakes whoever waits for them.
static PENDING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

impl Aftercare {
    /// Count before a program under `confinement` (blocking file system
    /// work: call it off the runtime's threads). Refused when the
    /// workspace is too large to count whole: what a program made in it
    /// could not all be seen.
    pub fn before(confinement: &Confinement) -> Result<Aftercare, String> {
        let census = match confinement.census_root() {
            Some(root) => {
                let census = Census::before_program(&root);
                if !census.complete {
                    return Err(format!(
                        "{} holds more folders than sandcrab can count ({}), so the git metadata a program would make there cannot all be checked: programs are refused. Work in a smaller folder, or lift the protection of git metadata with [policy] protected_paths (without \"**/.git\")",
                        root.display(),
                        crate::kept::MAX_CENSUS_FOLDERS
                    ));
                }
                Some((census, root))
            }
            None => None,
        };
        let absent = confinement.absent_kept();
        *PENDING.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Ok(Aftercare {
            census,
            absent,
            pending: true,
        })
    }

    /// The git metadata counted (to cover it for the program).
    pub fn census(&self) -> Option<&Census> {
        self.census.as_ref().map(|(c, _)| c)
    }

    /// Sweep after the program ended: a note for each thing taken out.
    pub fn after(mut self) -> Vec<String> {
        let notes = self.sweep();
        self.done();
        notes
    }

    fn sweep(&mut self) -> Vec<String> {
        let quarantine = crate::user_files::data_dir().map(|d| d.join("quarantine"));
        let mut swept = self.absent.sweep(quarantine.as_deref());
        if let Some((census, root)) = self.census.take() {
            let after = census.sweep(&root, quarantine.as_deref());
            swept.extend(after.swept);
            if !after.complete {
                let note = format!(
                    "{} now holds more folders than sandcrab can count: the git metadata programs make there cannot all be checked, so no further program runs in it until it is smaller",
                    root.display()
                );
                tracing::warn!("{note}");
                return swept
                    .iter()
                    .map(ToString::to_string)
                    .chain([note])
                    .collect();
            }
        }
        swept
            .iter()
            .map(|s| {
                tracing::warn!("{s}");
                s.to_string()
            })
            .collect()
    }

    fn done(&mut self) {
        if std::mem::take(&mut self.pending) {
            let mut pending = PENDING.0.lock().unwrap_or_else(|e| e.into_inner());
            *pending = pending.saturating_sub(1);
            PENDING.1.notify_all();
        }
    }
}

impl Drop for Aftercare {
    /// A program whose call went away: swept on a thread of its own (it
    /// was killed with its call), still counted as pending until done.
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        let mut rest = Aftercare {
            census: self.census.take(),
            absent: std::mem::take(&mut self.absent),
            pending: std::mem::take(&mut self.pending),
        };
        std::thread::spawn(move || {
            // Give the killed program's namespace a moment to go.
            std::thread::sleep(Duration::from_millis(50));
            rest.sweep();
            rest.done();
        });
    }
}

/// Wait (at most `limit`) until every sweep begun has been done: before
/// sandcrab exits, so a program cut off at the end is swept too.
pub fn wait_for_sweeps(limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut pending = PENDING.0.lock().unwrap_or_else(|e| e.into_inner());
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

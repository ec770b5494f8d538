//! One driver per session: a lease in the store (holder, host, process,
//! expiry), taken when a session is created or resumed, renewed while the
//! process lives, released when the session ends.
//!
//! A holder that stops renewing (killed, machine lost, frozen) loses the
//! lease when it expires ([`DEFAULT_TTL`]). On the machine and in the pid
//! namespace where the holder ran, a dead holder is known at once (its
//! process is gone), so a crash and `--resume` on the same machine need no
//! wait. Every write of a session's history checks the lease in its own
//! transaction: a holder that lost its lease cannot write (fencing), so two
//! hosts never both add to one session.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// How long a lease lasts without renewal (renewed every third of it).
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// Who holds leases: one per open store, so per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Unique per open store.
    pub id: String,
    /// The host's name (`[store] host`, else the machine's host name).
    pub host: String,
    pub pid: u32,
    /// What identifies the process on its machine: boot id, pid namespace,
    /// pid and start time (lets the same machine see a dead holder).
    pub process: String,
}

impl Holder {
    /// This process, named `host` (None: the machine's host name).
    pub fn this_process(host: Option<&str>) -> Holder {
        let pid = std::process::id();
        Holder {
            id: uuid::Uuid::new_v4().to_string(),
            host: host.map_or_else(machine_name, str::to_string),
            pid,
            process: process_key(pid).unwrap_or_default(),
        }
    }
}

/// A lease as stored: who holds it and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub session: String,
    pub holder: String,
    pub host: String,
    pub pid: u32,
    pub process: String,
    /// Milliseconds since the epoch (the database's clock).
    pub expires_ms: i64,
    /// Milliseconds left (negative: expired), by the database's clock.
    pub left_ms: i64,
}

impl LeaseInfo {
    /// Whether it still binds other holders: not expired, and not held by
    /// a process known to be dead.
    pub fn binds(&self) -> bool {
        self.left_ms > 0 && !holder_is_dead(&self.process)
    }

    /// The error for a write or a resume this lease forbids.
    pub fn refusal(&self, ttl: Duration) -> super::StoreError {
        super::StoreError::Leased {
            session: self.session.clone(),
            host: self.host.clone(),
            pid: self.pid,
            until: self.expires_at(),
            ttl_secs: ttl.as_secs().max(1),
        }
    }

    /// When it expires, RFC 3339.
    pub fn expires_at(&self) -> String {
        let ms = self.expires_ms.max(0) as u64;
        crate::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_millis(ms))
    }
}

/// Whether `me` may write to a session's history, given its lease row
/// `lease` and whether `me` took that lease (see [`Keeper::taken`]): the
/// holder may; while another holder's lease binds, nobody else may; and a
/// holder that took the lease may not write once it is no longer its own
/// (another host took it over, and perhaps ended and gave it back since:
/// this host's view of the history is stale).
pub fn fence(
    session: &str,
    lease: Option<&LeaseInfo>,
    me: &Holder,
    taken: bool,
    ttl: Duration,
) -> Result<(), super::StoreError> {
    match lease {
        Some(l) if l.holder == me.id => Ok(()),
        Some(l) if l.binds() => Err(l.refusal(ttl)),
        _ if taken => Err(super::StoreError::LeaseLost {
            session: session.to_string(),
        }),
        _ => Ok(()),
    }
}

/// The machine's host name.
pub fn machine_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `boot-id/pid-namespace/pid/start-time` of `pid` (None: not readable).
fn process_key(pid: u32) -> Option<String> {
    let (boot, ns) = machine_key()?;
    Some(format!("{boot}/{ns}/{pid}/{}", state_and_start(pid)?.1))
}

/// This kernel's boot id and this process's pid namespace (None when
/// `/proc` is not this pid namespace's: its pids would not be ours).
fn machine_key() -> Option<(String, String)> {
    let own = std::fs::read_link("/proc/self").ok()?;
    if own.to_str()? != std::process::id().to_string() {
        return None;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some((boot.trim().to_string(), ns.display().to_string()))
}

/// The state of `pid` (field 3 of its `stat`: `R`, `S`, `Z` for a zombie
/// …) and its start time in clock ticks since boot (field 22), which
/// tells a reused pid from the holder.
fn state_and_start(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count from the
    // last `)`.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Whether the holder described by `process` is known to be dead: it ran
/// on this machine (same boot) in this pid namespace, and no process with
/// its pid and start time exists. Anything else (another machine, an
/// unreadable key) is not known dead: its lease runs until it expires.
pub fn holder_is_dead(process: &str) -> bool {
    // The namespace reads `pid:[4026531836]`: no `/` in any part.
    let parts: Vec<&str> = process.split('/').collect();
    let [boot, ns, pid, start] = parts[..] else {
        return false;
    };
    let Some((my_boot, my_ns)) = machine_key() else {
        return false;
    };
    if boot != my_boot || ns != my_ns {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    match state_and_start(pid) {
        // Another process has the pid now.
        Some((_, now)) if now != start => true,
        // The holder, dead and not yet reaped (`Z`) or being torn down
        // (`X`): it renews nothing any more.
        Some((state, _)) => matches!(state, 'Z' | 'X'),
        // Unreadable is not dead (a `/proc` that hides other users'
        // processes, no descriptor left): only a pid no process has is.
        None => {
            let Ok(pid) = i32::try_from(pid) else {
                return false;
            };
            // SAFETY: signal 0 only checks that the process exists.
            let rc = unsafe { libc::kill(pid, 0) };
            rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        }
    }
}

/// Renews the leases one store holds, from a thread of its own, every
/// third of their time; stops when the store is dropped.
pub struct Keeper {
    shared: Arc<Shared>,
}

struct Shared {
    /// Sessions taken and not let go yet.
    held: Mutex<BTreeMap<String, Hold>>,
    wake: Condvar,
    started: std::sync::Once,
}

/// One session's lease as this store took it.
#[derive(Default)]
struct Hold {
    /// How many holds (a session resumed again in the same process before
    /// the last one let go).
    count: usize,
    /// Another holder took the lease since (this one stopped renewing in
    /// time): nothing is written to the session from here any more.
    lost: bool,
}

/// What renews: given the sessions held, renews them and returns the ones
/// still held (a lease another holder took is lost).
pub type Renew = Box<dyn Fn(&[String]) -> Result<Vec<String>, String> + Send + Sync>;

impl Keeper {
    pub fn new() -> Keeper {
        Keeper {
            shared: Arc::new(Shared {
                held: Mutex::new(BTreeMap::new()),
                wake: Condvar::new(),
                started: std::sync::Once::new(),
            }),
        }
    }

    /// Keep renewing `session` (starting the thread on first use, with
    /// `renew` made by `make`; None: nothing to renew, as in a store only
    /// this process sees).
    pub fn hold(&self, session: &str, ttl: Duration, make: Option<impl FnOnce() -> Renew>) {
        let mut held = self.lock();
        let hold = held.entry(session.to_string()).or_default();
        hold.count += 1;
        hold.lost = false;
        drop(held);
        let Some(make) = make else {
            return;
        };
        self.shared.started.call_once(|| {
            let renew = make();
            let weak = Arc::downgrade(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("sandcrab-lease".into())
                .spawn(move || renew_loop(weak, renew, ttl / 3));
            if let Err(err) = spawned {
                tracing::warn!("leases will not be renewed: {err}");
            }
        });
    }

    /// Let go of one hold of `session`; true when it was the last (the
    /// lease is to be given back).
    pub fn let_go(&self, session: &str) -> bool {
        let mut held = self.lock();
        match held.get_mut(session) {
            Some(hold) if hold.count > 1 => {
                hold.count -= 1;
                false
            }
            _ => {
                held.remove(session);
                true
            }
        }
    }

    /// Whether this store took the lease of `session` and has not let it
    /// go (lost since or not): its writes then need the lease itself, not
    /// only the absence of another holder's.
    pub fn taken(&self, session: &str) -> bool {
        self.lock().contains_key(session)
    }

    /// Whether this store took the lease of `session` and has seen it
    /// taken by another holder since.
    pub fn lost(&self, session: &str) -> bool {
        self.lock().get(session).is_some_and(|hold| hold.lost)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Hold>> {
        self.shared.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for Keeper {
    fn default() -> Self {
        Keeper::new()
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.shared.wake.notify_all();
    }
}

fn renew_loop(shared: Weak<Shared>, renew: Renew, every: Duration) {
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let held: Vec<String> = {
            let guard = strong.held.lock().unwrap_or_else(|e| e.into_inner());
            // Sleep until it is time (or the store is dropped).
            let (guard, _) = strong
                .wake
                .wait_timeout(guard, every)
                .unwrap_or_else(|e| e.into_inner());
            guard
                .iter()
                .filter(|(_, hold)| !hold.lost)
                .map(|(session, _)| session.clone())
                .collect()
        };
        if Arc::strong_count(&strong) == 1 {
            // Only this thread still refers to it: the store is gone.
            return;
        }
        drop(strong);
        if held.is_empty() {
            continue;
        }
        match renew(&held) {
            Ok(kept) => {
                if let Some(strong) = shared.upgrade() {
                    let mut guard = strong.held.lock().unwrap_or_else(|e| e.into_inner());
                    for lost in held.iter().filter(|s| !kept.contains(s)) {
                        if let Some(hold) = guard.get_mut(lost) {
                            hold.lost = true;
                            tracing::warn!(
                                "the lease of session {lost} was taken by another host: this host no longer writes to it"
                            );
                        }
                    }
                }
            }
            Err(err) => tracing::warn!("leases not renewed: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_known_dead() {
        let me = Holder::this_process(Some("h"));
        assert!(!me.process.is_empty(), "no process key on Linux");
        assert!(!holder_is_dead(&me.process));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let key = process_key(child.id());
        child.wait().unwrap();
        // The child may have ended before its key could be read.
        if let Some(key) = key {
            assert!(holder_is_dead(&key), "{key}");
        }
        // Another machine's holder is never known dead.
        assert!(!holder_is_dead("other-boot/pid:[1]/1/1"));
        assert!(!holder_is_dead(""));
    }

    #[test]
    fn a_holder_that_died_and_was_not_reaped_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let key = process_key(child.id()).expect("a running child has a key");
        assert!(!holder_is_dead(&key), "alive");
        // Not waited for: it stays a zombie until reaped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while state_and_start(child.id()).is_some_and(|(s, _)| s != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(holder_is_dead(&key), "a zombie renews nothing");
        child.wait().unwrap();
    }
}

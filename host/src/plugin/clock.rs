//! The wall-clock bound of one call into a plugin.
//!
//! The plugin's time limit counts guest time: running code, sleeping,
//! waiting on files. Time spent waiting on a program it started through
//! the `process` import is not counted, up to a per-call budget; beyond the
//! budget it counts too. So every call ends within `limit + budget`,
//! whatever the guest does — spin (epoch interruption stops it), sleep,
//! block on a FIFO, or start programs in a loop (the outer timer in
//! [`CallClock::bound`] stops it, since no guest code runs to be
//! interrupted).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Time a call may spend waiting on programs without it counting against
/// the plugin's limit (the longest program timeout plus its kill grace).
pub const PROCESS_BUDGET: Duration = Duration::from_secs(crate::process::MAX_TIMEOUT.as_secs() + 5);

/// The call ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// Shared by the store (epoch callback, host imports) and the caller.
#[derive(Debug)]
pub struct CallClock {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    deadline: Instant,
    /// Set while the guest waits on a program.
    paused_since: Option<Instant>,
    budget_left: Duration,
}

impl CallClock {
    /// A clock for a call with `limit` of guest time.
    pub fn new(limit: Duration) -> Arc<Self> {
        Self::with_budget(limit, PROCESS_BUDGET)
    }

    /// A clock with an explicit program-wait budget.
    pub fn with_budget(limit: Duration, budget: Duration) -> Arc<Self> {
        Arc::new(CallClock {
            state: Mutex::new(State {
                deadline: Instant::now() + limit,
                paused_since: None,
                budget_left: budget,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("call clock lock")
    }

    /// When the call must end (while paused: if the program used up the
    /// whole budget).
    pub fn deadline(&self) -> Instant {
        let s = self.lock();
        match s.paused_since {
            Some(since) => s.deadline.max(since) + s.budget_left,
            None => s.deadline,
        }
    }

    /// Whether the guest's time is up (checked by the epoch callback).
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline()
    }

    /// The guest starts waiting on a program.
    pub fn pause(&self) {
        let mut s = self.lock();
        if s.paused_since.is_none() {
            s.paused_since = Some(Instant::now());
        }
    }

    /// The program returned: its time is credited from the budget.
    pub fn resume(&self) {
        let mut s = self.lock();
        if let Some(since) = s.paused_since.take() {
            let credit = since.elapsed().min(s.budget_left);
            s.budget_left -= credit;
            s.deadline += credit;
        }
    }

    /// Run `work` until it finishes or the clock runs out (then `work` is
    /// dropped, which ends the instance and kills its programs).
    pub async fn bound<F: Future>(&self, work: F) -> Result<F::Output, TimedOut> {
        tokio::pin!(work);
        loop {
            let deadline = self.deadline();
            tokio::select! {
                out = &mut work => return Ok(out),
                _ = tokio::time::sleep_until(deadline.into()) => {
                    if self.expired() {
                        return Err(TimedOut);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeping_work_is_cut_at_the_limit() {
        let clock = CallClock::new(Duration::from_millis(50));
        let started = Instant::now();
        let out = clock
            .bound(tokio::time::sleep(Duration::from_secs(30)))
            .await;
        assert_eq!(out, Err(TimedOut));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn waiting_on_programs_is_credited_up_to_the_budget() {
        let clock = CallClock::with_budget(Duration::from_millis(100), Duration::from_millis(300));
        let c = clock.clone();
        let work = async move {
            // A "program" of 200 ms: more than the limit, within the budget.
            c.pause();
            tokio::time::sleep(Duration::from_millis(200)).await;
            c.resume();
            "done"
        };
        assert_eq!(clock.bound(work).await, Ok("done"));

        // Programs in a loop exhaust the budget, then the call ends.
        let clock = CallClock::with_budget(Duration::from_millis(100), Duration::from_millis(300));
        let c = clock.clone();
        let started = Instant::now();
        let work = async move {
            loop {
                c.pause();
                tokio::time::sleep(Duration::from_millis(50)).await;
                c.resume();
            }
        };
        assert_eq!(clock.bound(work).await, Err(TimedOut));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(350) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }
}

//! The wall-clock bound of one call into a plugin: the call's time limit
//! is the deadline of everything it does — running code, sleeping,
//! waiting on files, and every program it starts and waits for. A program
//! gets at most the time the call has left (see [`CallClock::remaining`]);
//! when the deadline passes the call's work is dropped, which ends the
//! instance and kills its programs. A guest that spins is stopped by epoch
//! interruption; one that starts programs in a loop by the outer timer in
//! [`CallClock::bound`], since no guest code runs to be interrupted.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The call ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// Shared by the store (epoch callback, host imports) and the caller.
#[derive(Debug)]
pub struct CallClock {
    deadline: Instant,
}

impl CallClock {
    /// A clock for a call with `limit`.
    pub fn new(limit: Duration) -> Arc<Self> {
        Arc::new(CallClock {
            deadline: Instant::now() + limit,
        })
    }

    /// When the call must end.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the call's time is up (checked by the epoch callback).
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The time the call has left.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Run `work` until it finishes or the clock runs out (then `work` is
    /// dropped, which ends the instance and kills its programs).
    pub async fn bound<F: Future>(&self, work: F) -> Result<F::Output, TimedOut> {
        tokio::select! {
            out = work => Ok(out),
            _ = tokio::time::sleep_until(self.deadline.into()) => Err(TimedOut),
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
}

//! While the model is asked: what the operator sees instead of silence.
//! A retry after a provider error is a WARNING naming the error, the wait
//! and which retry it is; a provider that has not begun to answer is a
//! WARNING each time the provider's read timeout passes without a word
//! (30 s unless set), naming the limit that ends the wait.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::session::Session;
use crate::llm::retry::{RetryObserver, Retrying, observed};

impl Session {
    /// Await `work` (the opening of a model call, or its first event),
    /// telling the operator of each retry and of each
    /// `still_waiting_every` without an answer since `since`.
    pub(super) async fn awaiting_model<T>(
        &self,
        since: Instant,
        work: impl Future<Output = T>,
    ) -> T {
        let (notes, mut noted) = mpsc::unbounded_channel::<String>();
        let observer: RetryObserver = Arc::new(move |err, retrying: Retrying| {
            let _ = notes.send(retry_note(&err.to_string(), retrying));
        });
        let work = observed(observer, work);
        tokio::pin!(work);
        let every = self
            .config
            .still_waiting_every
            .max(Duration::from_millis(100));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let out = loop {
            tokio::select! {
                out = &mut work => break out,
                Some(note) = noted.recv() => self.warn(&note),
                _ = ticks.tick() => self.warn(&format!(
                    "no answer from {} yet after {} s; still waiting (it gives up at [llm] first_byte_timeout_ms, 300000 ms unless set)",
                    self.client.provider(),
                    since.elapsed().as_secs()
                )),
            }
        };
        while let Ok(note) = noted.try_recv() {
            self.warn(&note);
        }
        out
    }
}

/// `ERROR; retrying in 1.2 s (retry 1 of 2)`.
fn retry_note(error: &str, retrying: Retrying) -> String {
    format!(
        "{error}; retrying in {:.1} s (retry {} of {})",
        retrying.wait.as_secs_f64(),
        retrying.attempt,
        retrying.of
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_note_says_the_error_the_wait_and_which_retry() {
        let note = retry_note(
            "anthropic: server error (HTTP 500)",
            Retrying {
                attempt: 1,
                of: 2,
                wait: Duration::from_millis(1200),
            },
        );
        assert_eq!(
            note,
            "anthropic: server error (HTTP 500); retrying in 1.2 s (retry 1 of 2)"
        );
    }
}

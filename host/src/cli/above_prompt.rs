//! Lines printed above the prompt while the operator types (a background
//! job's notice, the answer of a turn it woke): the line editor's external
//! printer clears the input line, prints, and draws the prompt and what was
//! typed so far again below. Prints go through a thread of their own,
//! because the editor takes none while it is in a search (Ctrl-R) and the
//! printer then blocks.

use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;

/// What may draw while a prompt is open.
#[derive(Clone)]
pub enum WhilePrompting {
    /// Plain lines from a pipe: drawing goes on as usual.
    DrawAsUsual,
    /// The line editor owns the input line: whole lines go above it.
    Above(AbovePrompt),
    /// The line editor, with no way to print above it: drawing waits until
    /// the operator sends.
    Wait,
}

/// A handle that prints whole lines above the prompt, in order.
#[derive(Clone)]
pub struct AbovePrompt {
    jobs: mpsc::Sender<Job>,
}

enum Job {
    Print(String),
    /// Answered once every print before it is done.
    Mark(oneshot::Sender<()>),
}

impl AbovePrompt {
    /// Start the printing thread for `printer`.
    pub fn start(
        mut printer: impl rustyline::ExternalPrinter + Send + 'static,
    ) -> std::io::Result<AbovePrompt> {
        let (jobs, incoming) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandcrab-above-prompt".into())
            .spawn(move || {
                for job in incoming {
                    match job {
                        Job::Print(text) => {
                            // The editor is gone: nothing more can be shown.
                            if printer.print(text).is_err() {
                                break;
                            }
                        }
                        Job::Mark(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(AbovePrompt { jobs })
    }

    /// Print `text`: whole lines (built only by sandcrab, escapes made
    /// visible), the last ending in a line break.
    pub fn print(&self, text: String) {
        let _ = self.jobs.send(Job::Print(text));
    }

    /// Wait until what was printed before is on the terminal, at most
    /// `within` (a print stays queued while the operator is in a search
    /// and shows above the next prompt); whether it all was.
    pub async fn drained(&self, within: Duration) -> bool {
        let (done, shown) = oneshot::channel();
        if self.jobs.send(Job::Mark(done)).is_err() {
            return true;
        }
        matches!(tokio::time::timeout(within, shown).await, Ok(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A printer that records, each print waiting for a permit (as the
    /// editor's printer waits while the operator searches history).
    struct Recording {
        printed: Arc<Mutex<Vec<String>>>,
        permits: mpsc::Receiver<()>,
    }

    impl rustyline::ExternalPrinter for Recording {
        fn print(&mut self, msg: String) -> rustyline::Result<()> {
            let _ = self.permits.recv();
            self.printed.lock().unwrap().push(msg);
            Ok(())
        }
    }

    #[tokio::test]
    async fn prints_in_order_and_a_blocked_printer_does_not_block_the_caller() {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let (permit, permits) = mpsc::channel();
        let above = AbovePrompt::start(Recording {
            printed: printed.clone(),
            permits,
        })
        .unwrap();
        above.print("one\n".into());
        above.print("two\n".into());
        assert!(!above.drained(Duration::from_millis(50)).await);
        assert!(printed.lock().unwrap().is_empty());
        permit.send(()).unwrap();
        permit.send(()).unwrap();
        assert!(above.drained(Duration::from_secs(5)).await);
        assert_eq!(*printed.lock().unwrap(), ["one\n", "two\n"]);
    }
}

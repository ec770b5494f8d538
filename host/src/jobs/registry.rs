//! The job registry: in memory only (nothing survives a restart), scoped by
//! thread, with at-most-once terminal messages in completion order and
//! bounded retention of finished jobs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::payload::{make_payload, render_message};
use super::record::{Actor, JobError, JobRecord, JobStatus};
use crate::tools::TruncationPolicy;

/// Terminal jobs kept per thread; the oldest finished is evicted first.
pub const TERMINAL_RETENTION: usize = 20;

/// How a job's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The tool returned normally (this wins over a pending cancel).
    Succeeded(String),
    /// The tool reported an error.
    Failed(String),
    /// The work exceeded its time limit.
    TimedOut(String),
    /// The cancellation took effect before the work finished.
    Cancelled,
}

/// Sent when a job reaches a terminal status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNotice {
    pub thread_id: String,
    pub job_id: String,
    pub status: JobStatus,
}

/// A started job: its record and the token its runner watches.
#[derive(Debug, Clone)]
pub struct JobStart {
    pub record: JobRecord,
    pub cancel: CancellationToken,
}

struct Entry {
    record: JobRecord,
    cancel: CancellationToken,
    order: u64,
    /// How much of the output the job's tool said the model should see.
    output_limit: Option<crate::plugin::TruncationLimits>,
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<String, Entry>,
    calls: HashSet<(String, String)>,
    /// Messages waiting for their thread's next turn boundary.
    pending: HashMap<String, VecDeque<(String, String)>>,
    /// Each thread's terminal jobs in completion order (for retention).
    terminal: HashMap<String, VecDeque<String>>,
    next_order: u64,
    next_seq: u64,
    spilled: Vec<tempfile::NamedTempFile>,
    listeners: Vec<mpsc::UnboundedSender<JobNotice>>,
}

/// All background jobs of this process.
pub struct JobRegistry {
    inner: Mutex<Inner>,
    limits: TruncationPolicy,
    spill_dir: Option<tempfile::TempDir>,
}

impl JobRegistry {
    /// An empty registry; payload limits follow `limits`.
    pub fn new(limits: TruncationPolicy) -> Arc<Self> {
        let spill_dir = tempfile::Builder::new()
            .prefix("sandcrab-jobs-")
            .tempdir()
            .ok();
        Arc::new(JobRegistry {
            inner: Mutex::new(Inner::default()),
            limits,
            spill_dir,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("job registry lock")
    }

    /// Start a job for a tool call (a new UUID id).
    pub fn start(
        &self,
        thread_id: &str,
        tool_call_id: &str,
        tool_name: &str,
    ) -> Result<JobStart, JobError> {
        loop {
            let id = uuid::Uuid::new_v4().to_string();
            match self.start_with_id(&id, thread_id, tool_call_id, tool_name) {
                Err(JobError::DuplicateJobId(_)) => continue,
                other => return other,
            }
        }
    }

    /// Start a job with a given id; refused if the id or the tool call
    /// already has a job.
    pub fn start_with_id(
        &self,
        job_id: &str,
        thread_id: &str,
        tool_call_id: &str,
        tool_name: &str,
    ) -> Result<JobStart, JobError> {
        let mut inner = self.lock();
        if inner.jobs.contains_key(job_id) {
            return Err(JobError::DuplicateJobId(job_id.to_string()));
        }
        let call = (thread_id.to_string(), tool_call_id.to_string());
        if inner.calls.contains(&call) {
            return Err(JobError::DuplicateToolCall(tool_call_id.to_string()));
        }
        let record = JobRecord {
            job_id: job_id.to_string(),
            tool_call_id: tool_call_id.to_string(),
            thread_id: thread_id.to_string(),
            tool_name: tool_name.to_string(),
            status: JobStatus::Running,
            started_at: crate::time::now_rfc3339(),
            completed_at: None,
            completion_seq: None,
            payload: None,
            terminal_message_emitted: false,
            cancel_requested_by: None,
            internal_errors: Vec::new(),
        };
        let cancel = CancellationToken::new();
        let order = inner.next_order;
        inner.next_order += 1;
        inner.calls.insert(call);
        inner.jobs.insert(
            job_id.to_string(),
            Entry {
                record: record.clone(),
                cancel: cancel.clone(),
                order,
                output_limit: None,
            },
        );
        Ok(JobStart { record, cancel })
    }

    /// Note how much of `job_id`'s output its tool said the model should
    /// see (its payload is cut to that, unless the operator set otherwise).
    pub fn limit_output(&self, job_id: &str, limit: Option<crate::plugin::TruncationLimits>) {
        if let Some(entry) = self.lock().jobs.get_mut(job_id) {
            entry.output_limit = limit;
        }
    }

    /// Record how a job ended. A job already terminal is left as it is.
    /// Returns the record (None if the job is unknown).
    pub fn finish(&self, job_id: &str, outcome: JobOutcome) -> Option<JobRecord> {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        let entry = inner.jobs.get_mut(job_id)?;
        if entry.record.status.is_terminal() {
            return Some(entry.record.clone());
        }
        let limits = self
            .limits
            .limits(&entry.record.tool_name, entry.output_limit);
        let (status, output) = match outcome {
            JobOutcome::Succeeded(out) => (JobStatus::Completed, Some(out)),
            JobOutcome::Failed(out) => (JobStatus::Failed, Some(out)),
            JobOutcome::TimedOut(out) => (JobStatus::TimedOut, Some(out)),
            JobOutcome::Cancelled => (
                JobStatus::Cancelled,
                Some("The job was cancelled before it finished.".to_string()),
            ),
        };
        let mut spilled = None;
        let payload = output.map(|out| {
            make_payload(&out, limits, |text| {
                let dir = self
                    .spill_dir
                    .as_ref()
                    .map(|d| d.path().to_path_buf())
                    .unwrap_or_else(std::env::temp_dir);
                let mut file = tempfile::Builder::new()
                    .prefix(&format!("job-{job_id}-"))
                    .suffix(".txt")
                    .tempfile_in(dir)?;
                std::io::Write::write_all(&mut file, text.as_bytes())?;
                let path = file.path().display().to_string();
                spilled = Some(file);
                Ok(path)
            })
        });
        let record = &mut entry.record;
        record.status = status;
        record.completed_at = Some(crate::time::now_rfc3339());
        record.completion_seq = Some(seq);
        record.payload = payload;
        let record = record.clone();
        inner.next_seq += 1;
        inner.spilled.extend(spilled);
        let message = render_message(
            &record.job_id,
            &record.tool_name,
            status.as_str(),
            record.payload.as_ref(),
        );
        inner
            .pending
            .entry(record.thread_id.clone())
            .or_default()
            .push_back((record.job_id.clone(), message));
        let finished = inner.terminal.entry(record.thread_id.clone()).or_default();
        finished.push_back(record.job_id.clone());
        let evicted: Vec<String> = (TERMINAL_RETENTION..finished.len())
            .filter_map(|_| finished.pop_front())
            .collect();
        for job_id in evicted {
            if let Some(gone) = inner.jobs.remove(&job_id) {
                inner
                    .calls
                    .remove(&(gone.record.thread_id, gone.record.tool_call_id));
            }
        }
        let notice = JobNotice {
            thread_id: record.thread_id.clone(),
            job_id: record.job_id.clone(),
            status,
        };
        inner.listeners.retain(|tx| tx.send(notice.clone()).is_ok());
        Some(record)
    }

    /// Request cancellation (best effort): a running job becomes
    /// pending_cancel and its runner is told; a finished job is unchanged.
    pub fn cancel(
        &self,
        thread_id: &str,
        job_id: &str,
        actor: Actor,
    ) -> Result<JobRecord, JobError> {
        let mut inner = self.lock();
        let entry = in_thread(&mut inner, thread_id, job_id)?;
        if entry.record.status == JobStatus::Running {
            entry.record.status = JobStatus::PendingCancel;
            entry.record.cancel_requested_by = Some(actor);
            entry.cancel.cancel();
        }
        Ok(entry.record.clone())
    }

    /// A job the thread owns, in full.
    pub fn inspect(&self, thread_id: &str, job_id: &str) -> Result<JobRecord, JobError> {
        let mut inner = self.lock();
        Ok(in_thread(&mut inner, thread_id, job_id)?.record.clone())
    }

    /// Manual retry is not part of the model.
    pub fn retry(&self, thread_id: &str, job_id: &str) -> Result<JobRecord, JobError> {
        let mut inner = self.lock();
        in_thread(&mut inner, thread_id, job_id)?;
        Err(JobError::ManualRetryNotSupported)
    }

    /// The thread's jobs with the given statuses (default: running and
    /// pending_cancel), oldest first.
    pub fn list(&self, thread_id: &str, statuses: Option<&[JobStatus]>) -> Vec<JobRecord> {
        let default = [JobStatus::Running, JobStatus::PendingCancel];
        let wanted = statuses.unwrap_or(&default);
        let inner = self.lock();
        let mut entries: Vec<&Entry> = inner
            .jobs
            .values()
            .filter(|e| e.record.thread_id == thread_id && wanted.contains(&e.record.status))
            .collect();
        entries.sort_by_key(|e| e.order);
        entries.into_iter().map(|e| e.record.clone()).collect()
    }

    /// Note a retryable error the job recovered from. Internal only: the
    /// status does not change and nothing is injected.
    pub fn note_internal_error(&self, job_id: &str, error: &crate::llm::LlmError) {
        if let Some(entry) = self.lock().jobs.get_mut(job_id)
            && error.retryable()
        {
            entry.record.internal_errors.push(error.to_string());
        }
    }

    /// Take the thread's terminal messages, oldest completion first. Each
    /// message is handed out exactly once, whoever asks.
    pub fn drain_messages(&self, thread_id: &str) -> Vec<String> {
        let mut inner = self.lock();
        let Some(queue) = inner.pending.remove(thread_id) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(queue.len());
        for (job_id, message) in queue {
            if let Some(entry) = inner.jobs.get_mut(&job_id) {
                entry.record.terminal_message_emitted = true;
            }
            out.push(message);
        }
        out
    }

    /// Whether the thread has terminal messages waiting.
    pub fn has_pending(&self, thread_id: &str) -> bool {
        self.lock()
            .pending
            .get(thread_id)
            .is_some_and(|q| !q.is_empty())
    }

    /// Whether the thread has running or pending-cancel jobs.
    pub fn has_active(&self, thread_id: &str) -> bool {
        self.lock()
            .jobs
            .values()
            .any(|e| e.record.thread_id == thread_id && !e.record.status.is_terminal())
    }

    /// Notices of jobs reaching a terminal status, from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<JobNotice> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().listeners.push(tx);
        rx
    }

    /// Number of records kept (all threads).
    pub fn len(&self) -> usize {
        self.lock().jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn in_thread<'a>(
    inner: &'a mut Inner,
    thread_id: &str,
    job_id: &str,
) -> Result<&'a mut Entry, JobError> {
    match inner.jobs.get_mut(job_id) {
        Some(entry) if entry.record.thread_id == thread_id => Ok(entry),
        _ => Err(JobError::NotFoundInThread(job_id.to_string())),
    }
}

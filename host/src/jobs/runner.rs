//! Dual-mode tool calls: a call returns inline, or becomes exactly one
//! background job — at once when asked (`run_in_background`), or when it is
//! still running after `background_after`.

use std::sync::Arc;
use std::time::Duration;

use super::record::{JobError, JobRecord};
use super::registry::{JobOutcome, JobRegistry};
use crate::tools::{ToolCallRequest, ToolContext, ToolOutcome, ToolRegistry, dispatch};

/// Background settings.
#[derive(Debug, Clone, Copy)]
pub struct BackgroundSettings {
    /// Move a call still running after this long to the background.
    pub after: Duration,
    /// A background job running longer than this is stopped (timed_out).
    pub max_duration: Duration,
}

impl Default for BackgroundSettings {
    fn default() -> Self {
        BackgroundSettings {
            after: Duration::from_millis(10_000),
            max_duration: Duration::from_secs(3600),
        }
    }
}

/// How a call was answered: never both.
#[derive(Debug, Clone)]
pub enum CallMode {
    Inline(Box<ToolOutcome>),
    Background(Box<JobRecord>),
}

impl CallMode {
    /// What the model sees for a background start.
    pub fn background_result(record: &JobRecord) -> String {
        BackgroundAnswer::started(&record.job_id).text()
    }
}

/// The answer a call that moved to the background gives the model:
/// `{"mode":"background","job_id":"…","status":"running"}`. Written and
/// read back (to find the jobs a resumed history started) through this one
/// type.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackgroundAnswer {
    mode: BackgroundMode,
    pub job_id: String,
    status: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackgroundMode {
    Background,
}

impl BackgroundAnswer {
    /// The answer for job `job_id`, just started.
    pub fn started(job_id: &str) -> Self {
        BackgroundAnswer {
            mode: BackgroundMode::Background,
            job_id: job_id.to_string(),
            status: "running".into(),
        }
    }

    /// As the model reads it.
    pub fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The answer a tool result's `text` is, if it is one.
    pub fn read(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// Whether the model asked for this call to run in the background (and
/// the tool allows it).
pub fn wants_background(tools: &ToolRegistry, request: &ToolCallRequest) -> bool {
    tools
        .get(&request.name)
        .is_some_and(|t| t.spec.traits.background)
        && request
            .arguments
            .get("run_in_background")
            .and_then(|v| v.as_bool())
            == Some(true)
}

/// Run one tool call in dual mode. When a background job finishes, the
/// registry records it and notifies its subscribers.
pub async fn run_call(
    jobs: &Arc<JobRegistry>,
    tools: ToolRegistry,
    request: ToolCallRequest,
    mut ctx: ToolContext,
    settings: BackgroundSettings,
) -> Result<CallMode, JobError> {
    // Told to the call when it moves to the background (it frees its
    // plugin instance slot then).
    let (detach, detached) = tokio::sync::watch::channel(false);
    ctx.detach = Some(detached);
    let force = wants_background(&tools, &request);
    let output_limit = tools
        .get(&request.name)
        .and_then(|t| t.spec.traits.output_limit);
    // Told to the tool in its call context: nobody waits for this call
    // past `settings.after` (it becomes a job then), so a short default
    // time limit would only stop it just after it moved to the background.
    // It may use its whole time budget (or the limit the model named).
    ctx.background = true;
    let thread = ctx.session_id.clone();
    let call_id = request.id.clone();
    let name = request.name.clone();
    // Retryable model errors the call met (before or after it became a
    // job) stay on the job's record: internal, nothing injected, status
    // unchanged. Until the job exists they wait here.
    let seen: Arc<std::sync::Mutex<(Option<String>, Vec<crate::llm::LlmError>)>> = Arc::default();
    let observer: crate::llm::retry::RetryObserver = {
        let (registry, seen) = (jobs.clone(), seen.clone());
        Arc::new(move |err: &crate::llm::LlmError, _| {
            let mut seen = seen.lock().expect("retry notes");
            match &seen.0 {
                Some(id) => registry.note_internal_error(id, err),
                None => seen.1.push(err.clone()),
            }
        })
    };
    let mut work = Box::pin(crate::llm::retry::observed(observer, async move {
        dispatch(&tools, &request, &ctx).await
    }));
    if !force {
        tokio::select! {
            biased;
            outcome = &mut work => return Ok(CallMode::Inline(Box::new(outcome))),
            _ = tokio::time::sleep(settings.after) => {}
        }
    }
    let started = jobs.start(&thread, &call_id, &name)?;
    let job_id = started.record.job_id.clone();
    jobs.limit_output(&job_id, output_limit);
    {
        let mut seen = seen.lock().expect("retry notes");
        for err in std::mem::take(&mut seen.1) {
            jobs.note_internal_error(&job_id, &err);
        }
        seen.0 = Some(job_id.clone());
    }
    let _ = detach.send(true);
    let cancel = started.cancel.clone();
    let registry = jobs.clone();
    tokio::spawn(async move {
        let outcome = tokio::select! {
            biased;
            outcome = &mut work => classify(outcome).into_job_outcome(),
            _ = cancel.cancelled() => JobOutcome::Cancelled,
            _ = tokio::time::sleep(settings.max_duration) => JobOutcome::TimedOut(format!(
                "the job ran longer than {} s and was stopped", settings.max_duration.as_secs()
            )),
        };
        // Dropping `work` here stops the tool (its processes are killed).
        drop(work);
        drop(detach);
        registry.finish(&job_id, outcome);
    });
    Ok(CallMode::Background(Box::new(started.record)))
}

/// A finished call, classified.
enum Finished {
    Ok(String),
    Error(String),
    TimedOut(String),
}

fn classify(outcome: ToolOutcome) -> Finished {
    if outcome.is_error() {
        Finished::Error(outcome.content)
    } else if outcome.timed_out() {
        Finished::TimedOut(outcome.content)
    } else {
        Finished::Ok(outcome.content)
    }
}

impl Finished {
    fn into_job_outcome(self) -> JobOutcome {
        match self {
            Finished::Ok(c) => JobOutcome::Succeeded(c),
            Finished::Error(c) => JobOutcome::Failed(c),
            Finished::TimedOut(c) => JobOutcome::TimedOut(c),
        }
    }
}

#[cfg(test)]
mod background_answer_tests {
    use super::BackgroundAnswer;

    /// The words the model has always read, written and read by one type;
    /// any other JSON is not a background answer.
    #[test]
    fn the_background_answer_is_pinned_and_reads_back() {
        let started = BackgroundAnswer::started("job-7");
        assert_eq!(
            started.text(),
            r#"{"mode":"background","job_id":"job-7","status":"running"}"#
        );
        assert_eq!(BackgroundAnswer::read(&started.text()), Some(started));
        assert_eq!(
            BackgroundAnswer::read(r#"{"mode":"inline","job_id":"x","status":"running"}"#),
            None
        );
        assert_eq!(BackgroundAnswer::read("job-7 started"), None);
    }
}

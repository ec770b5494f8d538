//! Where a session meets the world — steering, finished jobs, interrupts,
//! the tools on offer, each tool call's answer — and where each of those
//! is recorded (a live session with a recorder) or played back from a
//! recording (a replayed session, see `replay/`). The model's side is the
//! session's client: the replay gives it a client that answers from the
//! recording.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::recorder::Recorder;
use super::recording::{Entry, InterruptPoint, ProfileFacts, Settings, Start};
use super::session::Session;

impl Session {
    /// The session's recorder, when it is recorded.
    pub(super) fn recorder(&self) -> Option<&Arc<Recorder>> {
        self.memory.as_ref()?.recorder()
    }

    /// Record `entry` (when recorded).
    pub(super) fn record(&self, entry: Entry) {
        if let Some(recorder) = self.recorder() {
            recorder.record(entry);
        }
    }

    /// Record how the session starts: the profile, the world, the
    /// settings.
    pub(super) fn record_start(&self) {
        let Some(recorder) = self.recorder() else {
            return;
        };
        recorder.record(Entry::Start(Box::new(Start {
            format: super::recording::FORMAT,
            sandcrab: env!("CARGO_PKG_VERSION").to_string(),
            mode: recorder.mode(),
            profile: ProfileFacts {
                id: self.profile.info.id.clone(),
                context_window: self.window.facts().tokens,
                window_ratio: self.window.facts().ratio,
                window_source: self.window.facts().source,
                parallel_tool_calls: self.profile.info.parallel_tool_calls,
                base_instructions: self.profile.base_instructions.clone(),
            },
            world: self.world(),
            own_tools: self.own_tool_names(),
            settings: Settings::of(
                &self.config,
                self.memory.as_ref().map(|m| m.compactor.config().clone()),
            ),
        })));
    }

    /// The clock the session's turns are stamped with (see
    /// [`super::turns::with_clock`]).
    pub(super) fn turn_clock(&self) -> super::turns::TurnClock {
        if let Some(playback) = &self.playback {
            let playback = playback.clone();
            return Arc::new(move || playback.now());
        }
        match self.recorder() {
            Some(recorder) => {
                let recorder = recorder.clone();
                Arc::new(move || {
                    let now = crate::time::now_rfc3339();
                    recorder.clock_read(&now);
                    now
                })
            }
            None => Arc::new(crate::time::now_rfc3339),
        }
    }

    /// Steering to inject now.
    pub(super) fn take_steering(&self) -> Vec<String> {
        if let Some(playback) = &self.playback {
            return playback.steering();
        }
        let texts: Vec<String> = self.lock().steering.drain(..).collect();
        if !texts.is_empty() {
            self.record(Entry::Steering {
                texts: texts.clone(),
            });
        }
        texts
    }

    /// Messages of finished jobs to inject now.
    pub(super) fn take_job_messages(&self) -> Vec<String> {
        if let Some(playback) = &self.playback {
            return playback.job_messages();
        }
        let Some(jobs) = &self.jobs else {
            return Vec::new();
        };
        let messages = jobs.registry.drain_messages(&self.id);
        if !messages.is_empty() {
            self.record(Entry::Jobs {
                messages: messages.clone(),
            });
        }
        messages
    }

    /// Whether the operator interrupted before this round.
    pub(super) fn stop_requested(&self, cancel: &CancellationToken) -> bool {
        if let Some(playback) = &self.playback
            && playback.interrupted_before_round()
        {
            cancel.cancel();
            return true;
        }
        let stop = cancel.is_cancelled();
        if stop {
            self.record(Entry::Interrupt {
                at: InterruptPoint::Round,
            });
        }
        stop
    }

    /// The operator interrupted a tool round.
    pub(super) fn record_tools_interrupted(&self) {
        self.record(Entry::Interrupt {
            at: InterruptPoint::Tools,
        });
    }

    /// The tools the next request offers: the replayed ones put on offer
    /// when the recording changed them here, or those on offer now,
    /// recorded when they changed.
    pub(super) fn tools_for_request(&self) -> Vec<crate::plugin::ToolSpec> {
        if let Some(tools) = self.playback.as_ref().and_then(|p| p.tools()) {
            self.catalog.publish(tools);
        }
        let tools = self.tools().definitions();
        if self.playback.is_none()
            && let Some(recorder) = self.recorder()
        {
            recorder.tools(&tools);
        }
        tools
    }
}

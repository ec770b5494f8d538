//! The session's own moments for hooks: SessionStart and UserPromptSubmit
//! before an input reaches the model, Stop (or SubagentStop) when a turn
//! would end, PreCompact, SessionEnd. What they answer that changes the
//! conversation is recorded, and a replay takes it from the recording and
//! runs no hook.

use serde_json::{Map, Value};

use super::session::Session;
use super::turns::TurnKind;
use crate::hooks::{Decided, Facts, HookAnswer, HookEvent};

/// Most times Stop hooks may send the model back to work for one input.
pub const MAX_STOP_CONTINUES: u32 = 8;

/// What a session's moment hooks decided.
pub(super) enum Heard {
    /// Go on, with what the hooks add for the model.
    Go(Vec<String>),
    /// Blocked, with the reason.
    Blocked(String),
}

impl Session {
    /// Who and where, for a hook's input.
    pub(super) fn hook_facts(&self) -> Facts<'_> {
        Facts {
            session_id: &self.id,
            cwd: &self.working_dir,
            permission_mode: crate::hooks::permission_mode(self.approval_mode()),
        }
    }

    /// Fire `event`'s hooks (the source or tool `name` for their matchers)
    /// and record what they answered; in a replay, what they answered
    /// then. None when no hook is configured for it.
    async fn hooks_answer(
        &self,
        event: HookEvent,
        name: Option<&str>,
        fields: Map<String, Value>,
    ) -> Option<HookAnswer> {
        if let Some(playback) = &self.playback {
            return playback.hooked(event.name());
        }
        let hooks = &self.config.hooks;
        if !hooks.has(event) {
            return None;
        }
        let fired = hooks.fire(event, name, &self.hook_facts(), fields).await;
        for warning in &fired.warnings {
            self.warn(warning);
        }
        if !fired.any() {
            return None;
        }
        self.record(super::recording::Entry::Hooked {
            event: event.name().to_string(),
            answer: fired.answer.clone(),
        });
        Some(fired.answer)
    }

    /// Before `input` reaches the model: SessionStart (on the first input
    /// of this process) and UserPromptSubmit. Their context joins the
    /// input; a block keeps the input from the model.
    pub(super) async fn hooks_before_input(&self, input: &str, first: bool) -> Heard {
        let mut contexts = Vec::new();
        if first {
            let mut fields = Map::new();
            // Taken up again when it holds a conversation before this
            // input (its own turn counter starts at zero in every process).
            let source = if self.lock().history.is_empty() {
                "startup"
            } else {
                "resume"
            };
            fields.insert("source".into(), source.into());
            if let Some(answer) = self
                .hooks_answer(HookEvent::SessionStart, Some(source), fields)
                .await
            {
                contexts.extend(answer.context);
            }
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), input.into());
        if let Some(answer) = self
            .hooks_answer(HookEvent::UserPromptSubmit, None, fields)
            .await
        {
            if answer.decision == Some(Decided::Deny) || answer.stop.is_some() {
                let reason = answer.stop.or(answer.reason).unwrap_or_default();
                return Heard::Blocked(reason);
            }
            contexts.extend(answer.context);
        }
        Heard::Go(contexts)
    }

    /// `input` as the model sees it: with what hooks added after it.
    pub(super) fn with_hook_context(input: &str, contexts: &[String]) -> String {
        let mut text = input.to_string();
        for context in contexts {
            text.push_str(&format!("\n\n<hook-context>\n{context}\n</hook-context>"));
        }
        text
    }

    /// The turn would end: Stop (SubagentStop in a subagent). A block
    /// sends the model back to work with the reason, at most
    /// [`MAX_STOP_CONTINUES`] times per input.
    pub(super) async fn hooks_at_stop(&self, continued: u32) -> bool {
        let event = if self.depth > 0 {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        let mut fields = Map::new();
        fields.insert("stop_hook_active".into(), Value::Bool(continued > 0));
        let Some(answer) = self.hooks_answer(event, None, fields).await else {
            return false;
        };
        if answer.decision != Some(Decided::Deny) || answer.stop.is_some() {
            return false;
        }
        if continued >= MAX_STOP_CONTINUES {
            self.warn(&format!(
                "{event} hooks sent the model back to work {MAX_STOP_CONTINUES} times for this input; the turn ends here"
            ));
            return false;
        }
        let reason = answer
            .reason
            .unwrap_or_else(|| format!("a {event} hook asks you to go on"));
        self.push(TurnKind::Steering {
            text: format!("<hook-feedback event=\"{event}\">\n{reason}\n</hook-feedback>"),
        });
        self.notice(&format!("{event} hook: the turn goes on ({reason})"));
        true
    }

    /// Whether a hook of this round's calls said `continue: false`, and
    /// why (recorded; a replay takes it from the recording).
    pub(super) fn hook_ended_turn(&self) -> Option<String> {
        const EVENT: &str = "continue";
        if let Some(playback) = &self.playback {
            return playback.hooked(EVENT).and_then(|a| a.stop);
        }
        let reason = self.hook_stop.lock().ok()?.take()?;
        self.record(super::recording::Entry::Hooked {
            event: EVENT.to_string(),
            answer: HookAnswer {
                stop: Some(reason.clone()),
                ..Default::default()
            },
        });
        Some(reason)
    }

    /// Observers only: PreCompact and SessionEnd (none in a replay).
    pub(super) async fn hooks_observe(
        &self,
        event: HookEvent,
        name: &str,
        fields: Map<String, Value>,
    ) {
        if self.playback.is_some() || !self.config.hooks.has(event) {
            return;
        }
        let fired = self
            .config
            .hooks
            .fire(event, Some(name), &self.hook_facts(), fields)
            .await;
        for warning in &fired.warnings {
            self.warn(warning);
        }
    }
}

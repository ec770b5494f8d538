//! The session's side of spend caps ([`crate::llm::spend`]): before each
//! model call the request is fitted to what is left — its answer capped to
//! the room, or not sent when its input alone does not fit — and a cap
//! that stops the loop is told as SPEND_CAP and kept for the front end
//! (`run`'s exit code, `chat`'s question, ACP's stop reason).
//!
//! Time is read from the session's clock, so a replay of a recording sees
//! the same times and stops at the same call.

use super::event_data::{EventData, SpendCapReached};
use super::session::Session;
use crate::llm::Request;
use crate::llm::spend::{CapKind, CapReached, Hold, SpendReport};

impl Session {
    /// Fit `request` to the session's caps (its input counted as the
    /// provider counts, as far as the session learned): its answer capped
    /// to the room left and held until charged, or the cap that keeps it
    /// from being sent.
    pub(super) async fn fit_to_budget(&self, request: &mut Request) -> Result<Hold, CapReached> {
        let input = self.provider_tokens(crate::llm::estimate::request_tokens(request));
        let now = self.spend_clock();
        self.spend.fit(request, input, now).await
    }

    /// The session starts working: its time counts from the first time it
    /// does (read from the session's clock, so a replay starts it alike).
    pub(super) fn start_spending(&self) {
        if self.spend.times() {
            self.spend.start(self.spend_clock());
        }
    }

    /// Stop the input for `reached`: told as SPEND_CAP and kept.
    pub(super) fn stopped_by_cap(&self, reached: CapReached) {
        let spend = self.spend.report(self.spend_clock());
        self.lock().spend_stop = Some(reached.clone());
        self.emit(EventData::SpendCap(SpendCapReached { reached, spend }));
    }

    /// The cap that stopped the last input, if one did.
    pub fn spend_stopped(&self) -> Option<CapReached> {
        self.lock().spend_stop.clone()
    }

    /// The session's spend against its caps (None: it has no caps).
    pub fn spend_report(&self) -> Option<SpendReport> {
        self.spend
            .caps()
            .any()
            .then(|| self.spend.report(self.spend_clock()))
    }

    /// Raise the session's `cap` by `by` (tokens, dollars or seconds), as
    /// the operator answered.
    pub fn raise_cap(&self, cap: CapKind, by: f64) {
        self.spend.raise(cap, by);
        self.record(super::recording::Entry::CapRaised { cap, by });
    }

    /// In a replay, charge the model calls a server asked for during a
    /// recorded tool call, as they were charged live (the server is not
    /// asked again; its answer and its receipt come from the recording).
    pub(super) fn charge_replayed_model_calls(&self, outcome: &crate::tools::ToolOutcome) {
        if self.playback.is_none() {
            return;
        }
        let Some(receipt) = &outcome.receipt else {
            return;
        };
        // Every call that was charged (one cut off by the end of the call
        // it answered too): what the receipt says was charged.
        for used in &receipt.model_calls {
            if used.input_tokens + used.output_tokens == 0 && used.cost_micros.is_none() {
                continue;
            }
            self.spend.charge_recorded(&crate::llm::spend::Charge {
                model: used.model.clone(),
                usage: crate::llm::Usage {
                    input_tokens: used.input_tokens,
                    cached_tokens: used.cached_tokens,
                    output_tokens: used.output_tokens,
                    cost_micros: used.cost_micros,
                    ..Default::default()
                },
            });
        }
    }

    /// What a subagent's spend is counted in: a child of this session's.
    pub(super) fn child_ledger(&self) -> std::sync::Arc<crate::llm::spend::Ledger> {
        self.spend.child(self.config.budget.subagent)
    }

    /// Now in milliseconds, from the session's clock when a cap on
    /// duration needs it (a replay answers from the recording); 0 when
    /// none does, so no read is recorded for nothing. (A server's model
    /// call and a summary read the system clock: neither is asked again in
    /// a replay, their charges come from the recording.)
    fn spend_clock(&self) -> u64 {
        if !self.spend.times() {
            return 0;
        }
        crate::time::millis_of(&super::turns::turn_time()).unwrap_or(0)
    }
}

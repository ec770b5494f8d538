//! A session at the edge of its model's window: every request is counted
//! before it is sent and made to fit ([`super::request_fit`]); a refusal
//! teaches the window ([`super::window`]) and is answered by compacting
//! harder and asking again; an input that cannot fit whatever is cut is
//! said once, with the numbers, and the session goes on.

use super::request_fit::{FitReport, TooBig, brief_if_small, fit};
use super::session::Session;
use super::turns::{Turn, TurnKind};
use crate::llm::estimate::{message_tokens, request_tokens};
use crate::llm::refusal::context_refusal;
use crate::llm::{ErrorKind, LlmError, Request};

/// Refusals answered for one model call before the error is reported.
pub(super) const MAX_REFUSALS: u32 = 4;

/// What the summarizer's prompt itself takes, in estimated tokens.
const SUMMARY_PROMPT_TOKENS: u64 = 800;

/// Turns kept verbatim by the compactions that answer refusals, one per
/// refusal (then the fewest: the current input).
const KEEP_AFTER_REFUSALS: [usize; 3] = [3, 1, 1];

impl Session {
    /// The request for the next model call, fitted to the window (the
    /// tools joined first), or why the current input cannot fit.
    pub(super) async fn next_request(&self) -> Result<(Request, FitReport), TooBig> {
        // Plugins still compiling in the background join the tool set
        // before the model is asked.
        self.catalog.ready().await;
        let tools = self.tools_for_request();
        let (mut request, input) = self.request(&tools);
        let report = fit(&mut request, input, self.budget(), || {
            self.brief_system_prompt()
        })?;
        if !report.unchanged() {
            tracing::debug!(
                "request fitted to the window: {} messages cut, {} left out, tools shortened: {}",
                report.clipped,
                report.dropped,
                report.tools_shortened
            );
        }
        self.clamp_answer(&mut request, report.tokens);
        Ok((request, report))
    }

    /// The provider answered `request`, counting `input_tokens` of it:
    /// calibrate the estimate, and keep the largest request answered.
    pub(super) fn answered(&self, request: &Request, input_tokens: u64) {
        let estimated = request_tokens(request);
        let sent = if self.window.observe(input_tokens, estimated) {
            input_tokens
        } else {
            self.provider_tokens(estimated)
        };
        if let Ok(mut largest) = self.largest_request.lock() {
            *largest = (*largest).max(sent);
        }
    }

    /// Ask for no longer an answer than the window leaves (a provider that
    /// counts the answer's limit against the window refuses otherwise).
    fn clamp_answer(&self, request: &mut Request, tokens: u64) {
        let left = self
            .window
            .facts()
            .tokens
            .saturating_sub(self.provider_tokens(tokens))
            .max(256);
        let left = u32::try_from(left).unwrap_or(u32::MAX);
        request.max_tokens = request.max_tokens.map(|limit| limit.min(left));
        request.answer_ceiling = Some(left);
    }

    /// Estimated tokens in the provider's count.
    pub(super) fn provider_tokens(&self, estimated: u64) -> u64 {
        (estimated as f64 * self.window.facts().ratio).ceil() as u64
    }

    /// The largest request the provider answered so far, in its tokens
    /// (as it counted them, or as estimated when it did not say).
    pub fn largest_request(&self) -> u64 {
        self.largest_request.lock().map_or(0, |l| *l)
    }

    /// Estimated tokens of everything the next request would send, as the
    /// provider counts them: the tools as a small window gets them, every
    /// message whole (before any is cut).
    pub fn estimated_tokens(&self) -> u64 {
        let request = self.request_as_a_small_window_gets_it();
        self.provider_tokens(request_tokens(&request))
    }

    /// How many of the latest turns a compaction keeps verbatim: at most
    /// `keep_recent`, and no more than fill half of what the window leaves
    /// beside the instructions and tools (so one compaction frees room for
    /// several turns, not one), at least one.
    pub(super) fn turns_to_keep(&self, keep_recent: usize) -> usize {
        let request = self.request_as_a_small_window_gets_it();
        let fixed = request_tokens(&Request {
            messages: request.messages.into_iter().take(1).collect(),
            tools: request.tools,
            ..Request::default()
        });
        let mut room = self.budget().saturating_sub(fixed) / 2;
        let inner = self.lock();
        let mut keep = 0;
        for turn in inner.history.iter().rev() {
            if keep >= keep_recent.max(1) || turn.id == super::memory::SUMMARY_TURN_ID {
                break;
            }
            let size: u64 = turn.messages().iter().map(message_tokens).sum();
            if keep > 0 && size > room {
                break;
            }
            room = room.saturating_sub(size);
            keep += 1;
        }
        keep.max(1)
    }

    /// The next request with every message whole, its tools as the window
    /// gets them (described briefly when the window is small).
    fn request_as_a_small_window_gets_it(&self) -> Request {
        let tools = self.tools_for_request();
        let (mut request, _) = self.request(&tools);
        brief_if_small(&mut request, self.budget(), || self.brief_system_prompt());
        request
    }

    /// What a request may be, in estimated tokens.
    fn budget(&self) -> u64 {
        let reserve = self.window.answer_reserve(self.config.max_tokens);
        self.window.request_budget(reserve)
    }

    /// Answer a context-length refusal of `sent` (the `refusals`th for
    /// this call): learn the window from it, compact harder, and say
    /// whether to ask again (not when nothing changed).
    pub(super) async fn answer_refusal(
        &self,
        err: &LlmError,
        sent: &Request,
        refusals: u32,
    ) -> bool {
        if err.kind != ErrorKind::ContextLength || refusals > MAX_REFUSALS {
            return false;
        }
        let learned = self
            .window
            .learn(context_refusal(&err.message), request_tokens(sent));
        if learned.after.tokens != learned.before.tokens {
            self.notice(&format!(
                "the model's context window is {} tokens, not {} (the provider said so when it refused a request); sandcrab fits every request to it from now on",
                learned.after.tokens, learned.before.tokens
            ));
        }
        let keep = KEEP_AFTER_REFUSALS[(refusals as usize - 1).min(KEEP_AFTER_REFUSALS.len() - 1)];
        let compacted = self.memory.is_some()
            && self.compressible(keep)
            && self.compact_keeping(keep).await.messages_compressed > 0;
        // Asking again is worth it only when the next request will be
        // smaller: the window or the estimate changed, or history went.
        learned.after != learned.before || compacted
    }

    /// The error for an input that cannot fit, with what to do.
    pub(super) fn too_big(&self, too_big: TooBig) -> LlmError {
        let facts = self.window.facts();
        let reserve = self.window.answer_reserve(self.config.max_tokens);
        let input = self.provider_tokens(too_big.input);
        let fixed = self.provider_tokens(too_big.fixed);
        let what = if input > fixed {
            format!("this input alone is about {input} tokens")
        } else {
            format!("sandcrab's instructions and tool descriptions alone are about {fixed} tokens")
        };
        LlmError::new(
            ErrorKind::ContextLength,
            self.client.provider(),
            format!(
                "the request was not sent: {what}, and with the rest ({} tokens in all, and {reserve} kept for the answer) it cannot fit the model's context window of {} tokens. Raise the server's context (llama-server -c, Ollama num_ctx), pick a model with a larger window (/model or --model), or split the input into smaller parts; the conversation goes on",
                input + fixed,
                facts.tokens,
            ),
        )
    }

    /// Tokens the summarizer may read at once: its window (the session's,
    /// or that of the model `[summarization]` names, where known) less the
    /// prompt, the summary folded in and the summary written.
    pub(super) fn summarizer_chunk_tokens(&self) -> u64 {
        let config = self.memory.as_ref().map(|m| m.compactor.config().clone());
        let summary = config
            .as_ref()
            .map_or(1024, |c| u64::from(c.max_summary_tokens));
        let facts = self.window.facts();
        let own = config
            .and_then(|c| c.name)
            .filter(|name| *name != self.model())
            .and_then(|name| super::window::known_model_window(&name));
        let window = (own.unwrap_or(facts.tokens) as f64 / facts.ratio) as u64;
        window
            .saturating_sub(2 * summary + SUMMARY_PROMPT_TOKENS)
            .max(256)
    }
}

/// The index, among the messages of `history` after the system prompt
/// (so counted from 1), of the operator's latest input.
pub(super) fn current_input(history: &[Turn]) -> Option<usize> {
    let mut index = 1;
    let mut found = None;
    for turn in history {
        if matches!(turn.kind, TurnKind::User { .. }) {
            found = Some(index);
        }
        index += turn.message_count();
    }
    found
}

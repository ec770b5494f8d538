//! Spend caps: what a session may spend on model calls, counted from what
//! the provider reports and never guessed.
//!
//! A [`Ledger`] holds one session's caps and what it spent; a subagent's
//! ledger is a child of its parent's, so every call it makes is charged
//! to the parent too and stops when either's cap is reached. Every model
//! call made for a session goes through [`Ledger::fit`] first: a request
//! whose input alone does not fit what is left is not sent, one that fits
//! gets its answer capped to the room left, and what it may take is held
//! ([`Hold`]) until it is charged, so calls running side by side (parallel
//! subagents, several servers' sampling) cannot each spend the same room.
//! Cost counts only where the provider reports it or the operator gave
//! the model's prices; a call of unknown cost under a cost cap stops the
//! next one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Request, Usage};

/// Below this many tokens of room for the answer, a request is not sent.
pub const MIN_ANSWER_TOKENS: u64 = 16;

/// The caps of one ledger (None: no cap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Caps {
    /// Input and output tokens across every model call.
    pub tokens: Option<u64>,
    /// US dollars across every model call.
    pub cost_usd: Option<f64>,
    /// Wall time from the session's start (or resumption).
    pub duration: Option<Duration>,
}

impl Caps {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.tokens.is_some() || self.cost_usd.is_some() || self.duration.is_some()
    }
}

/// Which cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapKind {
    Tokens,
    Cost,
    Duration,
}

impl CapKind {
    /// Its name, as events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CapKind::Tokens => "tokens",
            CapKind::Cost => "cost",
            CapKind::Duration => "duration",
        }
    }

    /// Where the operator sets it: the flag and the configuration key.
    pub fn setting(self) -> &'static str {
        match self {
            CapKind::Tokens => "--max-tokens-total / [budget] max_tokens_total",
            CapKind::Cost => "--max-cost / [budget] max_cost",
            CapKind::Duration => "--max-duration / [budget] max_duration",
        }
    }
}

/// A model's prices, in US dollars per million tokens (`[budget.prices]`),
/// each finite and not negative.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "PriceText")]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input served from the provider's cache (default: `input`).
    pub cached_input: Option<f64>,
    /// Input written to the provider's cache (default: `input`).
    pub cache_write: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceText {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
}

impl TryFrom<PriceText> for Price {
    type Error = String;
    fn try_from(p: PriceText) -> Result<Self, String> {
        for (name, value) in [
            ("input", Some(p.input)),
            ("output", Some(p.output)),
            ("cached_input", p.cached_input),
            ("cache_write", p.cache_write),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(format!(
                    "the price {name} = {v} is not a number of US dollars per million tokens (finite, 0 or more)"
                ));
            }
        }
        Ok(Price {
            input: p.input,
            output: p.output,
            cached_input: p.cached_input,
            cache_write: p.cache_write,
        })
    }
}

impl Price {
    fn of(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.input_tokens);
        let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
        let fresh = usage.input_tokens - cached - written;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Prices by model name.
pub type Prices = BTreeMap<String, Price>;

/// The operator's budget: a session's caps, each subagent's own, and the
/// prices of models whose provider reports no cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default)]
    pub session: Caps,
    #[serde(default)]
    pub subagent: Caps,
    #[serde(default)]
    pub prices: Prices,
}

/// What a ledger has spent, and holds for calls in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Spent {
    tokens: u64,
    cost_usd: f64,
    /// Calls whose cost is unknown: the provider reported none and the
    /// model has no price.
    uncosted_calls: u32,
    held_tokens: u64,
    held_cost: f64,
}

/// A ledger's caps and spend at one moment (for the status line, events
/// and the run's result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpendReport {
    pub tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    pub cost_usd: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    pub elapsed_secs: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_duration_secs: Option<f64>,
    /// Calls whose cost is unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uncosted_calls: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A cap that stops the next model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct CapReached {
    pub cap: CapKind,
    /// Whether the cap is a parent's (a subagent's spend counts against
    /// the session that started it).
    pub parents: bool,
    /// What was spent and the cap, in the cap's unit.
    pub spent: f64,
    pub limit: f64,
    /// Whether raising the cap lets work go on (not when the cost of
    /// earlier calls is unknown: no cap can be kept then).
    #[serde(default = "yes")]
    pub raisable: bool,
    /// The whole reason, for people.
    pub message: String,
}

fn yes() -> bool {
    true
}

/// One session's caps and spend; see the module doc.
#[derive(Debug)]
pub struct Ledger {
    caps: Mutex<Caps>,
    spent: Mutex<Spent>,
    prices: Arc<Prices>,
    parent: Option<Arc<Ledger>>,
    /// When the session started working ([`Ledger::start`]), in the
    /// caller's milliseconds.
    started_ms: Mutex<Option<u64>>,
    /// Taken (on the top ledger of a chain) while a call is fitted or
    /// charged: checking and holding are one step for the whole chain.
    gate: Mutex<()>,
    /// Told (on the top ledger) when a hold is let go, for the calls that
    /// wait for room others hold.
    released: tokio::sync::Notify,
}

/// Why a call was not fitted.
enum Refusal {
    /// A cap is reached.
    Cap(CapReached),
    /// Only calls in flight hold the room it needs: it waits for them.
    Busy,
}

/// What a request that names no answer limit is allowed under a cap.
pub const UNSET_ANSWER: u64 = 32_768;

/// What one call may take, held on a ledger and its parents until the
/// call is charged ([`Hold::charge`]) or given up (dropped).
#[derive(Debug)]
#[must_use = "a hold is charged with what the call used, or dropped when it was not sent"]
pub struct Hold {
    ledger: Option<Arc<Ledger>>,
    model: String,
    tokens: u64,
    cost: f64,
    /// The request's input as estimated: charged when the provider
    /// reports no usage.
    input: u64,
}

impl Hold {
    /// A hold on nothing (no ledger to charge).
    pub fn none() -> Hold {
        Hold {
            ledger: None,
            model: String::new(),
            tokens: 0,
            cost: 0.0,
            input: 0,
        }
    }

    /// Charge what the call used (the provider's `usage`; a provider that
    /// reports none is charged the estimated input) and let go of the
    /// hold; what was charged.
    pub fn charge(mut self, usage: &Usage) -> Usage {
        let mut usage = *usage;
        if usage.total_tokens() == 0 {
            usage.input_tokens = self.input;
        }
        let Some(ledger) = self.ledger.take() else {
            return usage;
        };
        {
            let _gate = ledger.root().gate.lock();
            ledger.charge(&self.model, &usage);
            ledger.release(self.tokens, self.cost);
        }
        let _ = NOTED.try_with(|noted| {
            noted.borrow_mut().push(Charge {
                model: self.model.clone(),
                usage,
            })
        });
        usage
    }

    /// Charge a call that ended without an answer after the provider began
    /// (an interrupt, a broken stream): its input as estimated and
    /// `output_tokens` of what came.
    pub fn charge_unfinished(self, output_tokens: u64) -> Usage {
        let input = self.input;
        self.charge(&Usage {
            input_tokens: input,
            output_tokens,
            ..Usage::default()
        })
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(ledger) = self.ledger.take() {
            let _gate = ledger.root().gate.lock();
            ledger.release(self.tokens, self.cost);
        }
    }
}

impl Ledger {
    /// A top-level session's ledger.
    pub fn new(caps: Caps, prices: Arc<Prices>) -> Arc<Self> {
        Arc::new(Ledger {
            caps: Mutex::new(caps),
            spent: Mutex::default(),
            prices,
            parent: None,
            started_ms: Mutex::default(),
            gate: Mutex::default(),
            released: tokio::sync::Notify::new(),
        })
    }

    /// A subagent's ledger under this one, with caps of its own.
    pub fn child(self: &Arc<Self>, caps: Caps) -> Arc<Self> {
        Arc::new(Ledger {
            caps: Mutex::new(caps),
            spent: Mutex::default(),
            prices: self.prices.clone(),
            parent: Some(self.clone()),
            started_ms: Mutex::default(),
            gate: Mutex::default(),
            released: tokio::sync::Notify::new(),
        })
    }

    /// Whether this ledger or a parent's has a cap on duration (then the
    /// caller reads its clock for [`Self::fit`]).
    pub fn times(&self) -> bool {
        self.caps().duration.is_some() || self.parent.as_ref().is_some_and(|p| p.times())
    }

    /// The session starts working at `now_ms` (its session clock), unless
    /// it had: its time counts from there.
    pub fn start(&self, now_ms: u64) {
        if let Ok(mut started) = self.started_ms.lock() {
            started.get_or_insert(now_ms);
        }
    }

    /// When this ledger started (None: not yet).
    fn started(&self) -> Option<u64> {
        self.started_ms.lock().ok().and_then(|s| *s)
    }

    /// The top ledger of this one's chain.
    fn root(&self) -> &Ledger {
        self.chain().last().unwrap_or(self)
    }

    /// The ledgers charged for a call charged here: this one and every
    /// parent.
    fn chain(&self) -> impl Iterator<Item = &Ledger> {
        std::iter::successors(Some(self), |l| l.parent.as_deref())
    }

    /// Fit `request`, whose input is about `input_tokens`, to what this
    /// ledger and its parents have left at `now_ms`: its answer capped to
    /// the room (a request naming no limit gets at most
    /// [`UNSET_ANSWER`]), and that much held until the call is charged; or
    /// the cap that keeps it from being sent. When only calls in flight
    /// hold the room it needs, it waits for them to be charged.
    pub async fn fit(
        self: &Arc<Self>,
        request: &mut Request,
        input_tokens: u64,
        now_ms: u64,
    ) -> Result<Hold, CapReached> {
        loop {
            // Registered before the check: a release in between is seen.
            let released = self.root().released.notified();
            match self.try_fit(request, input_tokens, now_ms) {
                Ok(hold) => return Ok(hold),
                Err(Refusal::Cap(reached)) => return Err(reached),
                Err(Refusal::Busy) => released.await,
            }
        }
    }

    /// [`Self::fit`] for a call made on the session's behalf outside its
    /// loop (a server's model call, a summary): its input as estimated,
    /// the time read from the system clock (such calls are not made again
    /// in a replay; their charges come from the recording).
    pub async fn fit_now(self: &Arc<Self>, request: &mut Request) -> Result<Hold, CapReached> {
        let input = crate::estimate::request_tokens(request);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.fit(request, input, now).await
    }

    fn try_fit(
        self: &Arc<Self>,
        request: &mut Request,
        input_tokens: u64,
        now_ms: u64,
    ) -> Result<Hold, Refusal> {
        let _gate = self.root().gate.lock();
        let model = request.model.clone();
        let rooms = |holds: bool| -> Result<Option<u64>, CapReached> {
            let mut room: Option<u64> = None;
            for here in self.chain() {
                let parents = !std::ptr::eq(here, &**self);
                if let Some(r) = here.room(&model, input_tokens, now_ms, parents, holds)? {
                    room = Some(room.map_or(r, |mine| mine.min(r)));
                }
            }
            Ok(room)
        };
        let room = match rooms(true) {
            Ok(room) => room,
            // Would it fit but for what calls in flight hold?
            Err(reached) => {
                return Err(match rooms(false) {
                    Ok(_) => Refusal::Busy,
                    Err(_) => Refusal::Cap(reached),
                });
            }
        };
        if let Some(room) = room {
            let room = u32::try_from(room).unwrap_or(u32::MAX);
            let unset = u32::try_from(UNSET_ANSWER).unwrap_or(u32::MAX);
            request.max_tokens = Some(request.max_tokens.unwrap_or(unset).min(room));
            request.answer_ceiling = Some(request.answer_ceiling.map_or(room, |c| c.min(room)));
        }
        // What the call may take: its input and the most its answer may be
        // (with reasoning asked for, an adapter may grow the answer up to
        // its ceiling).
        let answer = if request.reasoning_effort.is_some() {
            request.answer_ceiling.or(request.max_tokens)
        } else {
            request.max_tokens.or(request.answer_ceiling)
        };
        let answer = answer.map(u64::from).unwrap_or(0);
        let tokens = input_tokens.saturating_add(answer);
        let cost = self.prices.get(&model).map_or(0.0, |p| {
            (input_tokens as f64 * p.input + answer as f64 * p.output) / 1_000_000.0
        });
        for here in self.chain() {
            if let Ok(mut spent) = here.spent.lock() {
                spent.held_tokens = spent.held_tokens.saturating_add(tokens);
                spent.held_cost += cost;
            }
        }
        Ok(Hold {
            ledger: Some(self.clone()),
            model,
            tokens,
            cost,
            input: input_tokens,
        })
    }

    /// Let go of a hold (the gate taken by the caller); the waiting are
    /// told.
    fn release(&self, tokens: u64, cost: f64) {
        for here in self.chain() {
            if let Ok(mut spent) = here.spent.lock() {
                spent.held_tokens = spent.held_tokens.saturating_sub(tokens);
                spent.held_cost = (spent.held_cost - cost).max(0.0);
            }
        }
        self.root().released.notify_waiters();
    }

    /// Charge one model call's `usage` by `model` here and to every parent.
    fn charge(&self, model: &str, usage: &Usage) {
        let cost = match (usage.cost_micros, self.prices.get(model)) {
            (Some(micros), _) => Some(micros as f64 / 1_000_000.0),
            (None, Some(price)) => Some(price.of(usage)),
            (None, None) => None,
        };
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        for here in self.chain() {
            if let Ok(mut spent) = here.spent.lock() {
                spent.tokens = spent.tokens.saturating_add(tokens);
                match cost {
                    Some(c) if c.is_finite() => spent.cost_usd += c,
                    _ => spent.uncosted_calls = spent.uncosted_calls.saturating_add(1),
                }
            }
        }
    }

    /// What this ledger has room for (counting what calls in flight hold
    /// when `holds`), or the cap reached.
    fn room(
        &self,
        model: &str,
        input_tokens: u64,
        now_ms: u64,
        parents: bool,
        holds: bool,
    ) -> Result<Option<u64>, CapReached> {
        let caps = self.caps();
        let mut spent = self.spent();
        if !holds {
            spent.held_tokens = 0;
            spent.held_cost = 0.0;
        }
        let whose = if parents { "the parent session's " } else { "" };
        let reached = |cap: CapKind, spent: f64, limit: f64, why: String| CapReached {
            cap,
            parents,
            spent,
            limit,
            raisable: true,
            message: format!(
                "{whose}spend cap reached: {why}; raise it with {}",
                cap.setting()
            ),
        };
        if let (Some(limit), Some(started)) = (caps.duration, self.started()) {
            let elapsed = Duration::from_millis(now_ms.saturating_sub(started));
            if elapsed >= limit {
                return Err(reached(
                    CapKind::Duration,
                    elapsed.as_secs_f64(),
                    limit.as_secs_f64(),
                    format!(
                        "{:.0} s of {:.0} s elapsed",
                        elapsed.as_secs_f64(),
                        limit.as_secs_f64()
                    ),
                ));
            }
        }
        let mut room: Option<u64> = None;
        if let Some(limit) = caps.tokens {
            let taken = spent.tokens.saturating_add(spent.held_tokens);
            let answer = limit.saturating_sub(taken).saturating_sub(input_tokens);
            if answer < MIN_ANSWER_TOKENS {
                let held = if spent.held_tokens > 0 {
                    format!(" ({} more held by calls in flight)", spent.held_tokens)
                } else {
                    String::new()
                };
                return Err(reached(
                    CapKind::Tokens,
                    spent.tokens as f64,
                    limit as f64,
                    format!(
                        "{} of {limit} tokens spent{held}, and the next request alone is about {input_tokens}",
                        spent.tokens
                    ),
                ));
            }
            room = Some(answer);
        }
        if let Some(limit) = caps.cost_usd {
            if spent.uncosted_calls > 0 {
                return Err(CapReached {
                    raisable: false,
                    ..reached(
                        CapKind::Cost,
                        spent.cost_usd,
                        limit,
                        format!(
                            "the cost of {} call(s) is unknown: the provider reported none and [budget.prices] has no price for model '{model}', so the cap of ${limit:.2} cannot be kept (add the model's prices)",
                            spent.uncosted_calls
                        ),
                    )
                });
            }
            let left = limit - spent.cost_usd - spent.held_cost;
            let answer = match self.prices.get(model) {
                Some(p) => {
                    let input_cost = input_tokens as f64 * p.input / 1_000_000.0;
                    if p.output > 0.0 {
                        ((left - input_cost) * 1_000_000.0 / p.output).max(0.0) as u64
                    } else if left > input_cost {
                        u64::MAX
                    } else {
                        0
                    }
                }
                // Only the provider's report will tell: one call at most
                // may pass the cap (documented; prices make it exact).
                None if left > 0.0 => u64::MAX,
                None => 0,
            };
            if answer < MIN_ANSWER_TOKENS {
                return Err(reached(
                    CapKind::Cost,
                    spent.cost_usd,
                    limit,
                    format!("${:.4} of ${limit:.2} spent", spent.cost_usd),
                ));
            }
            if answer != u64::MAX {
                room = Some(room.map_or(answer, |r| r.min(answer)));
            }
        }
        Ok(room)
    }

    /// Raise this ledger's `cap` by `by` (tokens, dollars or seconds), as
    /// the operator answered; a cap that was not set stays unset.
    pub fn raise(&self, cap: CapKind, by: f64) {
        let by = if by.is_finite() { by.max(0.0) } else { 0.0 };
        if let Ok(mut caps) = self.caps.lock() {
            match cap {
                CapKind::Tokens => caps.tokens = caps.tokens.map(|t| t.saturating_add(by as u64)),
                CapKind::Cost => caps.cost_usd = caps.cost_usd.map(|c| c + by),
                CapKind::Duration => {
                    caps.duration = caps.duration.map(|d| {
                        d.saturating_add(Duration::try_from_secs_f64(by).unwrap_or(Duration::MAX))
                    })
                }
            }
        }
    }

    /// What this ledger spent and its caps at `now_ms` (the time counted
    /// from its first model call; none before).
    pub fn report(&self, now_ms: u64) -> SpendReport {
        let caps = self.caps();
        let spent = self.spent();
        let started = self.started();
        SpendReport {
            tokens: spent.tokens,
            max_tokens: caps.tokens,
            cost_usd: spent.cost_usd,
            max_cost_usd: caps.cost_usd,
            elapsed_secs: started.map_or(0.0, |s| now_ms.saturating_sub(s) as f64 / 1000.0),
            max_duration_secs: caps.duration.map(|d| d.as_secs_f64()),
            uncosted_calls: spent.uncosted_calls,
        }
    }

    /// The caps in force.
    pub fn caps(&self) -> Caps {
        self.caps.lock().map(|c| *c).unwrap_or_default()
    }

    fn spent(&self) -> Spent {
        self.spent.lock().map(|s| *s).unwrap_or_default()
    }
}

tokio::task_local! {
    static CHARGED: Arc<Ledger>;
}

/// Run `work` with `ledger` as the one its model calls are charged to,
/// for the calls made on the session's behalf deep inside it (the
/// summary compaction asks for) that no argument reaches.
pub async fn charging<F: std::future::Future>(ledger: Arc<Ledger>, work: F) -> F::Output {
    CHARGED.scope(ledger, work).await
}

/// The ledger the current work is charged to, if any.
pub fn charged() -> Option<Arc<Ledger>> {
    CHARGED.try_with(Arc::clone).ok()
}

tokio::task_local! {
    static NOTED: std::cell::RefCell<Vec<Charge>>;
}

/// One charge, as a recording keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Charge {
    pub model: String,
    pub usage: Usage,
}

/// Run `work` and say every charge made in it (a recorded summary keeps
/// what its model call cost, so a replay charges the same).
pub async fn noting<F: std::future::Future>(work: F) -> (F::Output, Vec<Charge>) {
    NOTED
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = work.await;
            let noted = NOTED.with(|n| n.take());
            (output, noted)
        })
        .await
}

impl Ledger {
    /// Charge a call whose usage is known from elsewhere (a replay's
    /// recorded summaries and servers' model calls).
    pub fn charge_recorded(&self, charge: &Charge) {
        self.charge(&charge.model, &charge.usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    fn tokens(cap: u64) -> Caps {
        Caps {
            tokens: Some(cap),
            ..Caps::default()
        }
    }

    fn request(model: &str, max_tokens: Option<u32>) -> Request {
        Request {
            model: model.into(),
            max_tokens,
            ..Request::default()
        }
    }

    /// `try_fit`, with a cap reached as the error (None: busy).
    trait Fits {
        fn fit_or_busy(
            &self,
            r: &mut Request,
            input: u64,
            now: u64,
        ) -> Result<Hold, Option<CapReached>>;
    }

    impl Fits for Arc<Ledger> {
        fn fit_or_busy(
            &self,
            r: &mut Request,
            input: u64,
            now: u64,
        ) -> Result<Hold, Option<CapReached>> {
            self.try_fit(r, input, now)
                .map_err(|refusal| match refusal {
                    Refusal::Cap(reached) => Some(reached),
                    Refusal::Busy => None,
                })
        }
    }

    /// Fit a request to `model` with `input` tokens and charge it `usage`;
    /// the answer room it was given.
    fn call(ledger: &Arc<Ledger>, model: &str, input: u64, usage: Usage) -> Option<u32> {
        let mut r = request(model, None);
        let hold = ledger.fit_or_busy(&mut r, input, 0).unwrap();
        hold.charge(&usage);
        r.max_tokens
    }

    #[test]
    fn a_request_that_cannot_fit_is_refused_and_one_that_can_is_capped() {
        let ledger = Ledger::new(tokens(1000), Arc::default());
        assert_eq!(call(&ledger, "m", 100, used(600, 200)), Some(900));
        let mut r = request("m", Some(4096));
        let hold = ledger.fit_or_busy(&mut r, 100, 0).unwrap();
        assert_eq!(r.max_tokens, Some(100));
        drop(hold);
        let refused = ledger
            .fit_or_busy(&mut request("m", None), 190, 0)
            .unwrap_err()
            .unwrap();
        assert_eq!(refused.cap, CapKind::Tokens);
        assert!(refused.message.contains("800 of 1000 tokens"), "{refused}");
        assert!(refused.message.contains("--max-tokens-total"), "{refused}");
    }

    #[test]
    fn calls_in_flight_hold_their_room_so_parallel_calls_cannot_share_it() {
        let ledger = Ledger::new(tokens(1000), Arc::default());
        let mut first = request("m", Some(500));
        let held = ledger.fit_or_busy(&mut first, 100, 0).unwrap();
        // 600 held: the second gets the 300 left after its own 100.
        let mut second = request("m", Some(500));
        let other = ledger.fit_or_busy(&mut second, 100, 0).unwrap();
        assert_eq!(second.max_tokens, Some(300));
        // Nothing is left for a third while both are in flight: it waits
        // (busy), it is not refused.
        assert!(matches!(
            ledger.fit_or_busy(&mut request("m", None), 100, 0),
            Err(None)
        ));
        // The first used little: what it did not use is free again.
        held.charge(&used(100, 10));
        drop(other);
        assert_eq!(call(&ledger, "m", 100, used(1, 1)), Some(790));
    }

    #[test]
    fn a_childs_spend_counts_against_its_parent() {
        let parent = Ledger::new(tokens(1000), Arc::default());
        let child = parent.child(Caps::default());
        call(&child, "m", 10, used(900, 90));
        let refused = child
            .fit_or_busy(&mut request("m", None), 10, 0)
            .unwrap_err()
            .unwrap();
        assert!(refused.parents, "{refused}");
        assert!(parent.fit_or_busy(&mut request("m", None), 10, 0).is_err());
        // The control: a child with room of its own under a parent with
        // room is let through.
        let roomy = Ledger::new(tokens(10_000), Arc::default());
        assert!(
            roomy
                .child(tokens(500))
                .fit_or_busy(&mut request("m", None), 10, 0)
                .is_ok()
        );
    }

    #[test]
    fn cost_comes_from_the_provider_or_the_operators_prices_never_a_guess() {
        let caps = Caps {
            cost_usd: Some(1.0),
            ..Caps::default()
        };
        let prices: Prices = [(
            "priced".to_string(),
            Price {
                input: 1.0,
                output: 10.0,
                cached_input: None,
                cache_write: None,
            },
        )]
        .into();
        let ledger = Ledger::new(caps, Arc::new(prices));
        // 100k in, 10k out: $0.10 + $0.10.
        call(&ledger, "priced", 10, used(100_000, 10_000));
        assert!((ledger.report(0).cost_usd - 0.2).abs() < 1e-9);
        // $0.80 left, 100k in costs $0.10: $0.70 buys 70k output tokens.
        let mut r = request("priced", Some(100_000));
        drop(ledger.fit_or_busy(&mut r, 100_000, 0).unwrap());
        assert_eq!(r.max_tokens, Some(70_000));
        let reported = Usage {
            cost_micros: Some(500_000),
            ..used(1, 1)
        };
        call(&ledger, "unpriced", 10, reported);
        assert!((ledger.report(0).cost_usd - 0.7).abs() < 1e-9);
        // A call nobody can price stops the next one, and raising the cap
        // cannot help.
        call(&ledger, "unpriced", 10, used(10, 10));
        let refused = ledger
            .fit_or_busy(&mut request("unpriced", None), 10, 0)
            .unwrap_err()
            .unwrap();
        assert_eq!(refused.cap, CapKind::Cost);
        assert!(!refused.raisable);
        assert!(refused.message.contains("unknown"), "{refused}");
    }

    #[test]
    fn duration_counts_from_the_first_call_and_raising_a_cap_lets_work_go_on() {
        let caps = Caps {
            duration: Some(Duration::from_secs(60)),
            tokens: Some(100),
            ..Caps::default()
        };
        let ledger = Ledger::new(caps, Arc::default());
        assert_eq!(ledger.report(5_000).elapsed_secs, 0.0, "not started");
        let fit = |now| {
            ledger
                .fit_or_busy(&mut request("m", None), 10, now)
                .map(drop)
        };
        assert!(fit(1_000_000).is_ok(), "no time counts before the start");
        ledger.start(1_000);
        ledger.start(50_000);
        assert!(fit(60_999).is_ok());
        assert_eq!(fit(61_000).unwrap_err().unwrap().cap, CapKind::Duration);
        ledger.raise(CapKind::Duration, 30.0);
        assert!(fit(61_000).is_ok());
        call(&ledger, "m", 10, used(80, 10));
        assert_eq!(fit(61_000).unwrap_err().unwrap().cap, CapKind::Tokens);
        ledger.raise(CapKind::Tokens, 100.0);
        assert!(fit(61_000).is_ok());
        // Absurd raises saturate instead of wrapping.
        ledger.raise(CapKind::Tokens, f64::MAX);
        ledger.raise(CapKind::Duration, f64::INFINITY);
        assert_eq!(ledger.caps().tokens, Some(u64::MAX));
    }

    #[test]
    fn a_request_naming_no_limit_is_given_one_under_a_cap() {
        let ledger = Ledger::new(tokens(10_000_000), Arc::default());
        assert_eq!(
            call(&ledger, "m", 10, used(1, 1)),
            Some(UNSET_ANSWER as u32)
        );
    }

    #[tokio::test]
    async fn a_call_waits_for_room_others_hold_and_goes_when_they_are_charged() {
        let ledger = Ledger::new(tokens(1000), Arc::default());
        let mut first = request("m", Some(800));
        let held = ledger.fit(&mut first, 100, 0).await.unwrap();
        let waiting = {
            let ledger = ledger.clone();
            tokio::spawn(async move {
                let mut second = request("m", Some(500));
                ledger
                    .fit(&mut second, 100, 0)
                    .await
                    .map(|hold| (hold, second.max_tokens))
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "it went past a full hold");
        held.charge(&used(100, 50));
        let (_hold, room) = waiting.await.unwrap().unwrap();
        assert_eq!(room, Some(500));
    }

    #[test]
    fn a_caps_name_is_its_json_name() {
        for cap in [CapKind::Tokens, CapKind::Cost, CapKind::Duration] {
            assert_eq!(serde_json::to_value(cap).unwrap(), cap.as_str());
        }
    }

    #[test]
    fn a_provider_that_reports_no_usage_is_charged_the_estimated_input() {
        let ledger = Ledger::new(tokens(1000), Arc::default());
        call(&ledger, "m", 300, Usage::default());
        assert_eq!(ledger.report(0).tokens, 300);
    }

    #[test]
    fn prices_must_be_numbers_of_dollars() {
        let bad: Result<Prices, _> =
            serde_json::from_str(r#"{"m": {"input": -1.0, "output": 2.0}}"#);
        assert!(bad.unwrap_err().to_string().contains("finite, 0 or more"));
        let good: Prices =
            serde_json::from_str(r#"{"m": {"input": 1.0, "output": 2.0, "cache_write": 1.25}}"#)
                .unwrap();
        assert_eq!(good["m"].cache_write, Some(1.25));
    }
}

//! Spend caps: what a session may spend on model calls, counted from what
//! the provider reports and never guessed.
//!
//! A [`Ledger`] holds one session's caps and what it spent; a subagent's
//! ledger is a child of its parent's, so every call it makes is charged
//! to the parent too and stops when either's cap is reached. Before each
//! model call the caller asks [`Ledger::allowance`]: a request whose input
//! alone does not fit what is left is not sent, and one that fits gets its
//! answer capped to the room left. Cost counts only where the provider
//! reports it or the operator gave the model's prices; a call of unknown
//! cost under a cost cap stops the next one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Usage;

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
    /// Where the operator sets it: the flag and the configuration key.
    pub fn setting(self) -> &'static str {
        match self {
            CapKind::Tokens => "--max-tokens-total / [budget] max_tokens_total",
            CapKind::Cost => "--max-cost / [budget] max_cost",
            CapKind::Duration => "--max-duration / [budget] max_duration",
        }
    }
}

/// A model's prices, in US dollars per million tokens (`[budget.prices]`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input served from the provider's cache (default: `input`).
    pub cached_input: Option<f64>,
}

impl Price {
    fn of(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
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

/// What a ledger has spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub tokens: u64,
    pub cost_usd: f64,
    /// Calls whose cost is unknown: the provider reported none and the
    /// model has no price.
    pub uncosted_calls: u32,
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
    /// The whole reason, for people.
    pub message: String,
}

/// One session's caps and spend; see the module doc.
#[derive(Debug)]
pub struct Ledger {
    caps: Mutex<Caps>,
    spent: Mutex<Spent>,
    prices: Arc<Prices>,
    parent: Option<Arc<Ledger>>,
    /// When the ledger was first asked, in the caller's milliseconds: the
    /// session's time counts from its first model call.
    started_ms: Mutex<Option<u64>>,
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
        })
    }

    /// Whether this ledger or a parent's has a cap on duration (then the
    /// caller reads its clock for [`Self::allowance`]).
    pub fn times(&self) -> bool {
        self.caps().duration.is_some() || self.parent.as_ref().is_some_and(|p| p.times())
    }

    /// When this ledger started, starting it at `now_ms` if it had not.
    fn started(&self, now_ms: u64) -> u64 {
        match self.started_ms.lock() {
            Ok(mut started) => *started.get_or_insert(now_ms),
            Err(_) => now_ms,
        }
    }

    /// Charge one model call's `usage` by `model` here and to every parent.
    pub fn charge(&self, model: &str, usage: &Usage) {
        let cost = match (usage.cost_micros, self.prices.get(model)) {
            (Some(micros), _) => Some(micros as f64 / 1_000_000.0),
            (None, Some(price)) => Some(price.of(usage)),
            (None, None) => None,
        };
        let mut ledger = Some(self);
        while let Some(here) = ledger {
            if let Ok(mut spent) = here.spent.lock() {
                spent.tokens += usage.total_tokens();
                match cost {
                    Some(c) => spent.cost_usd += c,
                    None => spent.uncosted_calls += 1,
                }
            }
            ledger = here.parent.as_deref();
        }
    }

    /// Whether a call to `model` whose input is about `input_tokens` may
    /// be sent at `now_ms`, and the most its answer may then take (None:
    /// no cap limits it).
    pub fn allowance(
        &self,
        model: &str,
        input_tokens: u64,
        now_ms: u64,
    ) -> Result<Option<u64>, CapReached> {
        let mut room: Option<u64> = None;
        let mut ledger = Some(self);
        while let Some(here) = ledger {
            let parents = !std::ptr::eq(here, self);
            if let Some(r) = here.room(model, input_tokens, now_ms, parents)? {
                room = Some(room.map_or(r, |mine| mine.min(r)));
            }
            ledger = here.parent.as_deref();
        }
        Ok(room)
    }

    fn room(
        &self,
        model: &str,
        input_tokens: u64,
        now_ms: u64,
        parents: bool,
    ) -> Result<Option<u64>, CapReached> {
        let caps = self.caps();
        let spent = self.spent();
        let whose = if parents { "the parent session's " } else { "" };
        let reached = |cap: CapKind, spent: f64, limit: f64, why: String| CapReached {
            cap,
            parents,
            spent,
            limit,
            message: format!(
                "{whose}spend cap reached: {why}; raise it with {}",
                cap.setting()
            ),
        };
        let started = self.started(now_ms);
        if let Some(limit) = caps.duration {
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
            let left = limit.saturating_sub(spent.tokens);
            let answer = left.saturating_sub(input_tokens);
            if answer < MIN_ANSWER_TOKENS {
                return Err(reached(
                    CapKind::Tokens,
                    spent.tokens as f64,
                    limit as f64,
                    format!(
                        "{} of {limit} tokens spent, and the next request alone is about {input_tokens}",
                        spent.tokens
                    ),
                ));
            }
            room = Some(answer);
        }
        if let Some(limit) = caps.cost_usd {
            let price = self.prices.get(model);
            if spent.uncosted_calls > 0 {
                return Err(reached(
                    CapKind::Cost,
                    spent.cost_usd,
                    limit,
                    format!(
                        "the cost of {} call(s) is unknown: the provider reported none and [budget.prices] has no price for model '{model}', so the cap of ${limit:.2} cannot be kept",
                        spent.uncosted_calls
                    ),
                ));
            }
            let left = limit - spent.cost_usd;
            let answer = match price {
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
                // Only the provider's report will tell.
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
        if let Ok(mut caps) = self.caps.lock() {
            match cap {
                CapKind::Tokens => caps.tokens = caps.tokens.map(|t| t + by.max(0.0) as u64),
                CapKind::Cost => caps.cost_usd = caps.cost_usd.map(|c| c + by.max(0.0)),
                CapKind::Duration => {
                    caps.duration = caps
                        .duration
                        .map(|d| d + Duration::from_secs_f64(by.max(0.0)))
                }
            }
        }
    }

    /// What this ledger spent and its caps at `now_ms`.
    pub fn report(&self, now_ms: u64) -> SpendReport {
        let caps = self.caps();
        let spent = self.spent();
        SpendReport {
            tokens: spent.tokens,
            max_tokens: caps.tokens,
            cost_usd: spent.cost_usd,
            max_cost_usd: caps.cost_usd,
            elapsed_secs: now_ms.saturating_sub(self.started(now_ms)) as f64 / 1000.0,
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

    #[test]
    fn a_request_that_cannot_fit_is_refused_and_one_that_can_is_capped() {
        let ledger = Ledger::new(tokens(1000), Arc::default());
        assert_eq!(ledger.allowance("m", 100, 0), Ok(Some(900)));
        ledger.charge("m", &used(600, 200));
        assert_eq!(ledger.allowance("m", 100, 0), Ok(Some(100)));
        let refused = ledger.allowance("m", 190, 0).unwrap_err();
        assert_eq!(refused.cap, CapKind::Tokens);
        assert!(refused.message.contains("800 of 1000 tokens"), "{refused}");
        assert!(refused.message.contains("--max-tokens-total"), "{refused}");
    }

    #[test]
    fn a_childs_spend_counts_against_its_parent() {
        let parent = Ledger::new(tokens(1000), Arc::default());
        let child = parent.child(Caps::default());
        child.charge("m", &used(900, 90));
        let refused = child.allowance("m", 10, 0).unwrap_err();
        assert!(refused.parents, "{refused}");
        assert!(parent.allowance("m", 10, 0).is_err());
        // The control: a child with room of its own under a parent with
        // room is let through.
        let roomy = Ledger::new(tokens(10_000), Arc::default());
        assert!(roomy.child(tokens(500)).allowance("m", 10, 0).is_ok());
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
            },
        )]
        .into();
        let ledger = Ledger::new(caps, Arc::new(prices));
        // 100k in, 10k out: $0.10 + $0.10.
        ledger.charge("priced", &used(100_000, 10_000));
        assert!((ledger.report(0).cost_usd - 0.2).abs() < 1e-9);
        // $0.80 left, 100k in costs $0.10: $0.70 buys 70k output tokens.
        assert_eq!(ledger.allowance("priced", 100_000, 0), Ok(Some(70_000)));
        let reported = Usage {
            cost_micros: Some(500_000),
            ..used(1, 1)
        };
        ledger.charge("unpriced", &reported);
        assert!((ledger.report(0).cost_usd - 0.7).abs() < 1e-9);
        // A call nobody can price stops the next one.
        ledger.charge("unpriced", &used(10, 10));
        let refused = ledger.allowance("unpriced", 10, 0).unwrap_err();
        assert_eq!(refused.cap, CapKind::Cost);
        assert!(refused.message.contains("unknown"), "{refused}");
    }

    #[test]
    fn duration_counts_from_the_start_and_raising_a_cap_lets_work_go_on() {
        let caps = Caps {
            duration: Some(Duration::from_secs(60)),
            tokens: Some(100),
            ..Caps::default()
        };
        let ledger = Ledger::new(caps, Arc::default());
        assert!(ledger.allowance("m", 10, 1_000).is_ok());
        assert!(ledger.allowance("m", 10, 60_999).is_ok());
        assert_eq!(
            ledger.allowance("m", 10, 61_000).unwrap_err().cap,
            CapKind::Duration
        );
        ledger.raise(CapKind::Duration, 30.0);
        assert!(ledger.allowance("m", 10, 61_000).is_ok());
        ledger.charge("m", &used(80, 10));
        assert_eq!(
            ledger.allowance("m", 10, 61_000).unwrap_err().cap,
            CapKind::Tokens
        );
        ledger.raise(CapKind::Tokens, 100.0);
        assert_eq!(ledger.allowance("m", 10, 61_000), Ok(Some(100)));
    }
}

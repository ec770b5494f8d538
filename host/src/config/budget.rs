//! `[budget]`: what a session may spend, operator-only (a project file
//! cannot set it). Caps count what the provider reports; cost counts only
//! where the provider reports it or `[budget.prices]` prices the model.
//!
//! ```toml
//! [budget]
//! max_tokens_total = 2_000_000
//! max_cost = 5.00              # US dollars
//! max_duration = "30m"         # s, m, h; or seconds as a number
//!
//! [budget.subagent]            # each subagent's own caps (its spend
//! max_tokens_total = 200_000   # counts against the session's too)
//!
//! [budget.prices."claude-sonnet-4-5"]   # US dollars per million tokens
//! input = 3.0
//! output = 15.0
//! cached_input = 0.3
//! ```

use std::time::Duration;

use serde::Deserialize;

use crate::llm::spend::{Budget, Caps, Prices};

/// `[budget]` as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetToml {
    #[serde(flatten)]
    pub session: CapsToml,
    #[serde(default)]
    pub subagent: CapsToml,
    #[serde(default)]
    pub prices: Prices,
}

/// The three caps as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct CapsToml {
    pub max_tokens_total: Option<u64>,
    pub max_cost: Option<Dollars>,
    pub max_duration: Option<Span>,
}

impl CapsToml {
    /// The caps these name (the command line's flags are read into one
    /// too).
    pub fn caps(&self) -> Caps {
        Caps {
            tokens: self.max_tokens_total,
            cost_usd: self.max_cost.map(|d| d.0),
            duration: self.max_duration.map(|s| s.0),
        }
    }
}

impl BudgetToml {
    /// The budget in force: these caps with `flags` (`--max-…`) over the
    /// session's.
    pub fn resolve(&self, flags: &Caps) -> Budget {
        let file = self.session.caps();
        Budget {
            session: Caps {
                tokens: flags.tokens.or(file.tokens),
                cost_usd: flags.cost_usd.or(file.cost_usd),
                duration: flags.duration.or(file.duration),
            },
            subagent: self.subagent.caps(),
            prices: self.prices.clone(),
        }
    }
}

/// A positive amount of US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "f64")]
pub struct Dollars(pub f64);

impl TryFrom<f64> for Dollars {
    type Error = String;
    fn try_from(value: f64) -> Result<Self, String> {
        if value.is_finite() && value > 0.0 {
            Ok(Dollars(value))
        } else {
            Err(format!(
                "max_cost must be a positive number of US dollars, not {value}"
            ))
        }
    }
}

impl std::str::FromStr for Dollars {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let number = text.trim().trim_start_matches('$');
        number
            .parse::<f64>()
            .map_err(|_| format!("'{text}' is not an amount of US dollars (like 5 or 2.50)"))?
            .try_into()
    }
}

/// A length of time: `90s`, `30m`, `2h`, `1h30m`, or seconds as a number.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "SpanText")]
pub struct Span(pub Duration);

#[derive(Deserialize)]
#[serde(untagged)]
enum SpanText {
    Seconds(u64),
    Text(String),
}

impl TryFrom<SpanText> for Span {
    type Error = String;
    fn try_from(value: SpanText) -> Result<Self, String> {
        match value {
            SpanText::Seconds(0) => Err("max_duration must be longer than 0 s".into()),
            SpanText::Seconds(s) => Ok(Span(Duration::from_secs(s))),
            SpanText::Text(text) => text.parse(),
        }
    }
}

impl std::str::FromStr for Span {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad =
            || format!("'{text}' is not a length of time: write it like 90s, 30m, 2h or 1h30m");
        let mut secs = 0u64;
        let mut digits = String::new();
        for c in text.trim().chars() {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            let unit = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => return Err(bad()),
            };
            let n: u64 = digits.parse().map_err(|_| bad())?;
            secs = secs.saturating_add(n.saturating_mul(unit));
            digits.clear();
        }
        if !digits.is_empty() {
            secs = secs.saturating_add(digits.parse::<u64>().map_err(|_| bad())?);
        }
        if secs == 0 {
            return Err(bad());
        }
        Ok(Span(Duration::from_secs(secs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_read_from_the_file_and_flags_win() {
        let toml: BudgetToml = toml::from_str(
            r#"
            max_tokens_total = 1000
            max_cost = 2.5
            max_duration = "1h30m"
            [subagent]
            max_tokens_total = 100
            [prices.m]
            input = 1.0
            output = 2.0
            "#,
        )
        .unwrap();
        let flags = Caps {
            tokens: Some(50),
            ..Caps::default()
        };
        let budget = toml.resolve(&flags);
        assert_eq!(budget.session.tokens, Some(50));
        assert_eq!(budget.session.cost_usd, Some(2.5));
        assert_eq!(budget.session.duration, Some(Duration::from_secs(5400)));
        assert_eq!(budget.subagent.tokens, Some(100));
        assert_eq!(budget.prices["m"].output, 2.0);
    }

    #[test]
    fn bad_caps_are_refused_with_how_to_write_them() {
        for (text, says) in [
            ("max_cost = -1.0", "positive number of US dollars"),
            ("max_duration = \"soon\"", "like 90s, 30m"),
            ("max_duration = 0", "longer than 0"),
            ("max_tokens = 5", "unknown field"),
        ] {
            let err = toml::from_str::<BudgetToml>(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        assert_eq!("45".parse::<Span>().unwrap().0, Duration::from_secs(45));
        assert_eq!("$1.5".parse::<Dollars>().unwrap().0, 1.5);
    }
}

//! The three answers a rule can give, ordered by strictness: when several
//! rules match, the strictest wins.

use serde::{Deserialize, Serialize};

/// What a rule says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it without asking.
    Allow,
    /// Ask the operator first.
    Ask,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// The word the configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// When nothing in the rules speaks to a call (ordered from least to most
/// asking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing asks (what the policy grants runs, unless a rule says
    /// otherwise): the default until a session can ask.
    #[default]
    Never,
    /// Ask before shell commands no rule allows, and before anything
    /// beyond a plugin's grants.
    OnRisk,
    /// Ask before every tool call no rule allows.
    Always,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Never, Mode::OnRisk, Mode::Always];

    /// The word the configuration and `--approvals` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Never => "never",
            Mode::OnRisk => "on-risk",
            Mode::Always => "always",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown approvals mode '{s}': use never, on-risk or always"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strictest_decision_is_the_greatest() {
        assert_eq!(
            [Decision::Allow, Decision::Deny, Decision::Ask]
                .iter()
                .max(),
            Some(&Decision::Deny)
        );
        assert!(Decision::Allow < Decision::Ask && Decision::Ask < Decision::Deny);
        assert_eq!("on-risk".parse::<Mode>(), Ok(Mode::OnRisk));
        assert!("sometimes".parse::<Mode>().unwrap_err().contains("on-risk"));
    }
}

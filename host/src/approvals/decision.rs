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

/// When nothing in the rules speaks to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(Mode::Never),
            "on-risk" => Ok(Mode::OnRisk),
            "always" => Ok(Mode::Always),
            other => Err(format!(
                "unknown approvals mode '{other}': use never, on-risk or always"
            )),
        }
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

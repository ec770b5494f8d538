//! The approvals in force for a session: the rules (operator, project,
//! `--approve` flags) and the mode, and what a refusal tells the model
//! when nobody can be asked.

use super::command::CommandLine;
use super::rules::{RuleError, Rules, SHELL_TOOL, Subject, Verdict};
use sandcrab_core::approval::{ApprovalRecord, DecidedBy, Decision, Mode};

/// The approvals of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvals {
    pub rules: Rules,
    pub mode: Mode,
}

impl Approvals {
    /// The verdict for `subject`.
    pub fn decide(&self, subject: &Subject) -> Verdict {
        self.rules.decide(subject, self.mode)
    }

    /// The verdict for `subject` with `more` rules (a session's answers)
    /// beside these.
    pub fn decide_with(&self, subject: &Subject, more: &Rules) -> Verdict {
        self.rules.decide_with(more, subject, self.mode)
    }
}

/// Allow rules from `--approve` flags: `tool:NAME`, `shell:WORDS…` (an
/// argument list starting so), `command:WORDS…` (exactly this argument
/// list) or `path:GLOB`; `net:` before a tool, shell or command flag gives
/// the calls it allows the network too (`net:shell:npm install`).
pub fn rules_from_flags(flags: &[String]) -> Result<Rules, RuleError> {
    let mut text = String::new();
    for flag in flags {
        let (network, rest) = match flag.strip_prefix("net:") {
            Some(rest) => (true, rest),
            None => (false, flag.as_str()),
        };
        let (kind, value) = rest.split_once(':').ok_or_else(|| RuleError {
            at: format!("--approve {flag:?}"),
            message: "write KIND:VALUE, with KIND one of tool, shell, command, path (for example --approve 'shell:git status')".into(),
        })?;
        let value_toml = match kind {
            "shell" | "command" => {
                let words = shlex::split(value)
                    .filter(|w| !w.is_empty())
                    .ok_or_else(|| RuleError {
                        at: format!("--approve {flag:?}"),
                        message: "the shell words are empty or unbalanced".into(),
                    })?;
                toml::Value::Array(words.into_iter().map(toml::Value::String).collect()).to_string()
            }
            "tool" | "path" | "grant" => toml::Value::String(value.to_string()).to_string(),
            other => {
                return Err(RuleError {
                    at: format!("--approve {flag:?}"),
                    message: format!("unknown kind '{other}': use tool, shell, command or path"),
                });
            }
        };
        text.push_str(&format!(
            "[[approvals.rules]]\n{kind} = {value_toml}\ndecision = \"allow\"\n{}",
            if network { "network = true\n" } else { "" }
        ));
    }
    Rules::parse(
        &text,
        std::path::Path::new("--approve"),
        super::rules::RuleSource::Trusted,
    )
}

/// A warning for every rule that names a tool not among `known` (a
/// mistyped name would otherwise never match, silently): its file and
/// line, the name, and the tools there are.
pub fn unknown_tools(rules: &Rules, known: &[String]) -> Vec<String> {
    rules
        .iter()
        .filter_map(|rule| {
            let tool = match &rule.matcher {
                super::rules::Matcher::Tool(t) => t,
                super::rules::Matcher::Path { tool: Some(t), .. } => t,
                _ => return None,
            };
            (!known.contains(tool)).then(|| {
                format!(
                    "{}: the approval rule names tool '{tool}', which no tool here has, so it never applies; fix the name (tools: {})",
                    rule.at,
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// What the model reads when `verdict` stops a call of `subject` and
/// nobody can be asked.
pub fn refusal(subject: &Subject, verdict: &Verdict) -> String {
    match (verdict.decision, &verdict.rule) {
        (Decision::Deny, Some(rule)) => format!(
            "Denied by the operator's approval rule at {}: this call must not run. Do not retry it; ask the user if it really must happen.",
            rule.at
        ),
        (_, rule) => {
            let online = matches!(subject, Subject::Call { network: true, .. });
            let why = match rule {
                Some(rule) => format!("the approval rule at {} says to ask first", rule.at),
                None if online => "it asks for the network, and no approval rule gives the network to it; without `network: true` it runs with no network".to_string(),
                None => "no approval rule allows it".to_string(),
            };
            // Quoted as one shell word, whatever the model's command holds:
            // the operator may paste it into a shell.
            let how = match suggestion(subject).and_then(|flag| shlex::try_quote(&flag).ok().map(|q| q.into_owned())) {
                Some(flag) => format!(
                    "The operator can allow it with `--approve {flag}` or an allow rule in their configuration."
                ),
                None => "No single rule can allow it as written (several commands, or shell syntax rules cannot read): split it into plain commands, or ask the user to run it.".to_string(),
            };
            format!(
                "Not run: this call needs the operator's approval ({why}), and nobody can be asked in this session. {how}"
            )
        }
    }
}

/// The narrowest allow rule (as an `--approve` value) that would let this
/// exact call run, if one can: a shell line of one plain command (exactly
/// its argument list, no longer one), a tool writing one path that has no glob
/// characters, or a tool by name. None when no rule can (several
/// commands, opaque syntax) — then only a yes for this call will do.
pub fn suggestion(subject: &Subject) -> Option<String> {
    let rule = rule_suggestion(subject)?;
    let offer = match subject {
        Subject::Call { network: true, .. } => format!("net:{rule}"),
        _ => rule,
    };
    // Only what can be kept as a rule is offered (a path outside the
    // workspace, or the network for a path, cannot).
    rules_from_flags(std::slice::from_ref(&offer))
        .is_ok()
        .then_some(offer)
}

fn rule_suggestion(subject: &Subject) -> Option<String> {
    match subject {
        Subject::Call { tool, command, .. } if tool == SHELL_TOOL => {
            match command.as_deref().map(CommandLine::parse) {
                Some(CommandLine::Simple(commands)) if commands.len() == 1 => {
                    let words = shlex::try_join(commands[0].iter().map(String::as_str)).ok()?;
                    Some(format!("command:{words}"))
                }
                _ => None,
            }
        }
        Subject::Call { paths, .. } if paths.len() == 1 => {
            let path = &paths[0];
            (!path.contains(['*', '?', '[', ']'])).then(|| format!("path:{path}"))
        }
        Subject::Call { paths, .. } if paths.len() > 1 => None,
        Subject::Call { tool, .. } => Some(format!("tool:{tool}")),
        Subject::Grant { grant, .. } => Some(format!("grant:{grant}")),
    }
}

/// What the model reads when the operator said no (with their note).
pub fn operator_denial(note: Option<&str>) -> String {
    let note = note.map(|n| format!(": {n}")).unwrap_or_default();
    format!(
        "The operator denied this call{note}. Do not retry it as it is; change approach or ask the user."
    )
}

/// What a call would do, in a line (the command, the paths it writes,
/// the network it asks for).
pub fn describe_call(subject: &Subject) -> String {
    let what = describe_action(subject);
    match subject {
        Subject::Call { network: true, .. } => format!("{what} (with the network)"),
        _ => what,
    }
}

fn describe_action(subject: &Subject) -> String {
    match subject {
        Subject::Call {
            command: Some(command),
            ..
        } => command.clone(),
        Subject::Call { paths, tool, .. } if !paths.is_empty() => {
            format!("{tool} writes {}", paths.join(", "))
        }
        Subject::Call { tool, .. } => tool.clone(),
        Subject::Grant { plugin, grant } => format!("{plugin} asks for {grant}"),
    }
}

/// The record a receipt keeps of `verdict` (reached in `mode`): the
/// decision and the rule, or the mode, that gave it.
pub fn verdict_record(verdict: &Verdict, mode: Mode) -> ApprovalRecord {
    let by = match &verdict.rule {
        Some(rule) => DecidedBy::Rule {
            at: rule.at.clone(),
            rule: rule.describe(),
        },
        None => DecidedBy::Mode { mode },
    };
    ApprovalRecord::verdict(verdict.decision, by)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(line: &str) -> Subject {
        Subject::Call {
            tool: SHELL_TOOL.into(),
            command: Some(line.into()),
            paths: Vec::new(),
            network: false,
        }
    }

    #[test]
    fn a_call_that_asks_for_the_network_is_said_so_and_a_net_flag_gives_it() {
        let online = Subject::Call {
            tool: SHELL_TOOL.into(),
            command: Some("npm install".into()),
            paths: Vec::new(),
            network: true,
        };
        assert_eq!(describe_call(&online), "npm install (with the network)");
        assert_eq!(
            suggestion(&online).as_deref(),
            Some("net:command:npm install")
        );
        let never = Approvals {
            rules: Rules::default(),
            mode: Mode::Never,
        };
        let verdict = never.decide(&online);
        assert_eq!(verdict.decision, Decision::Deny);
        let told = refusal(&online, &verdict);
        assert!(
            told.contains("network") && told.contains("--approve 'net:command:npm install'"),
            "{told}"
        );
        let given = Approvals {
            rules: rules_from_flags(&["net:command:npm install".into()]).unwrap(),
            mode: Mode::Never,
        };
        assert_eq!(given.decide(&online).decision, Decision::Allow);
        // Without `net:`, the command is allowed and its network is not.
        let plain = Approvals {
            rules: rules_from_flags(&["command:npm install".into()]).unwrap(),
            mode: Mode::Never,
        };
        assert_eq!(plain.decide(&online).decision, Decision::Deny);
    }

    #[test]
    fn flags_become_allow_rules_and_bad_flags_say_how_to_write_them() {
        let rules = rules_from_flags(&["shell:git push".into(), "path:src/**".into()]).unwrap();
        let gate = Approvals {
            rules,
            mode: Mode::OnRisk,
        };
        assert_eq!(
            gate.decide(&shell("git push origin main")).decision,
            Decision::Allow
        );
        assert_eq!(gate.decide(&shell("git pull")).decision, Decision::Ask);
        let err = rules_from_flags(&["git push".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("KIND:VALUE"), "{err}");
        let err = rules_from_flags(&["shel:git".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown kind 'shel'"), "{err}");
    }

    #[test]
    fn a_rule_naming_no_tool_there_is_warned_about_with_its_line() {
        let rules = Rules::parse(
            "[[approvals.rules]]\ntool = \"write_fiel\"\ndecision = \"deny\"\n\n[[approvals.rules]]\ntool = \"shell\"\ndecision = \"ask\"\n",
            std::path::Path::new("/c/config.toml"),
            super::super::rules::RuleSource::Trusted,
        )
        .unwrap();
        let known = ["shell".to_string(), "write_file".to_string()];
        let warnings = unknown_tools(&rules, &known);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("/c/config.toml:1: the approval rule names tool 'write_fiel'"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn a_refusal_names_the_rule_or_the_flag_that_would_allow_it() {
        let gate = Approvals {
            rules: Rules::default(),
            mode: Mode::OnRisk,
        };
        let subject = shell("git push --force origin");
        let verdict = gate.decide(&subject);
        let text = refusal(&subject, &verdict);
        assert!(
            text.contains("--approve 'command:git push --force origin'"),
            "{text}"
        );
        // Several commands: no one rule allows the line.
        let two = shell("ls && git push");
        assert!(refusal(&two, &gate.decide(&two)).contains("No single rule can allow it"));
        assert_eq!(
            verdict_record(&verdict, gate.mode).line(),
            "ask by mode on-risk"
        );
    }
}

//! Approval rules: what they match (a tool by name, a shell command by the
//! prefix of its argument list, a file tool's paths by glob, a run-time
//! grant), what they decide, and the examples that prove each one means
//! what its author thinks — checked when the rules load, so a mistyped
//! rule fails at start naming its file and line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::command::{CommandLine, without_assignments};
use super::glob::Glob;
use sandcrab_core::approval::{Decision, Mode};

/// The tool whose `command` argument is a shell command line.
pub const SHELL_TOOL: &str = "shell";

/// Who wrote a set of rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// The operator's own configuration: any decision.
    Trusted,
    /// The project's `sandcrab.toml`: `ask` and `deny` only (a repository
    /// never allows itself anything, SPEC §9).
    Project,
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// Every call of a tool.
    Tool(String),
    /// Shell commands whose argument list starts with these words.
    Shell(Vec<String>),
    /// Shell commands whose argument list is exactly these words (what a
    /// yes for a conversation or a workspace adds: it allows the command
    /// the operator saw, not longer ones).
    Command(Vec<String>),
    /// Calls (of one tool, or of any file tool) writing a path the glob
    /// matches.
    Path { tool: Option<String>, glob: Glob },
    /// A grant a plugin asks for at run time (`network`, `program:git`).
    Grant(String),
}

/// One rule, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub matcher: Matcher,
    pub decision: Decision,
    /// `file:line`.
    pub at: String,
    /// Its place among its file's rules (1 for the first): what
    /// `sandcrab approvals revoke` names it by.
    pub number: usize,
    /// The only workspace it applies in (None: every workspace). An
    /// "always in this workspace" answer writes one.
    pub workspace: Option<PathBuf>,
    /// Who wrote it.
    pub origin: RuleSource,
    /// The file it is in.
    pub file: PathBuf,
    /// The calls it allows may use the network (an allow rule of the
    /// operator's: `network = true`).
    pub network: bool,
}

impl Rule {
    /// What the rule matches, in words (`shell git push`, `path src/**`).
    pub fn describe(&self) -> String {
        match &self.matcher {
            Matcher::Tool(t) => format!("tool {t}"),
            Matcher::Shell(words) => format!("shell {}", words.join(" ")),
            Matcher::Command(words) => format!("command {}", words.join(" ")),
            Matcher::Path {
                tool: Some(t),
                glob,
            } => format!("{t} path {}", glob.as_str()),
            Matcher::Path { tool: None, glob } => format!("path {}", glob.as_str()),
            Matcher::Grant(g) => format!("grant {g}"),
        }
    }

    /// Where it applies, in words.
    pub fn applies_in(&self) -> String {
        match &self.workspace {
            Some(ws) => format!("in {} only", ws.display()),
            None => "in every workspace".into(),
        }
    }
}

/// What is being decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A tool call: its tool, its command line (the shell tool), the
    /// workspace-relative paths it writes, whether it asks for the network.
    Call {
        tool: String,
        command: Option<String>,
        paths: Vec<String>,
        network: bool,
    },
    /// A grant a plugin asks for while it runs.
    Grant { plugin: String, grant: String },
}

/// The answer for a subject, and the rule that gave it (None: the mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: Option<Rule>,
}

/// A set of rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
}

/// A rule that cannot be used: where, what, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct RuleError {
    pub at: String,
    pub message: String,
}

#[derive(Deserialize)]
struct FileToml {
    #[serde(default)]
    approvals: Option<ApprovalsToml>,
}

#[derive(Deserialize)]
struct ApprovalsToml {
    #[serde(default)]
    rules: Vec<toml::Spanned<RuleToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleToml {
    tool: Option<String>,
    shell: Option<Vec<String>>,
    command: Option<Vec<String>>,
    path: Option<String>,
    grant: Option<String>,
    decision: Decision,
    #[serde(default)]
    examples: Vec<String>,
    #[serde(default)]
    not_examples: Vec<String>,
    /// The one workspace the rule applies in (an absolute path).
    workspace: Option<PathBuf>,
    /// The calls it allows may use the network.
    #[serde(default)]
    network: bool,
}

impl Rules {
    /// The `[[approvals.rules]]` of a configuration file's `text` (other
    /// keys are the configuration's business), written by `origin`.
    pub fn parse(text: &str, file: &Path, origin: RuleSource) -> Result<Rules, RuleError> {
        let parsed: FileToml = toml::from_str(text).map_err(|e| RuleError {
            at: file.display().to_string(),
            message: e.message().to_string(),
        })?;
        let mut rules = Vec::new();
        for (i, spanned) in parsed
            .approvals
            .map(|a| a.rules)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let line = text[..spanned.span().start].matches('\n').count() + 1;
            let at = format!("{}:{line}", file.display());
            let mut rule = rule(spanned.into_inner(), at, origin)?;
            rule.number = i + 1;
            rule.file = file.to_path_buf();
            rules.push(rule);
        }
        Ok(Rules { rules })
    }

    /// The rules that apply in `workspace`: those for every workspace and
    /// those written for this one — the workspace's real path, compared
    /// as written (a rule's path is not resolved again: a link planted
    /// later must not move a rule to another workspace).
    pub fn for_workspace(self, workspace: &Path) -> Rules {
        let here = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        Rules {
            rules: self
                .rules
                .into_iter()
                .filter(|r| r.workspace.as_deref().is_none_or(|ws| ws == here))
                .collect(),
        }
    }

    /// A set of these `rules`.
    pub fn from_rules(rules: Vec<Rule>) -> Rules {
        Rules { rules }
    }

    /// Say where these rules come from (`at` for every one of them).
    pub fn relabel(mut self, at: &str) -> Rules {
        for rule in &mut self.rules {
            rule.at = at.to_string();
        }
        self
    }

    /// These rules and `more` (a later layer's).
    pub fn extend(&mut self, more: Rules) {
        self.rules.extend(more.rules);
    }

    /// The rules, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter()
    }

    /// The decision for `subject`: the strictest matching rule, else what
    /// `mode` says. Every simple command of a shell line and every path a
    /// call writes is decided on its own, and the strictest of them wins.
    pub fn decide(&self, subject: &Subject, mode: Mode) -> Verdict {
        self.decide_with(&Rules::default(), subject, mode)
    }

    /// Like [`Rules::decide`], with `more` rules (a conversation's answers)
    /// beside these.
    pub fn decide_with(&self, more: &Rules, subject: &Subject, mode: Mode) -> Verdict {
        // The strictest rule that passes a test.
        let strictest = |test: &dyn Fn(&Rule) -> bool| {
            self.rules
                .iter()
                .chain(&more.rules)
                .filter(|r| test(r))
                .max_by_key(|r| r.decision)
                .map(|r| Verdict {
                    decision: r.decision,
                    rule: Some(r.clone()),
                })
        };
        let mut verdicts: Vec<Verdict> = Vec::new();
        match subject {
            Subject::Call {
                tool,
                command,
                paths,
                network,
            } => {
                let by_tool = strictest(&|r| matches!(&r.matcher, Matcher::Tool(t) if t == tool));
                // A rule for the tool speaks for every path it writes.
                let tool_spoke = by_tool.is_some();
                verdicts.extend(by_tool);
                if tool == SHELL_TOOL {
                    match command.as_deref().map(CommandLine::parse) {
                        Some(CommandLine::Simple(commands)) => {
                            for words in &commands {
                                let found = strictest(&|r| shell_matches(r, words));
                                verdicts.push(found.unwrap_or(by_mode(mode, true)));
                            }
                        }
                        _ => verdicts.push(by_mode(mode, true)),
                    }
                }
                // Every path needs a verdict of its own: a rule for one
                // file says nothing of another the same call writes.
                for path in paths {
                    let found = strictest(&|r| match &r.matcher {
                        Matcher::Path { tool: only, glob } => {
                            only.as_ref().is_none_or(|t| t == tool) && glob.matches(path)
                        }
                        _ => false,
                    });
                    match found {
                        Some(verdict) => verdicts.push(verdict),
                        None if !tool_spoke => verdicts.push(by_mode(mode, false)),
                        None => {}
                    }
                }
                if verdicts.is_empty() {
                    verdicts.push(by_mode(mode, false));
                }
                if *network {
                    // The network needs a yes of its own: an allow rule
                    // that gives it, for every command of the line.
                    let gives = |r: &Rule| r.network && r.decision == Decision::Allow;
                    let given = if tool == SHELL_TOOL {
                        match command.as_deref().map(CommandLine::parse) {
                            Some(CommandLine::Simple(commands)) if !commands.is_empty() => commands
                                .iter()
                                .map(|words| strictest(&|r| gives(r) && shell_matches(r, words)))
                                .collect::<Option<Vec<_>>>()
                                .and_then(|found| found.into_iter().next()),
                            _ => None,
                        }
                    } else {
                        strictest(&|r| {
                            gives(r) && matches!(&r.matcher, Matcher::Tool(t) if t == tool)
                        })
                    };
                    verdicts.push(given.unwrap_or(by_mode_network(mode)));
                }
            }
            Subject::Grant { grant, .. } => {
                verdicts.extend(strictest(
                    &|r| matches!(&r.matcher, Matcher::Grant(g) if g == grant),
                ));
                if verdicts.is_empty() {
                    // A grant beyond what the plugin was given: never
                    // silently, unless nothing ever asks.
                    verdicts.push(by_mode(mode, true));
                }
            }
        }
        // The strictest; of equals, one a rule gave (it names why).
        verdicts
            .into_iter()
            .max_by_key(|v| (v.decision, v.rule.is_some()))
            .expect("at least one verdict")
    }
}

/// What `mode` says when no rule speaks; `risky` for shell commands and
/// run-time grants.
fn by_mode(mode: Mode, risky: bool) -> Verdict {
    let decision = match mode {
        Mode::Never => Decision::Allow,
        Mode::OnRisk if risky => Decision::Ask,
        Mode::OnRisk => Decision::Allow,
        Mode::Always => Decision::Ask,
    };
    Verdict {
        decision,
        rule: None,
    }
}

/// What `mode` says about the network for a call no rule gives it: a
/// grant beyond the plugin's, never given silently — asked where someone
/// can be asked, refused where nothing asks.
fn by_mode_network(mode: Mode) -> Verdict {
    Verdict {
        decision: match mode {
            Mode::Never => Decision::Deny,
            Mode::OnRisk | Mode::Always => Decision::Ask,
        },
        rule: None,
    }
}

/// Whether a shell rule matches one simple command. Leading `NAME=value`
/// assignments change what a command does (`LD_PRELOAD=…`,
/// `GIT_CONFIG_…`), so a command with them is never allowed by a prefix;
/// `ask` and `deny` look past them.
fn shell_matches(rule: &Rule, words: &[String]) -> bool {
    let fits = |words: &[String]| match &rule.matcher {
        Matcher::Shell(prefix) => words.starts_with(prefix),
        Matcher::Command(exact) => words == exact.as_slice(),
        _ => false,
    };
    fits(words) || (rule.decision != Decision::Allow && fits(without_assignments(words)))
}

fn rule(raw: RuleToml, at: String, origin: RuleSource) -> Result<Rule, RuleError> {
    let fail = |message: String| RuleError {
        at: at.clone(),
        message,
    };
    if origin == RuleSource::Project && raw.decision == Decision::Allow {
        return Err(fail(
            "a project's sandcrab.toml may add `ask` and `deny` rules, never `allow`: put allow rules in your own configuration".into(),
        ));
    }
    match &raw.workspace {
        Some(_) if origin == RuleSource::Project => {
            return Err(fail(
                "`workspace` belongs in your own configuration: a project's rules apply in that project already; remove it".into(),
            ));
        }
        Some(ws) if !ws.is_absolute() => {
            return Err(fail(format!(
                "`workspace = \"{}\"` must be an absolute path (the workspace the rule applies in)",
                ws.display()
            )));
        }
        _ => {}
    }
    let kinds = [
        raw.shell.is_some(),
        raw.command.is_some(),
        raw.path.is_some(),
        raw.grant.is_some(),
    ]
    .iter()
    .filter(|set| **set)
    .count();
    if kinds > 1 {
        return Err(fail(
            "a rule matches one thing: give `shell`, `command`, `path` or `grant`, not several (write two rules)".into(),
        ));
    }
    if raw.network && (raw.decision != Decision::Allow || raw.path.is_some() || raw.grant.is_some())
    {
        return Err(fail(
            "`network = true` gives the network to the calls an allow rule lets through: use it on an allow rule for a tool, `shell` or `command`".into(),
        ));
    }
    if let Some(name) = &raw.tool
        && (name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
    {
        return Err(fail(format!(
            "`tool = \"{name}\"` is not a tool name (letters, digits, _, - and .; an MCP server's tools are SERVER__TOOL)"
        )));
    }
    // A shell rule's words: about the shell tool, none empty.
    let words = |key: &str, words: Vec<String>, like: &str| {
        if raw.tool.as_deref().is_some_and(|t| t != SHELL_TOOL) {
            return Err(fail(format!(
                "a `{key}` rule is about the {SHELL_TOOL} tool; drop `tool`"
            )));
        }
        if words.is_empty() || words.iter().any(|w| w.is_empty()) {
            return Err(fail(format!(
                "`{key}` is {like}; it cannot be empty or hold an empty word"
            )));
        }
        Ok(words)
    };
    let matcher = if let Some(list) = raw.shell.clone() {
        Matcher::Shell(words(
            "shell",
            list,
            "the start of an argument list, like [\"git\", \"status\"]",
        )?)
    } else if let Some(list) = raw.command.clone() {
        Matcher::Command(words(
            "command",
            list,
            "a whole argument list, like [\"git\", \"push\", \"origin\", \"main\"]",
        )?)
    } else if let Some(glob) = raw.path {
        Matcher::Path {
            tool: raw.tool,
            glob: Glob::new(&glob).map_err(fail)?,
        }
    } else if let Some(grant) = raw.grant {
        // Nothing asks for grants while a plugin runs yet: a rule that
        // could never apply would only mislead.
        return Err(fail(format!(
            "`grant = \"{grant}\"`: rules for grants asked for at run time are not in force yet (a plugin's grants are decided when it loads: see [policy.plugins.NAME]); remove the rule"
        )));
    } else if let Some(tool) = raw.tool {
        Matcher::Tool(tool)
    } else {
        return Err(fail(
            "the rule matches nothing: give `tool`, `shell`, `command`, `path` or `grant`".into(),
        ));
    };
    let rule = Rule {
        matcher,
        decision: raw.decision,
        at: at.clone(),
        number: 0,
        workspace: raw.workspace,
        origin,
        file: PathBuf::new(),
        network: raw.network,
    };
    for example in &raw.examples {
        if !example_matches(&rule, example) {
            return Err(fail(format!(
                "the rule does not match its example {example:?}: fix the rule or the example"
            )));
        }
    }
    for example in &raw.not_examples {
        if example_matches(&rule, example) {
            return Err(fail(format!(
                "the rule matches {example:?}, which it says it must not: make the rule narrower"
            )));
        }
    }
    Ok(rule)
}

/// Whether `rule` alone decides `example` (a command line for a shell
/// rule, a path for a path rule, a tool or grant name otherwise).
fn example_matches(rule: &Rule, example: &str) -> bool {
    match &rule.matcher {
        Matcher::Shell(_) | Matcher::Command(_) => match CommandLine::parse(example) {
            CommandLine::Simple(commands) => {
                // An allow rule allows a line only if it allows every
                // command in it; ask and deny speak to any of them.
                let hit = |words: &Vec<String>| shell_matches(rule, words);
                if rule.decision == Decision::Allow {
                    commands.iter().all(hit)
                } else {
                    commands.iter().any(hit)
                }
            }
            CommandLine::Opaque => false,
        },
        Matcher::Path { glob, .. } => glob.matches(example),
        Matcher::Tool(tool) => tool == example,
        Matcher::Grant(grant) => grant == example,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Rules {
        Rules::parse(text, Path::new("/c/config.toml"), RuleSource::Trusted).unwrap()
    }

    fn err(text: &str, origin: RuleSource) -> String {
        Rules::parse(text, Path::new("/c/config.toml"), origin)
            .unwrap_err()
            .to_string()
    }

    fn shell(line: &str) -> Subject {
        Subject::Call {
            tool: SHELL_TOOL.into(),
            command: Some(line.into()),
            paths: Vec::new(),
            network: false,
        }
    }

    fn online(line: &str) -> Subject {
        Subject::Call {
            tool: SHELL_TOOL.into(),
            command: Some(line.into()),
            paths: Vec::new(),
            network: true,
        }
    }

    #[test]
    fn the_network_needs_a_rule_that_gives_it_to_every_command() {
        let set = rules(
            "[[approvals.rules]]\nshell = [\"npm\", \"install\"]\nnetwork = true\ndecision = \"allow\"\n\n[[approvals.rules]]\nshell = [\"ls\"]\ndecision = \"allow\"\n",
        );
        let d = |s: &Subject, mode| set.decide(s, mode).decision;
        assert_eq!(
            d(&online("npm install left-pad"), Mode::Never),
            Decision::Allow
        );
        assert_eq!(
            d(&online("npm install x && ls"), Mode::Never),
            Decision::Deny
        );
        assert_eq!(
            d(&online("npm install x && ls"), Mode::OnRisk),
            Decision::Ask
        );
        assert_eq!(
            d(&online("ls"), Mode::Never),
            Decision::Deny,
            "ls is allowed, its network is not"
        );
        assert_eq!(d(&online("curl x"), Mode::Always), Decision::Ask);
        assert_eq!(d(&shell("ls"), Mode::Never), Decision::Allow);
        let why = err(
            "[[approvals.rules]]\nshell = [\"npm\"]\nnetwork = true\ndecision = \"ask\"\n",
            RuleSource::Trusted,
        );
        assert!(why.contains("network = true"), "{why}");
    }

    const RULES: &str = r#"
[[approvals.rules]]
shell = ["git", "status"]
decision = "allow"
examples = ["git status", "git status --short"]
not_examples = ["git push", "git statusx"]

[[approvals.rules]]
shell = ["git", "push"]
decision = "deny"

[[approvals.rules]]
shell = ["cargo", "test"]
decision = "allow"

[[approvals.rules]]
path = "src/**"
decision = "allow"

[[approvals.rules]]
tool = "write_file"
path = "**/*.lock"
decision = "ask"
"#;

    #[test]
    fn a_workspace_rule_applies_in_its_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (here, there) = (base.join("here"), base.join("there"));
        std::fs::create_dir(&here).unwrap();
        std::fs::create_dir(&there).unwrap();
        let text = format!(
            "[[approvals.rules]]\nshell = [\"make\"]\ndecision = \"allow\"\nworkspace = {:?}\n\n[[approvals.rules]]\nshell = [\"ls\"]\ndecision = \"allow\"\n",
            here.display().to_string()
        );
        let all = rules(&text);
        assert_eq!(all.iter().map(|r| r.number).collect::<Vec<_>>(), [1, 2]);
        let d = |ws: &Path, line: &str| {
            rules(&text)
                .for_workspace(ws)
                .decide(&shell(line), Mode::OnRisk)
                .decision
        };
        assert_eq!(d(&here, "make"), Decision::Allow);
        assert_eq!(
            d(&here.join("."), "make"),
            Decision::Allow,
            "compared as real paths"
        );
        assert_eq!(d(&there, "make"), Decision::Ask);
        assert_eq!(d(&there, "ls"), Decision::Allow);
        // The attack: the rule's directory replaced by a link to its
        // parent does not bring the rule to the parent.
        std::fs::rename(&here, base.join("here.old")).unwrap();
        std::os::unix::fs::symlink(".", &here).unwrap();
        assert_eq!(d(&base, "make"), Decision::Ask, "a link moved the rule");
        let relative =
            "[[approvals.rules]]\ntool = \"x\"\ndecision = \"allow\"\nworkspace = \"ws\"\n";
        assert!(err(relative, RuleSource::Trusted).contains("must be an absolute path"));
        let project = "[[approvals.rules]]\ntool = \"x\"\ndecision = \"ask\"\nworkspace = \"/w\"\n";
        assert!(err(project, RuleSource::Project).contains("belongs in your own configuration"));
    }

    #[test]
    fn a_command_rule_allows_exactly_its_argument_list() {
        let r = rules(
            "[[approvals.rules]]\ncommand = [\"rm\", \"-f\", \"build.log\"]\ndecision = \"allow\"\nexamples = [\"rm -f build.log\"]\nnot_examples = [\"rm -f build.log -r src .git\"]\n",
        );
        let d = |line: &str| r.decide(&shell(line), Mode::OnRisk).decision;
        assert_eq!(d("rm -f build.log"), Decision::Allow);
        assert_eq!(d("rm -f build.log -r src .git"), Decision::Ask);
        assert_eq!(d("rm -f"), Decision::Ask);
        assert_eq!(d("X=1 rm -f build.log"), Decision::Ask);
    }

    #[test]
    fn the_strictest_matching_rule_wins_and_each_command_counts() {
        let r = rules(RULES);
        let d = |s: &Subject, m: Mode| r.decide(s, m).decision;
        assert_eq!(d(&shell("git status"), Mode::Always), Decision::Allow);
        assert_eq!(d(&shell("git push origin"), Mode::Never), Decision::Deny);
        // Every command of a line is decided: one denied denies the line,
        // one nobody allows is asked about.
        assert_eq!(
            d(&shell("git status && git push"), Mode::OnRisk),
            Decision::Deny
        );
        assert_eq!(d(&shell("git status; ls"), Mode::OnRisk), Decision::Ask);
        assert_eq!(
            d(&shell("cargo test && git status"), Mode::OnRisk),
            Decision::Allow
        );
        // Never a raw substring: a prefix of the argument list.
        assert_eq!(d(&shell("echo git status"), Mode::OnRisk), Decision::Ask);
        // What rules cannot read is never allowed by them.
        assert_eq!(
            d(&shell("git status $(rm -rf x)"), Mode::OnRisk),
            Decision::Ask
        );
        // An assignment in front is not the allowed command, but a denied
        // command stays denied behind one.
        assert_eq!(
            d(&shell("GIT_DIR=/x git push"), Mode::Never),
            Decision::Deny
        );
        let write = |path: &str| Subject::Call {
            tool: "write_file".into(),
            command: None,
            paths: vec![path.into()],
            network: false,
        };
        assert_eq!(d(&write("src/main.rs"), Mode::Always), Decision::Allow);
        assert_eq!(d(&write("src/Cargo.lock"), Mode::Never), Decision::Ask);
        assert_eq!(d(&write("README.md"), Mode::OnRisk), Decision::Allow);
        assert_eq!(d(&write("README.md"), Mode::Always), Decision::Ask);
        // A rule for one file of a call says nothing of the others: each
        // path not covered is decided by the mode.
        let two = |a: &str, b: &str| Subject::Call {
            tool: "apply_patch".into(),
            command: None,
            paths: vec![a.into(), b.into()],
            network: false,
        };
        assert_eq!(
            d(&two("src/a.rs", ".github/workflows/x.yml"), Mode::Always),
            Decision::Ask
        );
        assert_eq!(
            d(&two("src/a.rs", "src/b.rs"), Mode::Always),
            Decision::Allow
        );
        assert_eq!(
            d(&two("src/a.rs", ".github/workflows/x.yml"), Mode::Never),
            Decision::Allow
        );
        let grant = |g: &str| Subject::Grant {
            plugin: "p".into(),
            grant: g.into(),
        };
        // Grants asked for at run time: decided by the mode.
        assert_eq!(d(&grant("network"), Mode::Never), Decision::Allow);
        assert_eq!(d(&grant("program:curl"), Mode::OnRisk), Decision::Ask);
        // Assignments in front change what a command does: never allowed by
        // a prefix, still denied.
        assert_eq!(
            d(&shell("LD_PRELOAD=./x.so git status"), Mode::OnRisk),
            Decision::Ask
        );
        let verdict = r.decide(&shell("git push"), Mode::Never);
        // The rule is named by the line of its `[[approvals.rules]]` header.
        assert_eq!(verdict.rule.unwrap().at, "/c/config.toml:8");
    }

    #[test]
    fn modes_decide_what_no_rule_speaks_to() {
        let none = Rules::default();
        let read = Subject::Call {
            tool: "read_file".into(),
            command: None,
            paths: Vec::new(),
            network: false,
        };
        assert_eq!(
            none.decide(&shell("ls"), Mode::Never).decision,
            Decision::Allow
        );
        assert_eq!(
            none.decide(&shell("ls"), Mode::OnRisk).decision,
            Decision::Ask
        );
        assert_eq!(none.decide(&read, Mode::OnRisk).decision, Decision::Allow);
        assert_eq!(none.decide(&read, Mode::Always).decision, Decision::Ask);
        assert!(none.decide(&read, Mode::Always).rule.is_none());
    }

    #[test]
    fn a_bad_rule_fails_at_load_naming_the_file_and_line() {
        let bad_example = "\n[[approvals.rules]]\nshell = [\"git\", \"status\"]\ndecision = \"allow\"\nexamples = [\"git stat\"]\n";
        let e = err(bad_example, RuleSource::Trusted);
        assert!(
            e.starts_with("/c/config.toml:2: ") && e.contains("git stat"),
            "{e}"
        );
        let too_wide = "[[approvals.rules]]\nshell = [\"git\"]\ndecision = \"allow\"\nnot_examples = [\"git push\"]\n";
        assert!(err(too_wide, RuleSource::Trusted).contains("narrower"));
        let outside = "[[approvals.rules]]\npath = \"/etc/**\"\ndecision = \"deny\"\n";
        assert!(err(outside, RuleSource::Trusted).contains("outside the workspace"));
        let bad_tool = "[[approvals.rules]]\ntool = \"Write File\"\ndecision = \"ask\"\n";
        assert!(err(bad_tool, RuleSource::Trusted).contains("not a tool name"));
        let grant = "[[approvals.rules]]\ngrant = \"network\"\ndecision = \"deny\"\n";
        assert!(err(grant, RuleSource::Trusted).contains("not in force yet"));
        let mcp = "[[approvals.rules]]\ntool = \"my-server__delete_repo\"\ndecision = \"ask\"\n";
        assert!(Rules::parse(mcp, Path::new("c"), RuleSource::Trusted).is_ok());
        let unknown = "[[approvals.rules]]\ntool = \"x\"\ndecison = \"ask\"\n";
        assert!(err(unknown, RuleSource::Trusted).contains("decison"));
    }

    #[test]
    fn a_project_may_ask_and_deny_but_never_allow() {
        let allow = "[[approvals.rules]]\nshell = [\"curl\"]\ndecision = \"allow\"\n";
        let e = err(allow, RuleSource::Project);
        assert!(
            e.contains("never `allow`") && e.starts_with("/c/config.toml:1"),
            "{e}"
        );
        let deny = "[[approvals.rules]]\nshell = [\"curl\"]\ndecision = \"deny\"\n";
        assert!(Rules::parse(deny, Path::new("p"), RuleSource::Project).is_ok());
    }
}

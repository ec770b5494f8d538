//! `chat`'s approval prompt: a call that needs the operator is shown on
//! the terminal — the tool, who asks, the sandbox it will run under, its
//! arguments, for a file edit the diff it would apply, and what each yes
//! would allow (for "always", the rule that would be written) — and the
//! answer is read from the terminal's own input: `y` this call, `s` for
//! this conversation, `a` always in this workspace, `n [NOTE]` deny (the
//! note goes to the model). Ctrl-C, or the end of input, is a denial.
//! An MCP server's question (a form) is answered `y` to accept it with
//! its defaults, `y FIELD=VALUE …` to give values, or `n` to decline.
//! Nothing else can answer: the queue takes answers only from here.

use std::path::Path;
use std::sync::Arc;

use super::line_input::{Line, LineInput};
use super::terminal::one_line;
use crate::approvals::{Answer, AnswerError, PermissionQueue, PermissionRequest, Scope};

/// What the operator typed, read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// Yes, as far as the scope; for a form, with the values given.
    Allow(Scope, Option<serde_json::Map<String, serde_json::Value>>),
    Deny(Option<String>),
    /// Not an answer this request accepts; the hint says why.
    Unclear(String),
}

/// Read one answer line for `request`.
fn read_reply(line: &str, request: &PermissionRequest) -> Reply {
    let line = line.trim();
    let (word, rest) = match line.split_once(|c: char| c.is_whitespace() || c == ':') {
        Some((word, rest)) => (word, rest.trim()),
        None => (line, ""),
    };
    let offered = |scope: Scope| request.scopes.iter().any(|o| o.scope == scope);
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" if request.form.is_some() => match form_values(rest) {
            Ok(values) => Reply::Allow(Scope::Once, Some(values)),
            Err(hint) => Reply::Unclear(hint),
        },
        "y" | "yes" if rest.is_empty() => Reply::Allow(Scope::Once, None),
        "s" if rest.is_empty() && offered(Scope::Session) => Reply::Allow(Scope::Session, None),
        "a" if rest.is_empty() && offered(Scope::Workspace) => {
            Reply::Allow(Scope::Workspace, None)
        }
        "s" | "a" if rest.is_empty() => Reply::Unclear(
            "no single rule can say what this call does, so only a yes for this call (y) is offered".into(),
        ),
        "n" | "no" => Reply::Deny((!rest.is_empty()).then(|| rest.to_string())),
        _ => Reply::Unclear(format!(
            "answer {} (n NOTE tells the model why)",
            keys(request).join(", ")
        )),
    }
}

/// `FIELD=VALUE …` as a form's values: a value that reads as JSON (a
/// number, true, false, a quoted string) is that, any other is text.
fn form_values(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut values = serde_json::Map::new();
    for pair in text.split_whitespace() {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!(
                "'{}' is not FIELD=VALUE: answer y to accept the defaults, y FIELD=VALUE … to give values, or n to decline",
                one_line(pair, 100)
            ));
        };
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        values.insert(name.to_string(), value);
    }
    Ok(values)
}

/// The answers `request` takes: y, then s and a where a rule can say what
/// the call does, then n.
fn keys(request: &PermissionRequest) -> Vec<&'static str> {
    let offered = |scope: Scope| request.scopes.iter().any(|o| o.scope == scope);
    let mut keys = vec!["y"];
    if offered(Scope::Session) {
        keys.push("s");
    }
    if offered(Scope::Workspace) {
        keys.push("a");
    }
    keys.push("n");
    keys
}

/// The prompt for `request`: `answer [y/s/a/n]: `, or `answer [y/n]: `
/// where only this call can be allowed.
fn prompt(request: &PermissionRequest) -> String {
    match &request.form {
        Some(form) => format!("answer {}'s form [y/n]: ", one_line(&form.asker, 100)),
        None => format!("answer [{}]: ", keys(request).join("/")),
    }
}

/// Longest command or argument text shown (on one line).
const MAX_SHOWN_CHARS: usize = 2_000;
/// Most diff lines shown.
const MAX_DIFF_LINES: usize = 200;

/// `request` as the terminal shows it. Everything the model controls is
/// on one line with its line breaks escaped and cut to a length, so a
/// command cannot push itself off the screen or draw a fake request; the
/// diff (many lines by nature) comes first, each line marked and cut,
/// and the command and the answers last, where the operator reads them.
fn render(request: &PermissionRequest, workspace: &Path) -> String {
    let mut out = format!(
        "\n── approval needed: {} (asked by {}; runs under the {} sandbox)\n",
        one_line(&request.tool, 200),
        one_line(&request.from, 200),
        one_line(&request.sandbox, 200)
    );
    if let Some(diff) = &request.diff {
        out.push_str("   change it would make:\n");
        let lines: Vec<&str> = diff.lines().collect();
        for line in lines.iter().take(MAX_DIFF_LINES) {
            out.push_str(&format!("   │ {}\n", one_line(line, 500)));
        }
        if lines.len() > MAX_DIFF_LINES {
            out.push_str(&format!(
                "   │ … {} more lines of diff not shown\n",
                lines.len() - MAX_DIFF_LINES
            ));
        }
    }
    out.push_str(&format!("   why: {}\n", one_line(&request.reason, 500)));
    if let Some(form) = &request.form {
        // The server's words, each line on one line of its own.
        for line in form.preview().lines() {
            out.push_str(&format!("   │ {}\n", one_line(line, 1_000)));
        }
        out.push_str("   y  accept with the defaults shown (y FIELD=VALUE … to give values)\n");
        out.push_str("   n  decline");
        return out;
    }
    if request.network {
        out.push_str("   network: this call asks for the network; a yes gives it\n");
    }
    match request.arguments["command"].as_str() {
        Some(command) if request.tool == crate::approvals::SHELL_TOOL => {
            let lines = command.lines().count();
            let note = if lines > 1 {
                format!(" ({lines} lines, shown on one)")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "   command{note}: {}\n",
                one_line(command, MAX_SHOWN_CHARS)
            ));
        }
        _ => out.push_str(&format!(
            "   arguments: {}\n",
            one_line(&request.arguments.to_string(), MAX_SHOWN_CHARS)
        )),
    }
    for offer in &request.scopes {
        let key = match offer.scope {
            Scope::Once => "y",
            Scope::Session => "s",
            Scope::Workspace => "a",
        };
        out.push_str(&format!(
            "   {key}  allow {}\n",
            one_line(&offer.allows, 1_000)
        ));
        if offer.scope == Scope::Workspace
            && let Some(flag) = &offer.rule
            && let Some(rule) = crate::config::remembered::rule_text(flag, workspace)
        {
            for line in rule.lines() {
                out.push_str(&format!("        {}\n", one_line(line, 1_000)));
            }
        }
    }
    out.push_str("   n  deny (n NOTE: deny and tell the model why)");
    out
}

/// Show `request` above the prompt the operator may be typing at; it is
/// asked (with a prompt of its own) once that prompt is sent, so a line
/// typed before the request existed never answers it.
pub fn announce(request: &PermissionRequest, input: &LineInput, workspace: &Path) {
    let mut shown = super::view::style::Styled::new(false);
    shown.text(&format!(
        "{}\n   (press Enter to answer it; a message you are typing is sent after the answer)\n",
        render(request, workspace)
    ));
    input.print_above(&shown);
}

/// Ask the operator about every request waiting in `queue`, oldest first,
/// reading answers from `lines` (the terminal). Returns when none waits.
pub async fn answer_waiting(queue: &Arc<PermissionQueue>, input: &mut LineInput, workspace: &Path) {
    while let Some(request) = queue.pending().into_iter().next() {
        errln!("{}", render(&request, workspace));
        loop {
            let answer = read_answer(&request, input).await;
            match queue.answer(&request.id, answer) {
                // Values that do not fit the form: it still waits.
                Err(AnswerError::Form { why, .. }) => errln!("   {why}"),
                Err(AnswerError::Unknown(_)) => {
                    errln!(
                        "   (that request is no longer waiting: it timed out or its call was interrupted)"
                    );
                    break;
                }
                Ok(()) => break,
            }
        }
    }
}

/// The operator's answer to `request`, asked until it is one.
async fn read_answer(request: &PermissionRequest, input: &mut LineInput) -> Answer {
    loop {
        let set_aside = super::tty_mode::discard_typeahead();
        if set_aside > 0 {
            errln!("   ({set_aside} bytes typed before this question were set aside)");
        }
        let line = match input.read_answer(&prompt(request)).await {
            Ok(Line::Text(line)) => line,
            Ok(Line::Interrupted) => {
                errln!("\n(Ctrl-C: denied)");
                return deny(Some("the operator pressed Ctrl-C".into()));
            }
            Ok(Line::End) | Err(_) => {
                errln!("(end of input: denied)");
                return deny(None);
            }
        };
        match read_reply(&line, request) {
            Reply::Allow(scope, content) => {
                return Answer {
                    allow: true,
                    scope,
                    note: None,
                    by: "chat".into(),
                    at: crate::time::now_rfc3339(),
                    content,
                };
            }
            Reply::Deny(note) => return deny(note),
            Reply::Unclear(hint) => errln!("   {hint}"),
        }
    }
}

fn deny(note: Option<String>) -> Answer {
    Answer {
        allow: false,
        scope: Scope::Once,
        note,
        by: "chat".into(),
        at: crate::time::now_rfc3339(),
        content: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::ScopeOffer;

    fn request(scopes: &[Scope]) -> PermissionRequest {
        PermissionRequest {
            id: "p1".into(),
            session_id: "s".into(),
            root_session_id: "s".into(),
            call_id: "c".into(),
            tool: "shell".into(),
            arguments: serde_json::json!({"command": "make"}),
            from: "agent".into(),
            preview: "make".into(),
            diff: None,
            sandbox: "workspace-write".into(),
            network: false,
            reason: "ask by mode on-risk".into(),
            scopes: scopes
                .iter()
                .map(|&scope| ScopeOffer {
                    scope,
                    allows: String::new(),
                    rule: None,
                })
                .collect(),
            form: None,
        }
    }

    #[test]
    fn a_command_cannot_draw_a_fake_request_or_hide_below_the_screen() {
        let mut fake = request(&[Scope::Once]);
        let filler = "\n".repeat(60);
        fake.arguments = serde_json::json!({
            "command": format!("echo PWNED > pwned{filler}── approval needed: shell\n   command: git status --short")
        });
        let shown = render(&fake, Path::new("/w"));
        assert_eq!(
            shown.matches("── approval needed").count(),
            2,
            "the fake header is only inside the escaped command: {shown}"
        );
        assert_eq!(
            shown
                .lines()
                .filter(|l| l.starts_with("── approval needed"))
                .count(),
            1,
            "{shown}"
        );
        let command = shown.lines().find(|l| l.contains("command")).unwrap();
        assert!(
            command.starts_with("   command (62 lines, shown on one): echo PWNED > pwned\\n\\n"),
            "{command}"
        );
        assert!(shown.lines().count() < 10, "{shown}");
        let long = "x".repeat(5_000);
        assert!(one_line(&long, 10).ends_with("… (4990 more characters)"));
    }

    #[test]
    fn a_call_that_asks_for_the_network_says_so_before_the_yes() {
        let mut asking = request(&[Scope::Once]);
        assert!(!render(&asking, Path::new("/w")).contains("network"));
        asking.network = true;
        let shown = render(&asking, Path::new("/w"));
        assert!(
            shown.contains("network: this call asks for the network; a yes gives it"),
            "{shown}"
        );
    }

    #[test]
    fn answers_are_read_strictly() {
        let all = request(&[Scope::Once, Scope::Session, Scope::Workspace]);
        assert_eq!(read_reply("y", &all), Reply::Allow(Scope::Once, None));
        assert_eq!(read_reply(" S ", &all), Reply::Allow(Scope::Session, None));
        assert_eq!(read_reply("a", &all), Reply::Allow(Scope::Workspace, None));
        assert_eq!(read_reply("n", &all), Reply::Deny(None));
        assert_eq!(
            read_reply("n use the Makefile target", &all),
            Reply::Deny(Some("use the Makefile target".into()))
        );
        assert_eq!(
            read_reply("no: later", &all),
            Reply::Deny(Some("later".into()))
        );
        for unclear in ["", "yes please", "ok", "always"] {
            assert!(
                matches!(read_reply(unclear, &all), Reply::Unclear(_)),
                "{unclear}"
            );
        }
        // A scope that was not offered is not taken.
        let once = request(&[Scope::Once]);
        assert!(matches!(read_reply("a", &once), Reply::Unclear(_)));
        assert!(matches!(read_reply("s", &once), Reply::Unclear(_)));
    }
}

//! What `chat` works with between inputs, and the status line it draws
//! after each turn.

use std::sync::Arc;

use super::line_input::LineInput;
use super::render::Renderer;
use super::view::style::{Look, Style, Styled, cut_to, terminal_width};
use crate::agent::{AgentKit, LivePlugins, Session};

/// What the chat loop works with.
pub(super) struct Chat {
    pub kit: AgentKit,
    pub session: Arc<Session>,
    /// The same session, for what reports from other threads (the plugin
    /// watcher); `/resume` sets both.
    pub shown: super::agent_cmd::ShownSession,
    pub renderer: Renderer,
    pub input: LineInput,
    pub asks: Arc<crate::approvals::PermissionQueue>,
    pub live: Arc<LivePlugins>,
    pub look: Look,
    pub json: bool,
}

impl Chat {
    /// One dim line after a turn: model, context use, the turn's tokens,
    /// running jobs.
    pub(super) fn status_line(&self) {
        if let Some(line) = self.status() {
            super::terminal::write_styled(&line, super::terminal::Sink::Err);
        }
    }

    /// The status line (none for `--json`).
    pub(super) fn status(&self) -> Option<Styled> {
        if self.json {
            return None;
        }
        let session = &self.session;
        let window = session.context_window().max(1);
        let used = session.estimated_tokens();
        let mut parts = vec![
            session.model(),
            format!(
                "context ~{}% of {}{}",
                (used * 100 / window).min(999),
                thousands(window),
                // A window a refusal taught is worth saying.
                if session.window_facts().source == crate::agent::window::WindowSource::Learned {
                    " (learned)"
                } else {
                    ""
                }
            ),
        ];
        if let Some(usage) = self.renderer.last_usage()
            && usage.input_tokens + usage.output_tokens > 0
        {
            let mut tokens = format!(
                "last turn ↑{} ↓{} tokens",
                thousands(usage.input_tokens),
                thousands(usage.output_tokens)
            );
            if usage.cached_tokens > 0 {
                tokens.push_str(&format!(" ({} cached)", thousands(usage.cached_tokens)));
            }
            parts.push(tokens);
        }
        if let Some(spend) = session.spend_report() {
            parts.push(spent_of_caps(&spend));
        }
        let running = self.kit.jobs.registry.list(session.id(), None).len();
        if running > 0 {
            parts.push(format!(
                "{running} background job{} running",
                if running == 1 { "" } else { "s" }
            ));
        }
        let mut text = format!("── {}", parts.join(" · "));
        if self.look.color
            && let Some(width) = terminal_width()
        {
            // One row, measured now (the terminal may have been resized).
            text = cut_to(&text, width.saturating_sub(1));
        }
        let mut line = Styled::new(self.look.color);
        line.styled(Style::Dim, &text).text("\n");
        Some(line)
    }
}

/// The session's spend against each cap it has: `spent 12.3k/50.0k
/// tokens, $0.41/$5.00, 3m/30m`.
fn spent_of_caps(spend: &crate::llm::spend::SpendReport) -> String {
    let mut parts = Vec::new();
    if let Some(max) = spend.max_tokens {
        parts.push(format!(
            "{}/{} tokens",
            thousands(spend.tokens),
            thousands(max)
        ));
    }
    if let Some(max) = spend.max_cost_usd {
        parts.push(format!("${:.2}/${max:.2}", spend.cost_usd));
    }
    if let Some(max) = spend.max_duration_secs {
        parts.push(if max < 120.0 {
            format!("{}s/{}s", spend.elapsed_secs as u64, max as u64)
        } else {
            format!(
                "{}m/{}m",
                (spend.elapsed_secs / 60.0) as u64,
                (max / 60.0).ceil() as u64
            )
        });
    }
    format!("spent {}", parts.join(", "))
}

/// `12.3k`, `1.2M`.
fn thousands(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

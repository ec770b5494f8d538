//! Live output of running programs (`TOOL_CALL_OUTPUT_DELTA`): on a
//! terminal, a bounded block per running call — a spinner, the tool, the
//! time so far and its last lines — redrawn in place and collapsed to its
//! first and last lines when the call ends. Plain output gets the lines
//! as they come, up to a limit.

use std::collections::VecDeque;
use std::time::Instant;

use super::style::{Look, Style, Styled, cut_to};

/// Lines of a running call shown in its block.
const TAIL_LINES: usize = 6;
/// Lines kept from the start, for the collapsed view.
const HEAD_LINES: usize = 2;
/// Lines printed as they come when the output is plain.
const PLAIN_LINES: usize = 40;
/// Most bytes kept of a line not yet ended (a progress bar redrawn with
/// `\r` for minutes never ends its line).
const MAX_PARTIAL: usize = 4096;
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

struct Block {
    call_id: String,
    name: String,
    started: Instant,
    head: Vec<String>,
    tail: VecDeque<String>,
    partial: String,
    lines: usize,
}

impl Block {
    fn add_line(&mut self, line: String) {
        self.lines += 1;
        if self.head.len() < HEAD_LINES {
            self.head.push(line.clone());
        }
        self.tail.push_back(line);
        if self.tail.len() > TAIL_LINES {
            self.tail.pop_front();
        }
    }
}

/// The live blocks of the calls running now.
pub struct LiveArea {
    look: Look,
    blocks: Vec<Block>,
    /// Rows drawn last time (to erase before drawing again).
    drawn: usize,
    frame: usize,
}

impl LiveArea {
    pub fn new(look: Look) -> LiveArea {
        LiveArea {
            look,
            blocks: Vec::new(),
            drawn: 0,
            frame: 0,
        }
    }

    /// The terminal changed (its width, after a resize).
    pub fn set_look(&mut self, look: Look) {
        self.look = look;
    }

    /// Whether a block is showing (the renderer then ticks).
    pub fn active(&self) -> bool {
        self.look.live && !self.blocks.is_empty()
    }

    /// A call started.
    pub fn start(&mut self, call_id: &str, name: &str) {
        self.blocks.push(Block {
            call_id: call_id.into(),
            name: name.into(),
            started: Instant::now(),
            head: Vec::new(),
            tail: VecDeque::new(),
            partial: String::new(),
            lines: 0,
        });
    }

    /// Output of a running call; what to print now (plain output only).
    pub fn output(&mut self, call_id: &str, text: &str) -> Styled {
        let mut out = Styled::new(self.look.color);
        let live = self.look.live;
        let Some(block) = self.blocks.iter_mut().find(|b| b.call_id == call_id) else {
            return out;
        };
        block.partial.push_str(text);
        while let Some(end) = block.partial.find('\n') {
            let line: String = block.partial.drain(..=end).collect();
            let line = last_frame(&line).to_string();
            if !live && block.lines < PLAIN_LINES {
                out.styled(Style::Dim, "  │ ").text(&line).text("\n");
            } else if !live && block.lines == PLAIN_LINES {
                out.styled(Style::Dim, "  │ … (more output)\n");
            }
            block.add_line(line);
        }
        if block.partial.len() > MAX_PARTIAL {
            let kept = last_frame(&block.partial);
            let kept = match kept.len() > MAX_PARTIAL / 2 {
                true => {
                    let mut from = kept.len() - MAX_PARTIAL / 2;
                    while !kept.is_char_boundary(from) {
                        from += 1;
                    }
                    format!("…{}", &kept[from..])
                }
                false => kept.to_string(),
            };
            block.partial = kept;
        }
        out
    }

    /// Erase what was drawn (before anything else prints).
    pub fn erase(&mut self) -> Styled {
        let mut out = Styled::new(self.look.color);
        out.erase_rows_above(self.drawn);
        self.drawn = 0;
        out
    }

    /// Draw the blocks again (a tick of the spinner or new output).
    pub fn redraw(&mut self) -> Styled {
        let mut out = self.erase();
        if !self.active() {
            return out;
        }
        self.frame = (self.frame + 1) % SPINNER.len();
        let columns = self.look.width.unwrap_or(80).saturating_sub(4).max(20);
        for block in &self.blocks {
            let secs = block.started.elapsed().as_secs_f64();
            out.styled(Style::Cyan, SPINNER[self.frame])
                .text(" ")
                .styled(Style::Bold, &cut_to(&block.name, columns / 2))
                .styled(
                    Style::Dim,
                    &format!(" · {secs:.1}s · {} lines", block.lines),
                )
                .text("\n");
            self.drawn += 1;
            let partial = (!block.partial.is_empty()).then(|| last_frame(&block.partial));
            let shown: Vec<&str> = block
                .tail
                .iter()
                .map(String::as_str)
                .chain(partial)
                .collect();
            let skip = shown.len().saturating_sub(TAIL_LINES);
            for line in &shown[skip..] {
                out.styled(Style::Dim, "  │ ")
                    .styled(Style::Dim, &cut_to(line, columns))
                    .text("\n");
                self.drawn += 1;
            }
        }
        out
    }

    /// A call ended: its block erased and, if it printed anything, shown
    /// collapsed to its first and last lines.
    pub fn end(&mut self, call_id: &str) -> Styled {
        let mut out = self.erase();
        let Some(at) = self.blocks.iter().position(|b| b.call_id == call_id) else {
            return out;
        };
        let mut block = self.blocks.remove(at);
        if !block.partial.is_empty() {
            let line = last_frame(&std::mem::take(&mut block.partial)).to_string();
            if !self.look.live && block.lines < PLAIN_LINES {
                out.styled(Style::Dim, "  │ ").text(&line).text("\n");
            }
            block.add_line(line);
        }
        if !self.look.live || block.lines == 0 {
            return out;
        }
        let columns = self.look.width.unwrap_or(80).saturating_sub(4).max(20);
        let line = |out: &mut Styled, text: &str| {
            out.styled(Style::Dim, "  │ ")
                .styled(Style::Dim, &cut_to(text, columns))
                .text("\n");
        };
        if block.lines <= block.tail.len() {
            for text in &block.tail {
                line(&mut out, text);
            }
        } else {
            for text in &block.head {
                line(&mut out, text);
            }
            out.styled(
                Style::Dim,
                &format!("  │ … {} more lines\n", block.lines - HEAD_LINES - 3),
            );
            let skip = block.tail.len().saturating_sub(3);
            for text in block.tail.iter().skip(skip) {
                line(&mut out, text);
            }
        }
        out
    }
}

/// A line as a terminal would leave it: what follows its last carriage
/// return (a progress bar redraws itself with `\r`).
pub fn last_frame(line: &str) -> &str {
    let line = line.trim_end_matches(['\n', '\r']);
    line.rsplit('\r').next().unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: Look = Look {
        color: true,
        width: Some(60),
        live: true,
    };

    #[test]
    fn a_running_call_redraws_in_place_within_its_bound() {
        let mut area = LiveArea::new(LIVE);
        area.start("c1", "shell");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        assert!(
            area.output("c1", &text).is_empty(),
            "live: drawn on the tick"
        );
        let first = area.redraw();
        let shown = first.as_terminal_bytes();
        assert!(
            shown.contains("shell") && shown.contains("100 lines"),
            "{shown}"
        );
        assert!(shown.contains("line 99") && !shown.contains("line 93\n"));
        assert_eq!(area.drawn, 1 + TAIL_LINES);
        let again = area.redraw();
        assert!(again.as_terminal_bytes().starts_with("\r\x1b[7A\x1b[J"));
        let end = area.end("c1");
        let end = end.as_terminal_bytes();
        assert!(end.starts_with("\r\x1b[7A\x1b[J"), "erased first");
        assert!(end.contains("line 0") && end.contains("line 1") && end.contains("line 99"));
        assert!(end.contains("… 95 more lines") && !end.contains("line 50"));
        assert!(!area.active());
    }

    #[test]
    fn a_progress_bar_shows_its_latest_frame_and_stays_bounded() {
        let mut area = LiveArea::new(LIVE);
        area.start("c1", "pip");
        for pct in (0..=100).step_by(10) {
            area.output("c1", &format!("\r[{}] {pct}%", "#".repeat(pct / 10)));
        }
        let frame = area.redraw();
        let frame = frame.as_terminal_bytes();
        assert!(frame.contains("100%") && !frame.contains("90%"), "{frame}");
        // Minutes of frames without a line break stay bounded.
        for _ in 0..20_000 {
            area.output("c1", "\r[####      ] 40%");
        }
        assert!(area.blocks[0].partial.len() <= MAX_PARTIAL);
        area.output("c1", "\r done\r\n");
        let end = area.end("c1");
        let end = end.as_terminal_bytes();
        assert!(end.contains(" done") && !end.contains("40%"), "{end}");
    }

    #[test]
    fn plain_output_prints_lines_as_they_come_up_to_a_limit() {
        let mut area = LiveArea::new(Look::PLAIN);
        area.start("c1", "shell");
        assert_eq!(area.output("c1", "a\nb").as_terminal_bytes(), "  │ a\n");
        assert_eq!(area.end("c1").as_terminal_bytes(), "  │ b\n");
        area.start("c2", "shell");
        let many: String = (0..100).map(|i| format!("{i}\n")).collect();
        let out = area.output("c2", &many);
        assert_eq!(out.as_terminal_bytes().lines().count(), PLAIN_LINES + 1);
        assert!(area.redraw().is_empty(), "no cursor movement when plain");
    }
}

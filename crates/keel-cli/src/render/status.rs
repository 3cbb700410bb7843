//! The live area at the foot of the terminal, redrawn in place: the plan's checklist
//! while a turn runs (see [`super::plan`]), then the status line (the spinner and what
//! it waits for, the last line a command printed, the line being typed). Other output
//! clears the area, prints above it, and the next tick draws it again below.

use std::io::Write;

use super::format::{clip, clip_columns, duration, thousands};
use super::{SPINNER, State, Terminal, plan, safe, width};

/// How many rows the terminal has (24 when it cannot be told).
fn height() -> usize {
    crossterm::terminal::size().map(|(_, h)| usize::from(h)).ok().filter(|h| *h >= 4).unwrap_or(24)
}

/// The text that takes the cursor from the status line of an area with `above` lines
/// over it back to the area's first column, ready to write over it.
fn back_to_top(above: usize) -> String {
    if above == 0 { "\r".to_owned() } else { format!("\r\x1b[{above}A") }
}

/// The text that draws `lines` (the last is the status line) over an area drawn before
/// with `above` lines over its status line: each line overwritten where it was, what is
/// left of a taller area below erased.
fn redraw(above: usize, lines: &[String]) -> String {
    let mut text = back_to_top(above);
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            text.push_str("\r\n");
        }
        text.push_str("\x1b[2K");
        text.push_str(line);
    }
    text.push_str("\x1b[J");
    text
}

impl Terminal {
    /// Erases the live area, leaving the cursor where it began.
    pub(super) fn clear(&self, state: &mut State) {
        if state.drawn {
            // `ESC[2K` as well as `ESC[J`: a reader of the output that knows only line
            // erasing (a log of the session, a simple terminal) sees the line cleared too.
            err!("{}\x1b[2K\x1b[J", back_to_top(state.drawn_above));
            state.drawn = false;
            state.drawn_above = 0;
        }
    }

    /// Draws the live area: the plan (while a turn runs), then the status line.
    pub(super) fn draw(&self, state: &mut State) {
        if state.text_open {
            return;
        }
        let lines = self.area(state);
        if lines.is_empty() {
            self.clear(state);
            return;
        }
        err!("{}", redraw(if state.drawn { state.drawn_above } else { 0 }, &lines));
        let _ = std::io::stderr().flush();
        state.drawn = true;
        state.drawn_above = lines.len() - 1;
    }

    /// The live area's lines: the plan's (unless a question keeps it off the screen),
    /// then the status line, which is there whenever the plan is (empty if need be);
    /// none when there is neither.
    fn area(&self, state: &State) -> Vec<String> {
        let status = self.status_line(state);
        let plan = if state.plan_hidden { &[][..] } else { &state.plan[..] };
        if status.is_none() && plan.is_empty() {
            return Vec::new();
        }
        let mut lines = if plan.is_empty() {
            Vec::new()
        } else {
            plan::footer(plan, width(), height() / 2, |code, text| self.paint(code, text))
        };
        lines.push(status.unwrap_or_default());
        lines
    }

    /// The status line: the spinner, then the line being typed (its end, if long);
    /// `None` when neither is there.
    fn status_line(&self, state: &State) -> Option<String> {
        let status = match &state.spinning {
            Some((label, since)) => {
                let mut text = format!("{} {label} {}", SPINNER[state.frame], duration(since.elapsed()));
                if state.streamed_chars > 0 {
                    text.push_str(&format!(" · {} chars", thousands(state.streamed_chars as u64)));
                }
                if let Some(live) = state.live.as_deref().map(safe::plain) {
                    // Room is kept for the line being typed.
                    let room = width()
                        .saturating_sub(text.chars().count() + 5 + state.typed.chars().count().min(30));
                    if room >= 10 {
                        text.push_str(&format!(" │ {}", clip(&live, room)));
                    }
                }
                text
            }
            None => String::new(),
        };
        if status.is_empty() && state.typed.is_empty() {
            return None;
        }
        // Never wider than the terminal, with room kept for the line being typed: a
        // wrapped status line would put the redraw of the plan above it one row off, and
        // leave the plan's first line behind on every tick.
        let keep = match state.typed.chars().count() {
            0 => 2,
            typed => 7 + typed.min(30),
        };
        let status = clip_columns(&safe::plain(&status), width().saturating_sub(keep));
        let room = width().saturating_sub(super::format::columns(&status) + 5).max(10);
        let typed = safe::visible(&state.typed);
        let count = typed.chars().count();
        let typed: String = if count > room {
            format!("…{}", typed.chars().skip(count + 1 - room).collect::<String>())
        } else {
            typed
        };
        let has_status = !status.is_empty();
        let status = self.paint("2", &status);
        Some(match (!has_status, state.typed.is_empty()) {
            (_, true) => status,
            (true, false) => format!("› {typed}"),
            (false, false) => format!("{status}  › {typed}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_area_is_drawn_over_itself_and_what_a_taller_one_left_is_erased() {
        let lines = ["  plan (0 of 1 done)".to_owned(), "    · Read".to_owned(), "⠋ waiting".to_owned()];
        assert_eq!(
            redraw(0, &lines),
            "\r\x1b[2K  plan (0 of 1 done)\r\n\x1b[2K    · Read\r\n\x1b[2K⠋ waiting\x1b[J"
        );
        // Drawn before with three lines over the status line: up three, then over them.
        assert_eq!(redraw(3, &lines[2..]), "\r\x1b[3A\x1b[2K⠋ waiting\x1b[J");
        assert_eq!(back_to_top(0), "\r");
    }

    #[test]
    fn the_plan_is_in_the_area_while_the_turn_runs_but_not_while_a_question_waits() {
        let terminal = Terminal::new(false);
        let steps =
            vec![keel_session::PlanStep { step: "Read".into(), status: keel_session::PlanStatus::Pending }];
        terminal.with(|state| state.plan = steps);
        terminal.spin(Some("waiting".into()));
        let lines = terminal.with(|state| terminal.area(state));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(&lines[..2], ["  plan (0 of 1 done)", "    · Read"]);
        // A question: the spinner stops and the plan gives way until it starts again.
        terminal.stop_spinner();
        assert_eq!(terminal.with(|state| terminal.area(state)), Vec::<String>::new());
        terminal.spin(Some("running".into()));
        assert_eq!(terminal.with(|state| terminal.area(state)).len(), 3);
    }

    #[test]
    fn the_status_line_is_never_wider_than_the_terminal() {
        let terminal = Terminal::new(false);
        let long = format!("shell {}", "word ".repeat(60));
        let line = terminal.with(|state| {
            state.spinning = Some((long.clone(), std::time::Instant::now()));
            state.typed = "a reply being typed".into();
            terminal.status_line(state)
        });
        let line = line.unwrap_or_default();
        assert!(super::super::format::columns(&line) < width(), "{line}");
        assert!(line.ends_with("  › a reply being typed"), "{line}");
    }
}

//! The agent's plan as a checklist, the step in progress bold, finished ones dimmed. On a
//! terminal it stays at the foot of the screen while a turn runs, above the status line,
//! and is updated in place whenever a call sets it ([`footer`]); when the turn ends it is
//! printed once, as it stands ([`checklist`]). Into a pipe or file every plan is printed.

use keel_session::{PlanStatus, PlanStep};

use super::format::clip_columns;

/// The checklist for `steps`, one line each, styled by `paint` (an SGR code and the
/// text; the terminal's own painter, which leaves text plain without colors).
pub fn checklist(steps: &[PlanStep], paint: impl Fn(&str, &str) -> String) -> Vec<String> {
    let mut lines = vec![format!("  {}", heading(steps))];
    lines.extend(steps.iter().map(|step| step_line(step, None, &paint)));
    lines
}

/// The checklist as the foot of a terminal `width` columns wide shows it: every line
/// clipped to fit (a wrapped line would break the redraw in place), at most `rows` lines;
/// a longer plan shows the steps from the one before the first unfinished, and says how
/// many more there are.
pub fn footer(
    steps: &[PlanStep],
    width: usize,
    rows: usize,
    paint: impl Fn(&str, &str) -> String,
) -> Vec<String> {
    let room = Some(width.saturating_sub(8).max(10));
    let rows = rows.max(3);
    // `clip` makes one line of its text, leading spaces gone: the indent goes after.
    let mut lines = vec![format!("  {}", clip_columns(&heading(steps), width.saturating_sub(4).max(10)))];
    if steps.len() < rows {
        lines.extend(steps.iter().map(|step| step_line(step, room, &paint)));
        return lines;
    }
    let shown = rows - 2;
    let unfinished = steps.iter().position(|s| s.status != PlanStatus::Completed).unwrap_or(steps.len());
    let first = unfinished.saturating_sub(1).min(steps.len() - shown);
    lines.extend(steps[first..first + shown].iter().map(|step| step_line(step, room, &paint)));
    let (before, after) = (first, steps.len() - first - shown);
    let more = match (before, after) {
        (0, after) => format!("    … {after} more"),
        (before, 0) => format!("    … {before} done before"),
        (before, after) => format!("    … {before} done before, {after} more"),
    };
    lines.push(paint("2", &more));
    lines
}

fn heading(steps: &[PlanStep]) -> String {
    let done = steps.iter().filter(|s| s.status == PlanStatus::Completed).count();
    format!("plan ({done} of {} done)", steps.len())
}

/// One step's line, its text on one line (clipped to `room` columns when given).
fn step_line(step: &PlanStep, room: Option<usize>, paint: &impl Fn(&str, &str) -> String) -> String {
    let text = super::safe::plain(&step.step).replace(['\n', '\t'], " ");
    let text = match room {
        Some(room) => clip_columns(&text, room),
        None => text,
    };
    let (mark, style) = match step.status {
        PlanStatus::Completed => ("✓", "2"),
        PlanStatus::InProgress => ("▸", "1"),
        PlanStatus::Pending => ("·", ""),
    };
    let text = if style.is_empty() { text } else { paint(style, &text) };
    format!("    {mark} {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str, status: PlanStatus) -> PlanStep {
        PlanStep { step: text.into(), status }
    }

    fn plain(_: &str, text: &str) -> String {
        text.to_owned()
    }

    #[test]
    fn a_plan_is_a_checklist_with_its_progress() {
        let steps = [
            step("Read the parser", PlanStatus::Completed),
            step("Fix it", PlanStatus::InProgress),
            step("Run\x1b[2J the tests", PlanStatus::Pending),
        ];
        let colored = |code: &str, text: &str| format!("\x1b[{code}m{text}\x1b[0m");
        assert_eq!(
            checklist(&steps, plain),
            ["  plan (1 of 3 done)", "    ✓ Read the parser", "    ▸ Fix it", "    · Run\\e[2J the tests"]
        );
        assert_eq!(checklist(&steps, colored)[2], "    ▸ \x1b[1mFix it\x1b[0m");
    }

    #[test]
    fn the_foot_of_the_screen_gets_lines_that_fit_and_a_window_on_a_long_plan() {
        let short =
            [step("Read", PlanStatus::Completed), step(&"long words ".repeat(20), PlanStatus::Pending)];
        let lines = footer(&short, 40, 10, plain);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2], "    · long words long words long word…");
        assert!(lines.iter().all(|line| line.chars().count() < 40), "{lines:#?}");
        // Wide characters take two columns each: the line still fits.
        let wide = [step(&"修复解析器中的错误".repeat(5), PlanStatus::InProgress)];
        let lines = footer(&wide, 40, 10, plain);
        assert_eq!(lines[1], format!("    ▸ {}…", &"修复解析器中的错误".repeat(2)[..15 * 3]));
        assert!(lines.iter().all(|line| super::super::format::columns(line) < 40), "{lines:#?}");

        let long: Vec<PlanStep> = (1..=9)
            .map(|n| {
                step(&format!("step {n}"), if n <= 5 { PlanStatus::Completed } else { PlanStatus::Pending })
            })
            .collect();
        assert_eq!(
            footer(&long, 80, 6, plain),
            [
                "  plan (5 of 9 done)",
                "    ✓ step 5",
                "    · step 6",
                "    · step 7",
                "    · step 8",
                "    … 4 done before, 1 more"
            ]
        );
        assert_eq!(
            footer(&long[..4], 80, 4, plain),
            ["  plan (4 of 4 done)", "    ✓ step 3", "    ✓ step 4", "    … 2 done before"]
        );
        let fresh: Vec<PlanStep> = (1..=5).map(|n| step(&format!("step {n}"), PlanStatus::Pending)).collect();
        assert_eq!(
            footer(&fresh, 80, 4, plain),
            ["  plan (0 of 5 done)", "    · step 1", "    · step 2", "    … 3 more"]
        );
    }
}

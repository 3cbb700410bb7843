//! The agent's plan as a checklist: shown whenever a call sets it (its effect carries
//! the whole plan), the step in progress bold, finished ones dimmed.

use keel_session::{PlanStatus, PlanStep};

/// The checklist for `steps`, one line each, styled by `paint` (an SGR code and the
/// text; the terminal's own painter, which leaves text plain without colors).
pub fn checklist(steps: &[PlanStep], paint: impl Fn(&str, &str) -> String) -> Vec<String> {
    let done = steps.iter().filter(|s| s.status == PlanStatus::Completed).count();
    let mut lines = vec![format!("  plan ({done} of {} done)", steps.len())];
    for step in steps {
        let text = super::safe::plain(&step.step).replace(['\n', '\t'], " ");
        let (mark, style) = match step.status {
            PlanStatus::Completed => ("✓", "2"),
            PlanStatus::InProgress => ("▸", "1"),
            PlanStatus::Pending => ("·", ""),
        };
        let text = if style.is_empty() { text } else { paint(style, &text) };
        lines.push(format!("    {mark} {text}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str, status: PlanStatus) -> PlanStep {
        PlanStep { step: text.into(), status }
    }

    #[test]
    fn a_plan_is_a_checklist_with_its_progress() {
        let steps = [
            step("Read the parser", PlanStatus::Completed),
            step("Fix it", PlanStatus::InProgress),
            step("Run\x1b[2J the tests", PlanStatus::Pending),
        ];
        let plain = |_: &str, text: &str| text.to_owned();
        let colored = |code: &str, text: &str| format!("\x1b[{code}m{text}\x1b[0m");
        assert_eq!(
            checklist(&steps, plain),
            ["  plan (1 of 3 done)", "    ✓ Read the parser", "    ▸ Fix it", "    · Run\\e[2J the tests"]
        );
        assert_eq!(checklist(&steps, colored)[2], "    ▸ \x1b[1mFix it\x1b[0m");
    }
}

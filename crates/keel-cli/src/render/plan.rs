//! The agent's plan as a checklist: shown whenever a call sets it (its effect carries
//! the whole plan), the step in progress bold, finished ones dimmed.

use keel_session::{PlanStatus, PlanStep};

/// The checklist for `steps`, one line each, with colors when `color`.
pub fn checklist(steps: &[PlanStep], color: bool) -> Vec<String> {
    let done = steps.iter().filter(|s| s.status == PlanStatus::Completed).count();
    let mut lines = vec![format!("  plan ({done} of {} done)", steps.len())];
    for step in steps {
        let text = super::safe::plain(&step.step).replace(['\n', '\t'], " ");
        let (mark, style) = match step.status {
            PlanStatus::Completed => ("✓", "2"),
            PlanStatus::InProgress => ("▸", "1"),
            PlanStatus::Pending => ("·", ""),
        };
        lines.push(match (color, style) {
            (true, style) if !style.is_empty() => format!("    {mark} \x1b[{style}m{text}\x1b[0m"),
            _ => format!("    {mark} {text}"),
        });
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
        assert_eq!(
            checklist(&steps, false),
            ["  plan (1 of 3 done)", "    ✓ Read the parser", "    ▸ Fix it", "    · Run\\e[2J the tests"]
        );
        assert_eq!(checklist(&steps, true)[2], "    ▸ \x1b[1mFix it\x1b[0m");
    }
}

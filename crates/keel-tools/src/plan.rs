//! `update_plan`: the plan the agent keeps for a task of several steps, each pending, in
//! progress or completed. The call changes nothing in the project; its effect carries
//! the whole plan ([`Effect::Plans`]), which the terminal shows as a checklist and
//! compaction carries over. Offered in the full profile; the small profile gets it only
//! when configured (`plan_tool`): a 1.5B model offered it planned after acting and marked
//! undone steps done, and no task's outcome moved (issue 34 notes).

use keel_agent::{Effect, Tool, ToolContext, ToolError, ToolErrorKind, ToolOutput};
use keel_session::{PlanStatus, PlanStep, plan_text};
use schemars::JsonSchema;
use serde::Deserialize;

/// Most steps a plan may have.
const MAX_STEPS: usize = 50;

/// Most characters of one step.
const MAX_STEP_CHARS: usize = 300;

/// Arguments of `update_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePlanArgs {
    /// The whole plan, in order: every step with its status (send all steps every time).
    pub plan: Vec<PlanItem>,
    /// Why the plan changed, if it did.
    #[serde(default)]
    pub explanation: Option<String>,
}

/// One step as the model writes it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanItem {
    /// What the step does, in a few words.
    pub step: String,
    /// `pending`, `in_progress` (at most one step) or `completed`.
    pub status: StatusArg,
}

/// A step's status as the model writes it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusArg {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Completed,
}

impl From<StatusArg> for PlanStatus {
    fn from(status: StatusArg) -> Self {
        match status {
            StatusArg::Pending => PlanStatus::Pending,
            StatusArg::InProgress => PlanStatus::InProgress,
            StatusArg::Completed => PlanStatus::Completed,
        }
    }
}

/// Keeps the plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpdatePlan;

impl UpdatePlan {
    /// The name the model calls.
    pub const NAME: &'static str = "update_plan";
}

/// The plan in `args`, checked: some steps, not too many or too long, none empty, at
/// most one in progress.
fn checked(args: &UpdatePlanArgs) -> Result<Vec<PlanStep>, ToolError> {
    let invalid = |message: String| ToolError::new(ToolErrorKind::InvalidArguments, message);
    if args.plan.is_empty() {
        return Err(invalid("the plan has no steps; give every step with its status".into()));
    }
    if args.plan.len() > MAX_STEPS {
        return Err(invalid(format!(
            "the plan has {} steps; keep it to {MAX_STEPS} or fewer",
            args.plan.len()
        )));
    }
    let mut steps = Vec::with_capacity(args.plan.len());
    for (n, item) in args.plan.iter().enumerate() {
        let text = item.step.trim();
        if text.is_empty() {
            return Err(invalid(format!("step {} is empty; say what it does", n + 1)));
        }
        if text.chars().count() > MAX_STEP_CHARS {
            return Err(invalid(format!(
                "step {} is longer than {MAX_STEP_CHARS} characters; say it in a few words",
                n + 1
            )));
        }
        steps.push(PlanStep { step: text.to_owned(), status: item.status.into() });
    }
    let active = steps.iter().filter(|s| s.status == PlanStatus::InProgress).count();
    if active > 1 {
        return Err(invalid(format!("{active} steps are in_progress; mark only the one you are working on")));
    }
    Ok(steps)
}

impl Tool for UpdatePlan {
    type Args = UpdatePlanArgs;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Keep a plan for a task of several steps: send the whole plan each time, every step with its status \
(pending, in_progress, completed; one in_progress at a time). Update it as you finish steps. Skip it for \
simple tasks."
    }

    fn effect(&self, arguments: &serde_json::Value) -> Effect {
        match serde_json::from_value::<UpdatePlanArgs>(arguments.clone()).ok().map(|args| checked(&args)) {
            Some(Ok(steps)) => Effect::Plans { steps },
            // A call that will be refused sets no plan.
            _ => Effect::Reads { path: None },
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: UpdatePlanArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let steps = checked(&args)?;
        let done = steps.iter().filter(|s| s.status == PlanStatus::Completed).count();
        Ok(ToolOutput::text(format!("Plan updated ({done} of {} done):\n{}", steps.len(), plan_text(&steps))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn call(arguments: serde_json::Value) -> (Effect, Result<ToolOutput, ToolError>) {
        let effect = UpdatePlan.effect(&arguments);
        let args = serde_json::from_value(arguments).unwrap();
        (effect, UpdatePlan.call(args, ToolContext::new(".")).await)
    }

    #[tokio::test]
    async fn a_plan_is_kept_in_the_effect_and_told_back() {
        let (effect, output) = call(json!({"plan": [
            {"step": "Read the parser", "status": "completed"},
            {"step": " Fix the off-by-one ", "status": "in_progress"},
            {"step": "Run the tests", "status": "pending"},
        ]}))
        .await;
        let steps = vec![
            PlanStep { step: "Read the parser".into(), status: PlanStatus::Completed },
            PlanStep { step: "Fix the off-by-one".into(), status: PlanStatus::InProgress },
            PlanStep { step: "Run the tests".into(), status: PlanStatus::Pending },
        ];
        assert_eq!(effect, Effect::Plans { steps });
        assert!(effect.read_only());
        assert_eq!(
            output.unwrap().content,
            "Plan updated (1 of 3 done):\n[x] Read the parser\n[>] Fix the off-by-one\n[ ] Run the tests"
        );
    }

    #[tokio::test]
    async fn a_plan_that_cannot_be_kept_is_refused_and_sets_nothing() {
        for (plan, says) in [
            (json!([]), "no steps"),
            (json!([{"step": "  ", "status": "pending"}]), "step 1 is empty"),
            (
                json!([{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]),
                "2 steps are in_progress",
            ),
            (json!([{"step": "x".repeat(301), "status": "pending"}]), "longer than 300"),
            (json!(vec![json!({"step": "s", "status": "pending"}); 51]), "51 steps"),
        ] {
            let (effect, output) = call(json!({ "plan": plan })).await;
            assert_eq!(effect, Effect::Reads { path: None }, "{says}");
            let error = output.unwrap_err();
            assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
            assert!(error.message.contains(says), "{}", error.message);
        }
        assert_eq!(UpdatePlan.effect(&json!({"plan": "not a list"})), Effect::Reads { path: None });
    }
}

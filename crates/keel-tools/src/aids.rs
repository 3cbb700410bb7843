//! The aids for small models, chosen in one place. A strong model gets the full tool
//! set and no aid; a small one (its size told by its server, its GGUF or its name: see
//! the CLI's profile choice) gets what it needs to finish a task:
//!
//! - fewer tools with fewer arguments ([`crate::profile`]);
//! - `change_file` in place of write_file and edit_file: the model says in words what
//!   to change and the same model, asked plainly, writes the new content
//!   ([`crate::change`]);
//! - when every step must call a tool, an answer written from the tool outputs
//!   ([`crate::grounded`]) or the plain `answer` tool ([`crate::answer`]);
//! - the finish checks: a question is not answered by a change
//!   ([`crate::question::QuestionGuard`], before the permission policy asks the user), a
//!   turn that described its change is asked once to make it (`keel_agent::FinishCheck`),
//!   a change is checked where the task names a check ([`crate::changes::ChangeCheck`]),
//!   a rename the turn made is not left half done ([`crate::renames::RenameCheck`]).
//!
//! The checks act on what the task wants, read by the model at turn start
//! (`keel_agent::intent`), never on words of the task; each nudge is logged with its
//! reason. Which aids apply is decided here, from [`Aids`]; what each does is in its own
//! module.

use std::sync::Arc;

use keel_agent::{FinishCheck, HookChain, Hooks, ToolRegistry};
use keel_llm::ModelClient;

use crate::ToolsConfig;
use crate::profile::{self, ToolProfile};

/// Which aids a model gets. Built from the settings, which fill each field from the
/// config or from the profile chosen for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aids {
    /// The tools offered.
    pub profile: ToolProfile,
    /// The finish checks (question guard, finish check, change check).
    pub finish_check: bool,
    /// The small profile offers change_file in place of write_file and edit_file.
    pub change_file: bool,
    /// With `always_call`, the small profile's answer is written from the tool outputs.
    pub grounded_answers: bool,
    /// Every step must call a tool (the `answer` tool finishes).
    pub always_call: bool,
    /// `update_plan` is offered.
    pub plan: bool,
}

impl Aids {
    /// Whether the small profile is in use.
    pub fn small(&self) -> bool {
        self.profile == ToolProfile::Small
    }

    /// Whether the task's intent is read at turn start: the aids that act on it need it.
    pub fn reads_intent(&self) -> bool {
        self.finish_check || self.small()
    }

    /// The hooks around `policy`: the question guard refuses before the policy would ask
    /// the user about a change; the finish checks come after it.
    pub fn hooks(&self, policy: Arc<dyn Hooks>) -> HookChain {
        let mut hooks = HookChain::new();
        if self.finish_check {
            hooks = hooks.with(crate::question::QuestionGuard::new());
        }
        hooks = hooks.with_shared(policy);
        if self.finish_check {
            hooks = hooks
                .with(FinishCheck::new())
                .with(crate::changes::ChangeCheck)
                .with(crate::renames::RenameCheck);
        }
        hooks
    }

    /// The tools, with `model` as change_file's editor and the grounded answer's writer.
    pub fn tools(&self, config: Arc<ToolsConfig>, model: &Arc<dyn ModelClient>) -> ToolRegistry {
        let mut tools = if self.small() && self.change_file {
            profile::small_with_editor(config, Arc::clone(model))
        } else {
            profile::tools(self.profile, config)
        };
        // The full profile has update_plan; the small one has not.
        if self.small() && self.plan {
            tools.register_dyn(profile::small_plan());
        } else if !self.small() && !self.plan {
            tools = tools.filtered(|tool| tool.definition().name != crate::plan::UpdatePlan::NAME);
        }
        if self.always_call && self.small() && self.grounded_answers {
            tools.register(crate::grounded::GroundedAnswer::new(Arc::clone(model)));
        } else if self.always_call {
            tools.register(crate::answer::Answer);
        }
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_testkit::ScriptedModel;

    fn aids(profile: ToolProfile, always_call: bool) -> Aids {
        Aids {
            profile,
            finish_check: true,
            change_file: true,
            grounded_answers: true,
            always_call,
            plan: false,
        }
    }

    fn names(aids: Aids) -> Vec<String> {
        let model: Arc<dyn ModelClient> = Arc::new(ScriptedModel::new(Vec::new()));
        aids.tools(Arc::new(ToolsConfig::default()), &model).names().map(str::to_owned).collect()
    }

    #[test]
    fn the_small_profile_gets_the_editor_and_the_grounded_answer() {
        assert_eq!(
            names(aids(ToolProfile::Small, true)),
            ["shell", "read_file", "change_file", "list_files", "grep", "answer"]
        );
        let plain = Aids { change_file: false, grounded_answers: false, ..aids(ToolProfile::Small, true) };
        assert_eq!(
            names(plain),
            ["shell", "read_file", "write_file", "edit_file", "list_files", "grep", "answer"]
        );
        assert!(aids(ToolProfile::Small, false).reads_intent());
    }

    #[test]
    fn the_plan_tool_is_offered_as_configured_in_either_profile() {
        let small = Aids { plan: true, ..aids(ToolProfile::Small, true) };
        assert_eq!(
            names(small),
            ["shell", "read_file", "change_file", "list_files", "grep", "update_plan", "answer"]
        );
        let model: Arc<dyn ModelClient> = Arc::new(ScriptedModel::new(Vec::new()));
        let tools = small.tools(Arc::new(ToolsConfig::default()), &model);
        let plan = tools.get("update_plan").map(|t| t.definition().clone());
        let schema: serde_json::Value =
            serde_json::from_str(plan.as_ref().map_or("null", |d| d.parameters.get())).unwrap_or_default();
        assert_eq!(schema["required"], serde_json::json!(["plan"]));
        assert!(schema["properties"].get("explanation").is_none(), "{schema}");
        let full = |plan| names(Aids { plan, ..aids(ToolProfile::Full, false) });
        assert!(full(true).contains(&"update_plan".to_owned()));
        assert!(!full(false).contains(&"update_plan".to_owned()));
        assert_eq!(full(false).len() + 1, full(true).len());
    }

    #[test]
    fn a_full_profile_gets_no_editor_and_reads_intent_only_for_its_checks() {
        let full = names(aids(ToolProfile::Full, false));
        assert!(full.contains(&"write_file".to_owned()) && !full.contains(&"change_file".to_owned()));
        assert!(names(aids(ToolProfile::Full, true)).last().is_some_and(|name| name == "answer"));
        let none = Aids { finish_check: false, ..aids(ToolProfile::Full, false) };
        assert!(!none.reads_intent() && aids(ToolProfile::Full, false).reads_intent());
    }
}

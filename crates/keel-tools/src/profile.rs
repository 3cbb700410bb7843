//! Tool profiles: which tools a model is offered, and how much of each.
//!
//! A strong model does well with every tool and option. A small one (1–8 B parameters)
//! does better with fewer tools and fewer arguments: every option is a chance to get a
//! call wrong, and every schema costs context. The small profile offers six tools with
//! only their essential arguments and one-line descriptions.

use std::sync::Arc;

use keel_agent::{ToolRegistry, narrow, typed};

use keel_llm::ModelClient;

use crate::{ToolsConfig, builtin, change, edit, grep, list, read, shell, web_fetch, write};

/// Which tools a model is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolProfile {
    /// Every built-in tool with every option.
    Full,
    /// shell, read_file, write_file, edit_file, list_files and grep, essential arguments
    /// only.
    Small,
}

impl ToolProfile {
    /// `full` or `small`.
    pub fn parse(text: &str) -> Option<ToolProfile> {
        match text {
            "full" => Some(ToolProfile::Full),
            "small" => Some(ToolProfile::Small),
            _ => None,
        }
    }

    /// The name used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolProfile::Full => "full",
            ToolProfile::Small => "small",
        }
    }
}

/// The tools of `profile`.
pub fn tools(profile: ToolProfile, config: Arc<ToolsConfig>) -> ToolRegistry {
    match profile {
        ToolProfile::Full => {
            let mut registry = builtin(Arc::clone(&config));
            // Not in the small profile: a 1.5B model given it did not choose it on its own
            // (docs/architecture.md, agent definitions).
            web_fetch::offer(&mut registry, &config);
            registry
        }
        ToolProfile::Small => small(config),
    }
}

/// The small profile with `change_file` in place of write_file and edit_file: the
/// model says in words what to change and `editor` (the same model, asked plainly)
/// writes the new content ([`crate::change`]).
pub fn small_with_editor(config: Arc<ToolsConfig>, editor: Arc<dyn ModelClient>) -> ToolRegistry {
    small_around(config, |registry, config| {
        registry.register(change::ChangeFile::new(config, editor));
    })
}

fn small(config: Arc<ToolsConfig>) -> ToolRegistry {
    small_around(config, |registry, config| {
        registry
            .register_dyn(narrow(
                typed(write::WriteFile::new(Arc::clone(&config))),
                &["path", "content"],
                "Create a file or replace its whole content.",
            ))
            .register_dyn(narrow(
                typed(edit::EditFile::new(config)),
                &["path", "old_text", "new_text"],
                "Replace text in a file: old_text must appear in the file exactly once.",
            ));
    })
}

/// `update_plan` for the small profile (when configured): the plan only, no explanation,
/// and a one-line description.
pub fn small_plan() -> Arc<dyn keel_agent::DynTool> {
    narrow(
        typed(crate::plan::UpdatePlan),
        &["plan"],
        "Keep a checklist for a task of several steps: send every step with its status each time.",
    )
}

/// shell and read_file, then the file-changing tools `changers` adds, then list_files
/// and grep: the small profile's order, whichever tools change files.
fn small_around(
    config: Arc<ToolsConfig>,
    changers: impl FnOnce(&mut ToolRegistry, Arc<ToolsConfig>),
) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register_dyn(narrow(
            typed(shell::Shell::new(Arc::clone(&config))),
            &["command"],
            "Run a bash command in the project folder; returns its output and exit code.",
        ))
        .register_dyn(narrow(
            typed(read::ReadFile::new(Arc::clone(&config))),
            &["path"],
            "Read a text file.",
        ));
    changers(&mut registry, Arc::clone(&config));
    registry
        .register_dyn(narrow(
            typed(list::ListFiles::new(Arc::clone(&config))),
            &["path"],
            "List the files in a folder (default: the project folder).",
        ))
        .register_dyn(narrow(
            typed(grep::Grep::new(config)),
            &["pattern", "path"],
            "Find the lines that match a regex in the project's files (or under path); returns file:line: text.",
        ));
    registry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_profile_is_six_tools_with_essential_arguments() {
        let registry = tools(ToolProfile::Small, Arc::new(ToolsConfig::default()));
        assert_eq!(
            registry.names().collect::<Vec<_>>(),
            ["shell", "read_file", "write_file", "edit_file", "list_files", "grep"]
        );
        let shell: serde_json::Value =
            serde_json::from_str(registry.definitions()[0].parameters.get()).unwrap();
        assert_eq!(shell["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["command"]);
        let bytes: usize =
            registry.definitions().iter().map(|d| d.description.len() + d.parameters.get().len()).sum();
        let full = tools(ToolProfile::Full, Arc::new(ToolsConfig::default()));
        let full_bytes: usize =
            full.definitions().iter().map(|d| d.description.len() + d.parameters.get().len()).sum();
        assert!(bytes * 10 < full_bytes * 6, "small {bytes} bytes, full {full_bytes}");
        assert!(registry.get("shell").is_some_and(|t| !t.is_read_only()));
        assert!(registry.get("read_file").is_some_and(|t| t.is_read_only()));
    }

    /// Issue 29: what a call does is declared by its tool (narrowed or not), so the rules
    /// that read it (compaction's file list, undo, the finish checks) need no names.
    #[test]
    fn every_tool_declares_what_its_calls_do() {
        use keel_agent::Effect;
        let registry = tools(ToolProfile::Small, Arc::new(ToolsConfig::default()));
        let effect = |name: &str, args: &str| registry.get(name).map(|t| t.effect(args));
        assert_eq!(effect("shell", r#"{"command": "ls"}"#), Some(Effect::Runs));
        assert_eq!(
            effect("read_file", r#"{"path": "a.py"}"#),
            Some(Effect::Reads { path: Some("a.py".into()) })
        );
        for writer in ["write_file", "edit_file"] {
            assert_eq!(effect(writer, r#"{"path": "b.py"}"#), Some(Effect::Writes { path: "b.py".into() }));
            assert_eq!(effect(writer, "not json"), Some(Effect::Other));
        }
        assert_eq!(effect("grep", r#"{"pattern": "x"}"#), Some(Effect::Reads { path: None }));
    }
}

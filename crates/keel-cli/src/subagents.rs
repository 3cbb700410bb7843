//! Subagents for the agent ([`keel_agent::subagent`]): the `task` tool, offered with the
//! full tool profile (the small profile was not measured with it), with the agents
//! defined in the project's `.keel/agents/*.md` and the user's `agents/` in keel's config
//! folder (found as custom commands are). A definition's front matter gives `name`,
//! `description`, `tools` and `model`; its text is the child's system prompt. A project
//! definition hides the user's of the same name; a file that cannot be one is named in
//! a note and skipped.
//!
//! Children are sessions of the store the parent's session is in (handed to [`offer`] by
//! whoever builds the agent: print and interactive mode, `keel acp`, `keel serve`), in
//! memory without one (`--no-session`, `keel replay`); they run with the parent's model
//! (or one the definition names on the same server), hooks and permission policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_agent::subagent::{Parent, Spawner, SubagentError};
use keel_agent::{AgentConfig, AgentDef, Hooks, Session, SessionContext, TaskTool, ToolRegistry};
use keel_llm::{ModelClient, ProviderConfig};
use keel_session::{Event, SessionError, SessionStore, SpawnRef};
use keel_tools::profile::ToolProfile;
use keel_tools::skills::markdown;

use crate::config::{ConfigError, ModelSettings, Settings};
use crate::custom_commands::{Kind, MAX_COMMANDS, project_files, shown_path, user_files};

/// The project's agents folder, relative to the workspace.
pub const PROJECT_DIR: &str = ".keel/agents";

/// What the notes call the files read here.
const AGENT_FILES: Kind = Kind { one: "an agent", files: "agent files" };

/// The agent definitions of `workspace` and the user's folder, by name, with notes about
/// files that were not used.
pub fn discover(workspace: &Path, allowed_roots: &[PathBuf]) -> (Vec<AgentDef>, Vec<String>) {
    let user = crate::paths::config_dir().join("agents");
    discover_in(workspace, allowed_roots, Some((&user, &shown_path(&user))))
}

/// [`discover`] with the user's folder given (`None`: none).
pub fn discover_in(
    workspace: &Path,
    allowed_roots: &[PathBuf],
    user: Option<(&Path, &str)>,
) -> (Vec<AgentDef>, Vec<String>) {
    let mut notes = Vec::new();
    let mut defs = project_files(AGENT_FILES, PROJECT_DIR, workspace, allowed_roots, &mut notes, definition);
    if let Some((dir, shown)) = user {
        let left = MAX_COMMANDS.saturating_sub(defs.len());
        for def in user_files(AGENT_FILES, dir, shown, left, &mut notes, definition) {
            if !defs.iter().any(|d| d.name == def.name) {
                defs.push(def);
            }
        }
    }
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    (defs, notes)
}

/// An agent definition from a file's text (`found` is its name from the file's path), or
/// why it cannot be one.
pub fn definition(found: String, text: &str, _shown: String) -> Result<AgentDef, String> {
    let doc = markdown::parse(text).map_err(|e| e.to_string())?;
    let name = doc.field("name").unwrap_or(&found).to_owned();
    if !keel_tools::skills::valid_name(&name) {
        return Err(format!("`{name}` is not an agent name (1 to 64 letters, digits, - and _)"));
    }
    let Some(description) = doc.field("description") else {
        return Err("its front matter has no description (what the agent is for and when to use it)".into());
    };
    if doc.body.is_empty() {
        return Err("it has no prompt (the text after the front matter)".into());
    }
    let tools = match doc.list("tools") {
        Some(tools) if tools.is_empty() => return Err("its `tools` list is empty".into()),
        tools => tools,
    };
    // Claude Code's `inherit` means the parent's model, as no model does.
    let model = doc.field("model").filter(|m| *m != "inherit").map(str::to_owned);
    let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok(AgentDef { name, description, tools, model, prompt: doc.body })
}

/// How the CLI makes what a child needs (`setup`'s functions, handed in: `setup` calls
/// this module, so this module does not call it).
#[derive(Clone, Copy)]
pub struct Making {
    /// A session's context ([`crate::setup::context`]).
    pub context: fn(&Settings, &Path, &Session) -> SessionContext,
    /// A client for a server's model ([`crate::setup::client`]).
    pub client: fn(&ProviderConfig) -> Result<Arc<dyn ModelClient>, ConfigError>,
}

/// What children need from the CLI: the store, the session context, models by name.
struct Children {
    settings: Settings,
    making: Making,
    /// The parent's store (none: children in memory).
    store: Option<Arc<dyn SessionStore>>,
}

impl Spawner for Children {
    fn create(&self, cwd: &str, link: SpawnRef) -> Result<Session, SessionError> {
        match &self.store {
            Some(store) => store.create_spawned(cwd, link),
            None => Ok(Session::in_memory(cwd)),
        }
    }

    fn log(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        match &self.store {
            Some(store) => store.read(id),
            None => Ok(Vec::new()),
        }
    }

    fn context(&self, session: &Session, workspace: &Path) -> SessionContext {
        (self.making.context)(&self.settings, workspace, session)
    }

    fn model(&self, name: &str) -> Result<Arc<dyn ModelClient>, SubagentError> {
        let unavailable = |reason: String| SubagentError::Model { name: name.into(), reason };
        match &self.settings.model {
            ModelSettings::Remote(config) => {
                let mut config = config.as_ref().clone();
                config.model = name.to_owned();
                (self.making.client)(&config).map_err(|e| unavailable(e.to_string()))
            }
            ModelSettings::Local(_) => Err(unavailable("the embedded model runs one model only".into())),
        }
    }
}

/// With the full profile, adds `task` to `tools`: its children get the tools of `tools` as
/// they are now (so never `task`), `model`, `hooks` and `config`, and are sessions of
/// `store` (the parent's; none: in memory). Notes about definitions go to `notes`.
pub fn offer(
    settings: &Settings,
    workspace: &Path,
    parent: (Arc<dyn ModelClient>, Arc<dyn Hooks>, &AgentConfig),
    store: Option<Arc<dyn SessionStore>>,
    tools: &mut ToolRegistry,
    notes: &mut Vec<String>,
    making: Making,
) {
    if settings.tool_profile != ToolProfile::Full {
        return;
    }
    let (defs, found) = discover(workspace, &settings.allowed_roots);
    notes.extend(found);
    let (model, hooks, config) = parent;
    let parent = Parent { model, tools: tools.clone(), hooks, config: config.clone() };
    let spawner = Arc::new(Children { settings: settings.clone(), making, store });
    let (task, more) = TaskTool::new(parent, defs, spawner, settings.subagent_limits);
    notes.extend(more);
    tools.register(task);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_file_gives_name_description_tools_model_and_prompt() {
        let text = "---\nname: explorer\ndescription: Finds where things are.\ntools:\n  - read_file\n  - grep\nmodel: small-model\n---\nYou explore.\n";
        assert_eq!(
            definition("file".into(), text, String::new()).unwrap(),
            AgentDef {
                name: "explorer".into(),
                description: "Finds where things are.".into(),
                tools: Some(vec!["read_file".into(), "grep".into()]),
                model: Some("small-model".into()),
                prompt: "You explore.".into(),
            }
        );
        let inherit = "---\ndescription: d\ntools: read_file, glob\nmodel: inherit\n---\nP";
        let def = definition("from-file".into(), inherit, String::new()).unwrap();
        assert_eq!(
            (def.name.as_str(), def.tools, def.model),
            ("from-file", Some(vec!["read_file".to_owned(), "glob".to_owned()]), None)
        );
    }

    #[test]
    fn definitions_are_found_in_the_project_and_the_user_folder_and_bad_files_are_named() {
        let project = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        let agents = project.path().join(PROJECT_DIR);
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("explorer.md"),
            "---\ndescription: Project's.\ntools: [read_file]\n---\nP",
        )
        .unwrap();
        std::fs::write(agents.join("broken.md"), "---\ndescription: never closed\n").unwrap();
        std::fs::write(user.path().join("explorer.md"), "---\ndescription: Mine.\n---\nU").unwrap();
        std::fs::write(user.path().join("reviewer.md"), "---\ndescription: Reviews.\n---\nR").unwrap();
        let workspace = project.path().canonicalize().unwrap();
        let (defs, notes) = discover_in(&workspace, &[], Some((user.path(), "~/agents")));
        let seen: Vec<(&str, &str)> =
            defs.iter().map(|d| (d.name.as_str(), d.description.as_str())).collect();
        assert_eq!(seen, [("explorer", "Project's."), ("reviewer", "Reviews.")]);
        assert_eq!(
            notes,
            [".keel/agents/broken.md was not read: its front matter is not closed (a `---` line after it)"]
        );
    }

    #[test]
    fn the_notes_about_agent_files_call_them_agent_files() {
        let project = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        for n in 0..MAX_COMMANDS + 2 {
            std::fs::write(user.path().join(format!("a{n:03}.md")), "---\ndescription: d\n---\nP").unwrap();
        }
        std::fs::write(user.path().join("0 bad.md"), "---\ndescription: d\n---\nP").unwrap();
        let workspace = project.path().canonicalize().unwrap();
        let (defs, notes) = discover_in(&workspace, &[], Some((user.path(), "~/agents")));
        assert_eq!(defs.len(), MAX_COMMANDS);
        assert_eq!(
            notes,
            [
                "~/agents/0 bad.md was not read: `0 bad` cannot name an agent (letters, digits, -, _ and .)"
                    .to_owned(),
                format!(
                    "~/agents/a{MAX_COMMANDS:03}.md and the files after it were not read: keel reads at most {MAX_COMMANDS} agent files"
                ),
            ]
        );
    }

    #[test]
    fn a_bad_definition_says_why() {
        let why = |text: &str| definition("x".into(), text, String::new()).unwrap_err();
        assert_eq!(
            why("---\nname: x\n---\nP"),
            "its front matter has no description (what the agent is for and when to use it)"
        );
        assert_eq!(why("---\ndescription: d\n---\n"), "it has no prompt (the text after the front matter)");
        assert_eq!(
            why("---\nname: a b\ndescription: d\n---\nP"),
            "`a b` is not an agent name (1 to 64 letters, digits, - and _)"
        );
        assert_eq!(why("---\ndescription: d\ntools: []\n---\nP"), "its `tools` list is empty");
        assert_eq!(why("---\ndescription: d\nP"), "its front matter is not closed (a `---` line after it)");
    }
}

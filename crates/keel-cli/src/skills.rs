//! Skills for the agent ([`keel_tools::skills`]): found in the project's `.keel/skills/`
//! and the user's `skills/` in keel's config folder; their names and descriptions join
//! the system prompt and the `skill` tool loads the rest. Offered with the full tool
//! profile only (the small profile was not measured with them). `keel skills` lists them.

use std::path::{Path, PathBuf};

use keel_agent::ToolRegistry;
use keel_tools::profile::ToolProfile;
use keel_tools::skills::{Places, SkillTool, Skills};

use crate::cli::Cli;
use crate::config::Settings;
use crate::custom_commands::shown_path;

/// The skills of `workspace` and the user's folder, with notes about folders skipped.
pub fn discover(workspace: &Path, allowed_roots: &[PathBuf]) -> (Skills, Vec<String>) {
    let user = crate::paths::config_dir().join("skills");
    let shown = shown_path(&user);
    Skills::discover(&Places { workspace, allowed_roots, user: Some((&user, &shown)) })
}

/// With the full profile, adds the skills found to `prompt` and the `skill` tool to
/// `tools`, and notes about skills that were not read to `notes`.
pub fn offer(
    settings: &Settings,
    workspace: &Path,
    prompt: &mut String,
    tools: &mut ToolRegistry,
    notes: &mut Vec<String>,
) {
    if settings.tool_profile != ToolProfile::Full {
        return;
    }
    let (skills, found) = discover(workspace, &settings.allowed_roots);
    notes.extend(found);
    if let Some(section) = skills.prompt_section() {
        prompt.push_str("\n\n");
        prompt.push_str(&section);
        tools.register(SkillTool::new(skills));
    }
}

/// The text of `keel skills`.
pub fn report(skills: &Skills) -> String {
    if skills.is_empty() {
        let user = shown_path(&crate::paths::config_dir().join("skills"));
        return format!(
            "no skills: add one as .keel/skills/NAME/SKILL.md (this project) or {user}/NAME/SKILL.md (yours),\n\
with `name` and `description` in its front matter\n"
        );
    }
    let name_width = skills.iter().map(|s| s.name.chars().count()).max().unwrap_or(0);
    let where_width = skills.iter().map(|s| s.shown.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for skill in skills.iter() {
        out.push_str(&format!(
            "{:name_width$}  {:where_width$}  {}\n",
            skill.name, skill.shown, skill.description
        ));
    }
    out
}

/// `keel skills`: each skill's name, folder and description; notes on stderr.
pub fn command(cli: &Cli) -> anyhow::Result<u8> {
    let folder = match &cli.cwd {
        Some(dir) => Ok(dir.clone()),
        None => std::env::current_dir(),
    };
    let workspace = match folder.and_then(|dir| dir.canonicalize()) {
        Ok(dir) => dir,
        Err(e) => {
            errln!("keel: cannot read the project folder: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    // The config's allowed_roots, when it reads (without a model configured too).
    let allowed_roots = crate::config::resolve(cli, false).map(|s| s.allowed_roots).unwrap_or_default();
    let (skills, notes) = discover(&workspace, &allowed_roots);
    for note in notes {
        errln!("keel: {note}");
    }
    crate::out::write(&report(&skills));
    Ok(crate::exit::OK)
}

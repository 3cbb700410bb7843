//! Skills in the Agent Skills shape (Anthropic's, also read by Claude Code, Codex and
//! opencode): a folder `NAME/` holding `SKILL.md` (front matter with `name` and
//! `description`, then instructions) and any files the instructions name. Only the
//! names and descriptions go into the system prompt ([`Skills::prompt_section`]); the
//! model loads a skill's instructions, and reads its other files, through the `skill`
//! tool ([`SkillTool`]) when a task needs it.
//!
//! Skills are found in the project (`.keel/skills/`, read like AGENTS.md: confined to the
//! workspace and its allowed roots) and in the user's own folder (may lead anywhere, as
//! the user's AGENTS.md). A project skill hides a user skill of the same name. Each
//! SKILL.md is read up to [`MAX_SKILL_BYTES`]; the prompt lists at most [`MAX_SKILLS`]
//! skills within [`PROMPT_BUDGET`] characters. A folder that cannot be used is named in
//! a note for the user, once, and skipped.

pub mod markdown;
mod tool;

use std::path::{Path, PathBuf};

use crate::workspace::Roots;
use markdown::{DocError, confined_error};

pub use tool::{SkillArgs, SkillTool};

/// The tool's name.
pub const NAME: &str = "skill";

/// Most bytes of one SKILL.md.
pub const MAX_SKILL_BYTES: usize = 64 * 1024;

/// Most skills listed in the system prompt.
pub const MAX_SKILLS: usize = 50;

/// Most characters of one description in the prompt (the Agent Skills format's own limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Most characters of the prompt's list of skills.
pub const PROMPT_BUDGET: usize = 12_000;

/// Most entries of one skills folder looked at.
const MAX_ENTRIES: usize = 500;

/// The project's skills folder, relative to the workspace.
pub const PROJECT_DIR: &str = ".keel/skills";

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The project's `.keel/skills/`.
    Project,
    /// The user's skills folder.
    User,
}

impl Origin {
    /// `project` or `user`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Project => "project",
            Origin::User => "user",
        }
    }
}

/// One skill: what the prompt lists, and where the rest is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The name the model calls it by.
    pub name: String,
    /// What it is for and when to use it, on one line.
    pub description: String,
    /// Its folder, canonical.
    pub dir: PathBuf,
    /// Its folder as shown to people and the model (`.keel/skills/NAME`, `~/.config/keel/skills/NAME`).
    pub shown: String,
    /// Where it was found.
    pub origin: Origin,
}

/// The skills offered, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skills {
    skills: Vec<Skill>,
}

/// Where to look for skills.
#[derive(Debug, Clone)]
pub struct Places<'a> {
    /// The workspace (its `.keel/skills/`).
    pub workspace: &'a Path,
    /// Folders outside the workspace that the file tools may use.
    pub allowed_roots: &'a [PathBuf],
    /// The user's skills folder, and how to show it (`~/.config/keel/skills`).
    pub user: Option<(&'a Path, &'a str)>,
}

impl Skills {
    /// Finds the skills of `places`; also returns notes about folders that were skipped.
    pub fn discover(places: &Places<'_>) -> (Skills, Vec<String>) {
        let mut notes = Vec::new();
        let mut found = project_skills(places.workspace, places.allowed_roots, &mut notes);
        if let Some((dir, shown)) = places.user {
            for skill in user_skills(dir, shown, &mut notes) {
                // A project skill hides the user's of the same name.
                if !found.iter().any(|s| s.name == skill.name) {
                    found.push(skill);
                }
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let mut skills = Vec::new();
        let mut used = 0;
        let mut left_out = Vec::new();
        for skill in found {
            let line = list_line(&skill).chars().count();
            if skills.len() < MAX_SKILLS && used + line <= PROMPT_BUDGET {
                used += line;
                skills.push(skill);
            } else {
                left_out.push(skill.name);
            }
        }
        if !left_out.is_empty() {
            notes.push(format!(
                "skills not offered (the prompt lists at most {MAX_SKILLS} skills in {PROMPT_BUDGET} characters): {}",
                left_out.join(", ")
            ));
        }
        (Skills { skills }, notes)
    }

    /// Skills as given (sorted by name; a second skill of a name is dropped).
    pub fn new(mut skills: Vec<Skill>) -> Skills {
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        skills.dedup_by(|b, a| a.name == b.name);
        Skills { skills }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The skills, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter()
    }

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The system prompt's part about skills: how to use them, and each one's name and
    /// description. `None` without skills.
    pub fn prompt_section(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut text = String::from(
            "# Skills\nA skill holds instructions for one kind of task. When a task matches a skill's description, call skill with its name before you start, and follow what it says.\n",
        );
        for skill in &self.skills {
            text.push_str(&list_line(skill));
        }
        Some(text.trim_end().to_owned())
    }
}

/// A skill's line in the prompt.
fn list_line(skill: &Skill) -> String {
    format!("- {}: {}\n", skill.name, skill.description)
}

/// Whether `name` can name a skill: 1–64 letters, digits, `-` and `_`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A SKILL.md's text as a skill, or why it cannot be one.
fn skill_of(text: &str, folder: &str) -> Result<(String, String), String> {
    let doc = markdown::parse(text).map_err(|e| e.to_string())?;
    let name = doc.field("name").unwrap_or(folder).to_owned();
    if !valid_name(&name) {
        return Err(format!("`{name}` is not a skill name (1 to 64 letters, digits, - and _)"));
    }
    let Some(description) = doc.field("description") else {
        return Err("its front matter has no description (what the skill is for and when to use it)".into());
    };
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let description = if one_line.chars().count() > MAX_DESCRIPTION_CHARS {
        let cut: String = one_line.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        one_line
    };
    Ok((name, description))
}

/// The names of the entries of `dir` that may be skill folders (not hidden), sorted;
/// at most [`MAX_ENTRIES`].
fn folder_names(dir: &Path) -> Result<Vec<String>, std::io::Error> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .take(MAX_ENTRIES)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .filter(|name| dir.join(name).is_dir())
        .collect();
    names.sort();
    Ok(names)
}

/// Adds `skill` to `found` unless a skill of its name is there (then a note).
fn add(found: &mut Vec<Skill>, skill: Skill, notes: &mut Vec<String>) {
    match found.iter().find(|s| s.name == skill.name) {
        Some(first) => {
            notes.push(format!("skill {} was not read: {} has the same name", skill.shown, first.shown))
        }
        None => found.push(skill),
    }
}

fn project_skills(workspace: &Path, allowed_roots: &[PathBuf], notes: &mut Vec<String>) -> Vec<Skill> {
    let mut found = Vec::new();
    let roots = match Roots::new(workspace, allowed_roots, &[]) {
        Ok(roots) => roots,
        Err(e) => {
            notes.push(format!("{PROJECT_DIR} was not read: {}", e.message));
            return found;
        }
    };
    let dir = match roots.open_read(PROJECT_DIR) {
        Ok((_, dir)) => dir,
        Err(e) => {
            match confined_error(e) {
                DocError::Missing => {}
                e => notes.push(format!("{PROJECT_DIR} was not read: {e}")),
            }
            return found;
        }
    };
    let names = match folder_names(&dir) {
        Ok(names) => names,
        Err(e) => {
            notes.push(format!("{PROJECT_DIR} was not read: {e}"));
            return found;
        }
    };
    for folder in names {
        let shown = format!("{PROJECT_DIR}/{folder}");
        let file = format!("{shown}/SKILL.md");
        let opened = roots.open_read(&file).map_err(confined_error);
        let read = opened.and_then(|(handle, path)| {
            let text = markdown::read_capped(handle, MAX_SKILL_BYTES)?;
            Ok((text, path.parent().map(Path::to_path_buf).unwrap_or_default()))
        });
        match read.map_err(|e| e.to_string()).and_then(|(text, dir)| Ok((skill_of(&text, &folder)?, dir))) {
            Ok(((name, description), dir)) => {
                add(&mut found, Skill { name, description, dir, shown, origin: Origin::Project }, notes)
            }
            Err(why) => notes.push(format!("skill {shown} was not read: {file}: {why}")),
        }
    }
    found
}

fn user_skills(dir: &Path, shown_dir: &str, notes: &mut Vec<String>) -> Vec<Skill> {
    let mut found = Vec::new();
    let names = match folder_names(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return found,
        Err(e) => {
            notes.push(format!("{shown_dir} was not read: {e}"));
            return found;
        }
    };
    for folder in names {
        let shown = format!("{shown_dir}/{folder}");
        let read = markdown::read_user_file(&dir.join(&folder).join("SKILL.md"), MAX_SKILL_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|text| skill_of(&text, &folder));
        let canonical = dir.join(&folder).canonicalize();
        match (read, canonical) {
            (Ok((name, description)), Ok(dir)) => {
                add(&mut found, Skill { name, description, dir, shown, origin: Origin::User }, notes)
            }
            (Err(why), _) => notes.push(format!("skill {shown} was not read: SKILL.md: {why}")),
            (_, Err(e)) => notes.push(format!("skill {shown} was not read: {e}")),
        }
    }
    found
}

#[cfg(test)]
mod tests;

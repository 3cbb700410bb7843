//! `skill`: loads a skill the system prompt lists (its SKILL.md without the front
//! matter, and the names of its folder's other files), or one of those files. Reads
//! only, and only inside the skill's folder: the folder of a user's skill is outside the
//! workspace, so its files come through this tool rather than read_file (whose roots
//! stay as they are), each opened as read_file opens a file, confined to the folder.

use std::path::{Component, Path};
use std::sync::Arc;

use keel_agent::{Effect, Tool, ToolContext, ToolError, ToolErrorKind, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::markdown::{self, DocError};
use super::{MAX_SKILL_BYTES, Origin, Skill, Skills};
use crate::workspace::Roots;

/// Most bytes of one file of a skill's folder.
const MAX_FILE_BYTES: usize = 256 * 1024;

/// Most files of a skill's folder listed.
const MAX_LISTED: usize = 100;

/// Deepest folder level of a skill's folder listed.
const MAX_DEPTH: usize = 4;

/// Arguments of `skill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillArgs {
    /// The skill's name, as the system prompt lists it.
    pub name: String,
    /// A file of the skill's folder, as listed when the skill was loaded, to read it;
    /// leave out (or empty) to load the skill's instructions.
    #[serde(default)]
    pub file: Option<String>,
}

/// Loads skills.
#[derive(Debug, Clone)]
pub struct SkillTool {
    skills: Arc<Skills>,
}

impl SkillTool {
    /// The tool for `skills`.
    pub fn new(skills: Skills) -> Self {
        SkillTool { skills: Arc::new(skills) }
    }
}

impl Tool for SkillTool {
    type Args = SkillArgs;

    fn name(&self) -> &str {
        super::NAME
    }

    fn description(&self) -> &str {
        "Load a skill the system prompt lists: returns its instructions and the files of its folder. \
With file, returns that file of the skill's folder (a script, a reference, a template)."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn effect(&self, _arguments: &serde_json::Value) -> Effect {
        Effect::Reads { path: None }
    }

    async fn call(&self, args: SkillArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(skill) = self.skills.get(&args.name).cloned() else {
            let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::new(
                ToolErrorKind::NotFound,
                format!("there is no skill `{}`; the skills are: {}", args.name, names.join(", ")),
            ));
        };
        // An empty file is no file: the 1.5B model filled the optional field with "" on
        // its first call, meaning the skill itself.
        let file = args.file.filter(|file| !file.trim().is_empty());
        let text = tokio::task::spawn_blocking(move || match file {
            None => load(&skill),
            Some(file) => read(&skill, &file),
        })
        .await
        .map_err(|e| ToolError::msg(format!("the tool stopped unexpectedly: {e}")))??;
        Ok(ToolOutput::text(text))
    }
}

/// The roots of a skill's folder: nothing outside it is opened.
fn roots(skill: &Skill) -> Result<Roots, ToolError> {
    Roots::new(&skill.dir, &[], &[]).map_err(|e| {
        ToolError::new(e.kind, format!("the folder of skill `{}` is unavailable: {}", skill.name, e.message))
    })
}

/// The skill's instructions and its folder's files.
fn load(skill: &Skill) -> Result<String, ToolError> {
    let roots = roots(skill)?;
    // SKILL.md is opened as it was found: the project's confined, the user's wherever
    // its link leads (the user's own file).
    let text = match skill.origin {
        Origin::Project => markdown::read_project_file(&roots, "SKILL.md", MAX_SKILL_BYTES),
        Origin::User => markdown::read_user_file(&skill.dir.join("SKILL.md"), MAX_SKILL_BYTES),
    }
    .map_err(|e| doc_error(skill, "SKILL.md", &e))?;
    let doc = markdown::parse(&text).map_err(|e| doc_error(skill, "SKILL.md", &e))?;
    let mut out = format!("Skill {} ({}):\n\n{}\n", skill.name, skill.shown, doc.body);
    let (files, more) = files(roots.root());
    if !files.is_empty() {
        out.push_str(&format!(
            "\nFiles in the skill's folder (read one with skill, name \"{}\" and file set to its path):\n",
            skill.name
        ));
        for file in &files {
            out.push_str(&format!("- {file}\n"));
        }
        if more {
            out.push_str(&format!("(only the first {MAX_LISTED} are listed)\n"));
        }
    }
    Ok(out.trim_end().to_owned())
}

/// One file of the skill's folder.
fn read(skill: &Skill, file: &str) -> Result<String, ToolError> {
    let relative = Path::new(file);
    let inside = relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if file.is_empty() || !inside {
        return Err(ToolError::new(
            ToolErrorKind::InvalidPath,
            format!(
                "`{file}` is not a file of the skill's folder: give its path relative to the folder, as listed"
            ),
        ));
    }
    match roots(skill)?.read_text(file, MAX_FILE_BYTES) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!(
                "skill `{}` has no file `{file}`; call skill with name \"{}\" alone to list its files",
                skill.name, skill.name
            ),
        )),
        Err(e) if e.kind == ToolErrorKind::OutsideWorkspace => Err(ToolError::new(
            ToolErrorKind::OutsideWorkspace,
            format!("`{file}` leads outside the folder of skill `{}`: refused", skill.name),
        )),
        Err(e) => Err(e),
    }
}

fn doc_error(skill: &Skill, file: &str, error: &DocError) -> ToolError {
    let kind = match error {
        DocError::Missing => ToolErrorKind::NotFound,
        DocError::Outside => ToolErrorKind::OutsideWorkspace,
        DocError::TooLarge(_) => ToolErrorKind::FileTooLarge,
        DocError::NotText => ToolErrorKind::BinaryFile,
        DocError::NotRegular(_) => ToolErrorKind::NotARegularFile,
        _ => ToolErrorKind::IoError,
    };
    ToolError::new(kind, format!("{file} of skill `{}` cannot be read: {error}", skill.name))
}

/// The files under `dir` but SKILL.md (not hidden ones, symlinks not followed into
/// folders), relative and sorted; whether there were more than [`MAX_LISTED`].
fn files(dir: &Path) -> (Vec<String>, bool) {
    let mut found = Vec::new();
    let mut more = false;
    let mut folders = vec![(dir.to_path_buf(), String::new(), 0)];
    while let Some((folder, prefix, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else { continue };
            if name.starts_with('.') || (depth == 0 && name == "SKILL.md") {
                continue;
            }
            let relative = format!("{prefix}{name}");
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if depth + 1 < MAX_DEPTH {
                    folders.push((entry.path(), format!("{relative}/"), depth + 1));
                }
            } else if found.len() < MAX_LISTED * 4 {
                found.push(relative);
            }
        }
    }
    found.sort();
    if found.len() > MAX_LISTED {
        found.truncate(MAX_LISTED);
        more = true;
    }
    (found, more)
}

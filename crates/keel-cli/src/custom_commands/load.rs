//! Finding command files: `*.md` under a commands folder, a subfolder making a namespace
//! (`git/commit.md` is `/git:commit`). The project's folder is read like the project's
//! AGENTS.md (confined to the workspace and its allowed roots, symlinks that lead out
//! refused); the user's may lead anywhere, as the user's AGENTS.md. Every file is a
//! regular file of at most [`MAX_COMMAND_BYTES`] of text; a file that is not is named in
//! a note and skipped.

use std::path::{Path, PathBuf};

use keel_tools::skills::markdown::{self, DocError, confined_error};
use keel_tools::workspace::Roots;

use super::{Command, Origin};

/// Most bytes of one command file.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Most command files read, over both places.
pub const MAX_COMMANDS: usize = 200;

/// What a folder's files are, for the notes about them: commands or agent definitions
/// (both are found by this module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// One of them, with its article (`a command`).
    pub one: &'static str,
    /// Its files (`command files`).
    pub files: &'static str,
}

/// Custom commands' files.
pub const COMMAND_FILES: Kind = Kind { one: "a command", files: "command files" };

/// Most entries of one folder looked at.
const MAX_ENTRIES: usize = 500;

/// Deepest namespace (`a:b:c:name`).
const MAX_DEPTH: usize = 3;

/// The project's commands folder, relative to the workspace.
pub const PROJECT_DIR: &str = ".keel/commands";

/// Most characters of a description taken from a command's first line.
const FIRST_LINE_CHARS: usize = 80;

/// Whether `part` may be a command's name or namespace: letters, digits, `-`, `_`, `.`.
fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && part.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// A command file found: its name (`ns:name`) and its path relative to the folder.
struct Found {
    name: String,
    relative: String,
}

/// Where to look: the folder, as shown in notes, whether its symlinks are followed, most
/// files read, and what the files are.
struct Look<'a> {
    dir: &'a Path,
    shown: &'a str,
    follow_links: bool,
    limit: usize,
    kind: Kind,
}

/// The `*.md` files under the folder (at most `limit`, then a note), sorted by path;
/// notes for names that cannot be what the files are.
fn walk(look: Look<'_>, notes: &mut Vec<String>) -> Vec<Found> {
    let Look { dir, shown, follow_links, limit, kind } = look;
    let mut found = Vec::new();
    let mut folders = vec![(dir.to_path_buf(), String::new(), Vec::<String>::new())];
    while let Some((folder, relative, namespace)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        let mut names: Vec<String> =
            entries.flatten().take(MAX_ENTRIES).filter_map(|e| e.file_name().into_string().ok()).collect();
        names.sort();
        for name in names {
            if name.starts_with('.') {
                continue;
            }
            let path = folder.join(&name);
            let is_dir = if follow_links {
                path.is_dir()
            } else {
                std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
            };
            let shown_path = format!("{shown}/{relative}{name}");
            if is_dir {
                if !valid_part(&name) {
                    notes.push(format!(
                        "{shown_path}/ was not read: `{name}` cannot name the namespace of {}",
                        kind.one
                    ));
                } else if namespace.len() < MAX_DEPTH {
                    let mut inner = namespace.clone();
                    inner.push(name.clone());
                    folders.push((path, format!("{relative}{name}/"), inner));
                }
                continue;
            }
            let Some(stem) = name.strip_suffix(".md") else { continue };
            if !valid_part(stem) {
                notes.push(format!(
                    "{shown_path} was not read: `{stem}` cannot name {} (letters, digits, -, _ and .)",
                    kind.one
                ));
                continue;
            }
            if found.len() == limit {
                notes.push(format!(
                    "{shown_path} and the files after it were not read: keel reads at most {MAX_COMMANDS} {}",
                    kind.files
                ));
                folders.clear();
                break;
            }
            let mut parts = namespace.clone();
            parts.push(stem.to_owned());
            found.push(Found { name: parts.join(":"), relative: format!("{relative}{name}") });
        }
    }
    found.sort_by(|a, b| a.relative.cmp(&b.relative));
    found
}

/// A command from a file's text, or why it cannot be one.
fn command(name: String, text: &str, shown: String, origin: Origin) -> Result<Command, String> {
    let doc = markdown::parse(text).map_err(|e| e.to_string())?;
    if doc.body.is_empty() {
        return Err("it has no text to send".into());
    }
    let first_line = doc.body.lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim();
    let description = match doc.field("description") {
        Some(given) => given.split_whitespace().collect::<Vec<_>>().join(" "),
        None if first_line.chars().count() > FIRST_LINE_CHARS => {
            format!("{}…", first_line.chars().take(FIRST_LINE_CHARS - 1).collect::<String>())
        }
        None => first_line.to_owned(),
    };
    Ok(Command {
        name,
        description,
        argument_hint: doc.field("argument-hint").map(str::to_owned),
        body: doc.body,
        shown,
        origin,
        hides_user: false,
    })
}

/// The project's commands (`.keel/commands`), confined to the workspace and `allowed_roots`.
pub fn project(workspace: &Path, allowed_roots: &[PathBuf], notes: &mut Vec<String>) -> Vec<Command> {
    project_files(COMMAND_FILES, PROJECT_DIR, workspace, allowed_roots, notes, |name, text, shown| {
        command(name, text, shown, Origin::Project)
    })
}

/// The user's commands (`commands` in keel's config folder), shown as `shown`; at most
/// `limit` files.
pub fn user(dir: &Path, shown: &str, limit: usize, notes: &mut Vec<String>) -> Vec<Command> {
    user_files(COMMAND_FILES, dir, shown, limit, notes, |name, text, path| {
        command(name, text, path, Origin::User)
    })
}

/// The `*.md` files of the project's folder `folder` (relative to the workspace, read
/// confined to it and `allowed_roots`), each made into a `T` by `make` (its name, text and
/// path as shown); a file that cannot be read or made is named in a note, which calls the
/// files what `kind` says. Also used for agent definitions (`.keel/agents`).
pub fn project_files<T>(
    kind: Kind,
    folder: &str,
    workspace: &Path,
    allowed_roots: &[PathBuf],
    notes: &mut Vec<String>,
    make: impl Fn(String, &str, String) -> Result<T, String>,
) -> Vec<T> {
    let roots = match Roots::new(workspace, allowed_roots, &[]) {
        Ok(roots) => roots,
        Err(e) => {
            notes.push(format!("{folder} was not read: {}", e.message));
            return Vec::new();
        }
    };
    let dir = match roots.open_read(folder) {
        Ok((_, dir)) => dir,
        Err(e) => {
            match confined_error(e) {
                DocError::Missing => {}
                e => notes.push(format!("{folder} was not read: {e}")),
            }
            return Vec::new();
        }
    };
    let mut made = Vec::new();
    let look = Look { dir: &dir, shown: folder, follow_links: false, limit: MAX_COMMANDS, kind };
    for found in walk(look, notes) {
        let shown = format!("{folder}/{}", found.relative);
        let read = markdown::read_project_file(&roots, &shown, MAX_COMMAND_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|text| make(found.name, &text, shown.clone()));
        match read {
            Ok(item) => made.push(item),
            Err(e) => notes.push(format!("{shown} was not read: {e}")),
        }
    }
    made
}

/// The `*.md` files of the user's folder `dir` (shown as `shown`), at most `limit`, each
/// made into a `T` by `make`, as [`project_files`] does.
pub fn user_files<T>(
    kind: Kind,
    dir: &Path,
    shown: &str,
    limit: usize,
    notes: &mut Vec<String>,
    make: impl Fn(String, &str, String) -> Result<T, String>,
) -> Vec<T> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut made = Vec::new();
    for found in walk(Look { dir, shown, follow_links: true, limit, kind }, notes) {
        let path = format!("{shown}/{}", found.relative);
        let read = markdown::read_user_file(&dir.join(&found.relative), MAX_COMMAND_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|text| make(found.name, &text, path.clone()));
        match read {
            Ok(item) => made.push(item),
            Err(e) => notes.push(format!("{path} was not read: {e}")),
        }
    }
    made
}

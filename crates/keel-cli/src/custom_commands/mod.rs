//! Custom slash commands: Markdown files in the project's `.keel/commands/` and the
//! user's `commands/` (in keel's config folder) become `/NAME` (`review.md` is
//! `/review`, `git/commit.md` is `/git:commit`). The front matter of Claude Code's and
//! opencode's files is read where they agree: `description` (else the first line) and
//! `argument-hint`; their other keys (`allowed-tools`, `model`, `agent`, …) are ignored.
//! The text after it, with the arguments put in ([`expand`]), is sent as the user's
//! message: it is what the model sees, so it is what the session logs.
//!
//! A project command hides the user's of the same name; keel's own commands are never
//! hidden (a file that tries is named in a note). Files are read once, when keel starts.

mod expand;
mod load;

pub(crate) use load::{Kind, project_files, user_files};

use std::path::{Path, PathBuf};

pub use load::MAX_COMMANDS;

/// Where a command was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The project's `.keel/commands/`.
    Project,
    /// The user's commands folder.
    User,
}

/// One custom command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name without the slash (`review`, `git:commit`).
    pub name: String,
    /// One line for `/help`.
    pub description: String,
    /// What to type after it (`[file]`), for `/help`.
    pub argument_hint: Option<String>,
    /// Its text, with `$ARGUMENTS`, `$1`… still in.
    pub body: String,
    /// Its file, as shown (`.keel/commands/review.md`).
    pub shown: String,
    /// Where it was found.
    pub origin: Origin,
    /// Whether it hides a user command of the same name.
    pub hides_user: bool,
}

/// A command's text, ready to send, and a line for the user about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The message the model gets.
    pub text: String,
    /// What is being sent, from where.
    pub note: String,
}

/// What a line typed at the interactive prompt comes to, when custom commands decide it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Show this (the help with the custom commands; a near miss of one).
    Say(String),
    /// Send this as the user's message.
    Prompt(Expanded),
}

/// The custom commands, by name.
#[derive(Debug, Clone, Default)]
pub struct CustomCommands {
    commands: Vec<Command>,
    /// keel's own commands, without the slash.
    builtins: Vec<String>,
}

/// The user's commands folder, and how to show it (`~` for the home folder).
pub fn user_dir() -> (PathBuf, String) {
    let dir = crate::paths::config_dir().join("commands");
    (dir.clone(), shown_path(&dir))
}

/// `path` with the home folder written `~`.
pub fn shown_path(path: &Path) -> String {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(home) if home.is_absolute() && home != Path::new("/") => match path.strip_prefix(&home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        },
        _ => path.display().to_string(),
    }
}

impl CustomCommands {
    /// Reads the project's and the user's commands; `builtins` are keel's own (`/help`,
    /// …), which no file may take. Also returns notes about files that were not used.
    pub fn load(
        workspace: &Path,
        allowed_roots: &[PathBuf],
        builtins: &[&str],
    ) -> (CustomCommands, Vec<String>) {
        let (dir, shown) = user_dir();
        Self::load_from(workspace, allowed_roots, Some((&dir, &shown)), builtins)
    }

    /// [`Self::load`] with the user's folder given (`None`: none).
    pub fn load_from(
        workspace: &Path,
        allowed_roots: &[PathBuf],
        user: Option<(&Path, &str)>,
        builtins: &[&str],
    ) -> (CustomCommands, Vec<String>) {
        let builtins: Vec<String> = builtins.iter().map(|b| b.trim_start_matches('/').to_owned()).collect();
        let mut notes = Vec::new();
        let mut commands = load::project(workspace, allowed_roots, &mut notes);
        if let Some((dir, shown)) = user {
            let left = MAX_COMMANDS.saturating_sub(commands.len());
            for command in load::user(dir, shown, left, &mut notes) {
                match commands.iter_mut().find(|c| c.name == command.name) {
                    Some(project) => project.hides_user = true,
                    None => commands.push(command),
                }
            }
        }
        commands.retain(|command| {
            let builtin = builtins.contains(&command.name);
            if builtin {
                notes.push(format!(
                    "{} is not a command: /{} is keel's own, which a file cannot replace",
                    command.shown, command.name
                ));
            }
            !builtin
        });
        commands.sort_by(|a, b| a.name.cmp(&b.name));
        (CustomCommands { commands, builtins }, notes)
    }

    /// The commands, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Command> {
        self.commands.iter()
    }

    /// Their names with the slash, for Tab.
    pub fn names(&self) -> Vec<String> {
        self.commands.iter().map(|c| format!("/{}", c.name)).collect()
    }

    /// The command called `name` (without the slash).
    pub fn get(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// `/help`'s part about custom commands; `None` without any.
    pub fn help(&self) -> Option<String> {
        if self.commands.is_empty() {
            return None;
        }
        let usage = |c: &Command| match &c.argument_hint {
            Some(hint) => format!("/{} {hint}", c.name),
            None => format!("/{}", c.name),
        };
        let width = self.commands.iter().map(|c| usage(c).chars().count()).max().unwrap_or(0).max(16);
        let mut text = String::from("custom commands (.keel/commands, and yours in keel's config folder):");
        for command in &self.commands {
            let from = match (command.origin, command.hides_user) {
                (Origin::Project, false) => "project",
                (Origin::Project, true) => "project; hides yours",
                (Origin::User, _) => "yours",
            };
            text.push_str(&format!("\n  {:width$} {} ({from})", usage(command), command.description));
        }
        Some(text)
    }

    /// The message `line` stands for when it starts with a custom command's name
    /// (`/review src/lib.rs`).
    pub fn expand(&self, line: &str) -> Option<Expanded> {
        let rest = line.strip_prefix('/')?;
        let (name, arguments) = match rest.find(char::is_whitespace) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        let command = self.get(name)?;
        let text = expand::expand(&command.body, arguments);
        let note = format!("/{name}: {} sent as your message ({} bytes)", command.shown, text.len());
        Some(Expanded { text, note })
    }

    /// What a line typed at the interactive prompt comes to, when it is about custom
    /// commands: a custom command, `/help` (`builtin_help` followed by the custom ones),
    /// or a misspelling nearest to a custom command. `None`: keel's own handling.
    pub fn route(&self, line: &str, builtin_help: &str) -> Option<Route> {
        if self.commands.is_empty() || !line.starts_with('/') {
            return None;
        }
        if let Some(expanded) = self.expand(line) {
            return Some(Route::Prompt(expanded));
        }
        let name = line.split_whitespace().next().unwrap_or_default();
        let bare = name.trim_start_matches('/');
        if bare == "help" {
            return Some(Route::Say(format!("{builtin_help}\n{}", self.help().unwrap_or_default())));
        }
        if self.builtins.iter().any(|b| b == bare) {
            return None;
        }
        let names: Vec<&str> = self
            .builtins
            .iter()
            .map(String::as_str)
            .chain(self.commands.iter().map(|c| c.name.as_str()))
            .collect();
        let near = crate::near::nearest(bare, &names)?;
        self.get(near)
            .map(|_| Route::Say(format!("unknown command {name}; did you mean /{near}? (/help lists them)")))
    }
}

/// Print mode's task when it starts with a custom command (`keel -p "/review src/lib.rs"`):
/// the expanded text, and notes for the user (files not used, what was sent, or a near
/// miss). Any other task is returned as it is, and no file is read for it.
pub fn for_task(workspace: &Path, allowed_roots: &[PathBuf], task: String) -> (String, Vec<String>) {
    let Some(rest) = task.strip_prefix('/') else { return (task, Vec::new()) };
    let name = rest.split(char::is_whitespace).next().unwrap_or_default().to_owned();
    // `/etc/hosts …` or `/ …` is a task about a path, not a command.
    if name.is_empty() || name.contains('/') {
        return (task, Vec::new());
    }
    let (commands, mut notes) = CustomCommands::load(workspace, allowed_roots, &[]);
    match commands.expand(&task) {
        Some(expanded) => {
            notes.push(expanded.note);
            (expanded.text, notes)
        }
        None => {
            let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
            if let Some(near) = crate::near::nearest(&name, &names) {
                notes.push(format!(
                    "/{name} is not a custom command (did you mean /{near}?); the task is sent as it is"
                ));
            }
            (task, notes)
        }
    }
}

#[cfg(test)]
mod tests;

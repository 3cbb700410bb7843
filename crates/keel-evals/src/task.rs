//! A task of the suite: a folder with `task.toml` (the prompt), `files/` (the
//! workspace's starting content), optional `setup.sh` (run in the fresh workspace before
//! keel, e.g. to make a git repository), `verify.sh` (exit 0 = pass) and `solve.sh` (a
//! reference solution, used only to check the task itself). `task.toml` may name the
//! task's `set` (the tasks added later say `set = "grown"`), so each set's pass rate can
//! be reported on its own; without it a task belongs to [`ORIGINAL_SET`].

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::EvalError;

/// The set of a task whose `task.toml` names none: the suite's first 24 tasks.
pub const ORIGINAL_SET: &str = "original";

/// [`ORIGINAL_SET`], owned (a serde default).
pub fn original_set() -> String {
    ORIGINAL_SET.to_owned()
}

/// One task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The folder name.
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    /// What the user asks.
    pub prompt: String,
    /// A short kind, for the report ("fix a bug", "git", …).
    pub category: String,
    /// Which set of tasks it belongs to ("original", "grown", …), reported on its own.
    pub set: String,
    /// The task that asks the same in another language, if any: the two are reported
    /// side by side, so a language that does worse shows.
    pub twin: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    prompt: String,
    #[serde(default)]
    category: String,
    #[serde(default = "original_set")]
    set: String,
    #[serde(default)]
    twin: Option<String>,
}

/// The outcome of a script run in a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptOutcome {
    /// True when it exited with 0.
    pub passed: bool,
    /// What it printed (stdout and stderr), trimmed.
    pub output: String,
}

impl Task {
    /// Loads the task in `dir`.
    pub fn load(dir: &Path) -> Result<Task, EvalError> {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(dir.join("task.toml"))
            .map_err(|e| EvalError::Task(format!("{name}: cannot read task.toml: {e}")))?;
        let file: TaskFile =
            toml::from_str(&text).map_err(|e| EvalError::Task(format!("{name}: task.toml: {e}")))?;
        if !dir.join("verify.sh").is_file() {
            return Err(EvalError::Task(format!("{name}: verify.sh is missing")));
        }
        if file.set.trim().is_empty() {
            return Err(EvalError::Task(format!("{name}: task.toml: `set` is empty")));
        }
        if file.twin.as_deref() == Some(name.as_str()) {
            return Err(EvalError::Task(format!("{name}: task.toml: a task is not its own `twin`")));
        }
        Ok(Task {
            name,
            dir: dir.to_path_buf(),
            prompt: file.prompt,
            category: file.category,
            set: file.set,
            twin: file.twin,
        })
    }

    /// Every task under `root`, sorted by name.
    pub fn load_all(root: &Path) -> Result<Vec<Task>, EvalError> {
        let entries = std::fs::read_dir(root)
            .map_err(|e| EvalError::Task(format!("cannot read the tasks folder {}: {e}", root.display())))?;
        let mut dirs: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.join("task.toml").is_file()).collect();
        dirs.sort();
        let tasks: Vec<Task> = dirs.iter().map(|d| Task::load(d)).collect::<Result<_, _>>()?;
        for task in &tasks {
            if let Some(twin) = &task.twin
                && !tasks.iter().any(|t| &t.name == twin)
            {
                return Err(EvalError::Task(format!(
                    "{}: task.toml: no task named `{twin}` (its twin)",
                    task.name
                )));
            }
        }
        Ok(tasks)
    }

    /// Makes a fresh workspace in `workspace` (which must not exist): copies `files/`,
    /// then runs `setup.sh` there.
    pub fn prepare(&self, workspace: &Path) -> Result<(), EvalError> {
        std::fs::create_dir_all(workspace)
            .map_err(|e| EvalError::Io(format!("cannot create {}: {e}", workspace.display())))?;
        let files = self.dir.join("files");
        if files.is_dir() {
            copy_tree(&files, workspace)?;
        }
        if self.dir.join("setup.sh").is_file() {
            let outcome = self.script("setup.sh", workspace, None)?;
            if !outcome.passed {
                return Err(EvalError::Task(format!("{}: setup.sh failed: {}", self.name, outcome.output)));
            }
        }
        Ok(())
    }

    /// Runs `verify.sh` in `workspace`; `answer` is the file holding keel's final answer.
    pub fn verify(&self, workspace: &Path, answer: &Path) -> Result<ScriptOutcome, EvalError> {
        self.script("verify.sh", workspace, Some(answer))
    }

    /// Runs the reference solution `solve.sh`, if the task has one.
    pub fn solve(&self, workspace: &Path, answer: &Path) -> Result<Option<ScriptOutcome>, EvalError> {
        if !self.dir.join("solve.sh").is_file() {
            return Ok(None);
        }
        self.script("solve.sh", workspace, Some(answer)).map(Some)
    }

    fn script(
        &self,
        script: &str,
        workspace: &Path,
        answer: Option<&Path>,
    ) -> Result<ScriptOutcome, EvalError> {
        let mut command = Command::new("bash");
        command.arg(self.dir.join(script)).current_dir(workspace).env("TASK_DIR", &self.dir);
        for (key, value) in crate::GIT_IDENTITY {
            command.env(key, value);
        }
        if let Some(answer) = answer {
            command.env("KEEL_EVAL_ANSWER", answer);
        }
        let output = command
            .output()
            .map_err(|e| EvalError::Io(format!("{}: cannot run {script}: {e}", self.name)))?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        Ok(ScriptOutcome { passed: output.status.success(), output: text.trim().to_owned() })
    }
}

/// Copies the folder `from` into `to`, recursively: folders, regular files (with their
/// permissions) and symbolic links (as links); nothing else.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), EvalError> {
    let io = |e: std::io::Error, p: &Path| EvalError::Io(format!("{}: {e}", p.display()));
    for entry in std::fs::read_dir(from).map_err(|e| io(e, from))? {
        let entry = entry.map_err(|e| io(e, from))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| io(e, &source))?;
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| io(e, &target))?;
            copy_tree(&source, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|e| io(e, &source))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&source).map_err(|e| io(e, &source))?;
            std::os::unix::fs::symlink(link, &target).map_err(|e| io(e, &target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_with(toml: &str) -> Result<Task, EvalError> {
        let dir = tempfile::tempdir().unwrap();
        let task_dir = dir.path().join("some-task");
        std::fs::create_dir_all(&task_dir).unwrap();
        std::fs::write(task_dir.join("task.toml"), toml).unwrap();
        std::fs::write(task_dir.join("verify.sh"), "exit 1\n").unwrap();
        Task::load(&task_dir)
    }

    #[test]
    fn a_task_without_a_set_is_in_the_original_set() {
        let task = task_with("prompt = \"do it\"\ncategory = \"edit\"\n").unwrap();
        assert_eq!((task.name.as_str(), task.set.as_str()), ("some-task", ORIGINAL_SET));
        let task = task_with("prompt = \"bump version\"\nset = \"grown\"\n").unwrap();
        assert_eq!(task.set, "grown");
    }

    #[test]
    fn an_empty_or_unknown_key_is_refused() {
        let empty = task_with("prompt = \"x\"\nset = \" \"\n").unwrap_err().to_string();
        assert!(empty.contains("`set` is empty"), "{empty}");
        let unknown = task_with("prompt = \"x\"\nsets = \"grown\"\n").unwrap_err().to_string();
        assert!(unknown.contains("unknown field"), "{unknown}");
    }

    #[test]
    fn a_twin_must_be_another_task_that_exists() {
        let own = task_with("prompt = \"x\"\ntwin = \"some-task\"\n").unwrap_err().to_string();
        assert!(own.contains("not its own `twin`"), "{own}");
        let root = tempfile::tempdir().unwrap();
        for (name, twin) in [("zh-a", "en-a"), ("en-a", "zh-a"), ("de-b", "en-b")] {
            let dir = root.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("task.toml"), format!("prompt = \"x\"\ntwin = \"{twin}\"\n")).unwrap();
            std::fs::write(dir.join("verify.sh"), "exit 1\n").unwrap();
        }
        let missing = Task::load_all(root.path()).unwrap_err().to_string();
        assert!(missing.contains("de-b: task.toml: no task named `en-b` (its twin)"), "{missing}");
        std::fs::remove_dir_all(root.path().join("de-b")).unwrap();
        let tasks = Task::load_all(root.path()).unwrap();
        assert_eq!(tasks.iter().map(|t| t.twin.as_deref()).collect::<Vec<_>>(), [Some("zh-a"), Some("en-a")]);
    }
}

//! The real-task suite: small coding tasks (`evals/tasks`) that keel runs with a real
//! model, each checked by its own script. See `evals/README.md`.

pub mod breakdown;
pub mod freeze;
pub mod merge;
pub mod nudge;
pub mod record;
pub mod report;
pub mod run;
pub mod stream;
pub mod task;
pub mod watch;

/// A git identity for setup scripts and for the agent's own commits.
pub const GIT_IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "keel eval"),
    ("GIT_AUTHOR_EMAIL", "eval@keel.invalid"),
    ("GIT_COMMITTER_NAME", "keel eval"),
    ("GIT_COMMITTER_EMAIL", "eval@keel.invalid"),
];

/// What can go wrong running the suite (not a failed task: that is a result).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A task folder is malformed or its setup failed.
    #[error("task: {0}")]
    Task(String),
    /// A file or process operation failed.
    #[error("{0}")]
    Io(String),
}

/// The tasks folder of this repository.
pub fn default_tasks_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/tasks")
}

/// Checks a task itself: on a fresh workspace the verification must fail, and after the
/// reference solution it must pass. Returns a problem description, or `None`.
pub fn check_task(task: &task::Task, scratch: &std::path::Path) -> Result<Option<String>, EvalError> {
    let answer = scratch.join("answer.txt");
    let workspace = scratch.join("ws");
    let _ = std::fs::remove_dir_all(&workspace);
    std::fs::create_dir_all(scratch).map_err(|e| EvalError::Io(format!("{}: {e}", scratch.display())))?;
    std::fs::write(&answer, "").map_err(|e| EvalError::Io(format!("{}: {e}", answer.display())))?;
    task.prepare(&workspace)?;
    let before = task.verify(&workspace, &answer)?;
    if before.passed {
        return Ok(Some("verify.sh passes before anything was done".into()));
    }
    match task.solve(&workspace, &answer)? {
        None => return Ok(Some("solve.sh is missing".into())),
        Some(solved) if !solved.passed => return Ok(Some(format!("solve.sh failed: {}", solved.output))),
        Some(_) => {}
    }
    let after = task.verify(&workspace, &answer)?;
    Ok((!after.passed).then(|| format!("verify.sh fails after solve.sh: {}", after.output)))
}

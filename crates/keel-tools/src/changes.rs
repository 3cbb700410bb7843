//! "Nothing changed": a turn-stopping rule. A task that asks for a change (its intent, read
//! by the model at the turn's start, [`keel_agent::intent`]) is not done while no file in
//! the project has changed; small models often end such a turn by saying they made a change they never
//! made. [`ChangeCheck`] takes a snapshot of the project's files (a hash of each small
//! file's content, size and modification time of bigger ones; git's index, HEAD and
//! reflog included) when the turn starts, compares when it would end, and asks once to
//! make the change. Content, not times: `sed -i` that replaces nothing still rewrites
//! the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures::future::BoxFuture;
use keel_agent::{Hooks, Nudge, TurnStarted, TurnStopping};
use keel_llm::Message;

/// How the request begins; the task follows.
pub const NOTHING_CHANGED: &str = "Nothing in the project has changed yet, so the task is not done:";

/// Files looked at; a bigger project is not checked.
const MAX_FILES: usize = 5_000;

/// Files up to this size are compared by content.
const HASHED_BYTES: u64 = 1024 * 1024;

/// Per file: its size, and a hash of its content (small files) or its modification time.
type Snapshot = HashMap<PathBuf, (u64, Stamp)>;

/// What tells one version of a file from another.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    Content(u64),
    Modified(Option<SystemTime>),
}

fn stamp(path: &Path, meta: &std::fs::Metadata) -> Stamp {
    use std::hash::{Hash, Hasher};
    if meta.len() <= HASHED_BYTES
        && let Ok(bytes) = std::fs::read(path)
    {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut hasher);
        return Stamp::Content(hasher.finish());
    }
    Stamp::Modified(meta.modified().ok())
}

/// The turn's starting snapshot, kept in the session's tool state.
#[derive(Default)]
struct Start(Option<(u32, Snapshot)>);

impl Start {
    /// True when turn `turn` started with exactly `now`.
    fn unchanged(&self, turn: u32, now: &Snapshot) -> bool {
        matches!(&self.0, Some((started, files)) if *started == turn && files == now)
    }
}

/// The rule, as [`Hooks`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ChangeCheck;

/// Sizes and modification times of the project's files (what `.gitignore` ignores left
/// out, git's index, HEAD and reflog in), or `None` past [`MAX_FILES`].
fn snapshot(workspace: &Path) -> Option<Snapshot> {
    let mut files = Snapshot::new();
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker.flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            let meta = entry.metadata().ok()?;
            let stamp = stamp(entry.path(), &meta);
            files.insert(entry.into_path(), (meta.len(), stamp));
            if files.len() > MAX_FILES {
                return None;
            }
        }
    }
    for name in ["index", "HEAD", "logs/HEAD"] {
        let path = workspace.join(".git").join(name);
        if let Ok(meta) = std::fs::metadata(&path) {
            files.insert(path, (meta.len(), Stamp::Modified(meta.modified().ok())));
        }
    }
    Some(files)
}

/// [`snapshot`] on the blocking pool: walking and hashing up to [`MAX_FILES`] files would
/// stall every other task of the runtime (a server's other sessions, the terminal's
/// spinner) for as long as it takes.
async fn snapshot_off_runtime(workspace: &Path) -> Option<Snapshot> {
    let workspace = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || snapshot(&workspace)).await.ok().flatten()
}

/// True when the project's files are as they were when this turn started (as the
/// session's [`ChangeCheck`] saw them); false when they differ or either look failed.
/// Git's own files are left out: `git status` rewrites the index to refresh what it
/// caches, and a turn that only looked would count as one that changed something.
pub(crate) async fn unchanged_this_turn(workspace: &Path, state: &keel_agent::ToolState) -> bool {
    let Some(now) = snapshot_off_runtime(workspace).await else { return false };
    let git = workspace.join(".git");
    state.with(|start: &mut Start| matches!(&start.0, Some((_, files)) if same_outside(files, &now, &git)))
}

/// True when the file at `relative` (to `workspace`) differs from what it was when this
/// turn started, as the session's [`ChangeCheck`] saw it. False when no snapshot was
/// taken, the file cannot be read, or the snapshot does not have it: a file new since and
/// one the snapshot leaves out (what `.gitignore` ignores) cannot be told apart, and an
/// ignored file left alone is not "changed earlier". One file, at most 1 MiB read (past
/// that, its size and time are compared).
pub(crate) fn file_changed_this_turn(
    workspace: &Path,
    relative: &Path,
    state: &keel_agent::ToolState,
) -> bool {
    let path = workspace.join(relative);
    let Ok(meta) = std::fs::metadata(&path) else { return false };
    let now = (meta.len(), stamp(&path, &meta));
    state.with(|start: &mut Start| {
        start.0.as_ref().and_then(|(_, files)| files.get(&path)).is_some_and(|then| *then != now)
    })
}

/// Whether `a` and `b` are the same but for files under `left_out`.
fn same_outside(a: &Snapshot, b: &Snapshot, left_out: &Path) -> bool {
    fn outside<'a>(files: &'a Snapshot, left_out: &Path) -> HashMap<&'a PathBuf, &'a (u64, Stamp)> {
        files.iter().filter(|(path, _)| !path.starts_with(left_out)).collect()
    }
    outside(a, left_out) == outside(b, left_out)
}

impl ChangeCheck {
    /// Whether to look at all: the task asks for a change (alone or with an answer) and
    /// this turn was not asked yet. A task read as wanting both (count-errors-to-file,
    /// embedded route: `grep -c` run, then "saved in error_count.txt" with no file written)
    /// is not done without its change; the two readings agreeing on both were right in
    /// every recorded reading (evals/intent, the suite's runs).
    fn may_ask(state: &TurnStopping<'_>) -> bool {
        state.intent.wants_a_change()
            && !state
                .messages
                .iter()
                .skip(1)
                .any(|m| matches!(m, Message::User(u) if u.content.starts_with(NOTHING_CHANGED)))
    }

    /// What to ask, if anything: the task asks for a change and no file changed.
    async fn nudge(state: &TurnStopping<'_>) -> Option<Nudge> {
        if !Self::may_ask(state) {
            return None;
        }
        let now = snapshot_off_runtime(&state.ctx.workspace).await?;
        if !state.ctx.tool_state.with(|start: &mut Start| start.unchanged(state.turn, &now)) {
            return None;
        }
        let task = state.task();
        Some(Nudge::new(
            format!(
                "{NOTHING_CHANGED} \"{task}\". Make the change now with your tools (a file tool or the shell), then check it."
            ),
            "change_check/nothing_changed: no file of the project differs from the turn's start, and the task asks \
             for a change (turn/intent)",
        ))
    }
}

impl Hooks for ChangeCheck {
    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let taken = snapshot_off_runtime(&state.ctx.workspace).await.map(|files| (state.turn, files));
            state.ctx.tool_state.with(|start: &mut Start| start.0 = taken);
        })
    }

    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        Box::pin(async move { Self::nudge(&state).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_that_only_refreshed_gits_index_changed_nothing_in_the_project() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/index"), "before").unwrap();
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        let git = dir.path().join(".git");
        let before = snapshot(dir.path()).unwrap();
        std::fs::write(dir.path().join(".git/index"), "refreshed by git status").unwrap();
        let after = snapshot(dir.path()).unwrap();
        assert_ne!(before, after, "ChangeCheck itself sees git's files (a commit is a change)");
        assert!(same_outside(&before, &after, &git));
        std::fs::write(dir.path().join("b.txt"), "new").unwrap();
        assert!(!same_outside(&before, &snapshot(dir.path()).unwrap(), &git));
        std::fs::remove_file(dir.path().join("b.txt")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        assert!(!same_outside(&before, &snapshot(dir.path()).unwrap(), &git));
    }

    #[test]
    fn a_file_is_changed_this_turn_only_when_the_snapshot_had_it_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        std::fs::write(dir.path().join("x.log"), "ignored").unwrap();
        let state = keel_agent::ToolState::default();
        let changed = |name: &str| file_changed_this_turn(dir.path(), Path::new(name), &state);
        assert!(!changed("a.txt"), "no snapshot taken");
        state.with(|start: &mut Start| start.0 = Some((1, snapshot(dir.path()).unwrap())));
        assert!(!changed("a.txt"));
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        assert!(changed("a.txt"));
        // An ignored file is not in the snapshot: never "changed earlier".
        std::fs::write(dir.path().join("x.log"), "changed").unwrap();
        assert!(!changed("x.log"));
        std::fs::write(dir.path().join("b.txt"), "new").unwrap();
        assert!(!changed("b.txt"), "new since, or ignored: not told apart");
        assert!(!changed("missing.txt"));
    }

    #[test]
    fn the_snapshot_sees_edits_and_commits_but_not_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        let before = snapshot(dir.path()).unwrap();
        std::fs::write(dir.path().join("x.log"), "ignored").unwrap();
        assert_eq!(snapshot(dir.path()).unwrap(), before);
        // Rewritten with the same content (as `sed -i` that matched nothing does): no change.
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        assert_eq!(snapshot(dir.path()).unwrap(), before);
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        assert_ne!(snapshot(dir.path()).unwrap(), before);
        let before = snapshot(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join(".git/logs")).unwrap();
        std::fs::write(dir.path().join(".git/logs/HEAD"), "commit").unwrap();
        assert_ne!(snapshot(dir.path()).unwrap(), before);
    }
}

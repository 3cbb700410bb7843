//! Where a replay's tools run: a copy of the session's workspace in a folder of its own
//! under the temporary folder, removed when the replay ends (with `--tools recorded`, a
//! folder with only the project's `AGENTS.md`: nothing runs in the workspace itself). The recorded session's
//! commands may be destructive; they change the copy (under the shell sandbox of the
//! settings), never the workspace. Before the replay starts, the files the session's file
//! tools changed are put back in the copy as they were before it (from the undo records
//! keel keeps with the session), so the first read sees what the recording's saw.

use std::path::{Path, PathBuf};

/// Most bytes copied; a larger workspace is replayed with `--tools recorded`.
const MAX_BYTES: u64 = 2 << 30;
/// Most files and folders copied.
const MAX_ENTRIES: u64 = 200_000;

/// Why the workspace could not be copied.
#[derive(Debug)]
pub struct CopyError {
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CopyError {}

fn io(what: &str, path: &Path, e: std::io::Error) -> CopyError {
    CopyError { message: format!("{what} {}: {e}", path.display()) }
}

/// A scratch folder: the workspace's copy and the replay's artifacts; removed on drop.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
    /// The copy of the workspace (named as the workspace is).
    pub workspace: PathBuf,
    /// The replayed session's artifacts (spilled output, undo records).
    pub artifacts: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Scratch {
    /// A new scratch folder, `keel-replay-…` in the temporary folder, readable only by
    /// the user, with an empty workspace named `name`.
    pub fn new(name: &str) -> Result<Scratch, CopyError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        for attempt in 0..100u32 {
            let root =
                base.join(format!("keel-replay-{}-{:x}-{attempt}", std::process::id(), stamp.as_nanos()));
            match std::fs::DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => {
                    let root = root.canonicalize().map_err(|e| io("cannot open", &root, e))?;
                    let scratch =
                        Scratch { workspace: root.join(name), artifacts: root.join("artifacts"), root };
                    for dir in [&scratch.workspace, &scratch.artifacts] {
                        std::fs::create_dir(dir).map_err(|e| io("cannot create", dir, e))?;
                    }
                    return Ok(scratch);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io("cannot create", &root, e)),
            }
        }
        Err(CopyError { message: format!("cannot create a scratch folder in {}", base.display()) })
    }

    /// Copies `original` (a folder) into the workspace: files with their permissions,
    /// symbolic links as links (never followed), nothing else.
    pub fn copy_from(&self, original: &Path) -> Result<(), CopyError> {
        let mut budget = (0u64, 0u64);
        copy_dir(original, &self.workspace, &mut budget)
    }
}

impl Scratch {
    /// Copies only the project's instructions (`AGENTS.md`, a regular file) from
    /// `original`: with `--tools recorded` keel works in the otherwise empty copy, so
    /// nothing (a user's hook) runs in the workspace, and the system prompt is the same.
    pub fn copy_instructions(&self, original: &Path) -> Result<(), CopyError> {
        let source = original.join("AGENTS.md");
        match std::fs::symlink_metadata(&source) {
            Ok(meta) if meta.is_file() => std::fs::copy(&source, self.workspace.join("AGENTS.md"))
                .map(drop)
                .map_err(|e| io("cannot copy", &source, e)),
            _ => Ok(()),
        }
    }
}

fn copy_dir(from: &Path, to: &Path, budget: &mut (u64, u64)) -> Result<(), CopyError> {
    let entries = std::fs::read_dir(from).map_err(|e| io("cannot read", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io("cannot read", from, e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| io("cannot read", &source, e))?;
        budget.1 += 1;
        if budget.1 > MAX_ENTRIES {
            return Err(CopyError {
                message: format!("the workspace has more than {MAX_ENTRIES} files and folders to copy"),
            });
        }
        if kind.is_dir() {
            std::fs::create_dir(&target).map_err(|e| io("cannot create", &target, e))?;
            copy_dir(&source, &target, budget)?;
        } else if kind.is_file() {
            budget.0 += entry.metadata().map(|m| m.len()).unwrap_or(0);
            if budget.0 > MAX_BYTES {
                return Err(CopyError {
                    message: format!("the workspace is larger than {} GB to copy", MAX_BYTES >> 30),
                });
            }
            std::fs::copy(&source, &target).map_err(|e| io("cannot copy", &source, e))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&source).map_err(|e| io("cannot read", &source, e))?;
            std::os::unix::fs::symlink(&link, &target).map_err(|e| io("cannot create", &target, e))?;
        }
    }
    Ok(())
}

/// What putting the session's file changes back did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rewound {
    /// Files written back as they were before the session.
    pub restored: usize,
    /// Files the session created, removed.
    pub removed: usize,
    /// Files that could not be put back, and why.
    pub failed: Vec<String>,
}

/// Puts the files that calls `writes` (in the order they ran) changed back in `copy` as
/// they were before the first of them, from the undo records in `artifacts`. A file
/// outside `original` is left alone (the copy has only the workspace).
pub fn rewind(copy: &Path, original: &Path, artifacts: &Path, writes: &[String]) -> Rewound {
    let mut done = Rewound::default();
    let mut oldest: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
    for call_id in writes.iter().rev() {
        match keel_tools::undo::kept_before(artifacts, call_id) {
            Ok(Some(kept)) => match kept.path.strip_prefix(original) {
                Ok(relative) => {
                    let path = copy.join(relative);
                    oldest.retain(|(p, _)| *p != path);
                    oldest.push((path, kept.content));
                }
                Err(_) => done.failed.push(format!("{} (outside the workspace)", kept.path.display())),
            },
            Ok(None) => {}
            Err(e) => done.failed.push(format!("a file changed by call {call_id}: {e}")),
        }
    }
    for (path, content) in oldest {
        let outcome = match &content {
            Some(bytes) => path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&path, bytes))
                .map(|_| done.restored += 1),
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other.map(|_| done.removed += 1),
            },
        };
        if let Err(e) = outcome {
            done.failed.push(format!("{}: {e}", path.display()));
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_has_files_links_and_folders_and_goes_away() {
        let original = tempfile::tempdir().unwrap();
        std::fs::create_dir(original.path().join("src")).unwrap();
        std::fs::write(original.path().join("src/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("src/a.txt", original.path().join("link")).unwrap();
        let scratch = Scratch::new("proj").unwrap();
        scratch.copy_from(original.path()).unwrap();
        assert_eq!(std::fs::read_to_string(scratch.workspace.join("src/a.txt")).unwrap(), "a");
        assert_eq!(std::fs::read_link(scratch.workspace.join("link")).unwrap(), Path::new("src/a.txt"));
        assert!(scratch.workspace.ends_with("proj") && scratch.artifacts.is_dir());
        let root = scratch.root.clone();
        drop(scratch);
        assert!(!root.exists());
    }
}

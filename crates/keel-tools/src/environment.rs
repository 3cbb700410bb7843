//! The environment block: what a model would otherwise spend its first steps finding out
//! (the folder, its top-level entries, the git branch and whether the tree is dirty, the
//! OS, the date). Logged once as the first user message of a session, so every request
//! starts with the same bytes (prompt caches keep working).

use std::path::Path;
use std::process::{Command, Stdio};

/// Most top-level entries named.
const MAX_ENTRIES: usize = 40;

/// The block for a session working in `workspace`, dated `date` (YYYY-MM-DD).
pub fn describe(workspace: &Path, date: &str) -> String {
    let mut out = String::from("<environment>\n");
    out.push_str(&format!(
        "Project folder: {} (your tools work here; use relative paths)\n",
        workspace.display()
    ));
    out.push_str(&entries_line(workspace));
    out.push_str(&git_line(workspace));
    out.push_str(&format!("OS: {} {}; today: {date}\n", std::env::consts::OS, std::env::consts::ARCH));
    out.push_str("</environment>");
    out
}

fn entries_line(workspace: &Path) -> String {
    let Ok(read) = std::fs::read_dir(workspace) else {
        return "Top-level entries: (the folder cannot be read)\n".to_owned();
    };
    let mut names: Vec<String> = read
        .flatten()
        .filter(|e| e.file_name() != ".git")
        .map(|e| {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    if names.is_empty() {
        return "Top-level entries: none (the folder is empty)\n".to_owned();
    }
    names.sort();
    let total = names.len();
    names.truncate(MAX_ENTRIES);
    let more = if total > names.len() { format!(" and {} more", total - names.len()) } else { String::new() };
    format!("Top-level entries: {}{more}\n", names.join(", "))
}

fn git(workspace: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim_end().to_owned())
}

fn git_line(workspace: &Path) -> String {
    if git(workspace, &["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        return "Git: not a git repository\n".to_owned();
    }
    let branch = git(workspace, &["branch", "--show-current"])
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "(detached HEAD)".to_owned());
    let state = match git(workspace, &["status", "--porcelain", "--untracked-files=normal"]) {
        Some(status) if status.is_empty() => "no uncommitted changes".to_owned(),
        Some(status) => {
            let n = status.lines().count();
            format!("uncommitted changes in {n} file{} (see `git status`)", if n == 1 { "" } else { "s" })
        }
        None => "status unknown".to_owned(),
    };
    format!("Git: branch {branch}, {state}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap()
            .status;
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_plain_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("README.md"), "x").unwrap();
        let block = describe(dir.path(), "2026-11-30");
        assert!(block.starts_with("<environment>\nProject folder: "), "{block}");
        assert!(block.contains("Top-level entries: README.md, src/\n"), "{block}");
        assert!(block.contains("Git: not a git repository\n"), "{block}");
        assert!(block.ends_with("today: 2026-11-30\n</environment>"), "{block}");
    }

    #[test]
    fn a_repository_with_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        run(dir.path(), &["init", "-q", "-b", "feature/x"]);
        run(dir.path(), &["add", "-A"]);
        run(dir.path(), &["commit", "-qm", "one"]);
        assert!(describe(dir.path(), "d").contains("Git: branch feature/x, no uncommitted changes\n"));
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        let block = describe(dir.path(), "d");
        assert!(
            block.contains("Git: branch feature/x, uncommitted changes in 1 file (see `git status`)\n"),
            "{block}"
        );
        assert!(!block.contains(".git"), "{block}");
    }

    #[test]
    fn many_entries_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..50 {
            std::fs::write(dir.path().join(format!("f{n:02}")), "").unwrap();
        }
        assert!(describe(dir.path(), "d").contains("f39 and 10 more\n"));
    }
}

//! The environment block: what a model would otherwise spend its first steps finding out
//! (the folder, its top-level entries, the git branch and which files are uncommitted, the
//! OS, the date). Logged once as the first user message of a session, so every request
//! starts with the same bytes (prompt caches keep working).

use std::path::Path;
use std::process::{Command, Stdio};

/// Most top-level entries named.
const MAX_ENTRIES: usize = 40;

/// The block for a session working in `workspace`, dated `date` (YYYY-MM-DD). With
/// `show_path` false the folder's absolute path is left out: small models copied it into
/// arguments and mangled it (dropping a component, or taking a folder name for a file).
pub fn describe(workspace: &Path, date: &str, show_path: bool) -> String {
    let mut out = String::from("<environment>\n");
    if show_path {
        out.push_str(&format!(
            "Project folder: {} (your tools work here; use relative paths)\n",
            workspace.display()
        ));
    } else {
        out.push_str("Project folder: the current folder, `.` (your tools and shell commands work here; use paths relative to it)\n");
    }
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
        Some(status) => changes_text(&status),
        None => "status unknown".to_owned(),
    };
    format!("Git: branch {branch}, {state}\n")
}

/// Most changed files named.
const MAX_CHANGED: usize = 8;
/// Longer paths are cut.
const MAX_PATH_CHARS: usize = 120;

/// "uncommitted changes in 2 files: src/app.py (modified), notes.txt (new)" from
/// `git status --porcelain` (v1) output: the answer to "what is uncommitted?" is in the
/// context, where a small model finds it without running git.
fn changes_text(porcelain: &str) -> String {
    let lines: Vec<&str> = porcelain.lines().filter(|l| l.len() > 3).collect();
    let n = lines.len();
    let named: Vec<String> = lines
        .iter()
        .take(MAX_CHANGED)
        .map(|line| {
            let (code, path) = line.split_at(2);
            let path: String = path.trim_start().chars().take(MAX_PATH_CHARS).collect();
            let kind = match code {
                "??" => "new, untracked",
                c if c.contains('D') => "deleted",
                c if c.contains('R') => "renamed",
                c if c.contains('A') => "added",
                c if c.contains('U') => "conflict",
                _ => "modified",
            };
            format!("{path} ({kind})")
        })
        .collect();
    let more = if n > named.len() { format!(" and {} more", n - named.len()) } else { String::new() };
    format!("uncommitted changes in {n} file{}: {}{more}", if n == 1 { "" } else { "s" }, named.join(", "))
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
        let block = describe(dir.path(), "2026-11-30", true);
        assert!(block.starts_with("<environment>\nProject folder: "), "{block}");
        assert!(block.contains("Top-level entries: README.md, src/\n"), "{block}");
        assert!(block.contains("Git: not a git repository\n"), "{block}");
        assert!(block.ends_with("today: 2026-11-30\n</environment>"), "{block}");
        let short = describe(dir.path(), "2026-11-30", false);
        assert!(short.starts_with("<environment>\nProject folder: the current folder, `.` ("), "{short}");
        assert!(!short.contains(&dir.path().display().to_string()), "{short}");
    }

    #[test]
    fn a_repository_with_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        run(dir.path(), &["init", "-q", "-b", "feature/x"]);
        run(dir.path(), &["add", "-A"]);
        run(dir.path(), &["commit", "-qm", "one"]);
        assert!(describe(dir.path(), "d", true).contains("Git: branch feature/x, no uncommitted changes\n"));
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        let block = describe(dir.path(), "d", true);
        assert!(
            block.contains("Git: branch feature/x, uncommitted changes in 1 file: a.txt (modified)\n"),
            "{block}"
        );
        assert!(!block.contains(".git"), "{block}");
    }

    #[test]
    fn changed_files_are_named_with_their_kind_and_cut() {
        let porcelain = " M src/app.py\n?? notes.txt\nD  old.py\nR  a.py -> b.py\nA  new.rs";
        assert_eq!(
            changes_text(porcelain),
            "uncommitted changes in 5 files: src/app.py (modified), notes.txt (new, untracked), old.py (deleted), a.py -> b.py (renamed), new.rs (added)"
        );
        let many: String = (0..12).map(|n| format!(" M f{n}.py\n")).collect();
        assert!(changes_text(&many).ends_with("f7.py (modified) and 4 more"), "{}", changes_text(&many));
    }

    #[test]
    fn many_entries_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..50 {
            std::fs::write(dir.path().join(format!("f{n:02}")), "").unwrap();
        }
        assert!(describe(dir.path(), "d", true).contains("f39 and 10 more\n"));
    }
}

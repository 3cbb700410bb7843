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

/// Settings every git keel runs gets, over whatever the repository's config says: a
/// repository must not make keel run its code (an fsmonitor, hooks, a pager, an external
/// diff, a transport).
const SAFE_GIT: &[&str] = &[
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.pager=cat",
    "-c",
    "diff.external=",
    "-c",
    "protocol.allow=never",
    "--no-optional-locks",
];

/// Runs keel's own `git` in `workspace`: the repository's dangerous settings overridden
/// ([`SAFE_GIT`], and every filter driver the config names emptied), a scrubbed
/// environment (no keys; `HOME` for the user's own config, `PATH`), no discovery above
/// the workspace, stdin closed, at most 3 seconds. Its stdout when it succeeds.
fn git(workspace: &Path, args: &[&str]) -> Option<String> {
    let filters =
        run_git(workspace, &["config", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$"], &[])
            .unwrap_or_default();
    let off: Vec<String> = filters
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .flat_map(|key| ["-c".to_owned(), format!("{key}=")])
        .collect();
    run_git(workspace, args, &off)
}

fn run_git(workspace: &Path, args: &[&str], extra: &[String]) -> Option<String> {
    let mut command = Command::new("git");
    command
        .args(SAFE_GIT)
        .args(extra)
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_clear()
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CEILING_DIRECTORIES", workspace.parent().unwrap_or(workspace))
        .env("LC_ALL", "C");
    for name in ["PATH", "HOME", "XDG_CONFIG_HOME"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let mut child = command.spawn().ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::Read::take(&mut out, 1 << 20), &mut bytes);
        bytes
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let stdout = reader.join().ok()?;
    status.success().then(|| String::from_utf8_lossy(&stdout).trim_end().to_owned())
}

/// The branch `HEAD` names, read from the repository's files (no git run): `None` when
/// detached.
fn branch(workspace: &Path) -> Option<String> {
    let dot_git = workspace.join(".git");
    let git_dir = if std::fs::symlink_metadata(&dot_git).ok()?.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok().filter(|t| t.len() < 4096)?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        workspace.join(target)
    };
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok().filter(|t| t.len() < 4096)?;
    head.trim().strip_prefix("ref: refs/heads/").map(str::to_owned)
}

fn git_line(workspace: &Path) -> String {
    // Only the workspace's own repository: nothing above it is looked at.
    if std::fs::symlink_metadata(workspace.join(".git")).is_err() {
        return "Git: not a git repository\n".to_owned();
    }
    let branch = branch(workspace).unwrap_or_else(|| "(detached HEAD)".to_owned());
    let state = match git(
        workspace,
        &["status", "--porcelain", "--untracked-files=normal", "--ignore-submodules=all"],
    ) {
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

    /// Issue 28, item 2: keel's `git status` ran a repository's fsmonitor (and could run
    /// its filters and hooks) with keel's own environment.
    #[test]
    fn a_repositorys_code_never_runs_from_keels_git() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "1").unwrap();
        run(&ws, &["init", "-q", "-b", "main"]);
        run(&ws, &["add", "-A"]);
        run(&ws, &["commit", "-qm", "one"]);
        let pwned = dir.path().join("pwned");
        let script = dir.path().join("evil.sh");
        std::fs::write(&script, format!("#!/bin/sh\ntouch {}\ncat\n", pwned.display())).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let evil = script.display();
        run(&ws, &["config", "core.fsmonitor", &evil.to_string()]);
        run(&ws, &["config", "filter.x.clean", &evil.to_string()]);
        run(&ws, &["config", "core.pager", &evil.to_string()]);
        std::fs::write(ws.join(".gitattributes"), "*.txt filter=x\n").unwrap();
        std::fs::write(
            ws.join(".git/hooks/post-index-change"),
            format!("#!/bin/sh\ntouch {}\n", pwned.display()),
        )
        .unwrap();
        std::fs::set_permissions(
            ws.join(".git/hooks/post-index-change"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        // Make a.txt look changed, so status would filter it.
        std::fs::write(ws.join("a.txt"), "2").unwrap();
        let block = describe(&ws, "d", true);
        assert!(block.contains("Git: branch main, uncommitted changes"), "{block}");
        assert!(!pwned.exists(), "the repository's code ran");
        // Without a .git of its own, the workspace is not a repository, whatever is above.
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        assert!(describe(&ws.join("sub"), "d", true).contains("Git: not a git repository\n"));
    }
}

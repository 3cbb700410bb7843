//! The system prompt: short, precise, plus `AGENTS.md` when present.

use keel_agent::ToolErrorKind;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use keel_tools::profile::ToolProfile;
use keel_tools::workspace::{Roots, special_kind};
use rustix::fs::{Mode, OFlags};

/// Most bytes of one AGENTS.md that are included.
const MAX_AGENTS_BYTES: usize = 32 * 1024;

/// The base system prompt for a tool profile. It names no folder (the environment block
/// in the first message does), so it is the same in every project and its evaluation can
/// be reused.
pub fn base(profile: ToolProfile) -> &'static str {
    match profile {
        ToolProfile::Small => {
            "You are a coding agent working in the user's project folder (see the environment block). Use paths relative to it.
Work in steps, one tool call at a time: look at a file before you change it, change it with a tool (do not just show the change), then check it (run the script or the tests).
To learn what a program prints, or how many lines, rows or tests there are, run a command (the program itself, wc -l, grep -c) instead of reading and counting.
Tool results are for you, not for the user: after each one, call the next tool until the task is done. Then answer briefly with what you found or did."
        }
        _ => {
            "You are keel, a coding agent working in the user's project folder (see the environment block). Use paths relative to it. The file tools cannot reach outside it; shell commands run with the user's rights, so keep them inside it too.
Act only through tool calls (never write a call as text), leaving out optional arguments you do not need. Call independent read-only tools together.
Failures are reported: shell output ends with [exit code: N] (0 is success); other tools return an error that says what to fix.
Inspect before changing anything, make the smallest correct change, verify it (run the tests if there are any), then answer briefly with what you found or did."
        }
    }
}

/// Reads at most the cap (plus one byte, to know it was cut) of an instructions file
/// that is already open, and checks it is a regular text file.
fn read_capped(file: File, label: &str) -> Result<Option<String>, String> {
    let metadata = file.metadata().map_err(|e| format!("{label} was not read: {e}"))?;
    if !metadata.is_file() {
        let kind = special_kind(&metadata.file_type()).unwrap_or("a folder");
        return Err(format!("{label} was not read: it is {kind}, not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_AGENTS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{label} was not read: {e}"))?;
    if bytes.contains(&0) {
        return Err(format!("{label} was not read: it is not text"));
    }
    let cut = bytes.len() > MAX_AGENTS_BYTES;
    bytes.truncate(MAX_AGENTS_BYTES);
    let text = String::from_utf8_lossy(&bytes);
    // A character cut at the cap becomes U+FFFD; drop it.
    let text = if cut { text.trim_end_matches('\u{fffd}') } else { &text };
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(if cut { format!("{text}\n[{label} cut at {MAX_AGENTS_BYTES} bytes]") } else { text.to_owned() }))
}

/// The user's own AGENTS.md: wherever its symlinks lead (it is the user's file), but only
/// a regular file, opened without blocking.
fn user_instructions(path: &Path) -> Result<Option<String>, String> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => read_capped(File::from(fd), "~/.config/keel/AGENTS.md"),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(format!("~/.config/keel/AGENTS.md was not read: {e}")),
    }
}

/// The project's AGENTS.md, confined like read_file: inside the workspace (or an allowed
/// root), a regular file, checked where it was opened.
fn project_instructions(workspace: &Path, allowed_roots: &[PathBuf]) -> Result<Option<String>, String> {
    let roots = Roots::new(workspace, allowed_roots, &[]).map_err(|e| e.message)?;
    match roots.open_read("AGENTS.md") {
        Ok((file, _)) => read_capped(file, "AGENTS.md"),
        Err(e) if e.kind == ToolErrorKind::NotFound => Ok(None),
        Err(e) if e.kind == ToolErrorKind::OutsideWorkspace => Err(
            "AGENTS.md was not read: it leads outside the project folder (add its folder to allowed_roots to use it)"
                .to_owned(),
        ),
        Err(e) => Err(format!("AGENTS.md was not read: {}", e.message)),
    }
}

/// The full system prompt: the base, then the user's and the workspace's AGENTS.md. Also
/// returns notes for the user about instruction files that were not read.
pub fn system_prompt(
    workspace: &Path,
    allowed_roots: &[PathBuf],
    profile: ToolProfile,
    answer_tool: bool,
) -> (String, Vec<String>) {
    let mut prompt = base(profile).to_owned();
    if answer_tool {
        prompt.push_str(
            "\nEvery reply is a tool call. When the task is done, call answer with your final answer.",
        );
    }
    // No "begin each reply with one short sentence" for small models: measured without
    // it (3 runs × 24 tasks, 1.5B), the same pass rate (24/72 against 22/72) with 40%
    // fewer output tokens and a fifth less time; the notes rambled and planned steps the
    // answer no longer needed. No worked example either: the 1.5B model copied one's file
    // names (`python3 app.py` in projects without app.py) and its final answer.
    let mut notes = Vec::new();
    match user_instructions(&crate::paths::config_dir().join("AGENTS.md")) {
        Ok(Some(user)) => {
            prompt.push_str("\n\n# The user's instructions (~/.config/keel/AGENTS.md)\n");
            prompt.push_str(&user);
        }
        Ok(None) => {}
        Err(note) => notes.push(note),
    }
    match project_instructions(workspace, allowed_roots) {
        Ok(Some(project)) => {
            prompt.push_str("\n\n# Project instructions (AGENTS.md)\n");
            prompt.push_str(&project);
        }
        Ok(None) => {}
        Err(note) => notes.push(note),
    }
    (prompt, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_agents_md_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let (without, notes) = system_prompt(dir.path(), &[], ToolProfile::Full, false);
        assert!(without.contains("[exit code: N]"));
        assert!(without.len() < 1000, "keep the prompt short: {} bytes", without.len());
        assert!(notes.is_empty());
        std::fs::write(dir.path().join("AGENTS.md"), "Run `make test` before finishing.\n").unwrap();
        let (with, _) = system_prompt(dir.path(), &[], ToolProfile::Full, false);
        assert!(
            with.ends_with("# Project instructions (AGENTS.md)\nRun `make test` before finishing."),
            "{with}"
        );
    }

    /// The small prompt asks for no note before each call and shows no worked example
    /// (its file names and answer were copied into unrelated tasks).
    #[test]
    fn the_small_prompt_has_no_example_to_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (small, _) = system_prompt(dir.path(), &[], ToolProfile::Small, true);
        assert!(
            small.contains(
                "\nEvery reply is a tool call. When the task is done, call answer with your final answer."
            ),
            "{small}"
        );
        assert!(!small.contains("one short sentence"), "{small}");
        assert!(!small.contains("app.py") && !small.contains("Example"), "{small}");
    }

    /// Runs `system_prompt` on another thread, failing instead of hanging.
    fn prompt_within(workspace: &Path, roots: &[PathBuf]) -> (String, Vec<String>) {
        let (workspace, roots) = (workspace.to_path_buf(), roots.to_vec());
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(system_prompt(&workspace, &roots, ToolProfile::Full, false)));
        receive.recv_timeout(std::time::Duration::from_secs(5)).expect("reading AGENTS.md hung")
    }

    /// Issue 10, item 5: a symlink outside was read into the prompt, `/dev/zero` took
    /// 2.1 GB, a FIFO hung start-up.
    #[test]
    fn a_hostile_agents_md_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("notes.md"), "SECRET-OUTSIDE\n").unwrap();
        let agents = dir.path().join("AGENTS.md");
        std::os::unix::fs::symlink(outside.path().join("notes.md"), &agents).unwrap();
        let (prompt, notes) = prompt_within(dir.path(), &[]);
        assert!(!prompt.contains("SECRET-OUTSIDE"));
        assert_eq!(
            notes,
            [
                "AGENTS.md was not read: it leads outside the project folder (add its folder to allowed_roots to use it)"
            ]
        );
        // Allowed on purpose: read.
        let (prompt, _) = prompt_within(dir.path(), &[outside.path().to_path_buf()]);
        assert!(prompt.ends_with("SECRET-OUTSIDE"), "{prompt}");

        std::fs::remove_file(&agents).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &agents).unwrap();
        let (_, notes) = prompt_within(dir.path(), &[]);
        assert!(notes[0].contains("leads outside the project folder"), "{notes:?}");
        let (_, notes) = prompt_within(dir.path(), &["/dev".into()]);
        assert_eq!(
            notes,
            [
                "AGENTS.md was not read: `AGENTS.md` is a character device, not a regular file; the file tools only open regular files (reading it could block forever or never end)"
            ]
        );

        std::fs::remove_file(&agents).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&agents).status().unwrap().success());
        let (_, notes) = prompt_within(dir.path(), &[]);
        assert!(notes[0].contains("is a FIFO (named pipe)"), "{notes:?}");
    }

    #[test]
    fn only_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("AGENTS.md");
        std::fs::write(&agents, "é".repeat(MAX_AGENTS_BYTES)).unwrap();
        let (prompt, notes) = prompt_within(dir.path(), &[]);
        assert!(notes.is_empty());
        assert!(
            prompt.ends_with(&format!("éé\n[AGENTS.md cut at {MAX_AGENTS_BYTES} bytes]")),
            "{}",
            &prompt[prompt.len() - 100..]
        );
        // 4 GB of holes after the text: read up to the cap, then refused as not text.
        std::fs::write(&agents, "Be brief.\n").unwrap();
        std::fs::OpenOptions::new().write(true).open(&agents).unwrap().set_len(4 << 30).unwrap();
        let started = std::time::Instant::now();
        let (prompt, notes) = prompt_within(dir.path(), &[]);
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(!prompt.contains("Be brief."));
        assert_eq!(notes, ["AGENTS.md was not read: it is not text"]);
    }
}

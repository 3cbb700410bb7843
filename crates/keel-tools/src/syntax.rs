//! A file that no longer parses after write_file or edit_file is said so in the result
//! (`ToolsConfig::syntax_check`): Python through `python3`'s own parser (`compile`, which
//! runs nothing), JSON in process. Small models wrote Python missing a colon, or JSON
//! missing a brace, and went on to answer "done"; the line and the parser's message in
//! the result name what to fix. The change itself is made, unless the file parsed before
//! and `ToolsConfig::keep_parsing` is on ([`Checks::change`]): then it is refused, so a small
//! model's broken edit cannot spoil a working file.

use keel_agent::ToolErrorKind;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Largest file checked.
const MAX_CHECKED_BYTES: usize = 1024 * 1024;
/// Longest a `python3` parse may take before it is given up.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest parser message quoted.
const MAX_MESSAGE_CHARS: usize = 300;
/// Longest line of the file quoted beside the parser's message.
const MAX_QUOTED_LINE_CHARS: usize = 160;

/// Prints `line N: message` for a Python syntax error read from stdin, and exits 1.
/// `compile` (to bytecode, never run) also catches what the parser alone lets through:
/// `return` outside a function, `break` outside a loop.
const PYTHON_CHECK: &str = "import sys\n\
try:\n    compile(sys.stdin.buffer.read(), 'file', 'exec', dont_inherit=True)\n\
except SyntaxError as e:\n    print(f'line {e.lineno}: {e.msg}'); sys.exit(1)\n\
except Exception as e:\n    print(e); sys.exit(1)\n";

/// JSON files that allow comments and trailing commas (JSONC), by name or folder.
fn is_jsonc(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    ["tsconfig", "jsconfig", "devcontainer", ".eslintrc", "settings", "launch", "tasks", "extensions"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        || path.components().any(|c| c.as_os_str() == ".vscode")
}

/// Why `content` of the file at `path` does not parse, when it is a kind keel checks
/// (`.py`, `.json` but not JSONC) and it does not; `None` when it parses, is another
/// kind, or cannot be checked (no `python3` outside `workspace`, too big, too slow).
/// The parser's message is followed by the line it names, quoted: a model told only
/// "line 4: invalid syntax" about text it wrote made the same call again.
pub fn problem(path: &Path, content: &str, workspace: &Path) -> Option<String> {
    if content.len() > MAX_CHECKED_BYTES {
        return None;
    }
    let (message, line) = match path.extension().and_then(|e| e.to_str()) {
        Some("json") if !is_jsonc(path) => {
            let error = serde_json::from_str::<serde::de::IgnoredAny>(content).err()?;
            (error.to_string(), error.line())
        }
        Some("py") => {
            let message = python(content, workspace)?;
            let line = python_line(&message).unwrap_or(0);
            (message, line)
        }
        _ => return None,
    };
    Some(with_line(message, content, line))
}

/// The line number of [`PYTHON_CHECK`]'s `line N: message`.
fn python_line(message: &str) -> Option<usize> {
    message.strip_prefix("line ")?.split(':').next()?.parse().ok()
}

/// `message`, then line `line` (counted from 1) of `content` quoted when it has text.
fn with_line(message: String, content: &str, line: usize) -> String {
    let Some(text) = line.checked_sub(1).and_then(|index| content.lines().nth(index)).map(str::trim) else {
        return message;
    };
    if text.is_empty() {
        return message;
    }
    format!("{message}: `{}`", crate::output::clip_line(text, MAX_QUOTED_LINE_CHARS))
}

/// `python3` from `PATH`, skipping folders inside `workspace`: a virtual environment in
/// the project is the model's to write, and the parser runs outside the sandbox.
fn python3(workspace: &Path) -> Option<std::path::PathBuf> {
    python3_on(&std::env::var_os("PATH")?, workspace)
}

/// [`python3`] on the search path `path`.
fn python3_on(path: &std::ffi::OsStr, workspace: &Path) -> Option<std::path::PathBuf> {
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    std::env::split_paths(path).find_map(|dir| {
        let dir = std::fs::canonicalize(dir).ok()?;
        if dir.starts_with(&workspace) {
            return None;
        }
        let candidate = dir.join("python3");
        candidate.is_file().then_some(candidate)
    })
}

/// What write_file and edit_file check about a change (`ToolsConfig::syntax_check`,
/// `ToolsConfig::keep_parsing`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checks {
    /// Say when the file will not parse.
    pub warn: bool,
    /// Refuse a change after which a file that parses would not.
    pub keep_parsing: bool,
}

impl Checks {
    /// The checks `config` asks for.
    pub(crate) fn of(config: &crate::ToolsConfig) -> Checks {
        Checks { warn: config.syntax_check, keep_parsing: config.keep_parsing }
    }

    /// Checks a change of the file at `path` to `after`, parsing it once; `before` gives
    /// the old text and is called only under `keep_parsing` when `after` does not parse.
    /// `Err` is the refusal; `Ok(Some(note))` the warning to append to the result.
    pub(crate) fn change(
        self,
        path: &str,
        before: impl FnOnce() -> Option<String>,
        after: &str,
        workspace: &Path,
    ) -> Result<Option<String>, keel_agent::ToolError> {
        self.judge(path, before, after, workspace).map_err(|problem| {
            keel_agent::ToolError::new(ToolErrorKind::WouldNotParse, refusal(path, &problem))
        })
    }

    /// [`Checks::change`] with the parser's problem itself as the refusal (`Err`).
    pub(crate) fn judge(
        self,
        path: &str,
        before: impl FnOnce() -> Option<String>,
        after: &str,
        workspace: &Path,
    ) -> Result<Option<String>, String> {
        if !self.warn && !self.keep_parsing {
            return Ok(None);
        }
        let Some(problem) = problem(Path::new(path), after, workspace) else { return Ok(None) };
        if self.keep_parsing
            && before().is_some_and(|old| self::problem(Path::new(path), &old, workspace).is_none())
        {
            return Err(problem);
        }
        Ok(self.warn.then(|| note(path, &problem)))
    }
}

/// `problem` cut to the length quoted in a message.
pub(crate) fn clipped(problem: &str) -> String {
    problem.chars().take(MAX_MESSAGE_CHARS).collect()
}

/// The refusal of a change after which `path` would not parse (`problem`).
pub(crate) fn refusal(path: &str, problem: &str) -> String {
    let problem = clipped(problem);
    format!(
        "`{path}` was not changed: it parses now, and with this change it would not ({problem}). Correct your text and make the call again."
    )
}

/// The text of the file at `path` under `roots` as it is now, when keel checks its kind
/// (`.py`, `.json`) and it is readable UTF-8 of at most the checked size.
pub(crate) fn current_text(roots: &crate::workspace::Roots, path: &str) -> Option<String> {
    if !matches!(Path::new(path).extension().and_then(|e| e.to_str()), Some("py" | "json")) {
        return None;
    }
    roots.read_text(path, MAX_CHECKED_BYTES).ok().flatten()
}

/// The report's note for [`problem`].
pub fn note(shown: &str, problem: &str) -> String {
    let problem = clipped(problem);
    format!("\nWarning: `{shown}` does not parse now ({problem}). Fix that before you go on.")
}

fn python(content: &str, workspace: &Path) -> Option<String> {
    // -I: no user site, no environment variables, no script folder on the path;
    // -S: no `site` import (it would run `.pth` files).
    let mut child = Command::new(python3(workspace)?)
        .args(["-I", "-S", "-c", PYTHON_CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // Written by a thread of its own, so a parser that stops reading cannot block us
    // past the deadline (killing it ends the write).
    let stdin = child.stdin.take()?;
    let bytes = content.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let mut stdin = stdin;
        stdin.write_all(&bytes).is_ok()
    });
    let deadline = Instant::now() + PYTHON_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = writer.join();
                return None;
            }
        }
    };
    let written = writer.join().unwrap_or(false);
    if status.success() || !written {
        return None;
    }
    let output = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_problems_name_the_line() {
        let ws = Path::new("/nonexistent-workspace");
        assert_eq!(problem(Path::new("a.json"), "{\"a\": 1}", ws), None);
        let broken = problem(Path::new("package.json"), "{\n  \"a\": 1,\n}\n", ws).unwrap_or_default();
        assert_eq!(broken, "key must be a string at line 3 column 1: `}`");
        assert_eq!(problem(Path::new("notes.txt"), "{", ws), None);
        // JSONC allows comments.
        let commented = "{\n  // strict mode\n  \"strict\": true,\n}\n";
        assert_eq!(problem(Path::new("tsconfig.json"), commented, ws), None);
        assert_eq!(problem(Path::new(".vscode/launch.json"), commented, ws), None);
    }

    #[test]
    fn python_problems_name_the_line_when_python3_is_there() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        if !keel_testkit::prereq::available("python3", python3(ws).is_some(), "python3") {
            assert_eq!(problem(Path::new("a.py"), "def f(:\n", ws), None);
            return;
        }
        assert_eq!(problem(Path::new("a.py"), "def f():\n    return 1\n", ws), None);
        assert_eq!(
            problem(Path::new("report.py"), "x = 1\n\ndef report(stock)\n    return stock\n", ws),
            Some("line 3: expected ':': `def report(stock)`".to_owned())
        );
        // The line the 1.5B model wrote, quoted back to it.
        assert_eq!(
            problem(Path::new("greet.py"), "import sys\n\n\ndef greet(name, --shout=False):\n    pass\n", ws),
            Some("line 4: invalid syntax: `def greet(name, --shout=False):`".to_owned())
        );
        // Compiling catches what parsing alone lets through (a body dedented out of its
        // function, as the 1.5B model's edit left it).
        assert_eq!(
            problem(Path::new("stats.py"), "def mean(v):\n    \"\"\"Doc.\"\"\"\nreturn sum(v)\n", ws),
            Some("line 3: 'return' outside function: `return sum(v)`".to_owned())
        );
        // Parsing runs nothing.
        assert_eq!(problem(Path::new("a.py"), "import os\nos.exit(3)\nraise SystemExit(4)\n", ws), None);
        // A python3 inside the workspace (a venv the model could write) is skipped.
        let bin = ws.join("venv/bin");
        std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(bin.join("python3"), "#!/bin/sh\nexit 0\n").unwrap_or_else(|e| panic!("{e}"));
        let mut dirs = vec![bin];
        dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        let path = std::env::join_paths(dirs).unwrap_or_else(|e| panic!("{e}"));
        let found = python3_on(&path, ws).unwrap_or_default();
        let ws = std::fs::canonicalize(ws).unwrap_or_else(|e| panic!("{e}"));
        assert!(found.is_file() && !found.starts_with(&ws), "{}", found.display());
    }

    #[test]
    fn the_quoted_line_is_cut_and_blank_or_missing_lines_are_not_quoted() {
        let long = format!("x = [{}", "1, ".repeat(100));
        let quoted = with_line("line 1: '[' was never closed".into(), &long, 1);
        assert!(quoted.ends_with(",… [cut]`") && quoted.chars().count() < 240, "{quoted}");
        assert_eq!(with_line("m".into(), "a\n\n", 2), "m");
        assert_eq!(with_line("m".into(), "a\n", 7), "m");
        assert_eq!(with_line("m".into(), "a\n", 0), "m");
        assert_eq!(python_line("line 12: invalid syntax"), Some(12));
        assert_eq!(python_line("unexpected EOF"), None);
    }

    #[test]
    fn the_note_says_what_to_fix() {
        assert_eq!(
            note("report.py", "line 3: expected ':'"),
            "\nWarning: `report.py` does not parse now (line 3: expected ':'). Fix that before you go on."
        );
    }
}

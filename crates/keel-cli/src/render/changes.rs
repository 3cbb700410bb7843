//! What a finished call changed, shown under its line: the diff of a write or edit
//! (compact), the last lines of a shell command's output.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;

use keel_tools::workspace::Roots;

/// Diff lines shown after a change at most.
const DIFF_LINES: usize = 16;
/// Output lines of a shell command shown at most.
const TAIL_LINES: usize = 5;
/// Largest file snapshotted for a diff.
const SNAPSHOT_BYTES: u64 = 512 * 1024;

/// Files as they were when a write or edit started, by call id.
pub struct Changes {
    roots: Roots,
    before: Mutex<HashMap<String, Option<String>>>,
}

impl Changes {
    /// Watches changes to files under `workspace`.
    pub fn new(workspace: &std::path::Path) -> Option<Changes> {
        let roots = Roots::new(workspace, &[], &[]).ok()?;
        Some(Changes { roots, before: Mutex::new(HashMap::new()) })
    }

    fn read(&self, path: &str) -> Option<String> {
        match self.roots.open_read(path) {
            Ok((file, _)) => {
                let mut bytes = Vec::new();
                file.take(SNAPSHOT_BYTES + 1).read_to_end(&mut bytes).ok()?;
                if bytes.len() as u64 > SNAPSHOT_BYTES {
                    return None;
                }
                String::from_utf8(bytes).ok()
            }
            Err(e) if e.code == "not_found" => Some(String::new()),
            Err(_) => None,
        }
    }

    /// A write or edit is starting: keep the file as it is.
    pub fn started(&self, call_id: &str, tool: &str, arguments: &str) {
        let Some(path) = file_path(tool, arguments) else { return };
        let snapshot = self.read(&path);
        if let Ok(mut before) = self.before.lock() {
            before.insert(call_id.to_owned(), snapshot);
        }
    }

    /// The lines to show under a finished call (empty for most calls).
    pub fn finished(
        &self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        output: &str,
        color: bool,
    ) -> Vec<String> {
        let before = self.before.lock().ok().and_then(|mut b| b.remove(call_id));
        if tool == "shell" {
            return tail(output);
        }
        let (Some(path), Some(Some(before))) = (file_path(tool, arguments), before) else {
            return Vec::new();
        };
        let Some(after) = self.read(&path) else { return Vec::new() };
        let (added, removed) = super::diff::stat(&before, &after);
        let mut lines = vec![format!("      {path}: +{added} -{removed}")];
        let diff = super::diff::unified(&before, &after, &path, DIFF_LINES + 2, color);
        // The diff's own two header lines repeat the path.
        lines.extend(diff.into_iter().skip(2).map(|l| format!("      {l}")));
        lines
    }
}

fn file_path(tool: &str, arguments: &str) -> Option<String> {
    if tool != "write_file" && tool != "edit_file" {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    args.get("path")?.as_str().map(str::to_owned)
}

/// The last lines of a shell result's output (without keel's own `[…]` notes), when it
/// printed more than the one line the call's summary shows.
pub fn tail(output: &str) -> Vec<String> {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| !(l.trim().is_empty() || (l.starts_with('[') && l.ends_with(']'))))
        .collect();
    if lines.len() < 2 {
        return Vec::new();
    }
    let start = lines.len().saturating_sub(TAIL_LINES);
    let mut out = Vec::new();
    if start > 0 {
        out.push(format!("      … {start} line{} above", if start == 1 { "" } else { "s" }));
    }
    out.extend(lines[start..].iter().map(|l| format!("      {}", super::format::clip(l, 160))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_shows_its_diff_and_a_shell_call_its_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let changes = Changes::new(dir.path()).unwrap();
        let args = r#"{"path":"a.txt","content":"one\n2\n"}"#;
        changes.started("c1", "write_file", args);
        std::fs::write(dir.path().join("a.txt"), "one\n2\n").unwrap();
        let lines = changes.finished("c1", "write_file", args, "Overwrote a.txt", false);
        assert_eq!(
            lines,
            ["      a.txt: +1 -1", "      @@ -1,2 +1,2 @@", "       one", "      -two", "      +2"]
        );
        let output: String = (1..=9).map(|n| format!("line {n}\n")).collect::<String>() + "[exit code: 0]";
        assert_eq!(
            tail(&output),
            [
                "      … 4 lines above",
                "      line 5",
                "      line 6",
                "      line 7",
                "      line 8",
                "      line 9"
            ]
        );
        assert!(tail("ok\n[exit code: 0]").is_empty());
    }
}

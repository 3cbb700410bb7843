//! What a finished call changed, shown under its line: the diff of a file change (from
//! the change logged with its result, so `keel --remote` shows the same), the last lines
//! of a shell command's output.

use keel_session::FileChange;

/// Diff lines shown after a change at most.
const DIFF_LINES: usize = 16;
/// Output lines of a shell command shown at most.
const TAIL_LINES: usize = 5;

/// The lines shown for a logged file change: `path: +a -r`, then the diff, cut.
pub fn diff(change: &FileChange, color: bool) -> Vec<String> {
    let what = if change.created { " (new)" } else { "" };
    let mut lines = vec![format!("      {}{what}: +{} -{}", change.path, change.added, change.removed)];
    let all: Vec<&str> = change.diff.lines().collect();
    lines.extend(all.iter().take(DIFF_LINES).map(|l| format!("      {}", super::diff::shown(l, color))));
    let hidden = all.len().saturating_sub(DIFF_LINES) + change.cut_lines as usize;
    if hidden > 0 {
        lines.push(format!("      … {hidden} more diff line{} hidden", if hidden == 1 { "" } else { "s" }));
    }
    lines
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
    fn a_change_shows_its_diff_and_a_shell_call_its_last_lines() {
        let change = FileChange {
            path: "a.txt".into(),
            created: false,
            added: 1,
            removed: 1,
            diff: "@@ -1,2 +1,2 @@\n one\n-two\n+2\n".into(),
            cut_lines: 3,
        };
        assert_eq!(
            diff(&change, false),
            [
                "      a.txt: +1 -1",
                "      @@ -1,2 +1,2 @@",
                "       one",
                "      -two",
                "      +2",
                "      … 3 more diff lines hidden"
            ]
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

//! Unified diffs for the terminal: before an approval and after a change.

use similar::TextDiff;

/// Characters of one diff line shown; longer lines are cut with a mark (the question
/// shows the command whole, a diff's long lines are context).
const LINE_CHARS: usize = 400;

/// A unified diff of `before` → `after` for `path`, at most `max_lines` lines (then a
/// count of hidden ones), colored when `color`. Empty when nothing changes.
pub fn unified(before: &str, after: &str, path: &str, max_lines: usize, color: bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    let diff = TextDiff::configure().deadline(deadline).diff_lines(before, after);
    let text = diff.unified_diff().context_radius(2).header(path, path).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().take(max_lines).map(|line| paint(&clip(line), color)).collect();
    if lines.len() > max_lines {
        let hidden = lines.len() - max_lines;
        out.push(format!("… {hidden} more diff line{} hidden", if hidden == 1 { "" } else { "s" }));
    }
    out
}

/// One diff line as shown: control characters made visible, clipped, colored.
pub fn shown(line: &str, color: bool) -> String {
    paint(&clip(line), color)
}

fn clip(line: &str) -> String {
    let line = crate::render::safe::visible(line);
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

fn paint(line: &str, color: bool) -> String {
    if !color {
        return line.to_owned();
    }
    let code = if line.starts_with("+++") || line.starts_with("---") {
        "1"
    } else if line.starts_with('+') {
        "32"
    } else if line.starts_with('-') {
        "31"
    } else if line.starts_with("@@") {
        "36"
    } else {
        return line.to_owned();
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_capped_with_a_count_and_colored_on_request() {
        let before: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let after = before.replace("line 3\n", "line three\n").replace("line 40\n", "");
        let lines = unified(&before, &after, "a.txt", 6, false);
        assert_eq!(lines[..4], ["--- a.txt", "+++ a.txt", "@@ -1,5 +1,5 @@", " line 1"]);
        assert!(lines[6].starts_with("… ") && lines[6].ends_with("more diff lines hidden"), "{lines:?}");
        assert_eq!(lines.len(), 7);
        let colored = unified("a\n", "b\n", "x", 10, true);
        assert!(
            colored.contains(&"\x1b[31m-a\x1b[0m".to_owned())
                && colored.contains(&"\x1b[32m+b\x1b[0m".to_owned())
        );
        assert!(unified("same\n", "same\n", "x", 10, false).is_empty());
    }
}

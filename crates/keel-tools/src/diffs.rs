//! What a write changed, as a bounded unified diff for people: logged with the call's
//! result ([`keel_agent::FileChange`]), shown by the terminal and `keel --remote`, never
//! sent to a model.

use keel_agent::FileChange;
use similar::{ChangeTag, TextDiff};

/// Largest text (before or after) a diff is made of; a bigger change is reported without.
pub const MAX_DIFFED_BYTES: usize = 512 * 1024;
/// Diff lines logged at most.
const MAX_LINES: usize = 200;
/// Diff bytes logged at most.
const MAX_BYTES: usize = 16 * 1024;
/// Characters of one diff line logged at most.
const LINE_CHARS: usize = 400;
/// Time a diff may take (a pathological pair of texts gets a coarser diff).
const DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);

/// The change from `before` (`None`: the file did not exist) to `after` in `path`;
/// `None` when either text is too big to diff or nothing changed.
pub fn file_change(path: &str, before: Option<&str>, after: &str) -> Option<FileChange> {
    let old = before.unwrap_or("");
    if old.len() > MAX_DIFFED_BYTES || after.len() > MAX_DIFFED_BYTES || (before.is_some() && old == after) {
        return None;
    }
    let diff = TextDiff::configure().deadline(std::time::Instant::now() + DEADLINE).diff_lines(old, after);
    let (mut added, mut removed) = (0u32, 0u32);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let unified = diff.unified_diff().context_radius(2).to_string();
    let (mut text, mut kept, mut cut) = (String::new(), 0usize, 0u32);
    for line in unified.lines() {
        if kept < MAX_LINES && text.len() + line.len() < MAX_BYTES {
            text.push_str(clip(line));
            text.push('\n');
            kept += 1;
        } else {
            cut += 1;
        }
    }
    Some(FileChange {
        path: path.to_owned(),
        created: before.is_none(),
        added,
        removed,
        diff: text,
        cut_lines: cut,
    })
}

fn clip(line: &str) -> &str {
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_counted_and_its_hunks_kept() {
        let change = file_change("a.txt", Some("one\ntwo\nthree\n"), "one\n2\nthree\n").unwrap();
        assert_eq!(
            change,
            FileChange {
                path: "a.txt".into(),
                created: false,
                added: 1,
                removed: 1,
                diff: "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n".into(),
                cut_lines: 0,
            }
        );
        let created = file_change("b.txt", None, "x\n").unwrap();
        assert!(created.created && created.added == 1 && created.removed == 0, "{created:?}");
        assert_eq!(file_change("a.txt", Some("same\n"), "same\n"), None);
    }

    #[test]
    fn a_long_diff_is_cut_and_says_how_much() {
        let after: String = (0..1000).map(|n| format!("line {n}\n")).collect();
        let change = file_change("big.txt", Some(""), &after).unwrap();
        assert_eq!(change.added, 1000);
        assert_eq!(change.diff.lines().count(), MAX_LINES);
        assert_eq!(change.cut_lines as usize, 1001 - MAX_LINES);
        let huge = "x".repeat(MAX_DIFFED_BYTES + 1);
        assert_eq!(file_change("huge.txt", Some(""), &huge), None);
    }
}

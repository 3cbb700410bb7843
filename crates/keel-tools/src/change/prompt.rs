//! What change_file's editor is asked, and how its reply is read.

use super::{ChangeArgs, MAX_RELATED, MAX_RELATED_BYTES};
use crate::workspace::Roots;

/// What the editor is shown: the file as it is (`None` when new) and other files.
pub(super) struct Inputs {
    pub current: Option<String>,
    pub related: Vec<(String, String)>,
}

/// What stands around a file name in prose: ASCII punctuation and the full-width marks
/// of Chinese and Japanese text (`修复 backup.sh。` names `backup.sh`).
const AROUND_NAMES: &str = "`'\"(),;:<>[]{}，。：；（）「」『』、！？";

/// The words of `text` that may be file names: split at spaces and [`AROUND_NAMES`],
/// a sentence's closing `.`, `!` or `?` dropped.
pub(super) fn file_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || AROUND_NAMES.contains(c))
        .map(|word| word.trim_end_matches(['.', '!', '?']))
        .filter(|word| !word.is_empty())
}

/// Words of `text` that name files in the project other than `target` (at most
/// [`MAX_RELATED`], small text files only): what the task is about besides the file.
pub(super) fn related_files(roots: &Roots, text: &str, target: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let target = roots.lexical(target);
    for word in file_words(text) {
        if found.len() == MAX_RELATED || !word.contains('.') || word.len() > 200 {
            continue;
        }
        if roots.lexical(word) == target || found.iter().any(|(name, _)| name == word) {
            continue;
        }
        if let Ok(Some(text)) = roots.read_text(word, MAX_RELATED_BYTES) {
            found.push((word.to_owned(), text));
        }
    }
    found
}

/// A code fence longer than any line of backticks in `texts`.
pub(crate) fn fence_for<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let longest = texts
        .into_iter()
        .flat_map(str::lines)
        .filter_map(|l| {
            let run = l.trim_start().chars().take_while(|&c| c == '`').count();
            (run >= 3).then_some(run)
        })
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// The editor's request text: the task, what to change in the file (the model's words),
/// the other files the task names, the file, and the request for its whole new content.
/// Measured on the 1.5B model: with the file last, just before the request, it made the
/// change in 5 of 5 samples where "file, change, request" made it in 0 to 2. Leaving the
/// model's words out when the task names the file made no difference where they were
/// wrong code (fix-failing-test 3 of 5 without, 2 of 5 with) and lost the sorted names
/// it had already printed (sort-lines 2 of 3 without, 3 of 3 with), so they stay.
/// For a new file the request asks for the text itself: told only "its complete content",
/// the editor given "11" for error_count.txt wrote a bash script that counts, and given
/// `echo 11 > error_count.txt` wrote that command; saying "not a program or command that
/// would write it" it wrote `11` for both (create-run-script, csv-to-json and gitignore
/// passed as before).
pub(super) fn editor_prompt(task: Option<&str>, args: &ChangeArgs, inputs: &Inputs) -> String {
    let fence = fence_for(
        inputs.current.iter().map(String::as_str).chain(inputs.related.iter().map(|(_, t)| t.as_str())),
    );
    let path = &args.path;
    let change = args.change.trim();
    let mut prompt = String::new();
    match task.map(str::trim).filter(|t| !t.is_empty()) {
        Some(task) if task == change => prompt.push_str(&format!("{task}\n")),
        Some(task) => prompt.push_str(&format!("{task}\nIn `{path}`: {change}\n")),
        None => prompt.push_str(&format!("In `{path}`: {change}\n")),
    }
    for (name, text) in &inputs.related {
        prompt.push_str(&format!("\nThis is `{name}`:\n{fence}\n{}{fence}\n", with_newline(text)));
    }
    match &inputs.current {
        Some(text) => prompt.push_str(&format!(
            "\nThis is `{path}`:\n{fence}\n{}{fence}\nReply with the complete new content of `{path}` in one code block.",
            with_newline(text)
        )),
        None => prompt.push_str(&format!(
            "\n`{path}` does not exist yet. Reply with its complete content in one code block: the text it is to hold, not a program or command that would write it."
        )),
    }
    prompt
}

fn with_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') { text.to_owned() } else { format!("{text}\n") }
}

/// How many backticks open `line` (three or more make a fence: ```` ``` ```` or ```` ```py ````).
pub(super) fn fence_len(line: &str) -> usize {
    line.trim_start().chars().take_while(|&c| c == '`').count()
}

/// The content of the reply's code block. When the old file has lines of bare
/// backticks (a Markdown file with code blocks), the block runs to the reply's last
/// closing fence; otherwise to the first.
pub(super) fn code_block(reply: &str, nested: bool) -> Option<String> {
    let lines: Vec<&str> = reply.lines().collect();
    let open = lines.iter().position(|l| fence_len(l) >= 3)?;
    let width = fence_len(lines[open]);
    let closes = |l: &str| {
        let t = l.trim();
        t.len() >= width && t.chars().all(|c| c == '`')
    };
    let rest = &lines[open + 1..];
    let end = if nested { rest.iter().rposition(|l| closes(l)) } else { rest.iter().position(|l| closes(l)) };
    // A reply cut off before its closing fence is not a whole file.
    let body = &rest[..end?];
    let mut text = body.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_block_is_the_first_fenced_one_unless_the_file_has_fences() {
        assert_eq!(
            code_block("Here:\n```python\na = 1\n```\nand\n```\nb\n```", false).as_deref(),
            Some("a = 1\n")
        );
        assert_eq!(code_block("```\n```", false).as_deref(), Some(""));
        assert_eq!(code_block("no block", false), None);
        assert_eq!(code_block("```\ncut off", false), None);
        // A Markdown file's own fences stay inside: the block runs to the last fence.
        assert_eq!(
            code_block("```md\n# T\n```\ncode\n```\n```", true).as_deref(),
            Some("# T\n```\ncode\n```\n")
        );
        // A longer opening fence is closed only by one at least as long.
        assert_eq!(code_block("````\n```\nx\n```\n````", false).as_deref(), Some("```\nx\n```\n"));
    }

    #[test]
    fn the_fence_is_longer_than_any_in_the_files() {
        assert_eq!(fence_for(["a\nb"]), "```");
        assert_eq!(fence_for(["```\nx\n```", "  `````"]), "``````");
    }

    #[test]
    fn related_files_are_the_existing_files_the_text_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("people.csv"), "name\n").unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/n.txt"), "1\n").unwrap();
        std::fs::write(dir.path().join("out.json"), "[]").unwrap();
        let roots = Roots::new(dir.path(), &[], &[]).unwrap();
        let found = related_files(
            &roots,
            "Convert `people.csv` (and data/n.txt, missing.txt) into out.json.",
            "out.json",
        );
        assert_eq!(
            found,
            [("people.csv".to_owned(), "name\n".to_owned()), ("data/n.txt".to_owned(), "1\n".to_owned())]
        );
        // Full-width punctuation closes a name as ASCII does.
        let found = related_files(&roots, "把 people.csv。转换成「data/n.txt」？", "out.json");
        assert_eq!(found.into_iter().map(|(name, _)| name).collect::<Vec<_>>(), ["people.csv", "data/n.txt"]);
    }
}

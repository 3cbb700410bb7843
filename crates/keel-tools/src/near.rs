//! A one-line edit whose old_text is not in the file, but whose change fits one line that
//! is almost the same: `version = "1.2.3"` → `"1.3.0"` over a file holding
//! `__version__ = "1.2.3"`. The not-found report then offers that edit as a ready call.
//! Small models retried the same wrong old_text after "copy old_text exactly"; they do
//! follow a ready call, so it is offered only when it is very likely what was meant:
//! one line alike at least [`MIN_RATIO`] and 0.1 more than any other, the changed word(s) in it
//! exactly once, and the line itself once in the file.

use std::time::Instant;

/// How alike (0–1, characters) the line must be to old_text.
pub const MIN_RATIO: f32 = 0.75;

/// How much more alike than any other line the chosen line must be.
const MIN_MARGIN: f32 = 0.1;

/// Lines looked at, at most.
const MAX_LINES: usize = 20_000;
/// Longest old_text or line compared, in characters.
const MAX_CHARS: usize = 400;

/// The edit offered instead: the line's text as it is, and as it would be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearEdit {
    /// 1-based line number.
    pub line: usize,
    /// The line's text (trimmed), to use as old_text.
    pub old_text: String,
    /// The same with the model's change made, to use as new_text.
    pub new_text: String,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The changed part of `old` → `new` widened to whole words: `(old_part, new_part)`.
/// `None` for a pure insertion or deletion (nothing to find in the line).
fn changed_words(old: &str, new: &str) -> Option<(String, String)> {
    let old: Vec<char> = old.chars().collect();
    let new: Vec<char> = new.chars().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old.iter().rev().zip(new.iter().rev()).take(max_suffix).take_while(|(a, b)| a == b).count();
    let (mut start, mut old_end, mut new_end) = (prefix, old.len() - suffix, new.len() - suffix);
    if start == old_end || start == new_end {
        return None;
    }
    while start > 0 && is_word(old[start - 1]) {
        start -= 1;
    }
    while old_end < old.len() && is_word(old[old_end]) {
        old_end += 1;
        new_end += 1;
    }
    Some((old[start..old_end].iter().collect(), new[start..new_end].iter().collect()))
}

/// The edit to offer when single-line `old` is not in `content` but one line is almost
/// it, or `None`. Gives up at `deadline`.
pub fn near_edit(content: &str, old: &str, new: &str, deadline: Instant) -> Option<NearEdit> {
    let (old, new) = (old.trim(), new.trim());
    if old.contains('\n') || new.contains('\n') || old.chars().count() > MAX_CHARS {
        return None;
    }
    let (old_part, new_part) = changed_words(old, new)?;
    let old_len = old.chars().count();
    let mut best: Option<(f32, usize, &str)> = None;
    let mut second = 0.0f32;
    for (n, line) in content.lines().enumerate().take(MAX_LINES) {
        if n % 256 == 0 && Instant::now() > deadline {
            return None;
        }
        let line = line.trim();
        let len = line.chars().count();
        // The ratio is at most 2·min/(a+b): skip lines too short or long to reach it.
        let too_different = 2 * len.min(old_len) * 4 < 3 * (len + old_len);
        if line.is_empty() || len > MAX_CHARS || too_different || !line.contains(old_part.as_str()) {
            continue;
        }
        let ratio = similar::TextDiff::configure().deadline(deadline).diff_chars(old, line).ratio();
        match best {
            Some((top, _, _)) if ratio <= top => second = second.max(ratio),
            _ => {
                second = best.map_or(second, |(top, _, _)| second.max(top));
                best = Some((ratio, n, line));
            }
        }
    }
    let (ratio, n, line) = best?;
    if ratio < MIN_RATIO || ratio < second + MIN_MARGIN || line.matches(old_part.as_str()).count() != 1 {
        return None;
    }
    if content.matches(line).count() != 1 {
        return None;
    }
    Some(NearEdit {
        line: n + 1,
        old_text: line.to_owned(),
        new_text: line.replacen(&old_part, &new_part, 1),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;

    use super::*;

    fn near(content: &str, old: &str, new: &str) -> Option<NearEdit> {
        near_edit(content, old, new, Instant::now() + Duration::from_secs(5))
    }

    #[test]
    fn a_change_fits_the_one_line_that_is_almost_old_text() {
        let file = "\"\"\"The app.\"\"\"\n\n__version__ = \"1.2.3\"\n";
        assert_eq!(
            near(file, "version = \"1.2.3\"", "version = \"1.3.0\""),
            Some(NearEdit {
                line: 3,
                old_text: "__version__ = \"1.2.3\"".into(),
                new_text: "__version__ = \"1.3.0\"".into()
            })
        );
        // Indented, and the number changed inside a word.
        let config = "[server]\n    host = \"0.0.0.0\"\n    port = 3000\n";
        assert_eq!(
            near(config, "port= 3000", "port= 3080"),
            Some(NearEdit { line: 3, old_text: "port = 3000".into(), new_text: "port = 3080".into() })
        );
    }

    #[test]
    fn nothing_is_offered_when_it_could_be_wrong() {
        let file = "def greet(name=\"world\"):\n    return name\n";
        // A pure insertion: where it goes in the other line is a guess.
        assert_eq!(near(file, "def greet(name):", "def greet(name, shout=False):"), None);
        // Two lines nearly as alike: `timeout = 30` could be either setting.
        let settings = "read_timeout = 30\nconnect_timeout = 30\n";
        assert_eq!(near(settings, "timeout = 30", "timeout = 60"), None);
        // Two lines equally alike.
        let twice = "a_version = \"1.2.3\"\nb_version = \"1.2.3\"\n";
        assert_eq!(near(twice, "version = \"1.2.3\"", "version = \"2.0.0\""), None);
        // The changed word twice in the line.
        let double = "x = total + total\n";
        assert_eq!(near(double, "y = total + total", "y = sum + total"), None);
        // Not alike enough.
        assert_eq!(near("grand_total_amount = 0\n", "total = 0", "total = 1"), None);
        // Several lines of old_text are left to the ordinary report.
        assert_eq!(near(file, "def greet(name):\n    return name", "x"), None);
    }

    #[test]
    fn changed_words_are_whole_words() {
        assert_eq!(changed_words("port = 3000", "port = 3080"), Some(("3000".into(), "3080".into())));
        assert_eq!(changed_words("v = \"1.2.3\"", "v = \"1.3.0\""), Some(("2.3".into(), "3.0".into())));
        assert_eq!(changed_words("same", "same"), None);
        assert_eq!(changed_words("f(a)", "f(a, b)"), None);
    }
}

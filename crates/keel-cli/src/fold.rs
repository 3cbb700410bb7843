//! Long pastes at the prompt, folded: the prompt shows `[pasted #1: 30 lines, 1.2 KB]`
//! in place of the text, which keel keeps word for word and puts back when the line is
//! sent (so the model and the session log get the whole paste). The fold is plain text
//! in the line, so a user edits around it freely; a fold that was changed is never
//! guessed at: the line is refused and put back (see [`Pastes::expand`]).

use std::sync::{Arc, Mutex, PoisonError};

/// A paste of more lines than this is folded.
const MOST_LINES: usize = 5;
/// A paste longer than this (in bytes) is folded, whatever its lines.
const MOST_BYTES: usize = 1000;

/// The pastes of this run, by number (`#1` is the first); shared by the line editor's
/// parts and the code that sends the line.
#[derive(Clone, Debug, Default)]
pub struct Pastes {
    kept: Arc<Mutex<Vec<String>>>,
}

impl Pastes {
    /// What a paste of `body` puts in the line: `body` itself when it is short, else a
    /// fold that stands for it. Line breaks are `\n` either way (a terminal sends `\r`).
    pub fn insert(&self, body: &str) -> String {
        let body = body.replace("\r\n", "\n").replace('\r', "\n");
        if !needs_fold(&body) {
            return body;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push(body);
        let number = kept.len();
        fold(number, &kept[number - 1])
    }

    /// `line` with every fold replaced by the text it stands for. A fold that was
    /// edited (`[pasted #1: 30 lines, 1.2 K`) is an error that names it: sending the
    /// line as it stands would lose or change the paste.
    pub fn expand(&self, line: &str) -> Result<String, String> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = Vec::new();
        // The highest numbers first, so `#1` is not found inside `#12`'s text.
        for (i, body) in kept.iter().enumerate().rev() {
            let shown = fold(i + 1, body);
            if line.contains(&shown) {
                continue;
            }
            if trace_of(line, i + 1) {
                changed.push(shown);
            }
        }
        if !changed.is_empty() {
            changed.reverse();
            return Err(format!(
                "the folded paste {} was changed; put it back as it was (it stands for the pasted text) or delete it whole",
                changed.join(", ")
            ));
        }
        // Texts are put in one pass over the line, so a paste that itself contains a
        // fold's words is never expanded again.
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while let Some((at, number, len)) = first_fold(rest, &kept) {
            out.push_str(&rest[..at]);
            out.push_str(&kept[number - 1]);
            rest = &rest[at + len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The byte ranges of the intact folds in `line` (for coloring them).
    pub fn folds_in(&self, line: &str) -> Vec<std::ops::Range<usize>> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ranges = Vec::new();
        let mut offset = 0;
        while let Some((at, _, len)) = first_fold(&line[offset..], &kept) {
            ranges.push(offset + at..offset + at + len);
            offset += at + len;
        }
        ranges
    }
}

/// Whether a paste is folded: a long one, and one with a backslash at a line's end
/// (which the prompt would read as a continuation and drop).
fn needs_fold(body: &str) -> bool {
    body.lines().count() > MOST_LINES || body.len() > MOST_BYTES || body.contains("\\\n")
}

/// The fold for paste number `number`: `[pasted #1: 30 lines, 1.2 KB]`.
fn fold(number: usize, body: &str) -> String {
    let lines = body.lines().count();
    let noun = if lines == 1 { "line" } else { "lines" };
    format!("[pasted #{number}: {lines} {noun}, {}]", size(body.len()))
}

/// A size for people: `812 B`, `1.2 KB`, `3.4 MB` (powers of 1,000).
fn size(bytes: usize) -> String {
    match bytes {
        0..1000 => format!("{bytes} B"),
        1000..1_000_000 => format!("{:.1} KB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// Whether `line` still shows a part of fold `number` (`pasted #3` not followed by a
/// digit): the fold was edited rather than deleted.
fn trace_of(line: &str, number: usize) -> bool {
    let mark = format!("pasted #{number}");
    line.match_indices(&mark)
        .any(|(at, _)| !line[at + mark.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// The first intact fold in `text`: its offset, paste number and length.
fn first_fold(text: &str, kept: &[String]) -> Option<(usize, usize, usize)> {
    let mut from = 0;
    while let Some(found) = text[from..].find("[pasted #") {
        let at = from + found;
        let digits: String =
            text[at + "[pasted #".len()..].chars().take_while(char::is_ascii_digit).collect();
        if let Ok(number) = digits.parse::<usize>()
            && let Some(body) = number.checked_sub(1).and_then(|i| kept.get(i))
        {
            let shown = fold(number, body);
            if text[at..].starts_with(&shown) {
                return Some((at, number, shown.len()));
            }
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(lines: usize) -> String {
        (1..=lines).map(|i| format!("line {i} of the traceback")).collect::<Vec<_>>().join("\n")
    }

    /// Issue 32, item 1: a long paste is shown folded, and the whole text is sent.
    #[test]
    fn a_long_paste_is_folded_and_sent_whole() {
        let pastes = Pastes::default();
        let short = "Traceback:\r\n  File \"a.py\"\rValueError";
        assert_eq!(pastes.insert(short), "Traceback:\n  File \"a.py\"\nValueError", "short: as it is");
        let long = block(30);
        let shown = pastes.insert(&long);
        assert_eq!(shown, "[pasted #1: 30 lines, 740 B]");
        let line = format!("why does {shown} happen? \\ and {}", pastes.insert(&"x".repeat(1500)));
        assert_eq!(line, format!("why does {shown} happen? \\ and [pasted #2: 1 line, 1.5 KB]"));
        let sent = pastes.expand(&line).unwrap();
        assert_eq!(sent, format!("why does {long} happen? \\ and {}", "x".repeat(1500)));
        assert_eq!(pastes.folds_in(&line), [9..37, 52..79]);
        // Sent again (a line put back, a recalled one): the same text.
        assert_eq!(pastes.expand(&line).unwrap(), sent);
        assert_eq!(pastes.expand("no folds here").unwrap(), "no folds here");
    }

    #[test]
    fn a_changed_fold_is_refused_and_a_deleted_one_is_gone() {
        let pastes = Pastes::default();
        let shown = pastes.insert(&block(12));
        let cut = &shown[..shown.len() - 1];
        assert_eq!(
            pastes.expand(&format!("explain {cut}")).unwrap_err(),
            format!(
                "the folded paste {shown} was changed; put it back as it was (it stands for the pasted text) or delete it whole"
            )
        );
        assert!(pastes.expand(&format!("explain {}", &shown[1..])).is_err(), "its start deleted");
        assert_eq!(pastes.expand("explain").unwrap(), "explain", "deleted whole: not sent");
        assert_eq!(pastes.expand("[pasted #9: 1 line, 1 B]").unwrap(), "[pasted #9: 1 line, 1 B]");
    }

    #[test]
    fn a_paste_that_contains_a_fold_is_not_expanded_again() {
        let pastes = Pastes::default();
        let first = pastes.insert(&block(8));
        let tricky = format!("{first}\n{}", block(7));
        let second = pastes.insert(&tricky);
        assert_eq!(pastes.expand(&second).unwrap(), tricky);
        for n in 3..=12 {
            pastes.insert(&block(n + 5));
        }
        let twelfth = fold(12, &block(17));
        assert_eq!(pastes.expand(&twelfth).unwrap(), block(17), "#1 is not read inside #12");
        assert!(!trace_of(&twelfth, 1));
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(999), "999 B");
        assert_eq!(size(1234), "1.2 KB");
        assert_eq!(size(2_500_000), "2.5 MB");
    }
}

//! Where the project still uses a name a change removed from a file: a rename made in
//! one file of several (`calc_total` renamed in billing.py, still imported and called in
//! main.py) is the commonest unfinished change of a small model, which then says the
//! rename is done everywhere. The file tools' reports name those places, so the model
//! (or the user reading along) sees what is left without having to search.
//!
//! Names are words of letters, digits and `_` in any script, compared whole: no
//! language's grammar is assumed. A change that removes many names is a rewrite, not a
//! rename, and gets no note. The search is bounded in files, bytes and time.
//!
//! The same for one file: a change asked for in words that quotes a text (`remove the
//! lines with 'DEBUG'`) and took it out of some lines but not all names the lines left
//! ([`partly_removed`]): change_file's editor rewrites whole files and misses some.

use std::collections::HashSet;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::workspace::Roots;

/// Names shorter than this (`i`, `x`, `id`) are too common to follow.
const MIN_NAME_CHARS: usize = 3;
/// A change that removes more names than this is a rewrite: no note.
const MAX_VANISHED: usize = 6;
/// Most names the note follows, and places it shows for each.
const MAX_NAMES_SHOWN: usize = 3;
const MAX_PLACES: usize = 6;
/// Files looked at, and the biggest one read.
const MAX_FILES: usize = 3_000;
const MAX_FILE_BYTES: u64 = 512 * 1024;
/// Time the search may take; past it the note shows what it found so far.
const BUDGET: Duration = Duration::from_millis(400);
/// Characters of a line shown.
const SHOWN_LINE_CHARS: usize = 160;

/// The names of `text`, in order of first appearance.
pub(crate) fn names(text: &str) -> Vec<&str> {
    let mut seen = HashSet::new();
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| word.chars().count() >= MIN_NAME_CHARS)
        .filter(|word| word.chars().next().is_some_and(|c| !c.is_numeric()))
        .filter(|word| seen.insert(*word))
        .collect()
}

/// Names in `before` that are nowhere in `after`, in order of first appearance; empty
/// when there are more than [`MAX_VANISHED`] (a rewrite).
pub(crate) fn vanished(before: &str, after: &str) -> Vec<String> {
    let kept: HashSet<&str> = names(after).into_iter().collect();
    let gone: Vec<String> =
        names(before).into_iter().filter(|n| !kept.contains(n)).map(str::to_owned).collect();
    if gone.len() > MAX_VANISHED { Vec::new() } else { gone }
}

/// Whether `line` has `name` as a whole word.
pub(crate) fn has_word(line: &str, name: &str) -> bool {
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + name.len()..].chars().next();
        !before.is_some_and(word_char) && !after.is_some_and(word_char)
    })
}

/// One place a name is still used: the file as shown, the line number, the line.
pub(crate) type Place = (String, usize, String);

/// For each name of `gone`, the places the project's files use it (at most
/// [`MAX_NAMES_SHOWN`] names that are used, [`MAX_PLACES`] places each).
pub(crate) fn everywhere(roots: &Roots, gone: &[String]) -> Vec<(String, Vec<Place>)> {
    places(roots, None, gone)
}

/// Calls `visit` with each of the project's files under `within` other than `skip` (as
/// shown, and its text) until it breaks: the files grep searches (hidden ones and what
/// .gitignore ignores left out), so a note and the model's own search agree; keel's
/// copies in the session's artifacts (an undo copy holds the old name) are not the
/// project's files either. At most `max_files` files, [`MAX_FILE_BYTES`] each, for
/// [`BUDGET`].
pub(crate) fn each_file(
    roots: &Roots,
    within: &Path,
    skip: Option<&Path>,
    max_files: usize,
    mut visit: impl FnMut(&str, &str) -> ControlFlow<()>,
) {
    let deadline = Instant::now() + BUDGET;
    let walker = ignore::WalkBuilder::new(within)
        .require_git(false)
        .git_global(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    let files = walker
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()) && !roots.in_read_only_root(e.path()));
    for entry in files.take(max_files) {
        if Instant::now() > deadline {
            break;
        }
        let path = entry.path();
        if Some(path) == skip {
            continue;
        }
        // Read the file that was opened and verified, as grep does: a file swapped for a
        // symlink after the walk saw it is not followed out of the project.
        let Some(file) = roots.open_found(path) else { continue };
        let mut text = String::new();
        if file.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES)
            || file.take(MAX_FILE_BYTES).read_to_string(&mut text).is_err()
        {
            continue;
        }
        if visit(&roots.display(path), &text).is_break() {
            break;
        }
    }
}

/// For each name of `gone`, the places the project's files other than `changed` use it.
fn places(roots: &Roots, changed: Option<&Path>, gone: &[String]) -> Vec<(String, Vec<Place>)> {
    let mut found: Vec<(String, Vec<Place>)> = gone.iter().map(|n| (n.clone(), Vec::new())).collect();
    each_file(roots, roots.root(), changed, MAX_FILES, |shown, text| {
        for (index, line) in text.lines().enumerate() {
            for (name, at) in found.iter_mut() {
                if at.len() < MAX_PLACES && has_word(line, name) {
                    let line = crate::output::clip_line(line.trim(), SHOWN_LINE_CHARS);
                    at.push((shown.to_owned(), index + 1, line));
                }
            }
        }
        ControlFlow::Continue(())
    });
    found.retain(|(_, at)| !at.is_empty());
    found.truncate(MAX_NAMES_SHOWN);
    found
}

/// The note for a change by the tool `tool` of the file at `changed` (shown as `shown`)
/// from `before` to `after`: where other files still use the names it removed
/// ([`renamed_note`]) and set a key to the value it replaced ([`old_values_note`]), or
/// `None`.
pub(crate) fn note(
    roots: &Roots,
    tool: &str,
    changed: &Path,
    shown: &str,
    before: &str,
    after: &str,
) -> Option<String> {
    let names = renamed_note(roots, changed, shown, before, after);
    let values = old_values_note(roots, tool, changed, shown, before, after);
    match (names, values) {
        (None, None) => None,
        (names, values) => Some(names.unwrap_or_default() + &values.unwrap_or_default()),
    }
}

/// Where other files still use the names the change removed.
fn renamed_note(roots: &Roots, changed: &Path, shown: &str, before: &str, after: &str) -> Option<String> {
    let gone = vanished(before, after);
    if gone.is_empty() {
        return None;
    }
    let found = places(roots, Some(changed), &gone);
    if found.is_empty() {
        return None;
    }
    let mut note = String::new();
    for (name, at) in &found {
        note.push_str(&format!(
            "\n\nOther files still use `{name}`, which this change removed from {shown}:"
        ));
        for (file, line, text) in at {
            note.push_str(&format!("\n{file}:{line}: {text}"));
        }
    }
    note.push_str("\nIf they mean what you changed, change them too.");
    Some(note)
}

/// A change of more settings than this is a rewrite: no note on old values.
const MAX_CHANGED_VALUES: usize = 3;
/// Shortest value followed; it must have a digit too (a version, a port, a limit):
/// `true` or `red` set in two files need not mean the same thing.
const MIN_VALUE_CHARS: usize = 3;

/// Where other files set a key to the value the change replaced: pyproject.toml's
/// version made 0.4.2, and the package's `__version__ = "0.4.1"` left behind (the 1.5B
/// model said the version was bumped; bump-version, every recorded run that got that
/// far). The note ends with the call that changes the first of them: asked again at the
/// recorded step, the model changed `__init__.py` 5 times of 5 with it, and without it
/// listed files, ran git or answered (a note ending "change them too" alone: 1 of 5).
fn old_values_note(
    roots: &Roots,
    tool: &str,
    changed: &Path,
    shown: &str,
    before: &str,
    after: &str,
) -> Option<String> {
    let values = crate::keyed::changed(before, after, MAX_CHANGED_VALUES + 1);
    if values.len() > MAX_CHANGED_VALUES {
        return None;
    }
    let followed =
        |value: &str| value.chars().count() >= MIN_VALUE_CHARS && value.chars().any(|c| c.is_ascii_digit());
    let mut found: Vec<(&crate::keyed::Changed, Vec<Place>)> =
        values.iter().filter(|c| followed(&c.before)).map(|c| (c, Vec::new())).collect();
    if found.is_empty() {
        return None;
    }
    each_file(roots, roots.root(), Some(changed), MAX_FILES, |file, text| {
        for (index, line) in text.lines().enumerate() {
            let Some((key, value)) = crate::keyed::setting(line) else { continue };
            for (change, at) in found.iter_mut() {
                if at.len() < MAX_PLACES && value == change.before && crate::keyed::same_key(key, &change.key)
                {
                    at.push((
                        file.to_owned(),
                        index + 1,
                        crate::output::clip_line(line.trim(), SHOWN_LINE_CHARS),
                    ));
                }
            }
        }
        ControlFlow::Continue(())
    });
    let first = found.iter().find_map(|(_, at)| at.first()).map(|(file, _, _)| file.clone())?;
    let mut note = String::new();
    for (change, at) in found.iter().filter(|(_, at)| !at.is_empty()) {
        let crate::keyed::Changed { key, before, after } = change;
        note.push_str(&format!(
            "\n\nOther files still set `{key}` to `{before}`, the value this change replaced with `{after}` in {shown}:"
        ));
        for (file, line, text) in at {
            note.push_str(&format!("\n{file}:{line}: {text}"));
        }
    }
    note.push_str(&format!(
        "\nIf they mean the same, change them too: call {tool} with \"path\": \"{first}\"."
    ));
    Some(note)
}

/// Shortest and longest quoted text followed.
const MIN_QUOTED_CHARS: usize = 2;
const MAX_QUOTED_CHARS: usize = 80;

/// The texts `request` quotes (`'…'`, `"…"`, `` `…` `` on one line), each once.
fn quoted(request: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    for line in request.lines() {
        for mark in ['\'', '"', '`'] {
            // Only a part with its closing mark after it was quoted.
            let closed = line.matches(mark).count() / 2;
            for part in line.split(mark).skip(1).step_by(2).take(closed) {
                let chars = part.chars().count();
                if (MIN_QUOTED_CHARS..=MAX_QUOTED_CHARS).contains(&chars) && !found.contains(&part) {
                    found.push(part);
                }
            }
        }
    }
    found
}

/// The note for a change asked for in words (`request`) that took a text it quotes out
/// of some lines of the file but not all: "remove the lines with 'DEBUG'" made into a
/// file that still prints DEBUG on one line. A text the change added or left alone gets
/// no note.
pub(crate) fn partly_removed(request: &str, before: &str, after: &str) -> Option<String> {
    let lines_with = |text: &str, part: &str| text.lines().filter(|line| line.contains(part)).count();
    let mut note = String::new();
    for part in quoted(request).into_iter().take(MAX_NAMES_SHOWN) {
        let (had, has) = (lines_with(before, part), lines_with(after, part));
        if has == 0 || has >= had {
            continue;
        }
        note.push_str(&format!(
            "\n\nYour change quotes `{part}`: the file had it on {had} lines and still has it on {has}:"
        ));
        for (index, line) in after.lines().enumerate().filter(|(_, l)| l.contains(part)).take(MAX_PLACES) {
            note.push_str(&format!(
                "\n{}: {}",
                index + 1,
                crate::output::clip_line(line.trim(), SHOWN_LINE_CHARS)
            ));
        }
    }
    (!note.is_empty()).then_some(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_vanish_are_whole_words_in_any_script() {
        assert_eq!(vanished("x = calc_total(a)\n", "x = compute_total(a)\n"), ["calc_total"]);
        assert_eq!(vanished("größe = 1\n", "umfang = 1\n"), ["größe"]);
        assert_eq!(vanished("合計 = 1\n", "総計 = 1\n"), Vec::<String>::new(), "two characters: too short");
        assert_eq!(vanished("def f(a): return a + 1\n", "def f(a): return a + 2\n"), Vec::<String>::new());
        assert_eq!(vanished("id = 12345\n", "id = 54321\n"), Vec::<String>::new(), "numbers are not names");
        let rewrite = "alpha beta gamma delta epsilon zeta eta theta\n";
        assert_eq!(vanished(rewrite, "something else\n"), Vec::<String>::new(), "a rewrite");
        assert!(has_word("from billing import calc_total", "calc_total"));
        assert!(!has_word("recalc_totals()", "calc_total"));
        assert!(has_word("dates.fmt_date(due)", "fmt_date"));
    }

    #[test]
    fn the_note_names_each_place_another_file_still_uses_a_removed_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("billing.py"), "def compute_total(prices):\n    return sum(prices)\n")
            .unwrap();
        std::fs::write(
            root.join("main.py"),
            "from billing import calc_total\n\nprint(calc_total([1, 2]))\nprint(recalc_totals)\n",
        )
        .unwrap();
        std::fs::write(root.join("notes.md"), "nothing here\n").unwrap();
        let roots = Roots::new(&root, &[], &[]).unwrap();
        let before = "def calc_total(prices):\n    return sum(prices)\n";
        let after = "def compute_total(prices):\n    return sum(prices)\n";
        let note = note(&roots, "edit_file", &root.join("billing.py"), "billing.py", before, after);
        assert_eq!(
            note.as_deref(),
            Some(
                "\n\nOther files still use `calc_total`, which this change removed from billing.py:\n\
                 main.py:1: from billing import calc_total\n\
                 main.py:3: print(calc_total([1, 2]))\n\
                 If they mean what you changed, change them too."
            )
        );
        // A symlink to a file outside the project is not followed.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.py"), "calc_total = 'outside'\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.py"), root.join("link.py")).unwrap();
        let shown =
            super::note(&roots, "edit_file", &root.join("billing.py"), "billing.py", before, after).unwrap();
        assert!(!shown.contains("outside") && !shown.contains("link.py"), "{shown}");
        std::fs::remove_file(root.join("link.py")).unwrap();
        // Nothing left elsewhere: no note.
        std::fs::write(root.join("main.py"), "from billing import compute_total\n").unwrap();
        assert_eq!(
            super::note(&roots, "edit_file", &root.join("billing.py"), "billing.py", before, after),
            None
        );
    }

    #[test]
    fn the_note_names_other_files_that_still_set_a_key_to_the_replaced_value() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("tidyup")).unwrap();
        std::fs::write(root.join("tidyup/__init__.py"), "__version__ = \"0.4.1\"\n").unwrap();
        std::fs::write(root.join("tidyup/cli.py"), "from tidyup import __version__\nlimit = \"0.4.1\"\n")
            .unwrap();
        std::fs::write(root.join("README.md"), "debug = true\n").unwrap();
        let roots = Roots::new(&root, &[], &[]).unwrap();
        let before = "[project]\nname = \"tidyup\"\nversion = \"0.4.1\"\ndebug = false\n";
        let after = "[project]\nname = \"tidyup\"\nversion = \"0.4.2\"\ndebug = true\n";
        let note = note(&roots, "change_file", &root.join("pyproject.toml"), "pyproject.toml", before, after);
        assert_eq!(
            note.as_deref(),
            Some(
                "\n\nOther files still set `version` to `0.4.1`, the value this change replaced with `0.4.2` in pyproject.toml:\n\
                 tidyup/__init__.py:1: __version__ = \"0.4.1\"\n\
                 If they mean the same, change them too: call change_file with \"path\": \"tidyup/__init__.py\"."
            ),
            "another key with the value, and a value without a digit, are not followed"
        );
        // The other file already has the new value: no note.
        std::fs::write(root.join("tidyup/__init__.py"), "__version__ = \"0.4.2\"\n").unwrap();
        assert_eq!(
            super::note(&roots, "change_file", &root.join("pyproject.toml"), "pyproject.toml", before, after),
            None
        );
    }

    #[test]
    fn a_quoted_text_taken_out_of_some_lines_but_not_all_is_named_where_it_is_left() {
        assert_eq!(quoted("remove all lines that contain 'DEBUG'"), ["DEBUG"]);
        assert_eq!(quoted("change \"a\" and `b_c` to \"de\"; don't"), ["de", "b_c"]);
        let before = "def load():\n    print(\"DEBUG: a\")\n    x = 1\n    print(\"DEBUG: b\")\n    print(\"DEBUG: done\")\n";
        let after = "def load():\n    x = 1\n    print(\"DEBUG: done\")\n";
        assert_eq!(
            partly_removed("remove all lines that contain 'DEBUG'", before, after).as_deref(),
            Some(
                "\n\nYour change quotes `DEBUG`: the file had it on 3 lines and still has it on 1:\n3: print(\"DEBUG: done\")"
            )
        );
        // All of it gone, or a quoted text added: nothing to say.
        assert_eq!(partly_removed("remove 'DEBUG' lines", before, "def load():\n    x = 1\n"), None);
        assert_eq!(partly_removed("add print('DEBUG: c')", after, before), None);
        assert_eq!(partly_removed("no quotes here", before, after), None);
    }
}

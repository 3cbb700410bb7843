//! Words that are an `echo` of plain text into the file itself.
//!
//! `echo 11 > error_count.txt` says exactly what the new file holds; the editor, asked
//! to apply it, wrote `1` in 2 of the 8 recorded calls (count-errors-to-file). For a file
//! that does not exist yet there is nothing the editor could keep, so such words are
//! written as they say. Only plain text is read so: no variables, substitutions,
//! escapes, globs or other commands (anything a shell would expand is left to the
//! editor), and only into the call's own path. An existing file is still the editor's:
//! an echo over it replaces what the task may need (`echo 'Hello, world!' > docs/a.txt`
//! for a script's input file, where the editor kept the file).

/// Characters a shell would give a meaning to, other than quotes and spaces.
const SPECIAL: &[char] =
    &['$', '`', '\\', '*', '?', '[', ';', '|', '&', '<', '(', ')', '{', '}', '~', '#', '!'];

/// The text `change` writes into `path` when it is `echo TEXT > path` with plain text:
/// the words after `echo`, unquoted and joined by single spaces, and a line break.
pub(super) fn content(path: &str, change: &str) -> Option<String> {
    let line = change.trim();
    if line.contains('\n') {
        return None;
    }
    let rest = line.strip_prefix("echo ")?;
    let (text, target) = rest.rsplit_once('>')?;
    // `>>` appends; `2>` or `11>` (a digit right before it) redirects another stream; a
    // second `>` means the text is not all echoed into the path.
    if text.ends_with(|c: char| c == '>' || c.is_ascii_digit())
        || text.contains('>')
        || target.contains(SPECIAL)
        || text.contains(SPECIAL)
    {
        return None;
    }
    let plain =
        |p: &str| p.trim().trim_matches(|c| c == '"' || c == '\'').trim_start_matches("./").to_owned();
    if plain(target) != plain(path) || target.trim().contains(char::is_whitespace) {
        return None;
    }
    let words = shell_words(text)?;
    // `echo -n`, `echo -e`: flags change what is written.
    if words.is_empty() || words[0].starts_with('-') {
        return None;
    }
    Some(words.join(" ") + "\n")
}

/// `text` split as a shell splits plain words: at unquoted spaces, quotes removed.
/// `None` when a quote is not closed.
fn shell_words(text: &str) -> Option<Vec<String>> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, started) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if started {
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any input is read without a panic, and what is read is one line of the words.
        #[test]
        fn any_words_are_read_safely(change in ".{0,80}") {
            if let Some(text) = content("a.txt", &change) {
                prop_assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "{text:?}");
                prop_assert!(!text.contains(SPECIAL), "{text:?}");
            }
        }

        /// Plain words, each quoted, come back joined by single spaces.
        #[test]
        fn quoted_plain_words_are_the_content(words in proptest::collection::vec("[a-zA-Z0-9 ,.:=+-]{1,12}", 1..5)) {
            let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
            let change = format!("echo {} > a.txt", quoted.join(" "));
            let want = if words[0].starts_with('-') { None } else { Some(words.join(" ") + "\n") };
            prop_assert_eq!(content("a.txt", &change), want);
        }
    }

    #[test]
    fn plain_text_echoed_into_the_file_is_its_content() {
        for (path, change, want) in [
            ("error_count.txt", "echo 11 > error_count.txt", "11\n"),
            ("total.txt", "  echo '123' >./total.txt ", "123\n"),
            ("docs/note.txt", "echo \"two  spaces\" kept > docs/note.txt", "two  spaces kept\n"),
            ("a.txt", "echo '' > a.txt", "\n"),
            ("a.txt", "echo hello   world > \"a.txt\"", "hello world\n"),
            ("a.txt", "echo a>a.txt", "a\n"),
        ] {
            assert_eq!(content(path, change).as_deref(), Some(want), "{change}");
        }
    }

    #[test]
    fn anything_a_shell_would_expand_or_another_target_is_left_to_the_editor() {
        for (path, change) in [
            ("count.txt", "echo $(grep -c ERROR server.log) > count.txt"),
            ("count.txt", "echo $N > count.txt"),
            ("a.txt", "echo -n 11 > a.txt"),
            ("a.txt", "echo -e 'a\\nb' > a.txt"),
            ("a.txt", "echo 11 >> a.txt"),
            ("a.txt", "echo 11> a.txt"),
            ("a.txt", "echo oops 2> a.txt"),
            ("b.txt", "echo a > a.txt > b.txt"),
            ("a.txt", "echo 11 > b.txt"),
            ("a.txt", "echo 11 > a.txt; cat a.txt"),
            ("a.txt", "echo *.py > a.txt"),
            ("a.txt", "echo 'open > a.txt"),
            ("a.txt", "echo > a.txt"),
            ("a.txt", "printf '11' > a.txt"),
            ("a.txt", "write 11 into a.txt"),
            ("a.txt", "echo 1\necho 2 > a.txt"),
        ] {
            assert_eq!(content(path, change), None, "{change}");
        }
    }
}

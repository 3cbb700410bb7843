//! Words that are an `echo` of plain text into the file itself.
//!
//! `echo 11 > error_count.txt` says exactly what the new file holds; the editor, asked
//! to apply it, wrote `1` in 2 of the 8 recorded calls (count-errors-to-file). For a file
//! that does not exist yet there is nothing the editor could keep, so such words are
//! written as they say. Only words bash passes as written are read so (no variables,
//! substitutions, globs or other commands: anything a shell would expand is left to
//! the editor), and only into the call's own path. An existing file is still the editor's:
//! an echo over it replaces what the task may need (`echo 'Hello, world!' > docs/a.txt`
//! for a script's input file, where the editor kept the file).

/// The text `change` writes into `path` when it is one `echo TEXT > path` whose words
/// bash would pass as written (read by [`crate::script::parse`], the parser the
/// permission rules use): the words after `echo` joined by single spaces, and a line
/// break. Anything else — an expansion, a substitution, a flag (`-n`, `-e`), another
/// redirection (`>>`, `2>`), a second command, a line the parser is unsure of — is left
/// to the editor.
pub(super) fn content(path: &str, change: &str) -> Option<String> {
    let script = crate::script::parse(change.trim());
    let [command] = script.commands.as_slice() else { return None };
    let [(operator, target)] = command.redirects.as_slice() else { return None };
    let (program, words) = command.words.split_first()?;
    let literal = |word: &crate::script::Word| !word.dynamic && !word.substitution;
    let plain = |text: &str| text.trim_start_matches("./").to_owned();
    let simple = script.unsure.is_none() && script.expanded.is_empty() && command.assignments.is_empty();
    let into_path = operator == ">" && literal(target) && plain(&target.text) == plain(path.trim());
    let echoed = program.text == "echo" && literal(program) && words.iter().all(literal);
    let flagged = words.first().is_none_or(|first| first.text.starts_with('-'));
    (simple && into_path && echoed && !flagged)
        .then(|| words.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any one-line input is read without a panic, and what is read is one line.
        #[test]
        fn any_words_are_read_safely(change in ".{0,80}") {
            if let Some(text) = content("a.txt", &change) {
                prop_assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "{text:?}");
            }
        }

        /// Words in single quotes, whatever they hold, come back as written, joined by
        /// single spaces (a first word that is a flag leaves it to the editor).
        #[test]
        fn quoted_words_are_the_content(words in proptest::collection::vec("[a-zA-Z0-9 ,.:=+$*?;|&<>(){}#!~-]{1,12}", 1..5)) {
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
            ("a.txt", "echo '$HOME costs 5$' > a.txt", "$HOME costs 5$\n"),
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

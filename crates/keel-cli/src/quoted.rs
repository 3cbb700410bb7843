//! A line split into words the way a shell groups them for quoting: whitespace
//! separates, `'…'` and `"…"` group (the quotes removed), and, where asked, a backslash
//! outside quotes takes the next character as it is (terminals paste `my\ shot.png`).
//! One splitter for pasted image paths and custom commands' `$1`, `$2`….

/// What a backslash outside quotes means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backslash {
    /// It escapes the next character, which joins the word whatever it is.
    Escapes,
    /// It is an ordinary character.
    IsText,
}

/// The words of `line`. An empty pair of quotes is an empty word.
pub fn words(line: &str, backslash: Backslash) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') if backslash == Backslash::Escapes => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_group_and_a_backslash_escapes_only_when_asked() {
        let line = r#"look at '/tmp/my shot.png' and /tmp/other\ one.png "x y""#;
        assert_eq!(
            words(line, Backslash::Escapes),
            ["look", "at", "/tmp/my shot.png", "and", "/tmp/other one.png", "x y"]
        );
        assert_eq!(
            words(line, Backslash::IsText),
            ["look", "at", "/tmp/my shot.png", "and", r"/tmp/other\", "one.png", "x y"]
        );
        assert_eq!(words(" a 'b c' \"d\"e '' ", Backslash::IsText), ["a", "b c", "de", ""]);
        assert_eq!(words("  ", Backslash::Escapes), Vec::<String>::new());
        assert_eq!(words("''", Backslash::Escapes), [""]);
        // A trailing backslash escapes nothing and ends the word; in quotes it is text.
        assert_eq!(words(r"a\", Backslash::Escapes), ["a"]);
        assert_eq!(words(r"'a\ b'", Backslash::Escapes), [r"a\ b"]);
        // An unclosed quote runs to the end of the line.
        assert_eq!(words("say 'hello there", Backslash::IsText), ["say", "hello there"]);
    }
}

//! Styled text wrapped at word boundaries to a width of visible columns.

use unicode_width::UnicodeWidthStr;

/// How a run of text is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    pub bold: bool,
    pub italic: bool,
    pub code: bool,
    pub strike: bool,
    pub link: bool,
    pub dim: bool,
}

impl Style {
    /// The SGR escape that starts this style (empty for plain text).
    fn escape(self) -> String {
        let mut codes = Vec::new();
        for (on, code) in [
            (self.bold, "1"),
            (self.dim, "2"),
            (self.italic, "3"),
            (self.link, "4"),
            (self.strike, "9"),
            (self.code, "36"),
        ] {
            if on {
                codes.push(code);
            }
        }
        if codes.is_empty() { String::new() } else { format!("\x1b[{}m", codes.join(";")) }
    }
}

/// A piece of inline content: styled text, or a forced line break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String, Style),
    Break,
}

/// Visible columns of `text`.
pub fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// `text` drawn in `style`.
pub fn styled(text: &str, style: Style) -> String {
    let start = style.escape();
    if start.is_empty() { text.to_owned() } else { format!("{start}{text}\x1b[0m") }
}

/// Lays `pieces` out in lines at most `columns` wide (a longer word gets a line of its
/// own); spaces between pieces are kept where the text has them.
pub fn wrap(pieces: &[Piece], columns: usize) -> Vec<String> {
    let columns = columns.max(10);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    // A space seen and not yet written: written before the next word on the same line.
    let mut space = false;
    for piece in pieces {
        let (text, style) = match piece {
            Piece::Break => {
                lines.push(std::mem::take(&mut line));
                used = 0;
                space = false;
                continue;
            }
            Piece::Text(text, style) => (text, *style),
        };
        for (i, word) in text.split(' ').enumerate() {
            if i > 0 {
                space = true;
            }
            if word.is_empty() {
                continue;
            }
            let needed = width(word) + usize::from(space && used > 0);
            if used > 0 && used + needed > columns {
                lines.push(std::mem::take(&mut line));
                used = 0;
            } else if space && used > 0 {
                line.push(' ');
                used += 1;
            }
            space = false;
            line.push_str(&styled(word, style));
            used += width(word);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Piece {
        Piece::Text(text.to_owned(), Style::default())
    }

    #[test]
    fn words_wrap_at_the_width_and_styles_do_not_count() {
        let bold = Style { bold: true, ..Style::default() };
        let pieces = [plain("one two "), Piece::Text("three".into(), bold), plain(" four five six")];
        let lines = wrap(&pieces, 14);
        assert_eq!(lines, vec!["one two \x1b[1mthree\x1b[0m", "four five six"]);
        assert_eq!(wrap(&[plain("a"), Piece::Break, plain("b")], 20), vec!["a", "b"]);
        assert_eq!(wrap(&[plain("x".repeat(30).as_str())], 12), vec!["x".repeat(30)]);
    }
}

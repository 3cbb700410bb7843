//! Text from the model, commands and servers made safe for a terminal: control
//! characters and escape sequences shown, not obeyed (an OSC 52 sequence writes the
//! clipboard, OSC 0 the window title, `ESC[2J` clears the screen).

use std::borrow::Cow;

/// Whether `c` is shown escaped rather than sent to the terminal: controls (but newline
/// and tab) and the characters that reorder or hide text.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn escape_into(c: char, out: &mut String) {
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\r' => out.push_str("\\r"),
        c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// `text` with every control character but newline and tab made visible (`\e`, `\r`,
/// `\xNN`, `\u{…}`): for answer text, before it is rendered.
pub fn plain(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) { escape_into(c, &mut out) } else { out.push(c) }
    }
    Cow::Owned(out)
}

/// `text` as [`plain`], but color and style sequences (`ESC [ … m`, SGR) kept: for lines
/// keel paints itself around text it does not control.
pub fn styled(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}'
            && let Some(len) = sgr_len(rest)
        {
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        if unsafe_char(c) {
            escape_into(c, &mut out)
        } else {
            out.push(c)
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The length of the SGR sequence `text` starts with (`ESC [`, digits, `;` or `:`, `m`).
fn sgr_len(text: &str) -> Option<usize> {
    let body = text.strip_prefix("\u{1b}[")?;
    let params = body.bytes().take_while(|b| b.is_ascii_digit() || *b == b';' || *b == b':').count();
    (body.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// `text` with control characters (other than newline, tab included) and terminal
/// escapes visible: tab as `\t`, ESC as `\e`, others as `\xNN`, and bidirectional-override
/// characters as `\u{…}` (stricter than [`plain`]: what is approved is shown exactly).
pub fn visible(text: &str) -> String {
    plain(text).replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28, item 8: OSC 52 (clipboard), OSC 0 (title) and `ESC[2J` from a command or
    /// the model reached the terminal raw.
    #[test]
    fn sequences_are_shown_not_obeyed_and_colors_survive_only_where_keel_paints() {
        let hostile = "hi\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{202e}x\tend\n";
        assert_eq!(plain(hostile), "hi\\e]52;c;ZXZpbA==\\x07\\e]0;pwned\\x07\\e[2J\\r\\u{202e}x\tend\n");
        assert_eq!(plain("just text\n\tand a tab"), "just text\n\tand a tab");
        assert!(matches!(plain("clean"), Cow::Borrowed(_)));
        let painted = format!("\u{1b}[1mshell\u{1b}[0m → {hostile}\u{1b}[38;2;1;2;3mok\u{1b}[m");
        assert_eq!(
            styled(&painted),
            "\u{1b}[1mshell\u{1b}[0m → hi\\e]52;c;ZXZpbA==\\x07\\e]0;pwned\\x07\\e[2J\\r\\u{202e}x\tend\n\u{1b}[38;2;1;2;3mok\u{1b}[m"
        );
        assert_eq!(styled("\u{1b}[31"), "\\e[31", "an unfinished sequence is escaped");
    }
}

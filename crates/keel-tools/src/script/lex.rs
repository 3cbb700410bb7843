//! The lexer: a command line cut into words and operators as bash cuts it.
//!
//! Quotes are removed (`'…'`, `"…"`, `$'…'` with its escapes, `\x`), words written in
//! pieces are joined (`r''m` is `rm`), `\` + newline joins lines, a `#` that starts a
//! word starts a comment to the end of the line. Expansions are kept as written but
//! noted on the word (`$x`, `${x}`, `$(…)`, `` `…` ``, `<(…)`), since their value is not
//! known here. Anything this lexer does not follow is reported as unsure, never guessed.

/// A word after quote removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The text bash would pass, expansions left as written.
    pub text: String,
    /// Some part of it is expanded by the shell (`$x`, `${x}`, `~`, an unquoted glob).
    pub dynamic: bool,
    /// It runs a command to make its text (`$(…)`, `` `…` ``, `<(…)`, `>(…)`).
    pub substitution: bool,
    /// Some part of it was quoted or escaped (so it is not a reserved word).
    pub quoted: bool,
}

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A word.
    Word(Word),
    /// `;`, `&`, `&&`, `||`, `|`, `|&`, `(`, `)`, or a line end.
    Op(&'static str),
    /// A redirection operator (`>`, `>>`, `<`, `2>`, `&>`, `>&`, `<<<`, …), with its
    /// file descriptor digits when written.
    Redirect(String),
}

/// Why the lexer is not sure what bash would do.
pub type Unsure = String;

struct Lexer {
    chars: Vec<char>,
    at: usize,
    tokens: Vec<Token>,
    word: Word,
    in_word: bool,
}

/// Cuts `text` into tokens, or says why it cannot be sure how.
pub fn lex(text: &str) -> Result<Vec<Token>, Unsure> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        at: 0,
        tokens: Vec::new(),
        word: Word::default(),
        in_word: false,
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn push(&mut self, c: char) {
        self.word.text.push(c);
        self.in_word = true;
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.tokens.push(Token::Word(std::mem::take(&mut self.word)));
            self.in_word = false;
        }
    }

    fn op(&mut self, op: &'static str, len: usize) {
        self.end_word();
        self.tokens.push(Token::Op(op));
        self.at += len;
    }

    fn run(&mut self) -> Result<(), Unsure> {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' => {
                    self.end_word();
                    self.at += 1;
                }
                '\n' => self.op("\n", 1),
                '#' if !self.in_word => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '\\' => match self.peek(1) {
                    Some('\n') => self.at += 2,
                    Some(next) => {
                        self.push(next);
                        self.word.quoted = true;
                        self.at += 2;
                    }
                    None => {
                        self.at += 1;
                    }
                },
                '\'' => self.single_quoted()?,
                '"' => self.double_quoted()?,
                '$' => self.dollar(false)?,
                '`' => self.backtick()?,
                ';' if self.peek(1) == Some(';') => return Err("a `case` branch (`;;`)".into()),
                ';' => self.op(";", 1),
                '&' if self.peek(1) == Some('&') => self.op("&&", 2),
                '&' if self.peek(1) == Some('>') => self.redirect(None)?,
                '&' => self.op("&", 1),
                '|' if self.peek(1) == Some('|') => self.op("||", 2),
                '|' if self.peek(1) == Some('&') => self.op("|&", 2),
                '|' => self.op("|", 1),
                '(' if self.peek(1) == Some('(') => return Err("an arithmetic command (`((…))`)".into()),
                '(' if self.in_word => {
                    return Err("a `(` inside a word (a function definition or an array)".into());
                }
                '(' => self.op("(", 1),
                ')' => self.op(")", 1),
                '<' | '>' if self.peek(1) == Some('(') => self.process_substitution()?,
                '<' | '>' => {
                    let digits = self.in_word
                        && self.word.text.chars().all(|c| c.is_ascii_digit())
                        && !self.word.quoted;
                    let fd = if digits { Some(std::mem::take(&mut self.word.text)) } else { None };
                    if digits {
                        self.in_word = false;
                        self.word = Word::default();
                    }
                    self.redirect(fd)?;
                }
                '*' | '?' | '[' | '~' => {
                    // A glob or a tilde: the shell expands it.
                    self.word.dynamic = true;
                    self.push(c);
                    self.at += 1;
                }
                _ => {
                    self.push(c);
                    self.at += 1;
                }
            }
        }
        self.end_word();
        Ok(())
    }

    fn single_quoted(&mut self) -> Result<(), Unsure> {
        self.at += 1;
        self.in_word = true;
        self.word.quoted = true;
        loop {
            match self.peek(0) {
                Some('\'') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(c) => {
                    self.word.text.push(c);
                    self.at += 1;
                }
                None => return Err("an unclosed single quote".into()),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<(), Unsure> {
        self.at += 1;
        self.in_word = true;
        self.word.quoted = true;
        loop {
            match self.peek(0) {
                Some('"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some('\\') => match self.peek(1) {
                    Some('\n') => self.at += 2,
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        self.word.text.push(next);
                        self.at += 2;
                    }
                    _ => {
                        self.word.text.push('\\');
                        self.at += 1;
                    }
                },
                Some('$') => self.dollar(true)?,
                Some('`') => self.backtick()?,
                Some(c) => {
                    self.word.text.push(c);
                    self.at += 1;
                }
                None => return Err("an unclosed double quote".into()),
            }
        }
    }

    /// `$…`: a parameter, a command substitution, arithmetic, or `$'…'`.
    fn dollar(&mut self, in_double: bool) -> Result<(), Unsure> {
        self.in_word = true;
        match self.peek(1) {
            Some('\'') if !in_double => self.ansi_c(),
            Some('"') if !in_double => {
                // `$"…"`: a translatable string, otherwise double quotes.
                self.at += 1;
                self.double_quoted()
            }
            Some('(') => {
                let arithmetic = self.peek(2) == Some('(');
                let start = self.at;
                self.at += 1;
                self.balanced('(', ')')?;
                let text: String = self.chars[start..self.at].iter().collect();
                self.word.text.push_str(&text);
                self.word.dynamic = true;
                self.word.substitution |= !arithmetic || text.contains("$(") || text.contains('`');
                Ok(())
            }
            Some('{') => {
                let start = self.at;
                self.at += 1;
                self.balanced('{', '}')?;
                let text: String = self.chars[start..self.at].iter().collect();
                self.word.substitution |= text.contains("$(") || text.contains('`');
                self.word.text.push_str(&text);
                self.word.dynamic = true;
                Ok(())
            }
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
                self.word.text.push('$');
                self.at += 1;
                while let Some(c) = self.peek(0).filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
                    self.word.text.push(c);
                    self.at += 1;
                }
                self.word.dynamic = true;
                Ok(())
            }
            Some(c) if "@*#?-$!".contains(c) => {
                self.word.text.push('$');
                self.word.text.push(c);
                self.at += 2;
                self.word.dynamic = true;
                Ok(())
            }
            _ => {
                self.word.text.push('$');
                self.at += 1;
                Ok(())
            }
        }
    }

    /// From an opening bracket at the cursor to its match, quotes and nesting followed.
    fn balanced(&mut self, open: char, close: char) -> Result<(), Unsure> {
        let mut depth = 0usize;
        let (mut single, mut double) = (false, false);
        while let Some(c) = self.peek(0) {
            self.at += 1;
            if single {
                single = c != '\'';
                continue;
            }
            match c {
                '\\' => self.at += 1,
                '\'' if !double => single = true,
                '"' => double = !double,
                c if c == open && !double => depth += 1,
                c if c == close && !double => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(format!("an unclosed `{open}`"))
    }

    fn backtick(&mut self) -> Result<(), Unsure> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.peek(0) {
                Some('\\') => self.at += 2,
                Some('`') => {
                    self.at += 1;
                    break;
                }
                Some(_) => self.at += 1,
                None => return Err("an unclosed backquote".into()),
            }
        }
        let text: String = self.chars[start..self.at.min(self.chars.len())].iter().collect();
        self.word.text.push_str(&text);
        self.in_word = true;
        self.word.dynamic = true;
        self.word.substitution = true;
        Ok(())
    }

    fn process_substitution(&mut self) -> Result<(), Unsure> {
        let start = self.at;
        self.at += 1;
        self.balanced('(', ')')?;
        let text: String = self.chars[start..self.at].iter().collect();
        self.word.text.push_str(&text);
        self.in_word = true;
        self.word.dynamic = true;
        self.word.substitution = true;
        Ok(())
    }

    /// `$'…'`: bash's quoting with backslash escapes.
    fn ansi_c(&mut self) -> Result<(), Unsure> {
        self.at += 2;
        self.word.quoted = true;
        loop {
            let Some(c) = self.peek(0) else { return Err("an unclosed `$'`".into()) };
            self.at += 1;
            match c {
                '\'' => return Ok(()),
                '\\' => {
                    let Some(e) = self.peek(0) else { return Err("an unclosed `$'`".into()) };
                    self.at += 1;
                    let decoded = match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'a' => '\x07',
                        'b' => '\x08',
                        'e' | 'E' => '\x1b',
                        'f' => '\x0c',
                        'v' => '\x0b',
                        'x' => {
                            let value = self.hex_digits(2);
                            char::from_u32(value.ok_or("an empty `\\x` escape")?).unwrap_or('\u{fffd}')
                        }
                        'u' | 'U' => {
                            let value = self.hex_digits(if e == 'u' { 4 } else { 8 });
                            char::from_u32(value.ok_or("an empty `\\u` escape")?).unwrap_or('\u{fffd}')
                        }
                        '0'..='7' => {
                            let mut value = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                match self.peek(0).and_then(|d| d.to_digit(8)) {
                                    Some(d) => {
                                        value = value * 8 + d;
                                        self.at += 1;
                                    }
                                    None => break,
                                }
                            }
                            char::from_u32(value).unwrap_or('\u{fffd}')
                        }
                        'c' => return Err("a `\\c` control escape".into()),
                        other => other,
                    };
                    self.word.text.push(decoded);
                }
                other => self.word.text.push(other),
            }
        }
    }

    fn hex_digits(&mut self, most: usize) -> Option<u32> {
        let mut value = None;
        for _ in 0..most {
            match self.peek(0).and_then(|d| d.to_digit(16)) {
                Some(d) => {
                    value = Some(value.unwrap_or(0) * 16 + d);
                    self.at += 1;
                }
                None => break,
            }
        }
        value
    }

    /// A redirection operator at the cursor (`<`, `>`, `&>`, …) with `fd` digits before it.
    fn redirect(&mut self, fd: Option<String>) -> Result<(), Unsure> {
        self.end_word();
        let rest: String = self.chars[self.at..(self.at + 3).min(self.chars.len())].iter().collect();
        let ops = ["<<<", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">"];
        let Some(op) = ops.iter().find(|op| rest.starts_with(**op)) else {
            return Err("an odd redirection".into());
        };
        if *op == "<<" {
            return Err("a here-document (`<<`)".into());
        }
        self.at += op.len();
        self.tokens.push(Token::Redirect(format!("{}{op}", fd.unwrap_or_default())));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn words(text: &str) -> Vec<String> {
        lex(text)
            .unwrap()
            .into_iter()
            .map(|t| match t {
                Token::Word(w) => w.text,
                Token::Op(op) => format!("<{}>", op.replace('\n', "nl")),
                Token::Redirect(r) => format!("[{r}]"),
            })
            .collect()
    }

    #[test]
    fn quotes_are_removed_and_pieces_joined() {
        assert_eq!(words(r#"r''m -rf 'a b' "c $d" e\ f"#), ["rm", "-rf", "a b", "c $d", "e f"]);
        assert_eq!(words(r"\rm x"), ["rm", "x"]);
        assert_eq!(words("$'a\\nb\\x41\\101\\'' x"), ["a\nbAA'", "x"]);
        assert_eq!(words("a\\\nb c"), ["ab", "c"]);
        assert_eq!(words("echo \"a\\\"b\\$c\\d\""), ["echo", "a\"b$c\\d"]);
    }

    #[test]
    fn comments_end_at_the_line_and_quotes_in_them_do_not_count() {
        assert_eq!(words("git status #'\ntouch X\n#'"), ["git", "status", "<nl>", "touch", "X", "<nl>"]);
        assert_eq!(words("git status # \\\ntouch X"), ["git", "status", "<nl>", "touch", "X"]);
        assert_eq!(words("echo a#b"), ["echo", "a#b"]);
    }

    #[test]
    fn operators_and_redirections() {
        assert_eq!(
            words("a && b || c; d | e |& f & g\nh"),
            ["a", "<&&>", "b", "<||>", "c", "<;>", "d", "<|>", "e", "<|&>", "f", "<&>", "g", "<nl>", "h"]
        );
        assert_eq!(
            words("make 2>&1 >out <in &>all"),
            ["make", "[2>&]", "1", "[>]", "out", "[<]", "in", "[&>]", "all"]
        );
        assert_eq!(words("(cd x && make)"), ["<(>", "cd", "x", "<&&>", "make", "<)>"]);
    }

    #[test]
    fn expansions_are_noted() {
        let tokens = lex("echo $(rm -rf ~) `id` \"$HOME\" *.py <(ls)").unwrap();
        let notes: Vec<(bool, bool)> = tokens
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some((w.dynamic, w.substitution)),
                _ => None,
            })
            .collect();
        assert_eq!(
            notes,
            [(false, false), (true, true), (true, true), (true, false), (true, false), (true, true)]
        );
    }

    #[test]
    fn what_is_not_followed_is_unsure() {
        for text in [
            "cat <<EOF\nx\nEOF",
            "echo 'open",
            "echo \"open",
            "echo $(open",
            "case x in a) ;; esac",
            "f() { x; }",
            "((i++))",
        ] {
            assert!(lex(text).is_err(), "{text:?}");
        }
    }
}

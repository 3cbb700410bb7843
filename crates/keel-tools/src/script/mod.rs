//! Shell command lines as bash reads them, for permission rules and the deny net.
//!
//! [`parse`] turns a command line into its simple commands (assignments, words after
//! quote removal, redirections) in order, with the pipelines that join them. It follows
//! what decides which programs run: quotes of every kind, words written in pieces,
//! comments, line continuations, `;`, `&`, `&&`, `||`, `|`, grouping, `if`/`while`/
//! `for` and friends. What it does not follow (here-documents, `case`, function
//! definitions, arithmetic) makes the result [`Script::unsure`]: a rule then never
//! allows the command, and the user is asked.

mod lex;
pub mod unwrap;

pub use lex::Word;
use lex::{Token, lex};

/// One simple command: what runs, with what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// `NAME=value` words before the program.
    pub assignments: Vec<Word>,
    /// The program and its arguments.
    pub words: Vec<Word>,
    /// Redirections: the operator (`>`, `2>&`, `<`, …) and its target.
    pub redirects: Vec<(String, Word)>,
    /// Its standard input is the previous command's output (`a | b`).
    pub piped: bool,
}

impl Command {
    /// The command as rules match it: assignments and words, quotes removed, one space
    /// apart (`A=1 rm -rf x`).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for word in self.assignments.iter().chain(&self.words) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&word.text);
        }
        out
    }

    /// It runs something to build its words or redirections (`$(…)`, backquotes, `<(…)`).
    pub fn substitutes(&self) -> bool {
        self.assignments
            .iter()
            .chain(&self.words)
            .chain(self.redirects.iter().map(|(_, w)| w))
            .any(|w| w.substitution)
    }

    /// It writes a file through a redirection (not a descriptor, not `/dev/null`).
    pub fn writes_file(&self) -> bool {
        self.redirects.iter().any(|(op, target)| {
            let output = op.contains('>') && !op.ends_with('&');
            output && target.text != "/dev/null"
        })
    }
}

/// A parsed command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Its simple commands, in order.
    pub commands: Vec<Command>,
    /// Words that are not commands but are expanded (`for x in WORDS`).
    pub expanded: Vec<Word>,
    /// Why the parse cannot be trusted, when it cannot.
    pub unsure: Option<String>,
}

impl Script {
    /// Every form of every command that rules and the deny net look at: as written
    /// (assignments included), with each wrapper taken off (`sudo`, `env`, `xargs`, …,
    /// and the program's path), and the same for command lines nested in `sh -c` or
    /// `eval`, three levels deep.
    pub fn forms(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_forms(0, &mut out);
        out
    }

    fn collect_forms(&self, depth: usize, out: &mut Vec<String>) {
        for command in &self.commands {
            out.push(command.text());
            let argv: Vec<String> = command.words.iter().map(|w| w.text.clone()).collect();
            for view in unwrap::unwrapped(&argv) {
                let text = view.join(" ");
                if !out.contains(&text) {
                    out.push(text);
                }
            }
            for view in unwrap::unwrapped(&argv) {
                if depth < 3
                    && let Some(line) = unwrap::nested(&view)
                {
                    parse(&line).collect_forms(depth + 1, out);
                }
            }
        }
    }
}

/// Words bash reads as keywords at the start of a command that only separate commands.
const SEPARATING: &[&str] =
    &["!", "{", "}", "then", "else", "do", "fi", "done", "if", "elif", "while", "until"];

/// Parses `text` (bash syntax).
pub fn parse(text: &str) -> Script {
    let tokens = match lex(text) {
        Ok(tokens) => tokens,
        Err(why) => return Script { unsure: Some(why), ..Script::default() },
    };
    let mut script = Script::default();
    let mut current = Command::default();
    let mut piped = false;
    let mut tokens = tokens.into_iter().peekable();
    let finish = |script: &mut Script, current: &mut Command, piped: &mut bool| {
        if !current.words.is_empty() || !current.assignments.is_empty() || !current.redirects.is_empty() {
            let mut command = std::mem::take(current);
            command.piped = *piped;
            script.commands.push(command);
        }
        *piped = false;
    };
    while let Some(token) = tokens.next() {
        match token {
            Token::Op(op) => {
                if op == "(" && !current.words.is_empty() {
                    script.unsure = Some("a function definition".into());
                }
                finish(&mut script, &mut current, &mut piped);
                piped = matches!(op, "|" | "|&");
            }
            Token::Redirect(op) => match tokens.next() {
                Some(Token::Word(target)) => current.redirects.push((op, target)),
                _ => script.unsure = Some(format!("a redirection `{op}` without a target")),
            },
            Token::Word(word) => {
                let starts = current.words.is_empty();
                let keyword = starts && !word.quoted && current.assignments.is_empty();
                if keyword && SEPARATING.contains(&word.text.as_str()) {
                    finish(&mut script, &mut current, &mut piped);
                    continue;
                }
                if keyword && matches!(word.text.as_str(), "case" | "esac" | "function" | "coproc" | "select")
                {
                    script.unsure = Some(format!("`{}`", word.text));
                    continue;
                }
                if keyword && word.text == "for" {
                    for_header(&mut tokens, &mut script);
                    continue;
                }
                if starts && is_assignment(&word) {
                    current.assignments.push(word);
                } else {
                    current.words.push(word);
                }
            }
        }
    }
    finish(&mut script, &mut current, &mut piped);
    script
}

/// `for NAME in WORDS;` (or `for NAME;`): the words are expanded, not run.
fn for_header(tokens: &mut std::iter::Peekable<std::vec::IntoIter<Token>>, script: &mut Script) {
    let _name = tokens.next();
    if matches!(tokens.peek(), Some(Token::Word(w)) if w.text == "in" && !w.quoted) {
        tokens.next();
    }
    for token in tokens.by_ref() {
        match token {
            Token::Word(word) => script.expanded.push(word),
            Token::Op(";" | "\n") => return,
            _ => {
                script.unsure = Some("an odd `for` loop".into());
                return;
            }
        }
    }
}

/// `NAME=…` (or `NAME+=…`) with a valid name, unquoted up to the `=`.
fn is_assignment(word: &Word) -> bool {
    let Some((name, _)) = word.text.split_once('=') else { return false };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;

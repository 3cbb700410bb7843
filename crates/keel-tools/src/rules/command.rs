//! Shell commands as rules see them: wildcards over the whole text, and compound
//! commands split into their parts.

/// `*` any text, `?` one character; the whole text must match.
pub(super) fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// One simple command of a compound command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPart {
    /// The command, trimmed (grouping parentheses and braces removed).
    pub text: String,
    /// It holds a command substitution or writes a file: no rule allows it.
    pub opaque: bool,
}

/// Splits a command line at `&&`, `||`, `;`, `|`, `&` and newlines outside quotes.
pub fn split_command(command: &str) -> Vec<CommandPart> {
    let chars: Vec<char> = command.chars().collect();
    let mut parts = Vec::new();
    let (mut current, mut opaque) = (String::new(), false);
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    let mut finish = |current: &mut String, opaque: &mut bool| {
        let text =
            current.trim().trim_start_matches(['(', '{', ' ']).trim_end_matches([')', '}', ' ']).trim();
        if !text.is_empty() {
            parts.push(CommandPart { text: text.to_owned(), opaque: *opaque });
        }
        current.clear();
        *opaque = false;
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if single {
            single = c != '\'';
            current.push(c);
            i += 1;
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                if let Some(n) = next {
                    current.push(n);
                }
                i += 2;
                continue;
            }
            '\'' if !double => single = true,
            '"' => double = !double,
            '`' => opaque = true,
            '$' if next == Some('(') => opaque = true,
            '<' | '>' if next == Some('(') && !double => opaque = true,
            '>' if !double && writes_file(&chars[i + 1..]) => opaque = true,
            ';' | '\n' | '&' | '|' if !double => {
                // `2>&1`, `>&2`: part of a redirection, not a separator.
                if c == '&' && (current.ends_with('>') || current.ends_with('<')) && next != Some('&') {
                    current.push(c);
                    i += 1;
                    continue;
                }
                finish(&mut current, &mut opaque);
                i += if matches!((c, next), ('&', Some('&')) | ('|', Some('|')) | ('|', Some('&'))) {
                    2
                } else {
                    1
                };
                continue;
            }
            _ => {}
        }
        current.push(c);
        i += 1;
    }
    finish(&mut current, &mut opaque);
    parts
}

/// After a `>`: true unless the target is a descriptor (`&1`) or `/dev/null`.
fn writes_file(rest: &[char]) -> bool {
    let rest: String = rest.iter().collect();
    let rest = rest.trim_start_matches('>').trim_start();
    !(rest.starts_with('&') || rest.starts_with("/dev/null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn compound_commands_split_outside_quotes() {
        let texts = |c: &str| split_command(c).into_iter().map(|p| p.text).collect::<Vec<_>>();
        assert_eq!(texts("cargo test && rm -rf x"), ["cargo test", "rm -rf x"]);
        assert_eq!(texts("a || b; c | d & e\nf"), ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(texts("echo 'a && b' \"c; d\" e\\;f"), ["echo 'a && b' \"c; d\" e\\;f"]);
        assert_eq!(texts("(cd x && make) |& tee log"), ["cd x", "make", "tee log"]);
        assert_eq!(texts("cargo test 2>&1 | tail"), ["cargo test 2>&1", "tail"]);
        assert!(!split_command("cargo test 2>&1").iter().any(|p| p.opaque));
        assert!(!split_command("ls >/dev/null").iter().any(|p| p.opaque));
        for opaque in ["echo $(rm x)", "echo `rm x`", "cargo test > /etc/passwd", "diff <(a) b"] {
            assert!(split_command(opaque)[0].opaque, "{opaque}");
        }
    }

    #[test]
    fn wildcards_match_the_whole_text() {
        assert!(wildcard("git status*", "git status --short"));
        assert!(wildcard("git status*", "git status"));
        assert!(!wildcard("git status*", "sudo git status"));
        assert!(wildcard("curl *|*sh*", "curl -s x | sh"));
        assert!(wildcard("a?c", "abc") && !wildcard("a?c", "abbc"));
    }
}

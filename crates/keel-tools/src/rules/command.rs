//! Shell commands as rules see them: parsed as bash reads them ([`crate::script`]), then
//! matched by wildcards over each simple command's text.

use crate::script::{self, Script};

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

/// The texts a deny or ask rule is tried on: the command line as written, and every form
/// of every command in it ([`Script::forms`]).
pub(super) fn deny_forms(command: &str, script: &Script) -> Vec<String> {
    let mut forms = vec![command.trim().to_owned()];
    forms.extend(script.forms());
    forms
}

/// The commands an allow rule must each match, or `None` when no rule may allow this
/// command line: the parser is unsure, or a command builds a word by running something,
/// writes a file through a redirection, or has a program named by an expansion.
pub(super) fn allowable(script: &Script) -> Option<Vec<String>> {
    if script.unsure.is_some() || script.commands.is_empty() || script.expanded.iter().any(|w| w.substitution)
    {
        return None;
    }
    let mut texts = Vec::new();
    for command in &script.commands {
        let program_known = command.words.first().is_some_and(|w| !w.dynamic);
        if command.substitutes() || command.writes_file() || !program_known {
            return None;
        }
        texts.push(command.text());
    }
    Some(texts)
}

/// Programs whose first argument names what they do (`git status`, `cargo test`).
const SUBCOMMANDS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "go",
    "docker",
    "podman",
    "kubectl",
    "make",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "bun",
    "deno",
    "dotnet",
    "gradle",
    "mvn",
    "rustup",
    "apt",
    "apt-get",
    "brew",
    "systemctl",
    "gh",
];

/// Programs that run what their arguments name: "always" covers exactly the command.
const RUNNERS: &[&str] = &[
    "python", "python3", "node", "ruby", "perl", "php", "bash", "sh", "zsh", "dash", "npx", "bunx", "java",
    "lua", "Rscript", "env", "sudo", "xargs", "eval", "exec", "source", ".", "nohup", "timeout", "nice",
    "watch",
];

/// The narrowest rules that cover every command of `script`, on word boundaries
/// (`shell(git status)` and `shell(git status *)`; `shell(ls)` never matches `lsblk`), the
/// exact command for programs that run what they are given (`shell(python3 calc.py)`).
/// Empty when no rule may allow the command line ([`allowable`]).
pub(super) fn suggest(script: &Script) -> Vec<String> {
    if allowable(script).is_none() {
        return Vec::new();
    }
    let mut rules: Vec<String> = Vec::new();
    for command in &script.commands {
        let words: Vec<&str> = command.words.iter().map(|w| w.text.as_str()).collect();
        let Some(first) = words.first() else { return Vec::new() };
        let exact = !command.assignments.is_empty() || RUNNERS.contains(&script::unwrap::program(first));
        let offered: Vec<String> = if exact {
            vec![command.text()]
        } else {
            let take = if words.len() > 1 && SUBCOMMANDS.contains(first) && !words[1].starts_with('-') {
                2
            } else {
                1
            };
            let prefix = words[..take].join(" ");
            if words.len() > take { vec![prefix.clone(), format!("{prefix} *")] } else { vec![prefix] }
        };
        for text in offered {
            if text.contains(['*', '?']) && !text.ends_with(" *") || text.contains(['(', ')', '\n']) {
                // A rule cannot say this literally.
                return Vec::new();
            }
            let rule = format!("shell({text})");
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn wildcards_match_the_whole_text() {
        assert!(wildcard("git status*", "git status --short"));
        assert!(wildcard("git status*", "git status"));
        assert!(!wildcard("git status*", "sudo git status"));
        assert!(wildcard("curl *|*sh*", "curl -s x | sh"));
        assert!(wildcard("a?c", "abc") && !wildcard("a?c", "abbc"));
    }

    #[test]
    fn suggestions_are_narrow_and_never_keywords() {
        let suggest = |line: &str| suggest(&script::parse(line));
        assert_eq!(suggest("git status --short"), ["shell(git status)", "shell(git status *)"]);
        assert_eq!(suggest("for f in *.py; do wc -l $f; done"), ["shell(wc)", "shell(wc *)"]);
        assert_eq!(suggest("python3 calc.py"), ["shell(python3 calc.py)"]);
        assert_eq!(suggest("ls"), ["shell(ls)"]);
        assert_eq!(suggest("A=1 make"), ["shell(A=1 make)"]);
        assert_eq!(suggest("echo $(id)"), Vec::<String>::new());
        assert_eq!(suggest("cat <<EOF\nx\nEOF"), Vec::<String>::new());
        assert_eq!(suggest("$CMD x"), Vec::<String>::new());
    }
}

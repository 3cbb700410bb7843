//! The deny-list: regular expressions matched against shell commands before they run.
//!
//! keel's own patterns are written for the shell's syntax, whose blanks and separators are
//! ASCII: they are compiled for bytes with Unicode classes off. In Unicode mode `\S`,
//! `\s` and the negated classes expand to every Unicode range, and compiling the set
//! took about 8 million instructions and 0.6 MB of the regex compiler's code on the first
//! shell call of every run — half of keel's own work on a six-step task. Patterns a user
//! adds keep the documented Unicode syntax and are compiled apart, only when there are some.

use std::sync::OnceLock;

use regex::RegexSet;
use regex::bytes::{RegexSet as ByteSet, RegexSetBuilder};

/// A path that names the whole home folder or the whole file system, in the common
/// spellings: `/`, `~`, `$HOME`, `${HOME}`, quoted or not, with an optional trailing `/`,
/// `/*` or `/.` (`~/*`, `"$HOME"/`, `'/'*`).
macro_rules! everything {
    () => {
        r#"["']?(?:/|~|\$HOME|\$\{HOME\})["']?/?["']?(?:\*|\.)?["']?"#
    };
}

/// What may follow a word: its end, a separator, a closing quote or parenthesis.
macro_rules! word_end {
    () => {
        r#"(?:$|[\s;&|)"'`])"#
    };
}

/// Where a command word starts: the start, a space, a separator, an opening quote or
/// parenthesis, a `/` (`/bin/rm`) or a backslash (`\rm`); not `-` (`docker run --rm /`).
macro_rules! command_start {
    () => {
        r#"(?:^|[\s;&|(`"'/\\])"#
    };
}

/// Shell commands refused by default. This is a net for accidents, not a sandbox: a
/// command can always be spelled so that no pattern sees it (a script, a variable, an
/// encoding), and shell commands run with the user's rights. Each pattern below is
/// tested shape by shape, with ordinary commands that must still run.
pub const DEFAULT_DENY: &[&str] = &[
    // rm of the home folder or the root, whatever the flags and quoting (`--` included),
    // also inside `bash -c "…"` or `eval '…'`.
    concat!(command_start!(), r"rm\s(?:[^;&|\n]*\s)?", everything!(), word_end!()),
    r"--no-preserve-root",
    // `cd ~ && rm -rf *` (and `cd` alone, which goes home).
    concat!(
        r"\bcd(?:\s+",
        everything!(),
        r#")?\s*(?:&&|;|\|\||\n)\s*rm\s(?:[^;&|\n]*\s)?["']?(?:\*|\.|\./\*)["']?"#,
        word_end!()
    ),
    // find on the home folder or the root that deletes.
    concat!(
        r"\bfind\s+(?:-[HLP]\s+)*",
        everything!(),
        r"\s[^;&|\n]*(?:-delete\b|-exec(?:dir)?\s+(?:\S*/)?rm\b)"
    ),
    // Force pushes: --force, -f (also in combined flags), --force-with-lease, +refspecs.
    r"\bgit\s+(?:-\S+(?:\s+\S+)?\s+)*?push\b[^;&|\n]*\s(?:--force(?:-with-lease|-if-includes)?(?:=\S*)?|-[a-zA-Z]*f[a-zA-Z]*)(?:$|[\s;&|)])",
    r"\bgit\s+(?:-\S+(?:\s+\S+)?\s+)*?push\b[^;&|\n]*\s\+[^\s;&|]",
    // Decoded text run by a shell: `base64 -d … | sh`.
    r"\bbase64\s[^;&|\n]*(?:-d|--decode|-D)\b[^;&\n]*\|\s*(?:sudo\s+)?(?:ba|da|z|k)?sh\b",
    // Every process of the user (`kill -9 -1`) is seen on the parsed command
    // (`deny_net`): a pattern here also caught `kill $P; ps | head -1`.
    r"\bmkfs(\.\w+)?\b",
    r"\bdd\b[^;&|]*\bof=/dev/",
    r">\s*/dev/(sd|nvme|hd|vd)[a-z]",
    r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
    r"(^|[;&|]\s*)(sudo\s+)?(shutdown|reboot|halt|poweroff)\b",
    // Recursive permission or owner changes of the home folder or the root.
    concat!(r"\b(?:chmod|chown|chgrp)\s+(?:\S+\s+)*?-\S*R\S*\s+(?:\S+\s+)*?", everything!(), word_end!()),
];

/// keel's patterns: [`DEFAULT_DENY`] plus `rm` of the home folder spelled out
/// (`rm -rf /home/me`), when `HOME` names one.
fn builtin_patterns(home: Option<&str>) -> Vec<String> {
    let mut patterns: Vec<String> = DEFAULT_DENY.iter().map(|p| (*p).to_owned()).collect();
    if let Some(home) = home.map(|h| h.trim_end_matches('/'))
        && !home.is_empty()
    {
        let home = regex::escape(home);
        patterns.push(format!(
            r#"{}rm\s(?:[^;&|\n]*\s)?["']?{home}["']?/?["']?(?:\*|\.)?["']?{}"#,
            command_start!(),
            word_end!()
        ));
    }
    patterns
}

/// The patterns shell commands are checked against, compiled on the first check.
#[derive(Debug)]
pub(crate) struct DenyList {
    /// keel's patterns, compiled as ASCII over bytes.
    builtin: Vec<String>,
    /// The user's patterns, compiled with Unicode classes.
    user: Vec<String>,
    compiled: OnceLock<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    builtin: Option<ByteSet>,
    /// keel's patterns that do not compile as ASCII (a home folder with a non-ASCII name
    /// where the regex crate wants Unicode), with the user's.
    unicode: UnicodeSet,
    /// The pattern each index of `unicode` stands for.
    unicode_patterns: Vec<String>,
}

/// Patterns compiled with Unicode classes: one set, or each alone when together they
/// exceed the regex crate's size limit (each compiled alone when it was added; a list
/// that does not compile must not let every command through).
#[derive(Debug)]
enum UnicodeSet {
    None,
    Set(RegexSet),
    Each(Vec<(usize, regex::Regex)>),
}

impl UnicodeSet {
    fn new(patterns: &[String]) -> Self {
        if patterns.is_empty() {
            return UnicodeSet::None;
        }
        match RegexSet::new(patterns) {
            Ok(set) => UnicodeSet::Set(set),
            Err(err) => {
                tracing::warn!(
                    "the deny-list does not compile as one set ({err}); each pattern is checked alone"
                );
                UnicodeSet::Each(
                    patterns
                        .iter()
                        .enumerate()
                        .filter_map(|(i, p)| Some((i, regex::Regex::new(p).ok()?)))
                        .collect(),
                )
            }
        }
    }

    /// The index of the first pattern `command` matches.
    fn first_match(&self, command: &str) -> Option<usize> {
        match self {
            UnicodeSet::None => None,
            UnicodeSet::Set(set) => set.matches(command).iter().next(),
            UnicodeSet::Each(each) => each.iter().find(|(_, regex)| regex.is_match(command)).map(|(i, _)| *i),
        }
    }
}

impl DenyList {
    /// keel's default patterns.
    pub(crate) fn builtin() -> Self {
        Self::builtin_for_home(std::env::var("HOME").ok().as_deref())
    }

    /// keel's default patterns, with `home` as the home folder.
    fn builtin_for_home(home: Option<&str>) -> Self {
        DenyList { builtin: builtin_patterns(home), user: Vec::new(), compiled: OnceLock::new() }
    }

    /// No pattern at all (the user replaces the list).
    pub(crate) fn clear(&mut self) {
        self.builtin.clear();
        self.user.clear();
        self.compiled = OnceLock::new();
    }

    /// Adds a user's pattern, checked first so a bad one is an error at configuration time.
    pub(crate) fn add(&mut self, pattern: &str) -> Result<(), regex::Error> {
        regex::Regex::new(pattern)?;
        self.user.push(pattern.to_owned());
        self.compiled = OnceLock::new();
        Ok(())
    }

    /// The patterns, keel's first.
    pub(crate) fn patterns(&self) -> impl Iterator<Item = &str> {
        self.builtin.iter().chain(&self.user).map(String::as_str)
    }

    /// The first pattern `command` matches.
    pub(crate) fn matching(&self, command: &str) -> Option<&str> {
        let compiled = self.compiled.get_or_init(|| self.compile());
        if let Some(set) = &compiled.builtin
            && let Some(index) = set.matches(command.as_bytes()).iter().next()
        {
            return self.builtin.get(index).map(String::as_str);
        }
        let index = compiled.unicode.first_match(command)?;
        compiled.unicode_patterns.get(index).map(String::as_str)
    }

    fn compile(&self) -> Compiled {
        let ascii = |patterns: &[String]| RegexSetBuilder::new(patterns).unicode(false).build();
        let (builtin, mut unicode_patterns) = match ascii(&self.builtin) {
            Ok(set) => (Some(set), Vec::new()),
            Err(err) => {
                tracing::debug!("keel's deny patterns compiled with Unicode classes: {err}");
                (None, self.builtin.clone())
            }
        };
        unicode_patterns.extend(self.user.iter().cloned());
        let unicode = UnicodeSet::new(&unicode_patterns);
        let builtin = builtin.filter(|set| !set.is_empty());
        Compiled { builtin, unicode, unicode_patterns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keels_patterns_compile_as_ascii_with_no_unicode_set() {
        let list = DenyList::builtin_for_home(Some("/home/me"));
        let compiled = list.compile();
        assert!(compiled.builtin.is_some());
        assert!(matches!(compiled.unicode, UnicodeSet::None));
        assert_eq!(list.matching("rm -rf /home/me"), list.builtin.last().map(String::as_str));
        assert_eq!(list.matching("rm -rf /home/me/project/build"), None);
    }

    #[test]
    fn a_home_folder_with_a_non_ascii_name_is_denied_spelled_out() {
        let list = DenyList::builtin_for_home(Some("/home/josé/"));
        assert!(matches!(list.compile().unicode, UnicodeSet::None), "compiled as ASCII");
        assert!(list.matching("rm -rf /home/josé").is_some());
        assert!(list.matching("rm -rf \"/home/josé/\"*").is_some());
        assert_eq!(list.matching("rm -rf /home/josé/build"), None);
    }

    #[test]
    fn non_ascii_text_around_a_command_does_not_hide_it() {
        let list = DenyList::builtin_for_home(None);
        for command in ["echo 完成 && rm -rf /", "rm -rf ~ # 清理", "git push --force origin 主分支"] {
            assert!(list.matching(command).is_some(), "should deny {command:?}");
        }
        assert_eq!(list.matching("rm -rf 构建目录"), None);
    }

    #[test]
    fn a_users_pattern_keeps_unicode_classes() {
        let mut list = DenyList::builtin_for_home(None);
        list.add(r"\bπ\w+\s+--drop").unwrap();
        assert_eq!(list.matching("πλάνο --drop"), Some(r"\bπ\w+\s+--drop"));
        assert_eq!(list.matching("plan --drop"), None);
        assert!(list.add("(unclosed").is_err());
    }

    #[test]
    fn a_replaced_list_holds_only_the_users_patterns() {
        let mut list = DenyList::builtin_for_home(None);
        list.clear();
        assert_eq!(list.matching("rm -rf /"), None);
        list.add("^make deploy").unwrap();
        assert_eq!(list.matching("make deploy"), Some("^make deploy"));
        assert_eq!(list.patterns().collect::<Vec<_>>(), vec!["^make deploy"]);
    }
}

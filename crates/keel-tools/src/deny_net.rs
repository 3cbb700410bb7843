//! The deny net on parsed commands: shapes a pattern over the raw text cannot see
//! reliably (`rm -rf ~//`, `H=~; rm -rf $H`, `find ~ | xargs rm`), and shapes it sees
//! where they are not (`kill $P; ps | head -1` is not `kill -1`). It reads each command
//! as bash would run it ([`crate::script`]), wrappers taken off and `sh -c` lines
//! followed, with the variables the line itself assigned (and `HOME`) put in. A net for
//! accidents, like the patterns: a command can always be spelled so that neither sees it.

use std::collections::HashMap;

use crate::script::unwrap::{nested, program, unwrapped};
use crate::script::{Script, parse};

/// Why `command` is refused, if one of the parsed shapes matches.
pub fn refused(command: &str) -> Option<&'static str> {
    let home = std::env::var("HOME").ok().filter(|h| h.starts_with('/'));
    refused_with(&parse(command), home.as_deref(), 0)
}

fn refused_with(script: &Script, home: Option<&str>, depth: usize) -> Option<&'static str> {
    let mut vars: HashMap<String, String> = HashMap::new();
    if let Some(home) = home {
        vars.insert("HOME".into(), home.to_owned());
    }
    for (index, command) in script.commands.iter().enumerate() {
        if command.words.is_empty() {
            for assignment in &command.assignments {
                if let Some((name, value)) = assignment.text.split_once('=') {
                    let value = expand(value, &vars, home);
                    vars.insert(name.to_owned(), value);
                }
            }
            continue;
        }
        let argv: Vec<String> = command.words.iter().map(|w| expand(&w.text, &vars, home)).collect();
        let next = script.commands.get(index + 1).filter(|c| c.piped);
        let feeds_rm = next.is_some_and(|next| {
            let argv: Vec<String> = next.words.iter().map(|w| w.text.clone()).collect();
            unwrapped(&argv).iter().any(|view| view.first().is_some_and(|p| p == "rm"))
        });
        for view in unwrapped(&argv) {
            if let Some(why) = view_refused(&view, home, feeds_rm) {
                return Some(why);
            }
            if depth < 3
                && let Some(line) = nested(&view)
                && let Some(why) = refused_with(&parse(&line), home, depth + 1)
            {
                return Some(why);
            }
        }
    }
    None
}

fn view_refused(view: &[String], home: Option<&str>, feeds_rm: bool) -> Option<&'static str> {
    let name = program(view.first()?);
    let args = &view[1..];
    match name {
        "rm" if operands(args).iter().any(|a| everything(a, home)) => {
            Some("rm of the home folder or the root")
        }
        "find" => {
            let starts: Vec<&String> = args.iter().take_while(|a| !a.starts_with(['-', '(', '!'])).collect();
            let deletes = args.iter().any(|a| a == "-delete")
                || args.windows(2).any(|w| w[0].starts_with("-exec") && program(&w[1]) == "rm")
                || feeds_rm;
            (deletes && starts.iter().any(|a| everything(a, home)))
                .then_some("find that deletes the home folder or the root")
        }
        "git" if args.iter().any(|a| a == "push") && args.iter().any(|a| a == "--mirror") => {
            Some("git push --mirror (it overwrites and deletes every remote ref)")
        }
        "kill" if kill_targets(args).iter().any(|pid| pid == "-1") => {
            Some("kill of every process of the user (-1)")
        }
        _ => None,
    }
}

/// The operands of `rm`: what follows its options (everything after `--`).
fn operands(args: &[String]) -> Vec<&String> {
    let mut out = Vec::new();
    let mut options = true;
    for arg in args {
        if options && arg == "--" {
            options = false;
        } else if !(options && arg.starts_with('-') && arg.len() > 1) {
            out.push(arg);
        }
    }
    out
}

/// The processes `kill ARGS` signals: a signal given as `-9`, `-KILL`, `-s KILL` or
/// `-n 9` comes first, then process ids (`-1` among them means every process).
fn kill_targets(args: &[String]) -> Vec<String> {
    let mut at = match args.first().map(String::as_str) {
        Some("-l" | "-L") => return Vec::new(),
        Some("-s" | "-n") => 2,
        Some("--") | None => 0,
        Some(first) if first.starts_with('-') => 1,
        Some(_) => 0,
    };
    if args.get(at).is_some_and(|a| a == "--") {
        at += 1;
    }
    args.get(at..).map(<[String]>::to_vec).unwrap_or_default()
}

/// `text` with `~`, `$NAME`, `${NAME}` and `${NAME:?…}`-style forms put in where the
/// value is known (others are left as written).
fn expand(text: &str, vars: &HashMap<String, String>, home: Option<&str>) -> String {
    let mut out = String::new();
    let mut rest = text;
    if let Some(home) = home
        && let Some(after) = rest.strip_prefix('~')
        && (after.is_empty() || after.starts_with('/'))
    {
        out.push_str(home);
        rest = after;
    }
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, len) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => {
                    let inner = &braced[..end];
                    let name_len =
                        inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(inner.len());
                    (&inner[..name_len], end + 2)
                }
                None => ("", 0),
            }
        } else {
            let len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            (&after[..len], len)
        };
        match vars.get(name).filter(|_| !name.is_empty() && len > 0) {
            Some(value) => {
                out.push_str(value);
                rest = &after[len..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `path` is the root, the home folder, or everything in either (`/`, `~//`,
/// `$HOME/.`, `/*`).
fn everything(path: &str, home: Option<&str>) -> bool {
    let normal = normalize(path);
    let normal = normal.strip_suffix("/*").map(str::to_owned).unwrap_or(normal);
    let normal = if normal.is_empty() { "/".to_owned() } else { normal };
    normal == "/" || home.is_some_and(|home| normalize(home) == normal)
}

/// Repeated slashes and `.` components dropped, no trailing slash (`//` is `/`).
fn normalize(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_owned();
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str) -> Option<&'static str> {
        refused_with(&parse(command), Some("/home/me"), 0)
    }

    /// Issue 28, item 16: these got past the net, and `kill $P` was refused.
    #[test]
    fn the_shapes_the_patterns_missed_are_refused() {
        for bad in [
            "rm -rf ~//",
            "rm -rf ~/./",
            "rm -rf -- \"${HOME:?}\"",
            "H=~; rm -rf $H",
            "H=$HOME; rm -rf \"$H/\"",
            "find ~ | xargs rm -rf",
            "find / -type f -print0 | xargs -0 rm",
            "git push --mirror",
            "git push --mirror origin",
            "rm -rf /home/me/.",
            "sudo -u me rm -rf ~",
            "sh -c 'rm -rf ~//'",
            "kill -9 -1",
            "kill -s KILL -1",
            "kill -- -1",
        ] {
            assert!(check(bad).is_some(), "should refuse {bad:?}");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for fine in [
            "kill $P",
            "kill -TERM $P",
            "kill $P; ps aux | head -1",
            "kill -1 1234",
            "kill %1",
            "rm -rf ~/.cache/pip",
            "rm -rf build",
            "H=~/tmp; rm -rf $H",
            "find . | xargs rm",
            "find ~/projects -name '*.o' -delete",
            "git push origin main",
            "echo rm -rf ~",
        ] {
            assert_eq!(check(fine), None, "should pass {fine:?}");
        }
    }

    #[test]
    fn paths_are_normalized() {
        assert!(everything("//", None) && everything("/./", None) && everything("/*", None));
        assert!(everything("/home/me//", Some("/home/me")) && everything("/home/me/./*", Some("/home/me")));
        assert!(!everything("/home/me/x", Some("/home/me")) && !everything("build", Some("/home/me")));
        let vars = HashMap::from([("HOME".to_owned(), "/home/me".to_owned())]);
        assert_eq!(expand("${HOME:?}/x", &vars, Some("/home/me")), "/home/me/x");
        assert_eq!(expand("~/a", &vars, Some("/home/me")), "/home/me/a");
        assert_eq!(expand("$UNKNOWN/x", &vars, Some("/home/me")), "$UNKNOWN/x");
    }
}

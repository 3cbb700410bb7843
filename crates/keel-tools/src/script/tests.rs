use super::*;
use pretty_assertions::assert_eq;

fn texts(line: &str) -> Vec<String> {
    let script = parse(line);
    assert_eq!(script.unsure, None, "{line:?}");
    script.commands.iter().map(Command::text).collect()
}

#[test]
fn the_bypasses_of_issue_28_are_seen_as_the_commands_they_are() {
    assert_eq!(texts("git status #'\ntouch X\n#'"), ["git status", "touch X"]);
    assert_eq!(texts("git status #\"\ntouch X\n#\""), ["git status", "touch X"]);
    assert_eq!(texts("git status # \\\ntouch X"), ["git status", "touch X"]);
    assert_eq!(texts("git status $'\\''; touch X; echo $'\\''"), ["git status '", "touch X", "echo '"]);
    assert_eq!(texts("A=1 rm -rf x"), ["A=1 rm -rf x"]);
    assert_eq!(texts("\\rm x; r''m y; rm\tz"), ["rm x", "rm y", "rm z"]);
}

#[test]
fn compound_commands_give_their_simple_commands() {
    assert_eq!(texts("cargo test && rm -rf x"), ["cargo test", "rm -rf x"]);
    assert_eq!(texts("a || b; c | d & e\nf"), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(texts("(cd x && make) |& tee log"), ["cd x", "make", "tee log"]);
    assert_eq!(texts("if grep -q x f; then rm f; else echo no; fi"), ["grep -q x f", "rm f", "echo no"]);
    assert_eq!(texts("while true; do sleep 1; done"), ["true", "sleep 1"]);
    assert_eq!(texts("{ a; b; }"), ["a", "b"]);
    assert_eq!(texts("! grep x y"), ["grep x y"]);
    let script = parse("for f in *.py $(ls); do wc -l $f; done");
    assert_eq!(script.commands.iter().map(Command::text).collect::<Vec<_>>(), ["wc -l $f"]);
    assert_eq!(script.expanded.iter().map(|w| w.text.as_str()).collect::<Vec<_>>(), ["*.py", "$(ls)"]);
    assert!(script.expanded[1].substitution);
}

#[test]
fn pipes_redirections_and_substitutions_are_marked() {
    let script = parse("find . -name x | xargs rm 2>/dev/null > out.txt");
    assert_eq!(script.commands.len(), 2);
    assert!(!script.commands[0].piped && script.commands[1].piped);
    assert!(script.commands[1].writes_file());
    assert!(!parse("make 2>&1 >/dev/null").commands[0].writes_file());
    assert!(parse("echo $(id)").commands[0].substitutes());
    assert!(parse("cat <(ls)").commands[0].substitutes());
    assert!(!parse("echo \"$HOME\"").commands[0].substitutes());
}

#[test]
fn what_the_parser_does_not_follow_makes_it_unsure() {
    for line in [
        "cat <<EOF\nrm -rf ~\nEOF",
        "case $x in a) rm x;; esac",
        "f() { rm x; }",
        "function f { x; }",
        "echo 'open",
    ] {
        assert!(parse(line).unsure.is_some(), "{line:?}");
    }
}

mod against_bash {
    //! Property: for command lines built from quotes, escapes, comments, continuations and
    //! separators, the commands parsed are the commands bash runs, word for word.
    use super::parse;
    use pretty_assertions::assert_eq;
    use proptest::prelude::{Just, ProptestConfig, Strategy, any, prop_assert_eq, prop_oneof, proptest};

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9._/=-]{1,6}",
            "[a-z ;|&#\"<>]{0,6}".prop_map(|s| format!("'{s}'")),
            "[a-z ;|&#'<>]{0,6}".prop_map(|s| format!("\"{s}\"")),
            Just("\"a\\\"b\\\\c\"".to_owned()),
            Just("$'x\\ty\\x41\\'z'".to_owned()),
            Just("$'\\101\\n'".to_owned()),
            prop_oneof![Just("\\ "), Just("\\;"), Just("\\#"), Just("\\|"), Just("\\'"), Just("\\\"")]
                .prop_map(str::to_owned),
            Just("a#b".to_owned()),
        ]
    }

    fn word() -> impl Strategy<Value = String> {
        proptest::collection::vec(piece(), 1..3).prop_map(|pieces| pieces.concat())
    }

    fn command() -> impl Strategy<Value = String> {
        (
            prop_oneof![Just("a"), Just("b"), Just("c")],
            proptest::collection::vec((word(), any::<bool>()), 0..4),
            prop_oneof![3 => Just(""), 1 => Just("( "), 1 => Just("{ ")],
        )
            .prop_map(|(name, args, wrap)| {
                let mut text = name.to_owned();
                for (arg, continued) in args {
                    text.push_str(if continued { " \\\n" } else { " " });
                    text.push_str(&arg);
                }
                match wrap {
                    "( " => format!("( {text} )"),
                    "{ " => format!("{{ {text}; }}"),
                    _ => text,
                }
            })
    }

    fn script() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            (
                command(),
                prop_oneof![Just(" ; "), Just(" && "), Just(" | "), Just("\n"), Just(" # x 'y\" ; z\n")],
            ),
            1..5,
        )
        .prop_map(|parts| {
            let mut text = String::new();
            for (i, (command, separator)) in parts.iter().enumerate() {
                text.push_str(command);
                if i + 1 < parts.len() {
                    text.push_str(separator);
                }
            }
            text
        })
    }

    /// What bash runs: one `name\x1fargs…` record per command, sorted. The commands
    /// `a`, `b` and `c` are functions that write their record to a file of their own (a
    /// pipe runs both sides at once, and an argument may hold a newline).
    fn bash_runs(line: &str) -> Option<Vec<String>> {
        let dir = tempfile::tempdir().ok()?;
        let prelude = r#"for f in a b c; do eval "$f() { local IFS=\$'\x1f'; printf '%s' \"$f\${IFS}\$*\" > \"\$D/\$BASHPID-\$RANDOM\$RANDOM\"; }"; done
"#;
        std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &format!("{prelude}{line}\nwait")])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("D", dir.path())
            .output()
            .ok()?;
        let mut records: Vec<String> = std::fs::read_dir(dir.path())
            .ok()?
            .flatten()
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .collect();
        records.sort();
        Some(records)
    }

    fn keel_runs(line: &str) -> Vec<String> {
        let script = parse(line);
        assert_eq!(script.unsure, None, "{line:?}");
        let mut records: Vec<String> = script
            .commands
            .iter()
            .map(|c| {
                let mut record = c.words[0].text.clone();
                record.push('\x1f');
                let args: Vec<&str> = c.words[1..].iter().map(|w| w.text.as_str()).collect();
                record.push_str(&args.join("\x1f"));
                record
            })
            .collect();
        records.sort();
        records
    }

    #[test]
    fn bash_is_there() {
        assert!(
            bash_runs("a x 'y z'").is_some_and(|r| r == ["a\x1fx\x1fy z"]),
            "bash must run for these tests"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn the_commands_parsed_are_the_commands_bash_runs(line in script()) {
            let bash = bash_runs(&line).expect("bash runs");
            prop_assert_eq!(keel_runs(&line), bash, "line: {:?}", line);
        }
    }
}

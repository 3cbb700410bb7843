//! What a command really runs: wrappers taken off (`sudo`, `env`, `nice`, `xargs`, …),
//! the program's path reduced to its name, and command lines nested in `sh -c` or `eval`.

/// A wrapper: the program that runs the rest of its arguments, its options that take a
/// value, and whether `NAME=value` words may follow its options.
struct Wrapper {
    name: &'static str,
    with_value: &'static [&'static str],
    assignments: bool,
    /// It takes one more operand before the command (`timeout DURATION`).
    operand: bool,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "sudo",
        with_value: &["-u", "-g", "-h", "-p", "-C", "-r", "-t", "-U", "-T", "-D", "-R"],
        assignments: true,
        operand: false,
    },
    Wrapper { name: "doas", with_value: &["-u", "-C"], assignments: false, operand: false },
    Wrapper { name: "command", with_value: &[], assignments: false, operand: false },
    Wrapper { name: "builtin", with_value: &[], assignments: false, operand: false },
    Wrapper { name: "exec", with_value: &["-a"], assignments: false, operand: false },
    Wrapper {
        name: "env",
        with_value: &["-u", "-C", "--unset", "--chdir"],
        assignments: true,
        operand: false,
    },
    Wrapper { name: "nice", with_value: &["-n", "--adjustment"], assignments: false, operand: false },
    Wrapper { name: "nohup", with_value: &[], assignments: false, operand: false },
    Wrapper { name: "setsid", with_value: &[], assignments: false, operand: false },
    Wrapper {
        name: "time",
        with_value: &["-f", "-o", "--format", "--output"],
        assignments: false,
        operand: false,
    },
    Wrapper {
        name: "timeout",
        with_value: &["-s", "-k", "--signal", "--kill-after"],
        assignments: false,
        operand: true,
    },
    Wrapper { name: "stdbuf", with_value: &["-i", "-o", "-e"], assignments: false, operand: false },
    Wrapper {
        name: "ionice",
        with_value: &["-c", "-n", "-p", "-P", "-u"],
        assignments: false,
        operand: false,
    },
    Wrapper { name: "chrt", with_value: &[], assignments: false, operand: true },
    Wrapper { name: "taskset", with_value: &[], assignments: false, operand: true },
    Wrapper {
        name: "xargs",
        with_value: &[
            "-I",
            "-n",
            "-P",
            "-d",
            "-a",
            "-E",
            "-L",
            "-s",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--replace",
        ],
        assignments: false,
        operand: false,
    },
    Wrapper { name: "busybox", with_value: &[], assignments: false, operand: false },
];

/// The argument `xargs` appends in the command it runs: the words of its input.
pub const XARGS_INPUT: &str = "…";

/// The program's name: `/usr/bin/rm` is `rm`.
pub fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `argv` (the command as written) and, for each wrapper taken off in turn, what it runs,
/// with the program's path reduced to its name: `sudo -u x nice -n 5 /bin/rm -rf ~` gives
/// `["sudo", …]`, `["nice", …]`, `["rm", "-rf", "~"]`.
pub fn unwrapped(argv: &[String]) -> Vec<Vec<String>> {
    let mut views = vec![argv.to_vec()];
    let mut rest: Vec<String> = argv.to_vec();
    for _ in 0..8 {
        let Some(first) = rest.first() else { break };
        let name = program(first).to_owned();
        if name != *first {
            rest[0] = name.clone();
            views.push(rest.clone());
        }
        let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == name) else { break };
        let mut i = 1;
        while let Some(word) = rest.get(i) {
            if word == "--" {
                i += 1;
                break;
            }
            if !word.starts_with('-') || word == "-" {
                break;
            }
            let takes_value = wrapper.with_value.iter().any(|o| word == o) && !word.contains('=');
            i += if takes_value { 2 } else { 1 };
        }
        if wrapper.assignments {
            while rest.get(i).is_some_and(|w| w.contains('=') && !w.starts_with('=')) {
                i += 1;
            }
        }
        if wrapper.operand {
            i += 1;
        }
        if i >= rest.len() {
            break;
        }
        rest = rest[i..].to_vec();
        if name == "xargs" {
            // xargs adds the words it reads to the command it runs.
            rest.push(XARGS_INPUT.to_owned());
        }
        views.push(rest.clone());
    }
    views
}

/// The command line `argv` hands to a shell: `sh -c 'LINE'`, `bash -lc LINE`, `eval A B`,
/// `env -S 'LINE'`.
pub fn nested(argv: &[String]) -> Option<String> {
    let name = program(argv.first()?);
    if name == "eval" {
        return Some(argv[1..].join(" "));
    }
    if name == "env" {
        let at = argv.iter().position(|a| a == "-S" || a == "--split-string")?;
        return argv.get(at + 1).cloned();
    }
    if !matches!(name, "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "busybox") {
        return None;
    }
    let mut args = argv[1..].iter();
    while let Some(arg) = args.next() {
        if arg.starts_with('-') && !arg.starts_with("--") && arg.contains('c') {
            return args.next().cloned();
        }
        if !arg.starts_with('-') {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn argv(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn wrappers_come_off_one_by_one() {
        let views = unwrapped(&argv("sudo -u root env -i A=1 nice -n 5 /bin/rm -rf ~"));
        let last = views.last().unwrap();
        assert_eq!(last, &argv("rm -rf ~"));
        assert!(views.contains(&argv("nice -n 5 /bin/rm -rf ~")));
        assert_eq!(unwrapped(&argv("timeout -s KILL 5 rm x")).last().unwrap(), &argv("rm x"));
        assert_eq!(unwrapped(&argv("xargs -0 -n 1 rm -rf")).last().unwrap(), &argv("rm -rf …"));
        assert_eq!(unwrapped(&argv("command rm x")).last().unwrap(), &argv("rm x"));
        assert_eq!(unwrapped(&argv("git status")), vec![argv("git status")]);
        assert_eq!(unwrapped(&argv("sudo")), vec![argv("sudo")]);
    }

    #[test]
    fn nested_command_lines_are_found() {
        assert_eq!(nested(&["bash".into(), "-lc".into(), "rm -rf ~".into()]).as_deref(), Some("rm -rf ~"));
        assert_eq!(nested(&["/bin/sh".into(), "-c".into(), "x".into()]).as_deref(), Some("x"));
        assert_eq!(nested(&argv("eval rm -rf /")).as_deref(), Some("rm -rf /"));
        assert_eq!(nested(&["env".into(), "-S".into(), "rm -rf ~".into()]).as_deref(), Some("rm -rf ~"));
        assert_eq!(nested(&argv("bash script.sh")), None);
        assert_eq!(nested(&argv("python3 -c print(1)")), None);
    }
}

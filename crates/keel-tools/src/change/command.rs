//! A shell command given as change_file's words.
//!
//! Small models use `change` as a command line (10 to 30% of change_file calls over the
//! suite's runs). A command that says what the content becomes — `sed -i 's/1.2.3/1.3.0/'
//! f`, `echo 'x' > f`, `cp a f`, `touch f` — is a description the editor can apply, and
//! it does: given `sed -i 's/source=docs/source=backup/' backup.sh` and the task, it fixed
//! the script's real bug (a run that passed; refusing such commands lost it, 51/72
//! against 55/72 on the llama-server route). A command that does not — `git add
//! stats.py`, `python3 app.py`, `pip install x`, `rm`, `mv` — cannot be applied to the
//! content, and the editor invents a change instead (given `git add stats.py` it added
//! an empty-list check to stats.py). Those are refused before the editor is asked, with
//! the shell named as the tool that runs commands.

/// Commands that say nothing about a file's content (they run, inspect, move, remove,
/// or manage packages and version control).
const COMMANDS: &[&str] =
    &["cat", "cd", "chmod", "git", "ls", "mkdir", "mv", "npm", "pip", "pip3", "python", "python3", "rm"];

/// Files whose content is commands: there a command line may be the content.
const SCRIPT_EXTENSIONS: &[&str] = &["sh", "bash", "zsh", "fish", "ps1", "bat", "cmd"];
const SCRIPT_NAMES: &[&str] = &["Makefile", "makefile", "GNUmakefile", "Dockerfile", "Justfile", "justfile"];

/// Most bytes of a command line told from words.
const MAX_COMMAND: usize = 300;

/// `change` trimmed, when it is one non-empty line short enough to be a command.
fn one_line(change: &str) -> Option<&str> {
    let line = change.trim();
    (!line.is_empty() && !line.contains('\n') && line.len() <= MAX_COMMAND).then_some(line)
}

/// `Some(command)` when `change` is a one-line shell command rather than words about
/// `path`'s content. In a script file a command may be the content, unless it names the
/// script itself (`chmod +x run.sh` for run.sh).
pub(super) fn shell_command<'a>(path: &str, change: &'a str) -> Option<&'a str> {
    let command = one_line(change)?;
    let mut words = command.split_whitespace();
    let first = words.next()?;
    // `cat a > b` writes content; `cat b` only shows it.
    if !COMMANDS.contains(&first) || words.next().is_none() || first == "cat" && command.contains('>') {
        return None;
    }
    let file = std::path::Path::new(path);
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or(path);
    let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    let script =
        SCRIPT_NAMES.contains(&name) || SCRIPT_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(extension));
    let names_the_file = command.split_whitespace().any(|word| {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        word == path || word.rsplit('/').next() == Some(name)
    });
    (!script || names_the_file).then_some(command)
}

/// Commands that write files from their words; with [`COMMANDS`], the first words of a
/// command line.
const WRITERS: &[&str] = &["cp", "echo", "printf", "sed", "tee", "touch"];

/// `Some(command)` when `change` is a one-line command of a known program with
/// arguments, whatever it does to the file.
pub(super) fn command_line(change: &str) -> Option<&str> {
    let command = one_line(change)?;
    let mut words = command.split_whitespace();
    let first = words.next()?;
    ((COMMANDS.contains(&first) || WRITERS.contains(&first)) && words.next().is_some()).then_some(command)
}

/// `Some(written)` when `change` is a one-line command that writes a file other than
/// `path`: `echo 'x' > docs/backup/a.txt` given for `docs/a.txt` (fix-shell-script,
/// full-p2: the editor, asked to apply it to docs/a.txt, wrote `beta` there, then the
/// echoed text). The file written is the one after the last `>` of an `echo`, `printf`
/// or `cat`, or the last word of `sed -i`, `cp` or `tee`; a folder (`cp a.txt backup/`)
/// writes the file of that name in it. Words that are not such a command are words.
pub(super) fn writes_elsewhere<'a>(path: &str, change: &'a str) -> Option<&'a str> {
    let command = one_line(change)?;
    let unquote =
        |word: &'a str| word.trim_end_matches([';', '&', '|']).trim_matches(|c| c == '"' || c == '\'');
    let mut words = command.split_whitespace();
    let first = words.next()?;
    let written = match (first, command.rfind('>')) {
        ("echo" | "printf" | "cat", Some(at)) => unquote(command[at + 1..].split_whitespace().next()?),
        ("sed", None) if command.split_whitespace().any(|w| w.starts_with("-i")) => {
            unquote(words.next_back()?)
        }
        ("cp" | "tee", None) => unquote(words.next_back()?),
        _ => return None,
    };
    let normal = |p: &str| p.trim_start_matches("./").to_owned();
    let (path, target) = (normal(path), normal(written));
    // `sed -i … a.txt b.txt` writes every file it names.
    if first == "sed" && command.split_whitespace().any(|word| normal(unquote(word)) == path) {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(&path);
    let same =
        target == path || target.strip_suffix('/').is_some_and(|folder| format!("{folder}/{name}") == path);
    (!target.is_empty() && !same).then_some(written)
}

/// The refusal of a command that writes `written`, not `path`.
pub(super) fn elsewhere_refusal(path: &str, command: &str, written: &str) -> String {
    format!(
        "`{path}` was not changed: `{command}` writes `{written}`, not `{path}`. To change `{written}`, call change_file with \"path\": \"{written}\"."
    )
}

/// Most characters of a task offered whole as change_file's words.
const MAX_TASK_OFFERED: usize = 400;

/// The refusal: what the call was, and what to do instead. When `path` is an existing
/// file (`exists`) the task names, it ends with the call that makes the task's change
/// there, the task's own words as the change (json-dependency: told only "say in words
/// what to change", the 1.5B model sent `npm install lodash` as the words again and
/// again; what a refusal offers last is what it does next), and offers nothing else:
/// after "To run it, call shell with it; to make the change …" the model ran the failing
/// `npm install` again (spot-u1). Not for a path that does not
/// exist: `node_modules/lodash` shares its last name with the task's package `lodash`,
/// and the offered call created it with package.json's content.
pub(super) fn refusal(path: &str, command: &str, task: Option<&str>, exists: bool) -> String {
    let head = format!(
        "`{path}` was not changed: `{command}` is a shell command, and change_file does not run commands."
    );
    let task = task
        .filter(|_| exists)
        .map(str::trim)
        .filter(|task| task.chars().count() <= MAX_TASK_OFFERED && super::elsewhere::task_names(task, path));
    match task {
        Some(task) => format!(
            "{head} To make the change the task asks for in `{path}`, call change_file with \"path\": {}, \"change\": {}.",
            json_string(path),
            json_string(task)
        ),
        None => format!(
            "{head} To run it, call shell with it; to change `{path}`, call change_file saying in words what to change in its content."
        ),
    }
}

/// `text` as a JSON string, quotes and all.
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_that_say_nothing_about_the_content_are_told_from_words() {
        for (path, change) in [
            ("stats.py", "git add stats.py"),
            ("README.md", "pip install tasker"),
            ("app.py", "python3 app.py"),
            ("notes.txt", "mv notes.txt NOTES.md"),
            ("check.sh", "chmod +x check.sh"),
            ("report.py", "cat report.py"),
        ] {
            assert_eq!(shell_command(path, change), Some(change), "{path}: {change}");
        }
        for (path, change) in [
            ("app.py", "remove all debug print statements"),
            ("app.py", "Remove the line `print(\"DEBUG: done\")`"),
            ("notes.txt", "echo is a command that prints its arguments"),
            ("hello.py", "print('Hello, keel!')"),
            // Commands that say what the content becomes are the editor's to apply.
            ("src/app/__init__.py", "sed -i 's/1.2.3/1.3.0/g' src/app/__init__.py"),
            ("backup/a.txt", "cp docs/a.txt backup/"),
            ("docs/a.txt", "echo 'This is a new content' > docs/a.txt"),
            ("check.sh", "touch check.sh"),
            ("all.txt", "cat a.txt b.txt > all.txt"),
            ("run.sh", "python3 hello.py"),
            ("Makefile", "cp build/app dist/"),
            ("config.toml", "set port to 8080\nand host to a"),
            ("README.md", "git"),
        ] {
            assert_eq!(shell_command(path, change), None, "{path}: {change}");
        }
    }

    /// Regression (suite runs full-p1..p3, json-dependency, 0 of 3): the words
    /// `npm install lodash@^4.17.21 --save-dev` for package.json were refused with "say
    /// in words what to change", and the model sent the same command as words again until
    /// the step limit. When the task names the file, the refusal ends with the call that
    /// makes the task's change, in the task's own words.
    #[test]
    fn a_command_for_a_file_the_task_names_is_answered_with_the_tasks_change() {
        let task =
            "Add the dependency \"lodash\" with version \"^4.17.21\" to the dependencies in package.json.";
        let npm = "npm install lodash@^4.17.21 --save-dev";
        assert_eq!(
            refusal("package.json", npm, Some(task), true),
            format!(
                "`package.json` was not changed: `{npm}` is a shell command, and change_file does not run commands. To make the change the task asks for in `package.json`, call change_file with \"path\": \"package.json\", \"change\": \"Add the dependency \\\"lodash\\\" with version \\\"^4.17.21\\\" to the dependencies in package.json.\"."
            )
        );
        let generic =
            "to change `package.json`, call change_file saying in words what to change in its content.";
        // A task that does not name the file, a long one, or none: the words are asked for.
        for task in
            [Some("Add lodash to the project."), Some(&*format!("{} package.json", "x".repeat(400))), None]
        {
            assert!(refusal("package.json", npm, task, true).ends_with(generic), "{task:?}");
        }
        // Regression (full-t1): a path that does not exist, though its last name is a word
        // of the task (the package `lodash`), is asked for words; the offered call had
        // created `node_modules/lodash` with package.json's content.
        let mkdir = "mkdir -p node_modules/lodash";
        assert!(refusal("node_modules/lodash", mkdir, Some(task), false).ends_with(
            "to change `node_modules/lodash`, call change_file saying in words what to change in its content."
        ));
        // Any script: the task's name for the file is found beside full-width marks.
        assert!(
            refusal("app.py", "python3 app.py", Some("修复 app.py。"), true)
                .ends_with("\"change\": \"修复 app.py。\".")
        );
    }

    #[test]
    fn a_command_that_writes_another_file_is_told_from_one_that_writes_the_file() {
        for (path, change, written) in [
            ("docs/a.txt", "echo 'This is a backup of a.txt' > docs/backup/a.txt", "docs/backup/a.txt"),
            ("a.txt", "cat b.txt >> \"c.txt\"", "c.txt"),
            ("src/app/__init__.py", "sed -i 's/1.2.3/1.3.0/g' setup.py", "setup.py"),
            ("backup.sh", "cp backup.sh backup.sh.bak", "backup.sh.bak"),
        ] {
            assert_eq!(writes_elsewhere(path, change), Some(written), "{path}: {change}");
        }
        for (path, change) in [
            ("docs/a.txt", "echo 'new content' > docs/a.txt"),
            ("a.txt", "echo x > ./a.txt"),
            ("a.txt", "echo x > a.txt; cat a.txt"),
            ("a.txt", "sed -i 's/x/y/' a.txt b.txt"),
            ("src/app/__init__.py", "sed -i 's/1.2.3/1.3.0/g' src/app/__init__.py"),
            ("backup/a.txt", "cp docs/a.txt backup/"),
            ("all.txt", "cat a.txt b.txt > all.txt"),
            ("app.py", "sed 's/a/b/' app.py"),
            ("app.py", "make the greeting louder"),
            ("app.py", "return a if a > b else b"),
        ] {
            assert_eq!(writes_elsewhere(path, change), None, "{path}: {change}");
        }
    }
}

use super::load::MAX_COMMAND_BYTES;
use super::*;
use std::fs;

struct Dirs {
    workspace: tempfile::TempDir,
    user: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs { workspace: tempfile::tempdir().unwrap(), user: tempfile::tempdir().unwrap() }
    }

    fn project(&self, rel: &str, text: &str) {
        let path = self.workspace.path().join(".keel/commands").join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn user(&self, rel: &str, text: &str) {
        let path = self.user.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn load(&self, builtins: &[&str]) -> (CustomCommands, Vec<String>) {
        CustomCommands::load_from(self.workspace.path(), &[], Some((self.user.path(), "~/cmds")), builtins)
    }
}

const BUILTINS: [&str; 3] = ["/help", "/model", "/quit"];

#[test]
fn project_and_user_commands_with_shadowing_and_namespaces() {
    let dirs = Dirs::new();
    dirs.project(
        "review.md",
        "---\ndescription: Review a file for bugs\nargument-hint: [file]\nallowed-tools: Read\n---\nReview $ARGUMENTS for bugs.\n",
    );
    dirs.user("review.md", "The user's review of $1.\n");
    dirs.user("git/commit.md", "Write a commit message for the staged changes.\nKeep it short.\n");
    dirs.user("notes.txt", "not a command");
    let (commands, notes) = dirs.load(&BUILTINS);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(commands.names(), ["/git:commit", "/review"]);
    let review = commands.get("review").unwrap();
    assert_eq!((review.origin, review.hides_user), (Origin::Project, true));
    assert_eq!(review.argument_hint.as_deref(), Some("[file]"));
    assert_eq!(
        commands.help().unwrap(),
        "custom commands (.keel/commands, and yours in keel's config folder):\n  \
/git:commit      Write a commit message for the staged changes. (yours)\n  \
/review [file]   Review a file for bugs (project; hides yours)"
    );
    let expanded = commands.expand("/review src/lib.rs").unwrap();
    assert_eq!(expanded.text, "Review src/lib.rs for bugs.");
    assert_eq!(expanded.note, "/review: .keel/commands/review.md sent as your message (27 bytes)");
    let commit = commands.expand("/git:commit").unwrap();
    assert_eq!(commit.text, "Write a commit message for the staged changes.\nKeep it short.");
    assert!(commands.expand("/reviewer x").is_none() && commands.expand("review x").is_none());
}

#[test]
fn keel_s_own_commands_are_never_shadowed() {
    let dirs = Dirs::new();
    dirs.project("help.md", "Help me.\n");
    dirs.user("model.md", "Which model?\n");
    dirs.project("fix.md", "Fix $1.\n");
    let (commands, notes) = dirs.load(&BUILTINS);
    assert_eq!(commands.names(), ["/fix"]);
    assert_eq!(
        notes,
        [
            ".keel/commands/help.md is not a command: /help is keel's own, which a file cannot replace",
            "~/cmds/model.md is not a command: /model is keel's own, which a file cannot replace",
        ]
    );
    let help = "commands:\n  /help  this list";
    match commands.route("/help", help) {
        Some(Route::Say(text)) => {
            assert!(text.starts_with(help) && text.ends_with("/fix             Fix $1. (project)"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(commands.route("/model gpt", help), None, "keel's own");
    assert_eq!(commands.route("/modle", help), None, "nearest a built-in: keel's own answer");
    assert_eq!(
        commands.route("/fxi the tests", help),
        Some(Route::Say("unknown command /fxi; did you mean /fix? (/help lists them)".into()))
    );
    match commands.route("/fix the tests", help) {
        Some(Route::Prompt(expanded)) => assert_eq!(expanded.text, "Fix the."),
        other => panic!("{other:?}"),
    }
    assert_eq!(commands.route("fix it", help), None);
    let (none, _) = Dirs::new().load(&BUILTINS);
    assert_eq!(none.route("/help", help), None, "no custom commands: keel's own help");
}

#[test]
fn bad_files_are_reported_once_and_skipped() {
    let dirs = Dirs::new();
    dirs.project("ok.md", "Fine.\n");
    dirs.project("empty.md", "---\ndescription: nothing after\n---\n");
    dirs.project("open.md", "---\ndescription: never closed\n");
    dirs.project("big.md", &"x".repeat(MAX_COMMAND_BYTES + 1));
    dirs.project("bad name.md", "Spaces.\n");
    dirs.project("bin.md", "a\0b");
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.md"), "SECRET-OUTSIDE").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        dirs.workspace.path().join(".keel/commands/leak.md"),
    )
    .unwrap();
    let (commands, notes) = dirs.load(&BUILTINS);
    assert_eq!(commands.names(), ["/ok"]);
    assert_eq!(
        notes,
        [
            ".keel/commands/bad name.md was not read: `bad name` cannot name a command (letters, digits, -, _ and .)",
            ".keel/commands/big.md was not read: it is larger than 64 KB",
            ".keel/commands/bin.md was not read: it is not UTF-8 text",
            ".keel/commands/empty.md was not read: it has no text to send",
            ".keel/commands/leak.md was not read: it leads outside the project folder (add its folder to allowed_roots to use it)",
            ".keel/commands/open.md was not read: its front matter is not closed (a `---` line after it)",
        ]
    );
    // A whole commands folder that leads outside is refused too.
    let linked = Dirs::new();
    fs::create_dir_all(linked.workspace.path().join(".keel")).unwrap();
    std::os::unix::fs::symlink(outside.path(), linked.workspace.path().join(".keel/commands")).unwrap();
    let (commands, notes) = linked.load(&BUILTINS);
    assert!(commands.names().is_empty());
    assert_eq!(
        notes,
        [
            ".keel/commands was not read: it leads outside the project folder (add its folder to allowed_roots to use it)"
        ]
    );
}

#[test]
fn the_number_of_files_is_bounded() {
    let dirs = Dirs::new();
    for n in 0..MAX_COMMANDS + 3 {
        dirs.user(&format!("c{n:03}.md"), "Do it.\n");
    }
    let (commands, notes) = dirs.load(&BUILTINS);
    assert_eq!(commands.iter().count(), MAX_COMMANDS);
    assert_eq!(
        notes,
        [format!(
            "~/cmds/c{MAX_COMMANDS:03}.md and the files after it were not read: keel reads at most {MAX_COMMANDS} command files"
        )]
    );
}

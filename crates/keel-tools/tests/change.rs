#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `change_file`: the model says what to change; a plain request to it writes the file.

use keel_agent::ToolErrorKind;
use std::sync::Arc;

use keel_agent::{Agent, Session, SessionContext, ToolContext, typed};
use keel_llm::{CancellationToken, Message, ToolChoice};
use keel_testkit::{ScriptedModel, reply};
use keel_tools::ToolsConfig;
use keel_tools::change::ChangeFile;
use keel_tools::profile::small_with_editor;

async fn change(
    ws: &std::path::Path,
    model: &ScriptedModel,
    task: &str,
    args: serde_json::Value,
) -> keel_agent::ToolOutput {
    change_with(ws, model, task, keel_agent::TaskIntent::default(), args).await
}

/// [`change`] for a task whose intent (read by the model at the turn's start) is known.
async fn change_with(
    ws: &std::path::Path,
    model: &ScriptedModel,
    task: &str,
    intent: keel_agent::TaskIntent,
    args: serde_json::Value,
) -> keel_agent::ToolOutput {
    let config = ToolsConfig { keep_parsing: true, ..ToolsConfig::default() };
    let tool = typed(ChangeFile::new(Arc::new(config), Arc::new(model.clone())));
    let prepared = tool.prepare(&args.to_string()).unwrap();
    let mut ctx = ToolContext::new(ws).task(task);
    ctx.intent = intent;
    prepared(ctx).await.unwrap()
}

/// The intent of a task about layout (blank lines, line endings).
const LAYOUT: keel_agent::TaskIntent =
    keel_agent::TaskIntent { wants: Some(keel_agent::Wants::Change), check: Some(false), layout: Some(true) };

/// The intent of a change known not to be about layout.
const NOT_LAYOUT: keel_agent::TaskIntent = keel_agent::TaskIntent {
    wants: Some(keel_agent::Wants::Change),
    check: Some(false),
    layout: Some(false),
};

fn editor_prompt(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let request = requests.last().unwrap();
    assert!(request.tools.is_empty());
    assert_eq!(request.tool_choice, ToolChoice::None);
    assert_eq!(request.temperature, Some(0.2));
    prompt_of(model, requests.len() - 1)
}

#[tokio::test]
async fn the_file_is_rewritten_from_the_editors_code_block_and_the_diff_returned() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("app.py"), "def load():\n    print(\"DEBUG\")\n    return 1\n").unwrap();
    let model = ScriptedModel::new([reply()
        .text("Here it is:\n```python\ndef load():\n    return 1\n```\nThe debug line is gone.")
        .usage(120, 30)]);
    let task = "Remove the debug prints from app.py.";
    let out =
        change(ws.path(), &model, task, serde_json::json!({"path": "app.py", "change": "remove the print"}))
            .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("app.py")).unwrap(), "def load():\n    return 1\n");
    assert!(out.content.starts_with("Changed app.py:\n"), "{}", out.content);
    assert!(out.content.contains("-    print(\"DEBUG\")"), "{}", out.content);
    assert_eq!(out.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((120, 30)));
    let change = out.change.expect("the change is recorded for people");
    assert_eq!(
        (change.path.as_str(), change.added, change.removed, change.diff.as_str()),
        ("app.py", 0, 1, "@@ -1,3 +1,2 @@\n def load():\n-    print(\"DEBUG\")\n     return 1\n")
    );
    let prompt = editor_prompt(&model);
    assert_eq!(
        prompt,
        "Remove the debug prints from app.py.\nIn `app.py`: remove the print\n\nThis is `app.py`:\n```\ndef load():\n    print(\"DEBUG\")\n    return 1\n```\nReply with the complete new content of `app.py` in one code block."
    );
}

#[tokio::test]
async fn a_new_file_is_created_with_the_files_the_task_names_shown_to_the_editor() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("people.csv"), "name,age\nada,36\n").unwrap();
    let model = ScriptedModel::new([reply().text("```json\n[{\"name\": \"ada\", \"age\": 36}]\n```")]);
    let task = "Convert people.csv into people.json.";
    let out = change(
        ws.path(),
        &model,
        task,
        serde_json::json!({"path": "people.json", "change": "the JSON list"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("people.json")).unwrap(),
        "[{\"name\": \"ada\", \"age\": 36}]\n"
    );
    assert!(out.content.starts_with("Created people.json (1 lines):\n[{"), "{}", out.content);
    let prompt = editor_prompt(&model);
    assert!(prompt.contains("This is `people.csv`:\n```\nname,age\nada,36\n```\n"), "{prompt}");
    assert!(
        prompt.ends_with(
            "`people.json` does not exist yet. Reply with its complete content in one code block: the text it is to hold, not a program or command that would write it."
        )
    );
}

#[tokio::test]
async fn replies_that_are_not_a_whole_changed_file_are_asked_again_hotter_then_refused() {
    let ws = tempfile::tempdir().unwrap();
    let cases = [
        ("a.txt", "x = 1\n", "I would set x to 2.", "did not come back as one whole code block"),
        // Cut off before its closing fence: not the whole file.
        ("a.txt", "x = 1\n", "```\nx = 2\n", "did not come back as one whole code block"),
        ("a.txt", "x = 1\n", "```\nx = 1\n```", "came back the same as the old"),
        // Only a blank line dropped, in a task known not to be about layout: no change
        // either.
        ("a.txt", "x = 1\n\ny = 2\n", "```\nx = 1\ny = 2  \n```", "came back the same as the old"),
        // A change that breaks a parsing JSON file is refused.
        ("b.json", "{\"x\": 1}\n", "```\n{\"x\": \n```", "would not"),
    ];
    for (file, old, reply_text, expected) in cases {
        let path = ws.path().join(file);
        std::fs::write(&path, old).unwrap();
        let model = ScriptedModel::new([
            reply().text(reply_text).usage(10, 5),
            reply().text(reply_text).usage(10, 5),
        ]);
        let args = serde_json::json!({"path": file, "change": "x = 2"});
        let out = change_with(ws.path(), &model, "Set x to 2", NOT_LAYOUT, args).await;
        assert!(out.is_error, "{reply_text}: {}", out.content);
        assert!(out.content.contains(expected), "{reply_text}: {}", out.content);
        assert_eq!(out.usage.map(|u| u.input_tokens), Some(20), "both attempts' tokens are counted");
        assert_eq!(
            model.requests().iter().map(|r| r.temperature).collect::<Vec<_>>(),
            [Some(0.2), Some(0.7)]
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
    }
}

/// The prompt of the model's `n`th request (one user message).
fn prompt_of(model: &ScriptedModel, n: usize) -> String {
    match &model.requests()[n].messages[..] {
        [Message::User(user)] => user.content.clone(),
        other => panic!("one user message expected: {other:?}"),
    }
}

/// Issue 29: the editor's second attempt was the first prompt again, only hotter, so a
/// reply that broke the file came back broken the same way (add-cli-flag, embedded
/// route: `def greet(name, --shout=False):` eighteen times). The second attempt is told
/// what was wrong with the first.
#[tokio::test]
async fn the_second_attempt_is_told_why_the_first_was_refused() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("b.json");
    // Sets x to 2 in b.json (holding x = 1) after a first reply of `first`: the two
    // editor prompts.
    let attempt = |first: &'static str| {
        let (ws, path) = (ws.path().to_owned(), path.clone());
        async move {
            std::fs::write(&path, "{\"x\": 1}\n").unwrap();
            let model = ScriptedModel::new([reply().text(first), reply().text("```\n{\"x\": 2}\n```")]);
            let args = serde_json::json!({"path": "b.json", "change": "x = 2"});
            let out = change_with(&ws, &model, "Set x to 2", NOT_LAYOUT, args).await;
            assert!(!out.is_error, "{}", out.content);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"x\": 2}\n");
            (prompt_of(&model, 0), prompt_of(&model, 1))
        }
    };
    let (first, second) = attempt("```\n{\"x\": \n```").await;
    let retry = second.strip_prefix(first.as_str()).expect("the first prompt, then the note");
    assert!(retry.starts_with("\n\nWith your earlier reply `b.json` would not parse ("), "{retry}");
    assert!(
        retry.ends_with(
            "Reply with the complete new content of `b.json` in one code block, making the change in a way that parses."
        ),
        "{retry}"
    );
    // A reply that came back the same as the file is asked again as it was.
    let (first, second) = attempt("```\n{\"x\": 1}\n```").await;
    assert_eq!(first, second);
}

/// Issue 29: a 1.5B model made the same refused change_file call nine times in a row and
/// the editor wrote the whole file twice for each (600 s, the time limit). The same call
/// on the same file is refused again at once, and says so; once the file changes, the
/// editor is asked again.
#[tokio::test]
async fn the_same_refused_call_on_the_same_file_is_not_asked_again() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("a.txt");
    std::fs::write(&path, "x = 1\n").unwrap();
    let same = |text: &str| reply().text(&format!("```\n{text}```"));
    let model = ScriptedModel::new([same("x = 1\n"), same("x = 1\n"), same("x = 3\n"), same("x = 3\n")]);
    let config = ToolsConfig::default();
    let tool = typed(ChangeFile::new(Arc::new(config), Arc::new(model.clone())));
    let ctx = ToolContext::new(ws.path()).task("Set x to 2");
    let call = |ctx: ToolContext| {
        let prepared = tool.prepare(r#"{"path": "a.txt", "change": "x = 2"}"#).unwrap();
        async move { prepared(ctx).await.unwrap() }
    };
    let first = call(ctx.clone()).await;
    assert!(first.is_error && first.content.contains("came back the same as the old"), "{}", first.content);
    assert_eq!(model.requests().len(), 2);
    let again = call(ctx.clone()).await;
    assert!(again.is_error, "{}", again.content);
    assert!(again.content.starts_with(&first.content), "{}", again.content);
    assert!(again.content.contains("the editor was not asked again"), "{}", again.content);
    assert_eq!(model.requests().len(), 2, "no request for a call refused before");
    // The file changed: the same words are a new request.
    std::fs::write(&path, "x = 3\n").unwrap();
    let after = call(ctx).await;
    assert!(after.is_error, "{}", after.content);
    assert!(!after.content.contains("not asked again"), "{}", after.content);
    assert_eq!(model.requests().len(), 4);
}

/// Issue 28, item 13: the editor answered a 63-line file with the one line it changed,
/// and change_file wrote it and said "Changed".
#[tokio::test]
async fn a_reply_with_a_part_of_the_file_is_not_written_over_it() {
    let ws = tempfile::tempdir().unwrap();
    let old: String = (1..=63).map(|n| format!("setting_{n} = {n}\n")).collect();
    std::fs::write(ws.path().join("conf.py"), &old).unwrap();
    let fragment = "```\nsetting_7 = 70\n```";
    let model = ScriptedModel::new([reply().text(fragment), reply().text(fragment)]);
    let args = serde_json::json!({"path": "conf.py", "change": "set setting_7 to 70"});
    let out = change(ws.path(), &model, "Set setting_7 to 70", args).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("came back with 1 of the file's 63 lines"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("conf.py")).unwrap(), old);
    // A change that removes a good part, but not most, of a file is written.
    let kept: String = old.lines().take(30).map(|l| format!("{l}\n")).collect();
    let model = ScriptedModel::new([reply().text(&format!("```\n{kept}```"))]);
    let args = serde_json::json!({"path": "conf.py", "change": "keep the first 30 settings"});
    let out = change(ws.path(), &model, "Drop settings after 30", args).await;
    assert!(!out.is_error && out.content.starts_with("Changed conf.py"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("conf.py")).unwrap(), kept);
}

#[tokio::test]
async fn a_second_attempt_that_makes_the_change_is_written() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "x = 1\n").unwrap();
    let model = ScriptedModel::new([reply().text("```\nx = 1\n```"), reply().text("```\nx = 2\n```")]);
    let out =
        change(ws.path(), &model, "Set x to 2", serde_json::json!({"path": "a.txt", "change": "x = 2"}))
            .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "x = 2\n");
}

#[tokio::test]
async fn a_markdown_file_with_code_blocks_is_fenced_longer_and_read_to_the_last_fence() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# Instalation\n\n```\npip install x\n```\n").unwrap();
    let model =
        ScriptedModel::new([reply().text("````markdown\n# Installation\n\n```\npip install x\n```\n````")]);
    let out =
        change(ws.path(), &model, "Fix the typo", serde_json::json!({"path": "README.md", "change": "fix"}))
            .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("README.md")).unwrap(),
        "# Installation\n\n```\npip install x\n```\n"
    );
    let prompt = editor_prompt(&model);
    assert!(
        prompt.starts_with("Fix the typo\nIn `README.md`: fix\n\nThis is `README.md`:\n````\n# Instalation"),
        "{prompt}"
    );
}

#[tokio::test]
async fn long_files_and_empty_changes_are_refused_before_asking() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("big.txt"), "line\n".repeat(500)).unwrap();
    let model = ScriptedModel::new([]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let long = tool.prepare(r#"{"path": "big.txt", "change": "add a line"}"#).unwrap();
    let error = long(ToolContext::new(ws.path())).await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::FileTooLarge);
    assert!(
        error.message.contains("`big.txt` has 500 lines") && error.message.contains("shell"),
        "{}",
        error.message
    );
    let empty = tool.prepare(r#"{"path": "a.txt", "change": "  "}"#).unwrap();
    assert_eq!(empty(ToolContext::new(ws.path())).await.unwrap_err().kind, ToolErrorKind::InvalidArguments);
    let outside = tool.prepare(r#"{"path": "../x.txt", "change": "hi"}"#).unwrap();
    assert!(outside(ToolContext::new(ws.path())).await.is_err());
    // A folder path is not a file to create (it once became a file named `backup`).
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    for folder in ["backup/", "docs"] {
        let call = tool.prepare(&serde_json::json!({"path": folder, "change": "x"}).to_string()).unwrap();
        assert_eq!(
            call(ToolContext::new(ws.path())).await.unwrap_err().kind,
            ToolErrorKind::IsADirectory,
            "{folder}"
        );
    }
    assert!(!ws.path().join("backup").exists());
    // Nor is git's own data.
    let git = tool.prepare(r#"{"path": ".git", "change": "init"}"#).unwrap();
    let refused = git(ToolContext::new(ws.path())).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::GitInternals);
    // Issue 29: "The task is done in the project's own files" was given as the answer.
    assert_eq!(
        refused.message,
        "`.git` is git's own data: the file tools do not write it. Change the project's own files instead: git's data changes only through git commands."
    );
    assert!(!ws.path().join(".git").exists());
    assert!(model.requests().is_empty(), "no model request for a refused call");
}

/// In the loop: the task reaches the editor, and its tokens count in the turn's usage.
#[tokio::test]
async fn in_the_loop_the_editor_sees_the_task_and_its_tokens_are_counted() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.toml"), "port = 3000\nhost = \"a\"\n").unwrap();
    let model = ScriptedModel::new([
        reply().call("change_file", r#"{"path": "config.toml", "change": "port 8080"}"#).usage(100, 10),
        reply().text("```toml\nport = 8080\nhost = \"a\"\n```").usage(50, 20),
        reply().text("Done.").usage(200, 5),
    ]);
    let tools = small_with_editor(Arc::new(ToolsConfig::default()), Arc::new(model.clone()));
    assert_eq!(
        tools.names().collect::<Vec<_>>(),
        ["shell", "read_file", "change_file", "list_files", "grep"]
    );
    let agent = Agent::builder(model.clone()).tools(tools).build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let sink = keel_agent::RecordingSink::new();
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::new(ws.path()),
            "Change the port in config.toml to 8080.",
            &sink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("config.toml")).unwrap(),
        "port = 8080\nhost = \"a\"\n"
    );
    assert_eq!((outcome.usage.input_tokens, outcome.usage.output_tokens), (350, 35));
    let requests = model.requests();
    let Message::User(editor) = &requests[1].messages[0] else { panic!("a user message") };
    assert!(
        editor.content.starts_with(
            "Change the port in config.toml to 8080.\nIn `config.toml`: port 8080\n\nThis is `config.toml`:\n"
        ),
        "{}",
        editor.content
    );
    // The change is logged with the result, for people; the model gets the result's text only.
    let logged = sink.logged().into_iter().find_map(|event| match &event.kind {
        keel_session::EventKind::ToolResult(result) => Some(result.clone()),
        _ => None,
    });
    let logged = logged.expect("a tool result is logged");
    let change = logged.change.expect("the change is logged");
    assert_eq!((change.path.as_str(), change.added, change.removed), ("config.toml", 1, 1));
    let sent = serde_json::to_string(&requests[2].messages).unwrap();
    assert!(
        !sent.contains("\"added\"") && sent.contains(&serde_json::to_string(&logged.content).unwrap()),
        "{sent}"
    );
}

#[tokio::test]
async fn asking_again_for_a_change_already_made_is_told_so_not_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("greet.py"), "print('hi')\n").unwrap();
    let made = "```\nprint('HI')\n```";
    let model = ScriptedModel::new([reply().text(made), reply().text(made), reply().text(made)]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let ctx = ToolContext::new(ws.path()).task("Shout in greet.py");
    let args = r#"{"path": "greet.py", "change": "upper case"}"#;
    let first = tool.prepare(args).unwrap()(ctx.clone()).await.unwrap();
    assert!(first.content.starts_with("Changed greet.py:"), "{}", first.content);
    let again = tool.prepare(args).unwrap()(ctx).await.unwrap();
    assert!(!again.is_error, "{}", again.content);
    assert!(
        again.content.starts_with("No change needed: `greet.py` already has the change"),
        "{}",
        again.content
    );
    // A file never changed this session whose content comes back the same is an error.
    std::fs::write(ws.path().join("other.py"), "x = 1\n").unwrap();
    let same = "```\nx = 1\n```";
    let model = ScriptedModel::new([reply().text(same), reply().text(same)]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model)));
    let out = tool.prepare(r#"{"path": "other.py", "change": "x"}"#).unwrap()(ToolContext::new(ws.path()))
        .await
        .unwrap();
    assert!(out.is_error && out.content.contains("came back the same as the old"), "{}", out.content);
}

#[tokio::test]
async fn blank_lines_the_editor_reflowed_are_put_back_unless_the_task_is_about_them() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("m.py");
    let old = "def a():\n    pass\n\n\ndef b():\n    pass\n";
    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([reply().text("```\ndef a():\n    pass\n\ndef b():\n    return 2\n```")]);
    let out = change(
        ws.path(),
        &model,
        "Make b return 2 in m.py",
        serde_json::json!({"path": "m.py", "change": "x"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "def a():\n    pass\n\n\ndef b():\n    return 2\n");
    // Asked to remove empty lines, removing them is the change.
    let model = ScriptedModel::new([reply().text("```\ndef a():\n    pass\ndef b():\n    return 2\n```")]);
    let task = "删除 m.py 里的空行";
    let out =
        change_with(ws.path(), &model, task, LAYOUT, serde_json::json!({"path": "m.py", "change": "x"}))
            .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "def a():\n    pass\ndef b():\n    return 2\n");
}

/// Issue 29: "Delete the extra blank lines in todo.txt", its intent's two readings
/// disagreeing on layout: the editor collapsed the runs of blank lines, they were put
/// back, and the model was told the file came back unchanged. Blank lines alone are the
/// change unless the task is known to be about something else.
#[tokio::test]
async fn blank_lines_alone_are_the_change_when_the_task_may_be_about_them() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("todo.txt");
    let old = "Release\n\n\n\nBefore:\n- merge\n\n\n";
    let collapsed = "Release\n\nBefore:\n- merge\n";
    let reply_text = format!("```\n{collapsed}```");
    let task = "Delete the extra blank lines in todo.txt";
    let args = serde_json::json!({"path": "todo.txt", "change": "collapse blank lines"});
    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([reply().text(&reply_text)]);
    let out = change(ws.path(), &model, task, args.clone()).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), collapsed);
    // Known not to be about layout, the same reply leaves the file as it was.
    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([reply().text(&reply_text), reply().text(&reply_text)]);
    let out = change_with(ws.path(), &model, task, NOT_LAYOUT, args).await;
    assert!(out.is_error && out.content.contains("came back the same as the old"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
}

/// Regression: the editor writes `\n`, so a `\r\n` file came back with every line changed.
#[tokio::test]
async fn a_crlf_file_keeps_its_line_endings_and_the_diff_shows_only_the_change() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("config.ini");
    std::fs::write(&path, "[server]\r\nhost = a\r\nport = 80\r\n").unwrap();
    let model = ScriptedModel::new([reply().text("```ini\n[server]\nhost = a\nport = 8080\n```")]);
    let task = "Set the port in config.ini to 8080";
    let out =
        change(ws.path(), &model, task, serde_json::json!({"path": "config.ini", "change": "port 8080"}))
            .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "[server]\r\nhost = a\r\nport = 8080\r\n");
    assert!(out.content.contains("-port = 80"), "{}", out.content);
    assert!(!out.content.contains("-host = a"), "only the changed line is in the diff: {}", out.content);
    // Asked to convert the line endings, the new ones stay.
    let model = ScriptedModel::new([reply().text("```ini\n[server]\nhost = a\nport = 8080\n```")]);
    let task = "Convert config.ini to Unix line endings";
    let out = change_with(
        ws.path(),
        &model,
        task,
        LAYOUT,
        serde_json::json!({"path": "config.ini", "change": "LF"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "[server]\nhost = a\nport = 8080\n");
}

/// Regression: `change` written as a shell command (`git add stats.py`) reached the
/// editor, which changed stats.py's code on its own (fix-failing-test, embedded run 1).
#[tokio::test]
async fn a_shell_command_as_the_change_is_refused_before_the_editor_is_asked() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("stats.py"), "def mean(v):\n    return sum(v) / len(v)\n").unwrap();
    let model = ScriptedModel::new([reply().text("```python\nraise SystemExit\n```")]);
    let config = ToolsConfig::default();
    let tool = typed(ChangeFile::new(Arc::new(config), Arc::new(model.clone())));
    let prepared = tool.prepare(r#"{"path": "stats.py", "change": "git add stats.py"}"#).unwrap();
    let error = prepared(ToolContext::new(ws.path()).task("Fix stats.py")).await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        error.message,
        "`stats.py` was not changed: `git add stats.py` is a shell command, and change_file does not run commands. To make the change the task asks for in `stats.py`, call change_file with \"path\": \"stats.py\", \"change\": \"Fix stats.py\"."
    );
    assert!(model.requests().is_empty(), "the editor was not asked");
    // A command aimed outside the project is refused as outside, not sent to the shell
    // (the model tried `rm -rf pluggy` on site-packages through change_file).
    let outside = tool.prepare(r#"{"path": "/usr/lib/python3/pluggy", "change": "rm -rf pluggy"}"#).unwrap();
    let error = outside(ToolContext::new(ws.path()).task("Fix stats.py")).await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::OutsideWorkspace, "{}", error.message);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("stats.py")).unwrap(),
        "def mean(v):\n    return sum(v) / len(v)\n"
    );
}

/// Regression (bug-in-helper, suite run full-t1): the words `test_invoice.py` for
/// test_invoice.py reached the editor nine times, which wrote the file back unchanged each
/// time. Words that only name the file are answered before the editor is asked.
#[tokio::test]
async fn words_that_only_name_the_file_are_refused_before_the_editor_is_asked() {
    let ws = tempfile::tempdir().unwrap();
    let test = "import unittest\n";
    std::fs::write(ws.path().join("test_invoice.py"), test).unwrap();
    let model = ScriptedModel::new([reply().text("```python\nimport unittest\n```")]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let prepared = tool.prepare(r#"{"path": "test_invoice.py", "change": "test_invoice.py"}"#).unwrap();
    let error = prepared(ToolContext::new(ws.path()).task("test_invoice.py fails. Can you fix it?"))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
    assert!(
        error.message.starts_with(
            "`test_invoice.py` was not changed: your words, `test_invoice.py`, only name the file"
        ),
        "{}",
        error.message
    );
    assert!(
        error.message.ends_with("run the command that fails and read its error, or read the file."),
        "{}",
        error.message
    );
    assert!(model.requests().is_empty(), "the editor was not asked");
    assert_eq!(std::fs::read_to_string(ws.path().join("test_invoice.py")).unwrap(), test);
}

/// Regression (count-errors-to-file, full-v1): the words `echo 11 > error_count.txt` for a
/// new error_count.txt were applied by the editor, which wrote `1`. Plain text echoed into
/// a file that does not exist yet is written as said, without asking the editor; an
/// existing file is still the editor's.
#[tokio::test]
async fn plain_text_echoed_into_a_new_file_is_written_as_said() {
    let ws = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([reply().text("```\nkept\n```")]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let new = tool.prepare(r#"{"path": "error_count.txt", "change": "echo 11 > error_count.txt"}"#).unwrap();
    let out = new(ToolContext::new(ws.path()).task("Count the errors")).await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("error_count.txt")).unwrap(), "11\n");
    assert!(model.requests().is_empty(), "the editor was not asked");
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let existing = tool.prepare(r#"{"path": "a.txt", "change": "echo kept > a.txt"}"#).unwrap();
    let out = existing(ToolContext::new(ws.path()).task("Fix a.txt")).await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(model.requests().len(), 1, "an existing file is the editor's");
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "kept\n");
}

#[test]
fn change_file_declares_that_it_writes_its_path() {
    let model = ScriptedModel::new([]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model)));
    assert_eq!(
        tool.effect(r#"{"path": "a.py", "change": "x"}"#),
        keel_agent::Effect::Writes { path: "a.py".into() }
    );
}

#[tokio::test]
async fn a_rename_in_one_file_reports_where_other_files_still_use_the_old_name() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("billing.py"), "def calc_total(prices):\n    return sum(prices)\n")
        .unwrap();
    std::fs::write(
        ws.path().join("main.py"),
        "from billing import calc_total\n\nprint(calc_total([1, 2]))\n",
    )
    .unwrap();
    let model = ScriptedModel::new([
        reply().text("```python\ndef compute_total(prices):\n    return sum(prices)\n```")
    ]);
    let out = change(
        ws.path(),
        &model,
        "Rename calc_total to compute_total everywhere",
        serde_json::json!({"path": "billing.py", "change": "rename calc_total to compute_total"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let (_, note) = out.content.split_once("+def compute_total(prices):\n").unwrap();
    assert_eq!(
        note,
        "     return sum(prices)\n\n\
         Other files still use `calc_total`, which this change removed from billing.py:\n\
         main.py:1: from billing import calc_total\n\
         main.py:3: print(calc_total([1, 2]))\n\
         If they mean what you changed, change them too."
    );
}

/// Issue 29: the task named `backup.sh`; the model called change_file on
/// `docs/backup.sh`, which did not exist, and the editor wrote the fixed script there
/// while `bash backup.sh` ran the old one (fix-shell-script, llama-server). Such a call is
/// refused before the editor is asked, again when made again; a file created first (with
/// the shell) is changed.
#[tokio::test]
async fn a_new_file_beside_the_file_the_task_names_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("backup.sh"), "cp $source/*.txt backup/\n").unwrap();
    let model = ScriptedModel::new([reply().text("```bash\ncp docs/*.txt backup/\n```")]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let ctx = ToolContext::new(ws.path()).task("backup.sh does not work. Fix the script.");
    let call = || tool.prepare(r#"{"path": "docs/backup.sh", "change": "copy from docs"}"#).unwrap();
    for _ in 0..2 {
        let error = call()(ctx.clone()).await.unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::NotFound);
        assert_eq!(
            error.message,
            "`docs/backup.sh` does not exist, and the file the task names is `backup.sh`. To change it, call change_file with \"path\": \"backup.sh\". To make a new file `docs/backup.sh` beside it, create it first with the shell (`touch docs/backup.sh`), then change it."
        );
    }
    assert!(model.requests().is_empty(), "the editor was not asked");
    assert!(!ws.path().join("docs/backup.sh").exists());
    std::fs::write(ws.path().join("docs/backup.sh"), "").unwrap();
    let out = call()(ctx).await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("docs/backup.sh")).unwrap(), "cp docs/*.txt backup/\n");
}

/// Issue 29: the model called change_file on `docs/a.txt` (which the task does not name)
/// and the editor, shown `backup.sh` as the file the task names, wrote the fixed script
/// over it, twice (fix-shell-script, llama-server, seed 1). Both replies are refused,
/// naming the file whose lines they are; the file keeps its content, and a call on the
/// named file changes it.
#[tokio::test]
async fn a_named_files_content_written_over_another_file_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    let script = "#!/bin/sh\nsrc=docs\nmkdir -p backup\ncp \"$source\"/*.txt backup/\n";
    let fixed = script.replace("$source", "$src");
    std::fs::write(ws.path().join("backup.sh"), script).unwrap();
    std::fs::write(ws.path().join("docs/a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.path().join("docs/b.txt"), "beta\n").unwrap();
    let block = format!("```sh\n{fixed}```");
    let model = ScriptedModel::new([reply().text(&block), reply().text(&block), reply().text(&block)]);
    let task = "backup.sh should copy every .txt file from docs/ into backup/. Fix the script.";
    let out =
        change(ws.path(), &model, task, serde_json::json!({"path": "docs/a.txt", "change": "docs/b.txt"}))
            .await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "`docs/a.txt` was not changed: its new content came back as the lines of `backup.sh`, the file the task names, not as a change to `docs/a.txt`. To change `backup.sh`, call change_file with \"path\": \"backup.sh\"."
    );
    assert_eq!(model.requests().len(), 2, "asked once more, hotter");
    assert_eq!(std::fs::read_to_string(ws.path().join("docs/a.txt")).unwrap(), "alpha\n");
    let out =
        change(ws.path(), &model, task, serde_json::json!({"path": "backup.sh", "change": "use $src"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("backup.sh")).unwrap(), fixed);
}

/// Issue 29: the shell is named for a rename only when the words name a new file. Said
/// to every unchanged reply, "to rename, move or delete the file, use the shell (mv, rm)"
/// sent the 1.5B model to `mv README.md README.md.bak` after it gave a README line as the
/// words (summarize-last-commit, full-p1). Words that are the new name alone are answered
/// before the editor is asked: in 5 recorded rename-file runs it wrote `# NOTES.md` into
/// the file as a heading, so no hint came and the file was never renamed.
#[tokio::test]
async fn words_that_are_only_a_new_files_name_name_mv_and_no_editor_is_asked() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "Meeting notes\n").unwrap();
    let same = || reply().text("```\nMeeting notes\n```");
    let heading = reply().text("```\n# NOTES.md\n\nMeeting notes\n```");
    let model = ScriptedModel::new([heading, same(), same()]);
    let task = "Rename notes.txt to NOTES.md.";
    let config = Arc::new(ToolsConfig { keep_parsing: true, ..ToolsConfig::default() });
    let tool = typed(ChangeFile::new(config, Arc::new(model.clone())));
    let args = serde_json::json!({"path": "notes.txt", "change": "NOTES.md"});
    let error =
        tool.prepare(&args.to_string()).unwrap()(ToolContext::new(ws.path()).task(task)).await.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (
            ToolErrorKind::InvalidArguments,
            "`notes.txt` was not changed: your words, `NOTES.md`, are only the name of a file that does not exist yet, and change_file changes what is in a file. To rename or move `notes.txt` to `NOTES.md`, use the shell (mv)."
        )
    );
    assert_eq!(model.requests().len(), 0, "the editor is not asked");
    let words = serde_json::json!({"path": "notes.txt", "change": "Call it `NOTES.md`."});
    let out = change(ws.path(), &model, task, words).await;
    assert_eq!(
        (out.is_error, out.content.as_str()),
        (
            false,
            "Changed notes.txt:\n--- notes.txt\n+++ notes.txt\n@@ -1 +1,2 @@\n+# NOTES.md\n Meeting notes"
        ),
        "words that say more are the editor's to read"
    );
    std::fs::write(ws.path().join("notes.txt"), "Meeting notes\n").unwrap();
    // A file that does not exist yet is not renamed: its words are the editor's.
    let created = reply().text("```\nNOTES.md\n```");
    let model = ScriptedModel::new([created, same(), same(), same(), same()]);
    let args = serde_json::json!({"path": "new.txt", "change": "NOTES.md"});
    let out = change(ws.path(), &model, task, args).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(model.requests().len(), 1, "the editor is asked");
    let words = serde_json::json!({"path": "notes.txt", "change": "Meeting notes."});
    let out = change(ws.path(), &model, "Summarize notes.txt.", words).await;
    assert_eq!(
        (out.is_error, out.content.as_str()),
        (
            true,
            "`notes.txt` was not changed: its new content came back the same as the old: the editor found nothing to change in it from your words. Say exactly what to add, remove or replace; if you do not know yet, find out first: run the command that fails and read its error, or read the file."
        )
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "Meeting notes\n");
}

/// Issue 29: words that are a command writing another file (`echo … > docs/backup/a.txt`
/// for docs/a.txt) are refused before the editor is asked, which had written `beta` over
/// docs/a.txt (fix-shell-script, full-p2); a command that writes the file itself is the
/// editor's to apply.
#[tokio::test]
async fn a_command_that_writes_another_file_is_refused_before_the_editor_is_asked() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("docs/a.txt"), "alpha\n").unwrap();
    let model = ScriptedModel::new([reply().text("```\nnew\n```")]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let ctx = ToolContext::new(ws.path()).task("Fix backup.sh.");
    let call =
        |change: &str| tool.prepare(&serde_json::json!({"path": "docs/a.txt", "change": change}).to_string());
    let error = call("echo 'a backup' > docs/backup/a.txt").unwrap()(ctx.clone()).await.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (
            ToolErrorKind::InvalidArguments,
            "`docs/a.txt` was not changed: `echo 'a backup' > docs/backup/a.txt` writes `docs/backup/a.txt`, not `docs/a.txt`. To change `docs/backup/a.txt`, call change_file with \"path\": \"docs/backup/a.txt\"."
        )
    );
    assert!(model.requests().is_empty(), "the editor was not asked");
    assert_eq!(std::fs::read_to_string(ws.path().join("docs/a.txt")).unwrap(), "alpha\n");
    let out = call("echo new > docs/a.txt").unwrap()(ctx).await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("docs/a.txt")).unwrap(), "new\n");
}

/// Issue 29: change_file on `.` with a sed command as its words was refused as "a folder
/// … name a file" and made again six times (version-bump, full-p2). The refusal names the
/// call the words ask for; nothing is written and the editor is not asked.
#[tokio::test]
async fn a_call_on_a_folder_is_told_the_call_its_words_ask_for() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("pyproject.toml"), "version = \"1.2.3\"\n").unwrap();
    let model = ScriptedModel::new([reply().text("```\nx\n```")]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let ctx = ToolContext::new(ws.path()).task("Bump the version to 1.3.0 in pyproject.toml.");
    let call = |change: &str| tool.prepare(&serde_json::json!({"path": ".", "change": change}).to_string());
    let error = call("sed -i 's/1.2.3/1.3.0/' pyproject.toml").unwrap()(ctx.clone()).await.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (
            ToolErrorKind::IsADirectory,
            "`.` is a folder, and change_file changes one file. `sed -i 's/1.2.3/1.3.0/' pyproject.toml` is a shell command: to run it, call shell with it."
        )
    );
    let error = call("set the version in pyproject.toml to 1.3.0").unwrap()(ctx).await.unwrap_err();
    assert_eq!(
        error.message,
        "`.` is a folder, and change_file changes one file. Your words name `pyproject.toml`: to change it, call change_file with \"path\": \"pyproject.toml\"."
    );
    assert!(model.requests().is_empty(), "the editor was not asked");
    assert_eq!(std::fs::read_to_string(ws.path().join("pyproject.toml")).unwrap(), "version = \"1.2.3\"\n");
}

/// Regression (summarize-last-commit, 3 of 5 recorded server runs): the model gave a
/// line of README.md as its words; the editor rightly gave the file back unchanged, and
/// asked again, hotter, it set `50 MB` in bold — an unasked change. An unchanged reply to
/// words the file already holds is the answer: the editor is asked once, nothing is
/// written, and the result (not an error) says so.
#[tokio::test]
async fn words_the_file_already_holds_are_not_asked_for_again() {
    let ws = tempfile::tempdir().unwrap();
    let readme = "# picshare\n\nUpload PNG, JPEG or WebP pictures of up to 50 MB.\n";
    std::fs::write(ws.path().join("README.md"), readme).unwrap();
    let model = ScriptedModel::new([
        reply().text(&format!("```\n{readme}```")),
        reply().text("```\n# picshare\n\nUpload PNG, JPEG or WebP pictures of up to **50 MB**.\n```"),
    ]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let prepared = tool
        .prepare(r#"{"path": "README.md", "change": "Upload PNG, JPEG or WebP pictures of up to 50 MB."}"#)
        .unwrap();
    let out = prepared(ToolContext::new(ws.path()).task("Summarize the last commit.")).await.unwrap();
    assert_eq!(
        (out.is_error, out.content.as_str()),
        (
            false,
            "No change needed: `README.md` already holds the text your words give, so it was left as it is. Go on with the next step of the task."
        )
    );
    assert_eq!(model.requests().len(), 1, "the editor was asked once");
    assert_eq!(std::fs::read_to_string(ws.path().join("README.md")).unwrap(), readme);
    // Words the file does not hold are asked for again, hotter, as before.
    let model = ScriptedModel::new([
        reply().text(&format!("```\n{readme}```")),
        reply().text("```\n# picshare\n\nUpload pictures of up to 60 MB.\n```"),
    ]);
    let tool = typed(ChangeFile::new(Arc::new(ToolsConfig::default()), Arc::new(model.clone())));
    let prepared = tool.prepare(r#"{"path": "README.md", "change": "Raise the limit to 60 MB"}"#).unwrap();
    let out = prepared(ToolContext::new(ws.path()).task("Raise the limit to 60 MB")).await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(model.requests().len(), 2);
}

/// Issue 29: asked `version = '0.4.2'` for a file at 0.4.1 with the task "bump version",
/// the editor wrote 0.4.3 (the words applied, then bumped again), and change_file wrote
/// it. The second attempt is told the value the words give; a reply that still sets
/// another is not written.
#[tokio::test]
async fn a_reply_that_sets_another_value_than_the_words_is_asked_again_then_refused() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("pyproject.toml");
    let old = "[project]\nname = \"tidyup\"\nversion = \"0.4.1\"\n";
    let at = |version: &str| reply().text(&format!("```toml\n{}```", old.replace("0.4.1", version)));
    let args = serde_json::json!({"path": "pyproject.toml", "change": "version = '0.4.2'"});

    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([at("0.4.3"), at("0.4.2")]);
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args.clone()).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), old.replace("0.4.1", "0.4.2"));
    let retry = prompt_of(&model, 1);
    let note = retry.strip_prefix(prompt_of(&model, 0).as_str()).expect("the first prompt, then the note");
    assert_eq!(
        note,
        "\n\nYour earlier reply set `version` to `0.4.3`, but the change gives `0.4.2`. Reply with the complete new content of `pyproject.toml` in one code block, with `version` set to `0.4.2` exactly."
    );

    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([at("0.4.3"), at("0.4.3")]);
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "`pyproject.toml` was not changed: your words set `version` to `0.4.2`, and the editor's new content set it to `0.4.3` instead. Call change_file again with the value you want, or look at the file first."
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), old, "nothing written");
}

/// Issue 29: having set the version in pyproject.toml, the 1.5B model called change_file
/// with `version = '1.0.1'` on the package's `cli.py`, which only imports the version,
/// four times, and was told each time only that the editor found nothing to change. The
/// unchanged reply names the file that sets the key; one that sets it gets no hint.
#[tokio::test]
async fn an_unchanged_reply_to_a_setting_names_the_file_that_sets_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("tidyup")).unwrap();
    let cli = "from tidyup import __version__\n\nprint(__version__)\n";
    std::fs::write(ws.path().join("tidyup/cli.py"), cli).unwrap();
    std::fs::write(ws.path().join("tidyup/__init__.py"), "__version__ = \"0.4.1\"\n").unwrap();
    std::fs::write(ws.path().join("pyproject.toml"), "[project]\nversion = \"0.4.2\"\n").unwrap();
    let same = || reply().text(&format!("```python\n{cli}```"));
    let model = ScriptedModel::new([same(), same()]);
    let args = serde_json::json!({"path": "tidyup/cli.py", "change": "version = '0.4.2'"});
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(out.is_error, "{}", out.content);
    // pyproject.toml, first by path, already has the value: the file still to change is named.
    assert!(
        out.content.ends_with(
            " `tidyup/cli.py` sets no `version`; `tidyup/__init__.py` sets `version` (line 1: `__version__ = \"0.4.1\"`): to change it there, call change_file with \"path\": \"tidyup/__init__.py\"."
        ),
        "{}",
        out.content
    );
    let model = ScriptedModel::new([same(), same()]);
    let args = serde_json::json!({"path": "tidyup/cli.py", "change": "version = '0.4.3'"});
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(out.content.contains("`pyproject.toml` sets `version` (line 2:"), "{}", out.content);
    // The file the words are for sets the key: nothing else is named.
    let init = "__version__ = \"0.4.1\"\n";
    let model = ScriptedModel::new([
        reply().text(&format!("```\n{init}```")),
        reply().text(&format!("```\n{init}```")),
    ]);
    let args = serde_json::json!({"path": "tidyup/__init__.py", "change": "version = '0.4.3'"});
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(out.is_error && !out.content.contains(" sets "), "{}", out.content);
}

/// Issue 29: with the version set, the 1.5B model called change_file with the
/// description line pyproject.toml already had as its words; the editor, given the task
/// "bump version", bumped the version again and change_file wrote it. Settings the file
/// already has are answered without the editor; a reply that changes a key the words do
/// not set is asked again, then refused.
#[tokio::test]
async fn settings_in_place_need_no_editor_and_keys_changed_unasked_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("pyproject.toml");
    let old = "[project]\nversion = \"1.0.0\"\ndescription = \"Tidies text\"\n";
    std::fs::write(&path, old).unwrap();
    let model = ScriptedModel::new([]);
    let args = serde_json::json!({"path": "pyproject.toml", "change": "description = 'Tidies text'"});
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.starts_with("No change needed: `pyproject.toml` already holds"), "{}", out.content);
    assert_eq!(model.requests().len(), 0, "the editor is not asked");

    let bumped =
        || reply().text(&format!("```toml\n{}```", old.replace("1.0.0", "1.0.1").replace("text", "files")));
    let model = ScriptedModel::new([bumped(), bumped()]);
    let args = serde_json::json!({"path": "pyproject.toml", "change": "description = 'Tidies files'"});
    let out = change_with(ws.path(), &model, "bump version", NOT_LAYOUT, args).await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "`pyproject.toml` was not changed: the editor's new content also changed `version` (`1.0.0` to `1.0.1`), which your words do not set. Call change_file again saying everything to change, or look at the file first."
    );
    assert!(
        prompt_of(&model, 1).ends_with(
            "Your earlier reply also changed `version` from `1.0.0` to `1.0.1`, which the change does not mention. Reply with the complete new content of `pyproject.toml` in one code block, changing only `description`."
        ),
        "{}",
        prompt_of(&model, 1)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
}

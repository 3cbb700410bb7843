#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Custom slash commands and skills (issue 34, item 4) end to end: a project command's
//! text with its arguments reaches the model and the log (print mode and the terminal);
//! keel's own commands are never replaced; a skill is listed in the system prompt,
//! loaded through the `skill` tool with its files; `keel skills`; bad files reported.

mod common;
#[path = "common/pty.rs"]
mod pty;

use common::*;
use keel_session::{EventKind, InputSource};
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The prompts the session logged (the user's messages, not keel's context).
fn prompts(env: &Env) -> Vec<String> {
    env.session_events()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::UserMessage(input) if input.source == InputSource::Prompt => Some(input.text),
            _ => None,
        })
        .collect()
}

/// The last user message of a Chat Completions request.
fn last_user(request: &serde_json::Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().rfind(|m| m["role"] == "user").unwrap()["content"].as_str().unwrap().to_owned()
}

fn tool_names(request: &serde_json::Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_command_with_arguments_reaches_the_model_in_print_mode() {
    let env = Env::new();
    write(
        &env.workspace().join(".keel/commands/review.md"),
        "---\ndescription: Review a file\nargument-hint: [file] [focus]\nmodel: sonnet\n---\nReview $1 for bugs, looking at $2.\nAll arguments: $ARGUMENTS\n",
    );
    write(
        &env.root.path().join("config/commands/review.md"),
        "The user's review, hidden by the project's.\n",
    );
    write(&env.workspace().join(".keel/commands/broken.md"), "---\ndescription: never closed\n");
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("No bugs.", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "/review hello.py \"error handling\""]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "No bugs.\n");
    let sent =
        "Review hello.py for bugs, looking at error handling.\nAll arguments: hello.py \"error handling\"";
    assert!(last_user(&server.requests()[0].json()).ends_with(sent), "{:?}", server.requests()[0].json());
    assert_eq!(prompts(&env), [sent], "the log keeps what the model saw");
    assert!(
        stderr.contains("keel: .keel/commands/broken.md was not read: its front matter is not closed (a `---` line after it)\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "keel: /review: .keel/commands/review.md sent as your message ({} bytes)\n",
            sent.len()
        )),
        "{stderr}"
    );

    // A task about a path, or a misspelled command, is sent as it is.
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("A file.", 1).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(["--no-session", "-p", "/reveiw hello.py"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(last_user(&server.requests()[0].json()).ends_with("/reveiw hello.py"));
    assert!(
        text(&out.stderr).contains(
            "keel: /reveiw is not a custom command (did you mean /review?); the task is sent as it is"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_commands_at_the_prompt_help_and_keel_s_own_first() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    write(
        &env.workspace().join(".keel/commands/explain.md"),
        "---\ndescription: Explain a file\n---\nExplain $ARGUMENTS briefly.\n",
    );
    write(&env.workspace().join(".keel/commands/usage.md"), "Not keel's /usage.\n");
    write(&env.root.path().join("config/commands/git/summary.md"), "Summarize the git log.\n");
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("It prints hello.", 1).finish("stop").response());
    server.push(ChatStream::new().text("Nothing yet.", 1).finish("stop").response());
    let args = format!("--base-url {} --model mock-model --permission auto", server.base_url());
    let script = pty::under_script(&env.keel_unconfigured(), &args);
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("/help");
        terminal.wait_for("custom commands", 1);
        terminal.type_line("/explain hello.py");
        terminal.wait_for("completed", 1);
        // Tab completes a custom command's name.
        terminal.keys("/git:su\t");
        terminal.wait_for("mmary", 1);
        terminal.keys("\r");
        std::thread::sleep(std::time::Duration::from_millis(300));
        terminal.keys("\r");
        terminal.wait_for("completed", 2);
        terminal.type_line("/usage");
        terminal.wait_for("turns", 2);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let screen = pty::plain(&terminal.text());
    assert!(status.success(), "{screen}");
    assert!(
        screen.contains(
            ".keel/commands/usage.md is not a command: /usage is keel's own, which a file cannot replace"
        ),
        "{screen}"
    );
    assert!(screen.contains("/explain         Explain a file (project)"), "{screen}");
    assert!(screen.contains("/git:summary     Summarize the git log. (yours)"), "{screen}");
    assert!(screen.contains("/explain: .keel/commands/explain.md sent as your message"), "{screen}");
    assert!(screen.contains("session ") && !screen.contains("Not keel's"), "/usage stays keel's: {screen}");
    assert_eq!(prompts(&env), ["Explain hello.py briefly.", "Summarize the git log."]);
    assert_eq!(server.requests().len(), 2, "/usage never reached the model");
}

fn skill_env() -> Env {
    let env = Env::new();
    write(
        &env.root.path().join("config/skills/release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: >\n  Write release notes from the git log.\n  Use when asked for a changelog.\nlicense: MIT\n---\n# Release notes\nFollow template.md.\n",
    );
    write(&env.root.path().join("config/skills/release-notes/template.md"), "## Added\n## Fixed\n");
    write(
        &env.workspace().join(".keel/skills/py-style/SKILL.md"),
        "---\nname: py-style\ndescription: The project's Python style.\n---\nUse four spaces.\n",
    );
    write(
        &env.workspace().join(".keel/skills/nameless/SKILL.md"),
        "---\nname: nameless\n---\nNo description.\n",
    );
    env
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_is_listed_loaded_and_its_files_read_through_the_tool() {
    let env = skill_env();
    let server = MockServer::start().await;
    server.push(
        ChatStream::new()
            .tool_call("s1", "skill", r#"{"name": "release-notes"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    server.push(
        ChatStream::new()
            .tool_call("s2", "skill", r#"{"name": "release-notes", "file": "template.md"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    server.push(ChatStream::new().text("## Added\n- skills", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.arg("Write the release notes");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("keel: skill .keel/skills/nameless was not read: .keel/skills/nameless/SKILL.md: its front matter has no description"),
        "{stderr}"
    );
    let first = server.requests()[0].json();
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with(
            "# Skills\nA skill holds instructions for one kind of task. When a task matches a skill's description, call skill with its name before you start, and follow what it says.\n\
- py-style: The project's Python style.\n\
- release-notes: Write release notes from the git log. Use when asked for a changelog."
        ),
        "{system}"
    );
    assert!(!system.contains("Follow template.md"), "bodies are loaded on request only");
    assert!(tool_names(&first).contains(&"skill".to_owned()));
    let tool_results = |n: usize| -> String {
        let request = server.requests()[n].json();
        let messages = request["messages"].as_array().unwrap();
        messages.iter().rfind(|m| m["role"] == "tool").unwrap()["content"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        tool_results(1),
        "Skill release-notes (~/config/skills/release-notes):\n\n# Release notes\nFollow template.md.\n\n\
Files in the skill's folder (read one with skill, name \"release-notes\" and file set to its path):\n- template.md"
    );
    assert_eq!(tool_results(2), "## Added\n## Fixed\n");
    let effects: Vec<_> = env
        .session_events()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::ToolCall(call) => call.effect,
            _ => None,
        })
        .collect();
    assert_eq!(effects, vec![keel_session::Effect::Reads { path: None }; 2]);

    // The small profile: neither the list nor the tool.
    let server = MockServer::start().await;
    server.set_handler(|request| {
        if request.method == "GET" {
            return keel_testkit::MockResponse::json(404, &serde_json::json!({"error": "not found"}));
        }
        intent_reply(&request.json(), "answer")
            .unwrap_or_else(|| ChatStream::new().text("ok", 1).finish("stop").response())
    });
    let mut keel = env.keel(&server.base_url());
    keel.args(["--no-session", "--tool-profile", "small", "Write the release notes"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let request = server
        .requests()
        .into_iter()
        .map(|r| r.json())
        .find(|r| !tool_names(r).contains(&"classify".to_owned()))
        .unwrap();
    assert!(!request.to_string().contains("release-notes"));
    assert!(!tool_names(&request).contains(&"skill".to_owned()));
}

#[tokio::test(flavor = "multi_thread")]
async fn keel_skills_lists_them_and_reports_bad_ones() {
    let env = skill_env();
    let mut keel = env.keel_unconfigured();
    keel.arg("skills");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "py-style       .keel/skills/py-style          The project's Python style.\n\
release-notes  ~/config/skills/release-notes  Write release notes from the git log. Use when asked for a changelog.\n"
    );
    assert_eq!(
        text(&out.stderr),
        "keel: skill .keel/skills/nameless was not read: .keel/skills/nameless/SKILL.md: its front matter has no description (what the skill is for and when to use it)\n"
    );
    let empty = Env::new();
    let mut keel = empty.keel_unconfigured();
    keel.arg("skills");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("no skills: add one as .keel/skills/NAME/SKILL.md"),
        "{}",
        text(&out.stdout)
    );
}

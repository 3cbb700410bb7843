#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 14, the terminal experience, through the real binary: permission rules from
//! config, approvals shown whole with their diff (under a pseudo-terminal), diffs and
//! output tails after calls, piped input, a closed stdout, misspelled subcommands.

mod common;
#[path = "common/pty.rs"]
mod pty;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use common::*;
use keel_session::SessionStore;
use keel_testkit::{ChatStream, MockResponse, MockServer};
use pretty_assertions::assert_eq;

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn calls(list: &[(&str, &str, &str)]) -> MockResponse {
    let mut stream = ChatStream::new();
    for (id, name, args) in list {
        stream = stream.tool_call(id, name, args, 2);
    }
    stream.finish("tool_calls").usage(400, 30).response()
}

fn keel_with(env: &Env, server: &MockServer, set: impl FnOnce(&mut Command)) -> Command {
    let mut keel = env.keel(&server.base_url());
    set(&mut keel);
    keel
}

fn tool_results(server: &MockServer, request: usize) -> Vec<String> {
    server.requests()[request].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_in_config_allow_and_refuse_in_print_mode_and_changes_show_on_stderr() {
    let env = Env::new();
    std::fs::write(
        env.root.path().join("config/config.toml"),
        "[permissions]\nallow = [\"shell(echo ok*)\", \"shell(seq *)\", \"write_file(./*.txt)\"]\ndeny = [\"shell(touch *)\", \"read_file(.env*)\"]\n",
    )
    .unwrap();
    std::fs::write(env.workspace().join(".env"), "KEY=secret\n").unwrap();
    let server = MockServer::start().await;
    server.push(calls(&[
        ("c1", "shell", r#"{"command":"echo ok && touch pwned"}"#),
        ("c2", "read_file", r#"{"path":".env"}"#),
        ("c3", "shell", r#"{"command":"echo ok; seq 1 9"}"#),
        ("c4", "write_file", r#"{"path":"notes.txt","content":"one\ntwo\n"}"#),
    ]));
    server.push(answer("done"));
    for mode in ["ask", "auto", "read-only"] {
        let server_requests = server.requests().len();
        if server_requests > 0 {
            server.push(calls(&[
                ("c1", "shell", r#"{"command":"echo ok && touch pwned"}"#),
                ("c2", "read_file", r#"{"path":".env"}"#),
            ]));
            server.push(answer("done"));
        }
        let mut keel = env.keel(&server.base_url());
        keel.args(["--no-session", "--permission", mode, "go"]);
        let out = output(keel).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{mode}: {stderr}");
        assert!(!env.workspace().join("pwned").exists(), "{mode}");
        let results = tool_results(&server, server_requests + 1);
        assert!(results[0].contains("`deny: shell(touch *)`"), "{mode}: {results:?}");
        assert!(results[1].contains("`deny: read_file(.env*)`") && !results[1].contains("secret"), "{mode}");
        if server_requests == 0 {
            // Ask mode: the allowed command and write ran without a question.
            assert!(results[2].starts_with("ok\n1\n2\n"), "{results:?}");
            assert!(results[3].starts_with("Created notes.txt"), "{results:?}");
            assert!(!stderr.contains("allow shell?"), "{stderr}");
            // After the write, its diff; after the shell call, its last lines.
            assert!(
                stderr.contains("notes.txt (new): +2 -0\n      @@ -0,0 +1,2 @@\n      +one\n      +two"),
                "{stderr}"
            );
            assert!(
                stderr.contains("      … 5 lines above\n      5\n      6\n      7\n      8\n      9\n"),
                "{stderr}"
            );
        }
    }
    // `keel permissions` names each rule's source; options may come before it.
    let mut keel = env.keel(&server.base_url());
    keel.args(["--permission", "ask", "permissions"]);
    let out = output(keel).await;
    let shown = text(&out.stdout);
    assert!(shown.starts_with("mode: ask\n"), "{shown}");
    assert!(shown.contains("  deny   shell(touch *)       config.toml [permissions]\n"), "{shown}");
    assert!(shown.contains("  allow  write_file(./*.txt)  config.toml [permissions]\n"), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_text_follows_the_task_in_a_fence() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(answer("It is a main function."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("explain this").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = keel.spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"fn main() {}\n").unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = server.requests()[0].json();
    let first = body["messages"][1]["content"].as_str().unwrap();
    assert!(first.ends_with("</environment>\n\nexplain this\n\n```\nfn main() {}\n```"), "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdout_ends_keel_quietly() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(answer("hello"));
    let out = output(keel_with(&env, &server, |k| {
        k.arg("hi");
    }))
    .await;
    assert_eq!(out.status.code(), Some(0));
    let id = env.store().list().unwrap()[0].id.clone();
    let keel = env!("CARGO_BIN_EXE_keel");
    let home = env.home();
    let report = tokio::task::spawn_blocking(move || {
        // `| head -1`, a hundred times: never a panic.
        for _ in 0..100 {
            let mut child = Command::new(keel)
                .args(["sessions", "show", &id, "--raw"])
                .env("KEEL_HOME", &home)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut first = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(first.contains("session/header"), "{first}");
            assert!(matches!(out.status.code(), Some(0 | 141)), "{:?} {}", out.status, text(&out.stderr));
            assert_eq!(text(&out.stderr), "");
        }
        // A pipe closed before keel writes: the first write fails, keel leaves with 141.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(keel)
            .args(["sessions", "show", &id])
            .env("KEEL_HOME", &home)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        // A closed stderr loses the message; keel still says nothing else and exits 2.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let typo = Command::new(keel).arg("sesions").env("KEEL_HOME", &home).stderr(writer).status().unwrap();
        (out.status.code(), text(&out.stderr), typo.code())
    })
    .await
    .unwrap();
    assert_eq!(report, (Some(141), String::new(), Some(2)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_misspelled_subcommand_is_an_error_with_a_suggestion() {
    let env = Env::new();
    let server = MockServer::start().await;
    for (typo, meant) in [("sesions", "sessions"), ("modles", "models"), ("model", "models")] {
        let out = output(keel_with(&env, &server, |k| {
            k.arg(typo);
        }))
        .await;
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains(&format!("did you mean `keel {meant}`?")),
            "{}",
            text(&out.stderr)
        );
    }
    assert!(server.requests().is_empty(), "nothing went to the model");
    // `-p` sends the word as a task; so does a task of several words.
    server.push(answer("A model is…"));
    server.push(answer("Sessions are…"));
    let out = output(keel_with(&env, &server, |k| {
        k.args(["-p", "model"]);
    }))
    .await;
    assert_eq!(text(&out.stdout), "A model is…\n");
    let out = output(keel_with(&env, &server, |k| {
        k.arg("explain sessions");
    }))
    .await;
    assert_eq!(text(&out.stdout), "Sessions are…\n");
}

/// Under a pseudo-terminal: a 300-character command is shown whole; an edit's diff comes
/// before the question; one key answers (`y`, `a`: no Enter); [a]lways offers and adds its
/// rule; a configured allow rule runs without a question.
#[tokio::test(flavor = "multi_thread")]
async fn approvals_show_everything_before_the_question() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.root.path().join("config/config.toml"),
        "[permissions]\nallow = [\"shell(echo allowed*)\"]\n",
    )
    .unwrap();
    let long = format!("echo '{}' && echo tail-of-the-command-END", "x".repeat(280));
    assert!(long.len() > 300);
    let server = MockServer::start().await;
    let shell_args = serde_json::json!({ "command": long }).to_string();
    server.push(calls(&[("c1", "shell", &shell_args)]));
    server.push(calls(&[
        ("c2", "read_file", r#"{"path":"hello.py"}"#),
        ("c3", "edit_file", r#"{"path":"hello.py","old_text":"hello from keel","new_text":"hello, world"}"#),
    ]));
    server.push(calls(&[(
        "c4",
        "edit_file",
        r#"{"path":"hello.py","old_text":"hello, world","new_text":"hello, keel"}"#,
    )]));
    server.push(calls(&[("c5", "shell", r#"{"command":"echo allowed"}"#)]));
    server.push(answer("All done."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission ask");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Change the greeting");
        terminal.wait_for("Enter: no ·", 1);
        // One key answers: no Enter.
        terminal.keys("y");
        terminal.wait_for("Enter: no ·", 2);
        terminal.keys("a");
        terminal.wait_for("All done.", 1);
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("approvals.txt"), &screen).unwrap();
    }
    assert!(status.success(), "{screen}");
    // The command whole, wrapped at the terminal's width: joined back, it is all there.
    let question = &screen[screen.find("allow shell?").unwrap()..];
    let question = &question[..question.find("[y]es").unwrap()];
    let joined: String = question.lines().skip(1).map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    assert!(joined.contains(&long), "{question}");
    assert!(question.lines().all(|l| l.chars().count() <= 100), "{question}");
    // The edit's diff, then the question offering the rule.
    let edit = &screen[screen.find("allow edit_file?").unwrap()..];
    let expected = "    hello.py  (in ";
    assert!(edit.contains(expected), "{edit}");
    let diff = edit.find("    -print('hello from keel')\n    +print('hello, world')").expect(edit);
    let choices = edit
        .find("[y]es  [a]lways: edit_file(./*.py)  p⏎: keep for this project  [n]o  [s]top\n  one key · Enter: no")
        .expect(edit);
    assert!(diff < choices, "{edit}");
    // [a]lways covered the second edit; the config's rule the echo: no more questions.
    assert_eq!(screen.matches("Enter: no ·").count(), 2, "{screen}");
    assert_eq!(std::fs::read_to_string(env.workspace().join("hello.py")).unwrap(), "print('hello, keel')\n");
    assert!(
        tool_results(&server, 4).last().unwrap().starts_with("allowed"),
        "{:?}",
        tool_results(&server, 4)
    );
}

/// Issue 32: a pasted four-line traceback sent four turns, and words typed at an
/// approval question were a plain no the model never saw. Now a paste (bracketed) is one
/// message, `\` + Enter goes on to a next line, `n` then words and words alone are a no
/// with what to do instead, which the model gets.
#[tokio::test(flavor = "multi_thread")]
async fn a_paste_is_one_message_and_words_at_a_question_reach_the_model() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(calls(&[("c1", "shell", r#"{"command":"rm -rf build"}"#)]));
    server.push(calls(&[("c2", "shell", r#"{"command":"rm -rf dist"}"#)]));
    server.push(answer("Understood."));
    server.push(answer("Two lines."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission ask");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.keys(
            "\x1b[200~Traceback (most recent call last):\r  File \"a.py\", line 1\rValueError: boom\x1b[201~",
        );
        terminal.keys(" why?\r");
        terminal.wait_for("Enter: no ·", 1);
        terminal.keys("please keep build\r");
        terminal.wait_for("Enter: no ·", 2);
        terminal.keys("n");
        terminal.wait_for("what should it do instead?", 1);
        terminal.keys("list dist first\r");
        terminal.wait_for("completed", 1);
        terminal.keys("first line \\\r");
        terminal.keys("second line\r");
        terminal.wait_for("completed", 2);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let screen = pty::plain(&terminal.text());
    assert!(status.success(), "{screen}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one turn for the paste, one for the continued line: {screen}");
    let first = requests[0].json();
    let users: Vec<&str> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let task = users.last().unwrap();
    assert!(
        task.contains("Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: boom why?"),
        "{task}"
    );
    let refusals = tool_results(&server, 2);
    assert!(refusals[0].contains("declined `shell` and said instead:\nplease keep build"), "{refusals:?}");
    assert!(refusals[1].contains("declined `shell` and said instead:\nlist dist first"), "{refusals:?}");
    let last = requests[3].json().to_string();
    assert!(last.contains("first line \\nsecond line"), "{last}");
}

/// `/undo` puts back what the last turn wrote and edited (and says shell effects stay);
/// the model hears of it; leaving names `keel --resume ID`; `--continue` shows the last
/// exchange before the prompt.
#[tokio::test(flavor = "multi_thread")]
async fn undo_then_leave_then_continue() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(calls(&[
        ("c1", "read_file", r#"{"path":"hello.py"}"#),
        ("c1b", "read_file", r#"{"path":"README.md"}"#),
        ("c2", "edit_file", r#"{"path":"hello.py","old_text":"hello from keel","new_text":"bye"}"#),
        ("c3", "write_file", r#"{"path":"made/new.txt","content":"new\n"}"#),
        ("c4", "write_file", r#"{"path":"README.md","content":"gone\n"}"#),
        ("c5", "shell", r#"{"command":"echo side > effect.txt"}"#),
    ]));
    server.push(answer("Changed three files."));
    server.push(answer("Understood, they are back."));
    let original = std::fs::read(env.workspace().join("README.md")).unwrap();
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission auto");
    let ws = env.workspace();
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Change things");
        terminal.wait_for("completed", 1);
        assert_eq!(std::fs::read_to_string(ws.join("hello.py")).unwrap(), "print('bye')\n");
        terminal.type_line("/undo");
        terminal.wait_for("not undone:", 1);
        terminal.type_line("/undo");
        terminal.wait_for("undone already", 1);
        terminal.type_line("What now?");
        terminal.wait_for("completed", 2);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    assert!(terminal.child.wait().unwrap().success());
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("undo.txt"), &screen).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("hello.py")).unwrap(),
        "print('hello from keel')\n"
    );
    assert_eq!(std::fs::read(env.workspace().join("README.md")).unwrap(), original);
    assert!(!env.workspace().join("made/new.txt").exists());
    assert!(env.workspace().join("effect.txt").exists(), "shell effects stay");
    for line in [
        "  restored hello.py\n",
        "  removed made/new.txt (created by the last turn)\n",
        "  restored README.md\n",
        "  not undone: what the last turn's 1 shell command did",
    ] {
        assert!(screen.contains(line), "{line:?} in\n{screen}");
    }
    let note = server.requests()[2].json().to_string();
    assert!(note.contains("the user undid your last turn's file changes: hello.py (restored), made/new.txt (removed), README.md (restored)"), "{note}");
    let id = env.store().list().unwrap()[0].id.clone();
    assert!(screen.contains(&format!("to come back to this session: keel --resume {id}")), "{screen}");

    server.push(answer("Still here."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--continue --permission auto");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.wait_for("last exchange:", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    assert!(terminal.child.wait().unwrap().success());
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("continue.txt"), &screen).unwrap();
    }
    assert!(
        screen.contains(&format!(
            "resumed session {id} · 2 turns · 1,400 tokens\n  last exchange:\n  you: What now?\n  keel: Understood, they are back.\n"
        )),
        "{screen}"
    );
}

/// On a terminal an answer is rendered as Markdown (no `**` or fences left, words kept
/// whole at the terminal's width); with NO_COLOR it stays raw.
#[tokio::test(flavor = "multi_thread")]
async fn answers_render_as_markdown_on_a_terminal() {
    if !pty::available() {
        return;
    }
    let markdown = "## Summary\n\nI changed **hello.py** so it greets the *world*:\n\n- one edit\n- no new files\n\n```python\nprint('hello, world')\n```\n\nRun it with `python3 hello.py`. This last sentence is long enough to wrap at the terminal's width, and it must wrap between words, never inside one.";
    for no_color in [false, true] {
        let env = Env::new();
        let server = MockServer::start().await;
        server.push(answer(markdown));
        let mut keel = env.keel(&server.base_url());
        if no_color {
            keel.env("NO_COLOR", "1");
        }
        let script = pty::under_script(&keel, "--permission auto");
        let terminal = tokio::task::spawn_blocking(move || {
            let terminal = pty::Terminal::start(script);
            terminal.wait_for("/help for commands", 1);
            terminal.type_line("What did you do?");
            terminal.wait_for("completed", 1);
            terminal.type_line("/quit");
            terminal
        })
        .await
        .unwrap();
        let mut terminal = terminal;
        assert!(terminal.child.wait().unwrap().success());
        let screen = pty::plain(&terminal.text());
        let answer = &screen[screen.find("What did you do?").unwrap()..screen.find("completed").unwrap()];
        if no_color {
            assert!(answer.contains("I changed **hello.py** so it greets the *world*:"), "{answer}");
            continue;
        }
        if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
            std::fs::write(std::path::Path::new(&dir).join("markdown.txt"), answer).unwrap();
        }
        assert!(answer.contains("I changed hello.py so it greets the world:"), "{answer}");
        assert!(!answer.contains("**") && !answer.contains("```") && !answer.contains("## "), "{answer}");
        assert!(answer.contains("print('hello, world')") && answer.contains("Summary"), "{answer}");
        for word in ["sentence", "between", "words,", "never", "inside"] {
            assert!(answer.split_whitespace().any(|w| w == word), "{word} cut in\n{answer}");
        }
        assert!(answer.lines().all(|l| l.chars().count() <= 100), "{answer}");
    }
}

/// Text typed while the agent works stays on screen after the spinner; Enter steers; a
/// line left unfinished carries over to the prompt; Ctrl-C still stops the turn.
#[tokio::test(flavor = "multi_thread")]
async fn typed_text_stays_visible_and_ctrl_c_still_aborts() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(calls(&[("c1", "shell", r#"{"command":"sleep 3"}"#)]));
    server.push(calls(&[("c2", "shell", r#"{"command":"sleep 2.5"}"#)]));
    server.push(answer("ok"));
    server.push(calls(&[("c3", "shell", r#"{"command":"sleep 20"}"#)]));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission auto");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Work slowly");
        terminal.wait_for("shell sleep 3", 1);
        terminal.keys("fix th");
        terminal.wait_for("› fix th", 1);
        terminal.keys("e tests\r");
        terminal.wait_for("queued for the next step: fix the tests", 1);
        terminal.wait_for("shell sleep 2.5", 1);
        terminal.keys("later");
        terminal.wait_for("› later", 1);
        terminal.wait_for("completed", 1);
        terminal.keys("\r");
        terminal.wait_for("shell sleep 20", 1);
        terminal.keys("\x03");
        terminal.wait_for("aborted", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("typing.txt"), &screen).unwrap();
    }
    assert!(status.success(), "{status:?}\n{screen}");
    let user_messages = |request: usize| -> Vec<String> {
        server.requests()[request].json()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert!(user_messages(1).last().unwrap().ends_with("fix the tests"), "{:?}", user_messages(1));
    assert_eq!(user_messages(3).last().unwrap(), "later", "the unfinished line became the next prompt");
    assert_eq!(server.requests().len(), 4, "{screen}");
}

/// `/rewind 2` puts the files back as they were two turns ago and continues in a fork
/// of the conversation made before those turns; the original session is kept.
#[tokio::test(flavor = "multi_thread")]
async fn rewind_goes_back_in_files_and_conversation() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    for (n, content, extra) in [(1, "one", None), (2, "two", Some("b.txt")), (3, "three", None)] {
        let args = serde_json::json!({"path": "a.txt", "content": content}).to_string();
        let mut list = vec![(format!("w{n}"), "write_file", args)];
        if let Some(path) = extra {
            list.push((
                format!("x{n}"),
                "write_file",
                serde_json::json!({"path": path, "content": "b"}).to_string(),
            ));
        }
        let borrowed: Vec<(&str, &str, &str)> =
            list.iter().map(|(i, t, a)| (i.as_str(), *t, a.as_str())).collect();
        server.push(calls(&borrowed));
        server.push(answer(&format!("Turn {n} done.")));
    }
    server.push(answer("Back at one."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission auto");
    let ws = env.workspace();
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        for (n, task) in ["first", "second", "third"].iter().enumerate() {
            terminal.type_line(task);
            terminal.wait_for("completed", n + 1);
        }
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "three");
        terminal.type_line("/rewind 2");
        terminal.wait_for("continuing in session", 1);
        terminal.type_line("where are we?");
        terminal.wait_for("completed", 4);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let screen = pty::plain(&terminal.text());
    assert!(status.success(), "{screen}");
    assert_eq!(std::fs::read_to_string(env.workspace().join("a.txt")).unwrap(), "one", "{screen}");
    assert!(!env.workspace().join("b.txt").exists(), "{screen}");
    assert!(screen.contains("  restored a.txt\n  removed b.txt (created by the last 2 turns)\n"), "{screen}");
    assert!(screen.contains("  last exchange:\n  you: first\n  keel: Turn 1 done.\n"), "{screen}");
    // The model sees the first turn and the new prompt, nothing of turns 2 and 3.
    let last = server.requests().last().unwrap().json().to_string();
    assert!(last.contains("first") && last.contains("where are we?"), "{last}");
    assert!(!last.contains("second") && !last.contains("Turn 2 done"), "{last}");
    let mut sessions = env.store().list().unwrap();
    sessions.sort_by_key(|s| s.turns);
    assert_eq!(sessions.iter().map(|s| s.turns).collect::<Vec<_>>(), [2, 3], "the fork and the original");
}

/// While a command runs, its last line of output is shown after the spinner; after it,
/// its last lines stay under its line.
#[tokio::test(flavor = "multi_thread")]
async fn a_running_command_shows_its_output_live() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let command = r#"{"command":"for i in 1 2 3 4; do echo step-$i; sleep 0.8; done"}"#;
    server.push(calls(&[("c1", "shell", command)]));
    server.push(answer("Four steps."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission auto");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Count");
        terminal.wait_for("│ step-2", 1);
        let live = terminal.text();
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        (terminal, live)
    })
    .await
    .unwrap();
    let (mut terminal, live) = terminal;
    assert!(terminal.child.wait().unwrap().success());
    let status = live.rsplit('\r').find(|s| s.contains("│ step-2")).unwrap();
    assert!(status.contains("shell for i in 1 2 3 4; do echo step-$i; sleep 0.8; done "), "{status:?}");
    assert!(!live.contains("step-4"), "live, not after the fact: {live}");
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("live.txt"), &screen).unwrap();
        std::fs::write(std::path::Path::new(&dir).join("live-raw.txt"), &live).unwrap();
    }
    assert!(screen.contains("      step-1\n      step-2\n      step-3\n      step-4\n"), "{screen}");
}

/// Issue 28, item 8: escape sequences from a command's output and from the model's
/// answer (OSC 52 writes the clipboard, OSC 0 the title, `ESC[2J` clears the screen)
/// reached the terminal raw. They are shown, not obeyed.
#[tokio::test(flavor = "multi_thread")]
async fn escapes_from_commands_and_answers_are_shown_not_obeyed() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let command = r#"printf 'out\033]52;c;Y2xpcA==\007\033]0;title\007\033[2Jend\n'"#;
    server.push(calls(&[("c1", "shell", &serde_json::json!({"command": command}).to_string())]));
    server.push(answer("Done \u{1b}]52;c;YW5zd2Vy\u{7}\u{1b}[2J here."));
    let keel = env.keel(&server.base_url());
    let script = pty::under_script(&keel, "--permission auto");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("go");
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    assert!(terminal.child.wait().unwrap().success());
    let raw = terminal.text();
    for obeyed in ["\u{1b}]52", "\u{1b}]0;title", "\u{1b}[2J"] {
        assert!(!raw.contains(obeyed), "{obeyed:?} reached the terminal:\n{raw:?}");
    }
    assert!(raw.contains("\\e]52;c;YW5zd2Vy"), "the answer's sequence is shown: {raw:?}");
}

/// Issue 32, item 4: a reasoning model's thoughts stream beside the spinner as they come
/// (its latest line), and before any reply the spinner says it waits for the model,
/// not that a model which may not reason is "thinking".
#[tokio::test(flavor = "multi_thread")]
async fn reasoning_streams_beside_the_spinner_and_waiting_is_said_plainly() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let reasoning =
        "First I look at the files.\nThe greeting lives in hello dot py, so that is where to look.";
    server.push(
        ChatStream::new()
            .reasoning(reasoning, 8)
            .text("It greets.", 2)
            .finish("stop")
            .response()
            .delay(std::time::Duration::from_millis(1500))
            .delay_each(std::time::Duration::from_millis(250)),
    );
    let script = pty::under_script(&env.keel(&server.base_url()), "--no-session");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("What does hello.py do?");
        terminal.wait_for("waiting for the model", 1);
        terminal.wait_for("is where to look", 1);
        terminal.wait_for("It greets.", 1);
        terminal.type_line("/quit");
        // What was drawn, status lines included (they are cleared once the reply ends).
        terminal.text()
    })
    .await
    .unwrap();
    assert!(screen.contains("reasoning"), "{screen}");
    assert!(screen.contains("reasoning") && screen.contains("│ First I loo"), "as it streams: {screen}");
    assert!(
        screen.contains("│ The greeting lives in hello dot py, so that is where to look."),
        "its latest line: {screen}"
    );
    assert!(!screen.contains("thinking"), "{screen}");
}

/// Issue 32, item 7: `[p]roject` keeps the offered rule for this folder, in keel's config
/// folder (never in the repository); `keel permissions` shows it, and the next run in the
/// folder does not ask again.
#[tokio::test(flavor = "multi_thread")]
async fn a_rule_kept_for_the_project_holds_in_the_next_run() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(calls(&[("c1", "shell", r#"{"command":"echo kept-rule"}"#)]));
    server.push(answer("Done once."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission ask --no-session");
    tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Say it");
        terminal.wait_for("p⏎: keep for this project", 1);
        // A line, not a key: words that start with p ("please …") stay words.
        terminal.keys("p\r");
        terminal.wait_for("kept for this project", 1);
        terminal.wait_for("Done once.", 1);
        terminal.type_line("/quit");
    })
    .await
    .unwrap();
    let kept = std::fs::read_to_string(env.root.path().join("config/project-rules.toml")).unwrap();
    let folder = env.workspace().canonicalize().unwrap().display().to_string();
    assert!(kept.contains(&format!("[projects.\"{folder}\"]")) && kept.contains("shell(echo"), "{kept}");
    assert!(!env.workspace().join(".keel").exists(), "nothing is written into the project");

    let mut permissions = env.keel(&server.base_url());
    permissions.arg("permissions");
    let out = output(permissions).await;
    let report = text(&out.stdout);
    assert!(report.contains("shell(echo") && report.contains("(this project)"), "{report}");

    // The next run in the folder: print mode cannot ask, so only a kept rule lets it run.
    server.push(calls(&[("c2", "shell", r#"{"command":"echo kept-rule"}"#)]));
    server.push(answer("Done twice."));
    let mut again = env.keel(&server.base_url());
    again.args(["--permission", "ask", "Say it again"]);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(tool_results(&server, 3), vec!["kept-rule\n[exit code: 0]".to_owned()]);
}

/// Issue 32, item 8: `/undo N` puts back the files of the last N turns at once.
#[tokio::test(flavor = "multi_thread")]
async fn undo_goes_back_more_than_one_turn() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(calls(&[("c1", "write_file", r#"{"path":"one.txt","content":"1\n"}"#)]));
    server.push(answer("Wrote one."));
    server.push(calls(&[(
        "c2",
        "edit_file",
        r#"{"path":"hello.py","old_text":"hello from keel","new_text":"two"}"#,
    )]));
    server.push(answer("Edited two."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission auto");
    let ws = env.workspace();
    tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("First");
        terminal.wait_for("completed", 1);
        terminal.type_line("Second");
        terminal.wait_for("completed", 2);
        assert!(ws.join("one.txt").exists());
        terminal.type_line("/undo 3");
        terminal.wait_for("this session has only 2 turn(s)", 1);
        terminal.type_line("/undo 2");
        terminal.wait_for("removed one.txt", 1);
        terminal.type_line("/quit");
    })
    .await
    .unwrap();
    assert!(!env.workspace().join("one.txt").exists(), "the first turn's file is gone");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("hello.py")).unwrap(),
        "print('hello from keel')\n",
        "the second turn's edit is put back"
    );
}

/// Issue 32, item 8: Tab completes slash commands (and the workspace's paths).
#[tokio::test(flavor = "multi_thread")]
async fn tab_completes_a_slash_command() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let script = pty::under_script(&env.keel(&server.base_url()), "--no-session");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.keys("/us\t");
        std::thread::sleep(std::time::Duration::from_millis(300));
        terminal.keys("\r");
        std::thread::sleep(std::time::Duration::from_millis(300));
        terminal.keys("\r");
        terminal.wait_for("tokens", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    assert!(!screen.contains("unknown command"), "{screen}");
}

/// Issue 32, item 1: a long paste is shown folded at the prompt (`[pasted #1: 30 lines,
/// …]`) and sent whole, as one turn, with the words typed around it; a fold that was
/// changed is refused and put back, not sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_paste_is_shown_folded_and_sent_whole() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(answer("Seen."));
    let lines: Vec<String> =
        (1..=30).map(|i| format!("  at frame {i:02} (src/deep/module.rs:{i})")).collect();
    let paste = format!("\x1b[200~{}\x1b[201~", lines.join("\r"));
    let script = pty::under_script(&env.keel(&server.base_url()), "");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        // Apart, as a person types then pastes (crossterm leaves the rest of a read
        // that held a whole event unread until the next key).
        terminal.keys("explain ");
        terminal.wait_for("explain", 1);
        terminal.keys(&paste);
        terminal.wait_for("[pasted #1: 30 lines, 1.1 KB]", 1);
        // Backspace eats the fold's `]`: the line is refused and put back.
        terminal.keys("\x7f\r");
        terminal.wait_for("was changed", 1);
        terminal.keys("] please\r");
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one turn: {screen}");
    let sent = format!("explain {} please", lines.join("\n"));
    let first = requests[0].json();
    let task = first["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "user").unwrap();
    assert!(task["content"].as_str().unwrap().ends_with(&sent), "{task}");
    let logged = env.session_events().into_iter().rev().find_map(|e| match e.kind {
        keel_session::EventKind::UserMessage(input) => Some(input.text),
        _ => None,
    });
    assert_eq!(logged.as_deref(), Some(sent.as_str()), "the log keeps the whole paste");
    assert!(screen.contains("explain [pasted #1: 30 lines, 1.1 KB] please"), "{screen}");
    assert!(!screen.contains("frame 17"), "the pasted lines are not shown: {screen}");
}

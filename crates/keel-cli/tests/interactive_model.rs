#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Interactive `keel` under a pseudo-terminal (util-linux `script`): `/model` switches
//! a running session from Claude to an OpenAI reasoning model and back, and each
//! request carries only the thinking of the model it goes to.

mod common;
#[path = "common/pty.rs"]
mod pty;

use common::*;
use keel_session::EventKind;
use keel_testkit::{AnthropicStream, MockServer, ResponsesStream};

#[tokio::test(flavor = "multi_thread")]
async fn slash_model_switches_provider_mid_session_without_foreign_thinking() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let claude = MockServer::start().await;
    claude.push(
        AnthropicStream::new()
            .thinking("Plan with A", "sig-a", 2)
            .tool_use("toolu_1", "list_files", "{}", 1)
            .stop(10)
            .response(),
    );
    claude.push(
        AnthropicStream::new()
            .thinking("Two files.", "sig-b", 1)
            .text("Two files: README.md, hello.py.", 2)
            .stop(10)
            .response(),
    );
    claude.push(AnthropicStream::new().text("Back with Claude.", 1).stop(5).response());
    let gpt = MockServer::start().await;
    gpt.push(
        ResponsesStream::new()
            .reasoning("rs_1", "Plan with R", "enc-r", 1)
            .text("msg_1", "Nothing else.", 1)
            .completed(100, 0, 10, 5)
            .response(),
    );
    std::fs::write(
        env.root.path().join("config/config.toml"),
        format!(
            "[profiles.claude]\nprovider = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-a\"\n\n\
             [profiles.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-5-mini\"\n",
            claude.base_url(),
            gpt.base_url()
        ),
    )
    .unwrap();
    let mut command = env.keel_unconfigured();
    command.env("ANTHROPIC_API_KEY", "sk-ant").env("OPENAI_API_KEY", "sk-oai");
    let script = pty::under_script(&command, "--profile claude --permission auto");
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("List the files");
        terminal.wait_for("completed", 1);
        terminal.type_line("/model gpt");
        terminal.wait_for("model: gpt-5-mini (openai, responses API)", 1);
        terminal.type_line("Anything else?");
        terminal.wait_for("completed", 2);
        terminal.type_line("/model claude");
        terminal.wait_for("model: claude-a (anthropic, anthropic API)", 1);
        terminal.type_line("Once more");
        terminal.wait_for("completed", 3);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    assert!(status.success(), "{}", terminal.text());

    let to_gpt = gpt.requests()[0].json().to_string();
    assert!(!to_gpt.contains("sig-a") && !to_gpt.contains("Plan with A"), "{to_gpt}");
    assert!(to_gpt.contains("\"call_id\":\"toolu_1\""), "Claude's call goes as a plain call: {to_gpt}");
    let back = claude.requests()[2].json().to_string();
    assert!(back.contains("\"signature\":\"sig-a\"") && back.contains("\"signature\":\"sig-b\""), "{back}");
    assert!(!back.contains("enc-r") && !back.contains("Plan with R"), "{back}");
    let models: Vec<String> = env
        .session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AssistantMessage(m) => m.origin.map(|o| o.model),
            _ => None,
        })
        .collect();
    assert_eq!(models, vec!["claude-a", "claude-a", "gpt-5-mini", "claude-a"]);
}

/// Issue 29: `/model` switched the model but not the profile, nor the model the tools
/// ask. Switching from a 70B model to a 1.5B one on the same server now builds the
/// agent again: the small profile's tools and prompt, logged in a new request header.
#[tokio::test(flavor = "multi_thread")]
async fn slash_model_to_a_small_model_switches_the_profile() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.set_handler(|request| {
        if request.method == "POST" {
            keel_testkit::ChatStream::new().text("Hello.", 1).finish("stop").response()
        } else {
            keel_testkit::MockResponse::json(404, &serde_json::json!({"error": "no such route"}))
        }
    });
    let args = format!("--base-url {} --model llama3.1:70b --permission auto", server.base_url());
    let script = pty::under_script(&env.keel_unconfigured(), &args);
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Say hello");
        terminal.wait_for("completed", 1);
        terminal.type_line("/model qwen2.5-coder:1.5b");
        terminal.wait_for("profile small (1.5B parameters (the model's name))", 1);
        terminal.type_line("Say hello again");
        terminal.wait_for("completed", 2);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    assert!(status.success(), "{}", terminal.text());
    let headers: Vec<(String, Option<String>, bool)> = env
        .session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RequestHeader(h) => {
                let small_tools = h.tools.iter().any(|t| t.name == "change_file");
                Some((h.model, h.profile, small_tools))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        headers,
        vec![
            ("llama3.1:70b".to_owned(), Some("full: 70B parameters (the model's name)".to_owned()), false),
            (
                "qwen2.5-coder:1.5b".to_owned(),
                Some("small: 1.5B parameters (the model's name)".to_owned()),
                true
            ),
        ]
    );
}

/// Issue 32, item 8: Tab after `/model ` completes the names the server lists (asked once,
/// in the background, when `/model ` is typed; nothing is offered until it answers).
#[tokio::test(flavor = "multi_thread")]
async fn tab_completes_the_servers_model_names() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let list = serde_json::json!({"data": [{"id": "llama3.2:3b"}, {"id": "qwen2.5-coder:7b"}]});
    server.route("GET", "/v1/models", keel_testkit::MockResponse::json(200, &list));
    server.set_handler(|_| {
        keel_testkit::MockResponse::json(404, &serde_json::json!({"error": "no such route"}))
    });
    let args = format!("--base-url {} --model mock-model --no-session", server.base_url());
    let script = pty::under_script(&env.keel_unconfigured(), &args);
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        // Typing `/model ` starts asking the server; once it has answered, the next key
        // shows the first match as a hint.
        terminal.keys("/model ");
        std::thread::sleep(std::time::Duration::from_millis(500));
        terminal.keys("ll");
        terminal.wait_for("ama3.2:3b", 1);
        // Tab offers the matches; Enter takes the one chosen, and Enter sends the line.
        terminal.keys("\t");
        std::thread::sleep(std::time::Duration::from_millis(300));
        terminal.keys("\r");
        terminal.wait_for("/model llama3.2:3b", 1);
        terminal.keys("\r");
        terminal.wait_for("model: llama3.2:3b", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    assert!(!screen.contains("does not list"), "the name is the server's own: {screen}");
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Interactive `keel` under a pseudo-terminal (util-linux `script`): `/model` switches
//! a running session from Claude to an OpenAI reasoning model and back, and each
//! request carries only the thinking of the model it goes to.

mod common;

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use keel_session::EventKind;
use keel_testkit::{AnthropicStream, MockServer, ResponsesStream};

/// A program on a terminal: what it printed, and a way to type. Cursor-position
/// queries (`ESC[6n`, which the line editor sends at every prompt) are answered.
struct Terminal {
    child: Child,
    input: Arc<Mutex<ChildStdin>>,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    fn start(mut command: Command) -> Terminal {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let input = Arc::new(Mutex::new(child.stdin.take().unwrap()));
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = child.stdout.take().unwrap();
        let (answer, seen) = (Arc::clone(&input), Arc::clone(&screen));
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            let mut answered = 0;
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                let mut screen = seen.lock().unwrap();
                screen.extend_from_slice(&buffer[..n]);
                let queries = screen.windows(4).filter(|w| w == b"\x1b[6n").count();
                for _ in answered..queries {
                    let _ = answer.lock().unwrap().write_all(b"\x1b[1;1R");
                }
                answered = queries;
            }
        });
        Terminal { child, input, screen }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    fn type_line(&self, line: &str) {
        let mut input = self.input.lock().unwrap();
        input.write_all(line.as_bytes()).unwrap();
        input.write_all(b"\r").unwrap();
        input.flush().unwrap();
    }

    /// Waits until the screen shows `needle` `times` times.
    fn wait_for(&self, needle: &str, times: usize) {
        let started = Instant::now();
        while self.text().matches(needle).count() < times {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never saw {needle:?} x{times}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the prompt settle before typing.
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn has_script() -> bool {
    Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread")]
async fn slash_model_switches_provider_mid_session_without_foreign_thinking() {
    if !has_script() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is not installed");
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
    let keel = format!("{} --profile claude --permission auto", env!("CARGO_BIN_EXE_keel"));
    let mut command = env.keel_unconfigured();
    command.env("ANTHROPIC_API_KEY", "sk-ant").env("OPENAI_API_KEY", "sk-oai").env("TERM", "xterm");
    let mut script = Command::new("script");
    script.args(["-qfec", &keel, "/dev/null"]).current_dir(env.workspace()).env_clear();
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            script.env(name, value);
        }
    }
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = Terminal::start(script);
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

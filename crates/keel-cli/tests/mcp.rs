#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP servers through the real binary: `keel mcp list`, tools called in print mode,
//! read-only mode, required servers, the server's environment, and no server left
//! running after keel ends (normally, SIGINT, SIGTERM, kill -9, or its terminal gone).

mod common;
#[path = "common/pty.rs"]
mod pty;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use keel_session::EventKind;
use keel_testkit::mcp::McpHttpServer;
use keel_testkit::{ChatStream, MockResponse, MockServer};
use pretty_assertions::assert_eq;
use rustix::process::{Pid, Signal, kill_process};

fn server_binary() -> String {
    keel_testkit::mcp::example_binary("keel-cli", "mcp_test_server").display().to_string()
}

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 2).finish("stop").usage(500, 20).response()
}

fn calls(calls: &[(&str, &str)]) -> MockResponse {
    let mut stream = ChatStream::new();
    for (i, (name, args)) in calls.iter().enumerate() {
        stream = stream.tool_call(&format!("c{i}"), name, args, 2);
    }
    stream.finish("tool_calls").usage(400, 30).response()
}

/// A `[mcp_servers.NAME]` table for the test server with `args` (a marker names its
/// processes).
fn stdio_table(name: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[mcp_servers.{name:?}]\ncommand = {:?}\nargs = [{}]\n{extra}\n",
        server_binary(),
        args.join(", ")
    )
}

fn configure(env: &Env, text: &str) {
    std::fs::write(env.root.path().join("config/config.toml"), text).unwrap();
}

fn results(env: &Env) -> Vec<(String, String, bool)> {
    env.session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult(r) => Some((r.name, r.content, r.is_error)),
            _ => None,
        })
        .collect()
}

async fn appears(arg: &str) {
    let started = std::time::Instant::now();
    while processes_with_arg(arg).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "no process with {arg} started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_shows_each_server_its_state_and_tools() {
    let env = Env::new();
    let http = McpHttpServer::start().await;
    let extra = env.root.path().join("extra.toml");
    std::fs::write(
        &extra,
        format!("[mcp_servers.web]\nurl = {:?}\nenabled_tools = [\"echo\"]\n", http.url()),
    )
    .unwrap();
    configure(
        &env,
        &(stdio_table("local", &["--marker", "list-1"], "")
            + &stdio_table("broken", &["--fail-start", "--marker", "list-2"], "")),
    );
    let mut keel = env.keel_unconfigured();
    keel.args(["mcp", "list", "--mcp-config"]).arg(&extra);
    let out = output(keel).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a server failed: {stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("broken · stdio: {} --fail-start --marker list-2", server_binary()));
    assert_eq!(lines[1], "  failed: exited with status 1: keel-test-mcp: failing at start on purpose");
    assert_eq!(lines[2], format!("local · stdio: {} --marker list-1", server_binary()));
    assert_eq!(lines[3], "  ready · 11 tools");
    assert_eq!(lines[4], "    mcp__local__echo        Returns its text. (read-only)");
    assert_eq!(lines[5], "    mcp__local__sleep       Sleeps, then says so.");
    assert_eq!(lines[15], format!("web · http: {}", http.url()));
    assert_eq!(lines[16..], ["  ready · 1 tool", "    mcp__web__echo  Returns its text. (read-only)"]);
    for marker in ["list-1", "list-2"] {
        assert!(gone(marker, 5).await, "{marker} outlived `keel mcp list`");
    }
    // No server configured: says how to add one.
    let env = Env::new();
    let mut keel = env.keel_unconfigured();
    keel.args(["mcp", "list"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("no MCP servers configured; add [mcp_servers.NAME] to "),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn print_mode_calls_mcp_tools_and_the_server_ends_with_the_session() {
    let env = Env::new();
    configure(
        &env,
        &(stdio_table("test", &["--marker", "print-1"], "")
            + &stdio_table("a.test", &["--marker", "print-2"], "")),
    );
    let server = MockServer::start().await;
    server.push(calls(&[("mcp__test__echo", r#"{"text": "hello over MCP"}"#), ("mcp__test__image", "{}")]));
    server.push(answer("The server said hello."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("Say hello through MCP");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "The server said hello.\n");
    assert!(stderr.contains("mcp: test ready (11 tools)"), "{stderr}");
    // `a.test` sanitizes to `a_test`: no clash; its tools are offered too.
    assert!(stderr.contains("mcp: a.test ready (11 tools)"), "{stderr}");
    assert_eq!(
        results(&env),
        [
            ("mcp__test__echo".to_owned(), "hello over MCP".to_owned(), false),
            (
                "mcp__test__image".to_owned(),
                "a red dot\n[image: image/png, 69 bytes; image 1 below]".to_owned(),
                false
            ),
        ]
    );
    // The tool's image reaches the model (Chat Completions: a user message after the
    // tool messages, naming the call).
    let second = server.requests()[1].json();
    let last = second["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user", "{last}");
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Images returned by the `mcp__test__image` call")
    );
    assert!(last["content"][1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
    let tools: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(tools.starts_with(&["shell".to_owned()]), "{tools:?}");
    assert!(
        tools.contains(&"mcp__a_test__echo".to_owned()) && tools.contains(&"mcp__test__sleep".to_owned()),
        "{tools:?}"
    );
    for marker in ["print-1", "print-2"] {
        assert!(gone(marker, 5).await, "{marker} outlived keel");
    }
}

/// Issue 28, item 11: a process an MCP server starts with `setsid` left the server's
/// process group and outlived keel. In the server's own PID namespace it ends with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_setsid_child_of_a_server_ends_with_keel() {
    if !common::pid_namespaces() {
        eprintln!(
            "SKIPPED: this machine gives keel no PID namespaces (not root, or a container that forbids them)"
        );
        return;
    }
    let env = Env::new();
    let line = format!("setsid sleep 3017 >/dev/null 2>&1 & exec {} --marker setsid-server", server_binary());
    configure(&env, &format!("[mcp_servers.test]\ncommand = \"sh\"\nargs = [\"-c\", {line:?}]\n"));
    let server = MockServer::start().await;
    server.push(answer("Done."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(gone("setsid-server", 5).await, "the server outlived keel");
    assert!(gone("3017", 5).await, "its setsid child outlived keel: {:?}", processes_with_arg("3017"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_taken_twice_is_refused_with_a_warning_and_read_only_mode_offers_read_only_tools() {
    let env = Env::new();
    configure(
        &env,
        &(stdio_table("a.b", &["--marker", "dup-1"], "") + &stdio_table("a_b", &["--marker", "dup-2"], "")),
    );
    let server = MockServer::start().await;
    server.push(answer("ok"));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--permission", "read-only", "hi"]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "mcp: MCP server `a_b`: its tool `echo` is not offered: a tool named `mcp__a_b__echo` is already registered; the new one was refused"
        ),
        "{stderr}"
    );
    let tools: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(
        tools,
        [
            "mcp__a_b__echo",
            "mcp__a_b__image",
            "mcp__a_b__resource",
            "mcp__a_b__structured",
            "mcp__a_b__env",
            "mcp__a_b__pid"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_required_server_that_fails_stops_keel_before_the_model_is_asked() {
    let env = Env::new();
    configure(&env, &stdio_table("needed", &["--fail-start"], "required = true"));
    let server = MockServer::start().await;
    let mut keel = env.keel(&server.base_url());
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).lines().last().unwrap(),
        "keel: MCP server `needed`: it is required (`required = true`) but is not ready: failed: exited with status 1: keel-test-mcp: failing at start on purpose"
    );
    assert_eq!(server.request_count(), 0);
}

/// keel's keys never reach a server: credentials by name or value are removed, except
/// those named in `env_vars`; `env` adds variables.
#[tokio::test(flavor = "multi_thread")]
async fn no_key_variable_reaches_the_server() {
    let env = Env::new();
    configure(
        &env,
        &stdio_table("test", &[], "env_vars = [\"GITHUB_TOKEN\"]\nenv = { SET_BY_CONFIG = \"yes\" }"),
    );
    let names = [
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "KEEL_API_KEY",
        "HF_TOKEN",
        "DATABASE_URL",
        "GITHUB_TOKEN",
        "SET_BY_CONFIG",
        "PATH",
    ];
    let server = MockServer::start().await;
    let env_calls: Vec<(&str, String)> =
        names.iter().map(|n| ("mcp__test__env", serde_json::json!({ "name": n }).to_string())).collect();
    let borrowed: Vec<(&str, &str)> = env_calls.iter().map(|(n, a)| (*n, a.as_str())).collect();
    server.push(calls(&borrowed));
    server.push(answer("done"));
    let mut keel = env.keel(&server.base_url());
    keel.env("OPENAI_API_KEY", "sk-openai-mcp1")
        .env("DEEPSEEK_API_KEY", "sk-deepseek-mcp2")
        .env("KEEL_API_KEY", "sk-keel-mcp3")
        .env("HF_TOKEN", "hf-mcp4")
        .env("DATABASE_URL", "postgres://app:pw-mcp5@db/app")
        .env("GITHUB_TOKEN", "ghp-mcp6")
        .arg("show the environment");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let values: Vec<String> = results(&env).into_iter().map(|r| r.1).collect();
    let path = std::env::var("PATH").unwrap();
    assert_eq!(
        values,
        ["(unset)", "(unset)", "(unset)", "(unset)", "(unset)", "ghp-mcp6", "yes", path.as_str()]
    );
}

/// The server is killed with keel on every exit path: SIGINT and SIGTERM during a call
/// (the turn is aborted, keel leaves), SIGINT while keel waits for servers to start, and
/// kill -9 (the launcher's parent-death signal). The servers here `--linger`: they do not
/// leave when their stdin closes, so only keel's killing ends them.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_dies_with_keel_on_sigint_sigterm_and_kill_9() {
    for (signal, marker) in [(Signal::INT, "sig-int"), (Signal::TERM, "sig-term"), (Signal::KILL, "sig-kill")]
    {
        let env = Env::new();
        configure(&env, &stdio_table("test", &["--linger", "--marker", marker], ""));
        let server = MockServer::start().await;
        server.push(calls(&[("mcp__test__sleep", r#"{"seconds": 300}"#)]));
        let mut keel = env.keel(&server.base_url());
        keel.arg("sleep").stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = keel.spawn().unwrap();
        appears(marker).await;
        // The call is running once the model was asked and the call logged.
        let started = std::time::Instant::now();
        while server.request_count() == 0 {
            assert!(started.elapsed() < Duration::from_secs(20));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        kill_process(Pid::from_raw(child.id() as i32).unwrap(), signal).unwrap();
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
        if signal != Signal::KILL {
            assert_eq!(out.status.code(), Some(130), "{signal:?}: {}", text(&out.stderr));
            let result = results(&env);
            assert_eq!(result.len(), 1, "{signal:?}");
            assert!(result[0].1.starts_with("Operation aborted"), "{signal:?}: {result:?}");
        }
        assert!(
            gone(marker, 5).await,
            "{signal:?}: the server outlived keel: {:?}",
            processes_with_arg(marker)
        );
    }
    // SIGINT while keel waits for a slow server to start (no turn yet).
    let env = Env::new();
    configure(
        &env,
        &stdio_table("slow", &["--delay-start", "60", "--linger", "--marker", "sig-startup"], ""),
    );
    let server = MockServer::start().await;
    let mut keel = env.keel(&server.base_url());
    keel.arg("hi").stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = keel.spawn().unwrap();
    appears("sig-startup").await;
    kill_process(Pid::from_raw(child.id() as i32).unwrap(), Signal::INT).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(gone("sig-startup", 5).await, "the starting server outlived keel");
}

/// When keel's terminal goes away (its parent, `script` here, is killed), keel gets
/// SIGHUP and leaves; its servers go with it.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_dies_when_keels_parent_is_killed() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    configure(&env, &stdio_table("test", &["--linger", "--marker", "parent-killed"], ""));
    let server = MockServer::start().await;
    // Names this keel among the processes (other tests run keel too).
    let workspace = env.workspace().display().to_string();
    // `script` gives keel a terminal (interactive mode); keel is the terminal's session.
    let keel = env.keel(&server.base_url());
    let mut terminal =
        pty::Terminal::start(pty::under_script(&keel, &format!("--no-session -C {workspace}")));
    appears("parent-killed").await;
    terminal.child.kill().unwrap();
    terminal.child.wait().unwrap();
    assert!(gone(&workspace, 5).await, "keel outlived its parent");
    assert!(gone("parent-killed", 5).await, "the server outlived keel's parent");
}

async fn requests(server: &MockServer, n: usize) {
    let started = std::time::Instant::now();
    while server.request_count() < n {
        assert!(started.elapsed() < Duration::from_secs(20), "request {n} never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// In interactive mode a server slower than its startup timeout is skipped by the first
/// turn and its tools are offered from the next turn once it is ready; `/mcp` reports.
#[tokio::test(flavor = "multi_thread")]
async fn a_late_server_joins_at_a_later_turn_in_interactive_mode() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    configure(
        &env,
        &(stdio_table("fast", &["--marker", "late-1"], "")
            + &stdio_table(
                "slow",
                &["--delay-start", "2", "--marker", "late-2"],
                "startup_timeout_sec = 0.5",
            )),
    );
    let server = MockServer::start().await;
    server.push(answer("one"));
    server.push(answer("two"));
    let keel = env.keel(&server.base_url());
    let mut terminal = pty::Terminal::start(pty::under_script(&keel, "--no-session"));
    appears("late-2").await;
    let started = std::time::Instant::now();
    // The terminal's waits block: off the runtime's task, which serves the mock model.
    let wait = |terminal: &pty::Terminal, needle: &str, times: usize| {
        tokio::task::block_in_place(|| terminal.wait_for(needle, times))
    };
    wait(&terminal, "/help for commands", 1);
    terminal.type_line("first");
    requests(&server, 1).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the first turn came too late to test this: {:?}",
        started.elapsed()
    );
    wait(&terminal, "completed", 1);
    // The slow server is ready 5 s after it started.
    tokio::time::sleep(Duration::from_millis(5500).saturating_sub(started.elapsed())).await;
    terminal.type_line("second");
    requests(&server, 2).await;
    wait(&terminal, "completed", 2);
    terminal.type_line("/mcp");
    wait(&terminal, "mcp__slow__echo", 1);
    terminal.type_line("/quit");
    tokio::task::block_in_place(|| {
        let waited = std::time::Instant::now();
        while terminal.child.try_wait().unwrap().is_none() {
            assert!(waited.elapsed() < Duration::from_secs(20), "keel did not leave");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let screen = pty::plain(&terminal.text());
    let offered = |i: usize| -> Vec<String> {
        server.requests()[i].json()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| {
                t["function"]["name"].as_str().filter(|n| n.starts_with("mcp__")).map(str::to_owned)
            })
            .collect()
    };
    assert_eq!(offered(0).len(), 11, "{:?}", offered(0));
    assert!(offered(0).iter().all(|n| n.starts_with("mcp__fast__")), "{:?}", offered(0));
    assert_eq!(offered(1).len(), 22, "{:?}", offered(1));
    assert!(offered(1).contains(&"mcp__slow__echo".to_owned()), "{:?}", offered(1));
    assert!(
        screen.contains("mcp: slow starting (past its startup timeout; its tools join when it is ready)"),
        "{screen}"
    );
    assert!(screen.contains("mcp: slow ready (11 tools)"), "{screen}");
    assert!(screen.contains("    mcp__slow__echo"), "/mcp lists the tools: {screen}");
    for marker in ["late-1", "late-2"] {
        assert!(gone(marker, 5).await, "{marker} outlived keel");
    }
}

/// JSON mode reports the servers once, in one `keel/mcp` line, before the turn.
#[tokio::test(flavor = "multi_thread")]
async fn json_mode_reports_the_servers_in_one_line() {
    let env = Env::new();
    configure(
        &env,
        &(stdio_table("test", &[], "enabled_tools = [\"echo\"]")
            + &stdio_table("bad", &["--fail-start"], "")),
    );
    let server = MockServer::start().await;
    server.push(answer("ok"));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--json", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> =
        text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mcp: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "keel/mcp").collect();
    assert_eq!(
        mcp,
        [&serde_json::json!({"type": "keel/mcp", "data": {"servers": [
            {"name": "bad", "state": "failed", "error": "exited with status 1: keel-test-mcp: failing at start on purpose", "tools": []},
            {"name": "test", "state": "ready", "error": null, "tools": ["mcp__test__echo"]},
        ], "refused": []}})]
    );
}

/// In `ask` mode an MCP tool asks unless its server marks it read-only (here nobody can
/// answer, so it is denied); a read-only one runs.
#[tokio::test(flavor = "multi_thread")]
async fn ask_mode_asks_for_tools_not_marked_read_only() {
    let env = Env::new();
    configure(&env, &stdio_table("test", &[], ""));
    let server = MockServer::start().await;
    server.push(calls(&[("mcp__test__echo", r#"{"text": "read"}"#), ("mcp__test__fail", "{}")]));
    server.push(answer("done"));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--permission", "ask", "go"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let results = results(&env);
    assert_eq!(results[0], ("mcp__test__echo".to_owned(), "read".to_owned(), false));
    assert!(results[1].2 && !results[1].1.contains("it failed on purpose"), "{results:?}");
    assert!(
        text(&out.stderr)
            .contains("mcp__test__fail needs permission, but there is no terminal to ask: denied"),
        "{}",
        text(&out.stderr)
    );
}

/// A stdio server with `sandbox = "workspace-write"` writes its own folder and nothing
/// outside it. Skipped where the kernel enforces no Landlock rules.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_server_writes_only_its_folder() {
    let probe =
        std::process::Command::new(env!("CARGO_BIN_EXE_keel")).args(["__exec", "--probe"]).output().unwrap();
    let support = keel_sandbox::Support::parse(&String::from_utf8_lossy(&probe.stdout));
    if !support.landlock() {
        eprintln!("skipped: this kernel enforces no Landlock rules ({})", support.landlock);
        return;
    }
    let env = Env::new();
    let inside = env.workspace().join("inside.txt");
    let outside = env.root.path().join("outside.txt");
    let extra = format!("cwd = {:?}\nsandbox = \"workspace-write\"", env.workspace().display().to_string());
    configure(&env, &stdio_table("test", &[], &extra));
    let server = MockServer::start().await;
    let write = |path: &std::path::Path| serde_json::json!({"path": path, "text": "x"}).to_string();
    let (a, b) = (write(&inside), write(&outside));
    server.push(calls(&[("mcp__test__write", a.as_str()), ("mcp__test__write", b.as_str())]));
    server.push(answer("done"));
    let mut keel = env.keel(&server.base_url());
    keel.arg("write two files");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let results = results(&env);
    assert!(!results[0].2, "{results:?}");
    // Landlock refuses the write; in a mount namespace the read-only mount refuses first.
    let refused = ["ermission denied", "Read-only file system"];
    assert!(results[1].2 && refused.iter().any(|r| results[1].1.contains(r)), "{results:?}");
    assert!(inside.exists());
    assert!(!outside.exists());
}

/// An unknown sandbox mode is a configuration error naming the server.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_sandbox_mode_is_refused() {
    let env = Env::new();
    configure(&env, &stdio_table("test", &[], "sandbox = \"strict\""));
    let mut keel = env.keel_unconfigured();
    keel.args(["mcp", "list"]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    let stdout = text(&out.stdout);
    assert!((stderr.clone() + &stdout).contains("unknown sandbox `strict`"), "{stdout}\n{stderr}");
}

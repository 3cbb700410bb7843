#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP servers end to end: the test server (keel-testkit) over stdio (this crate's
//! example binary) and streamable HTTP, driven through the agent loop.

use std::time::{Duration, Instant};

use keel_agent::{Agent, NullSink, SessionContext, ToolRegistry};
use keel_llm::CancellationToken;
use keel_mcp::{McpErrorKind, McpManager, McpOptions, ServerConfig, ServerState, ToolStatus};
use keel_testkit::mcp::McpHttpServer;
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn server_binary() -> String {
    keel_testkit::mcp::example_binary("keel-mcp", "test_server").display().to_string()
}

fn stdio(args: &[&str]) -> ServerConfig {
    ServerConfig::stdio(server_binary(), args.iter().copied())
}

fn start(servers: Vec<(&str, ServerConfig)>) -> McpManager {
    McpManager::start(servers.into_iter().map(|(n, c)| (n.to_owned(), c)), McpOptions::default()).unwrap()
}

/// Runs one turn with a model that makes `calls` (tool name, arguments) in one step,
/// then answers; returns each result's (content, is_error, code).
async fn run_calls(tools: ToolRegistry, calls: &[(&str, &str)]) -> Vec<(String, bool)> {
    let mut first = reply();
    for (name, args) in calls {
        first = first.call(name, args);
    }
    let model = ScriptedModel::new([first, reply().text("done")]);
    let agent = Agent::builder(model).tools(tools).build();
    let mut session = keel_agent::Session::in_memory("/w");
    agent
        .run_turn(&mut session, &SessionContext::new("/w"), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            keel_llm::Message::ToolResult(r) => Some((r.content.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

async fn gone(pid: u32) -> bool {
    let started = Instant::now();
    while alive(pid) {
        if started.elapsed() > Duration::from_secs(5) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

async fn pid_of(tools: &ToolRegistry, server: &str) -> u32 {
    let results = run_calls(tools.clone(), &[(&format!("mcp__{server}__pid"), "{}")]).await;
    results[0].0.parse().unwrap_or_else(|_| panic!("not a pid: {results:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_listed_and_called_through_the_loop_over_stdio_and_http() {
    let http = McpHttpServer::start().await;
    let mut remote = ServerConfig::http(http.url());
    remote.enabled_tools = Some(vec!["echo".into(), "image".into(), "sleep".into()]);
    remote.disabled_tools = Some(vec!["sleep".into()]);
    remote.http_headers = [("X-Team".to_owned(), "core".to_owned())].into();
    remote.bearer_token_env_var = Some("HOME".into());
    let mcp = start(vec![("local", stdio(&[])), ("remote", remote)]);
    mcp.wait_for_startup().await;
    let statuses = mcp.statuses();
    assert_eq!(
        statuses.iter().map(|s| s.state.clone()).collect::<Vec<_>>(),
        [ServerState::Ready, ServerState::Ready]
    );
    assert_eq!(
        statuses[1].tools,
        [
            ToolStatus {
                name: "mcp__remote__echo".into(),
                remote: "echo".into(),
                read_only: true,
                description: "Returns its text.".into()
            },
            ToolStatus {
                name: "mcp__remote__image".into(),
                remote: "image".into(),
                read_only: true,
                description: "Returns a picture.".into()
            },
        ]
    );
    assert_eq!(statuses[0].tools.len(), 11);
    assert!(statuses[0].transport.starts_with("stdio: "), "{}", statuses[0].transport);
    let (tools, refused) = mcp.registry(&ToolRegistry::new(), false);
    assert!(refused.is_empty(), "{refused:?}");
    let definition = tools.get("mcp__local__sleep").unwrap().definition();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(definition.parameters.get()).unwrap(),
        serde_json::json!({"type": "object", "properties": {"seconds": {"type": "number", "description": "How long."}}, "required": ["seconds"]})
    );
    let results = run_calls(
        tools,
        &[
            ("mcp__local__echo", r#"{"text": "over stdio"}"#),
            ("mcp__remote__echo", r#"{"text": "over http"}"#),
            ("mcp__remote__image", ""),
            ("mcp__local__resource", "{}"),
            ("mcp__local__structured", "{}"),
            ("mcp__local__fail", "{}"),
        ],
    )
    .await;
    assert_eq!(
        results,
        [
            ("over stdio".to_owned(), false),
            ("over http".to_owned(), false),
            ("a red dot\n[image: image/png, 69 bytes; image 1 below]".to_owned(), false),
            (
                "[resource: file:///notes.txt]\nthe notes\n[resource: file:///logo.png, image/png, 69 bytes]\n\
                 [resource link: file:///big.csv (big.csv, text/csv)]"
                    .to_owned(),
                false
            ),
            (r#"{"temperature":21.5,"unit":"celsius"}"#.to_owned(), false),
            ("it failed on purpose".to_owned(), true),
        ]
    );
    // Headers and the bearer token reached the HTTP server.
    let call = http.requests().into_iter().find(|r| r.json()["method"] == "tools/call").unwrap();
    assert_eq!(call.header("x-team"), Some("core"));
    assert_eq!(
        call.header("authorization"),
        Some(format!("Bearer {}", std::env::var("HOME").unwrap()).as_str())
    );
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_checked_against_the_schema_before_the_call() {
    let mcp = start(vec![("t", stdio(&[]))]);
    mcp.wait_for_startup().await;
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    let results = run_calls(
        tools,
        &[("mcp__t__echo", r#"{"text": 5}"#), ("mcp__t__sleep", "{}"), ("mcp__t__echo", "[1]")],
    )
    .await;
    assert_eq!(
        results,
        [
            (
                "Invalid arguments for `mcp__t__echo`: `text`: expected a string, got an integer. Expected a JSON object {text: string (required)}."
                    .to_owned(),
                true
            ),
            (
                "Invalid arguments for `mcp__t__sleep`: missing field `seconds`. Expected a JSON object {seconds: number (required)}."
                    .to_owned(),
                true
            ),
            (
                "Invalid arguments for `mcp__t__echo`: expected an object, got an array. Expected a JSON object {text: string (required)}."
                    .to_owned(),
                true
            ),
        ]
    );
}

/// A server slower than its startup timeout is reported and skipped; its tools join
/// the registry built once it is ready (at a later turn).
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_server_is_skipped_then_joins_later() {
    // The slow server needs 3 s, ten times its startup timeout: the wait must end at the
    // timeout, far from the moment the server comes up, even on a loaded machine.
    let mut slow = stdio(&["--delay-start", "3"]);
    slow.startup_timeout_sec = Some(0.3);
    let mcp = start(vec![("fast", stdio(&[])), ("slow", slow)]);
    let started = Instant::now();
    mcp.wait_for_startup().await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_millis(2500), "{waited:?}");
    let states: Vec<ServerState> = mcp.statuses().into_iter().map(|s| s.state).collect();
    assert_eq!(states, [ServerState::Ready, ServerState::Starting { late: true }]);
    let version = mcp.version();
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    assert!(tools.get("mcp__slow__echo").is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    while mcp.version() == version {
        assert!(Instant::now() < deadline, "the slow server never joined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mcp.statuses()[1].state, ServerState::Ready);
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    assert_eq!(
        run_calls(tools, &[("mcp__slow__echo", r#"{"text": "late"}"#)]).await,
        [("late".to_owned(), false)]
    );
}

/// Issue 28, item 11: one tool whose schema is not an object made the whole server
/// unusable, reported as an "unexpected response".
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_with_a_broken_definition_is_skipped_and_the_rest_work() {
    let mcp = start(vec![("t", stdio(&["--bad-tool"]))]);
    mcp.wait_for_startup().await;
    let status = &mcp.statuses()[0];
    assert_eq!(status.state, ServerState::Ready);
    assert_eq!(status.skipped.len(), 1, "{:?}", status.skipped);
    assert!(status.skipped[0].starts_with("broken: its definition does not parse"), "{:?}", status.skipped);
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    assert!(tools.get("mcp__t__broken").is_none());
    assert_eq!(
        run_calls(tools, &[("mcp__t__echo", r#"{"text": "fine"}"#)]).await,
        [("fine".to_owned(), false)]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_says_why_and_a_required_one_is_an_error() {
    let mut broken = stdio(&["--fail-start"]);
    broken.required = true;
    let mut missing = ServerConfig::stdio("/nonexistent/mcp-server", Vec::<String>::new());
    missing.startup_timeout_sec = Some(5.0);
    let mut token = ServerConfig::http("http://127.0.0.1:9/mcp");
    token.bearer_token_env_var = Some("KEEL_TEST_NEVER_SET_7F3A".into());
    let mcp = start(vec![("broken", broken), ("missing", missing), ("fine", stdio(&[])), ("token", token)]);
    mcp.wait_for_startup().await;
    let states: Vec<ServerState> = mcp.statuses().into_iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [
            ServerState::Failed("exited with status 1: keel-test-mcp: failing at start on purpose".into()),
            ServerState::Failed(
                "cannot start `/nonexistent/mcp-server`: No such file or directory (os error 2)".into()
            ),
            ServerState::Ready,
            ServerState::Failed("KEEL_TEST_NEVER_SET_7F3A is not set".into()),
        ]
    );
    // Issue 31, item 5: each failure keeps its kind and the error underneath, so a caller
    // can tell a command that is not there from a server that exits.
    let errors: Vec<_> = mcp.statuses().into_iter().map(|s| s.error).collect();
    let kinds: Vec<_> = errors.iter().map(|e| e.as_ref().map(|e| e.kind)).collect();
    assert_eq!(
        kinds,
        [Some(McpErrorKind::Exited), Some(McpErrorKind::Spawn), None, Some(McpErrorKind::Variable)]
    );
    let missing = errors[1].as_ref().unwrap();
    assert_eq!(missing.io_kind(), Some(std::io::ErrorKind::NotFound));
    assert_eq!(mcp.statuses()[1].state, ServerState::Failed(missing.message.clone()));
    let error = mcp.check_required().unwrap_err();
    assert_eq!(error.kind, McpErrorKind::Required);
    assert_eq!(error.server, "broken");
    assert!(error.to_string().starts_with("MCP server `broken`: it is required"), "{error}");
    let why = error.cause().and_then(|cause| cause.downcast_ref::<keel_mcp::McpError>()).unwrap();
    assert_eq!(why.kind, McpErrorKind::Exited);
    // A configuration mistake is refused before anything starts.
    let bad =
        McpManager::start([("x".to_owned(), ServerConfig::default())], McpOptions::default()).unwrap_err();
    assert_eq!(bad.kind, McpErrorKind::Config);
}

/// A call that hangs past tool_timeout_sec costs that call; the server is stopped and
/// the next call starts a new one.
#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_call_times_out_and_the_next_call_restarts_the_server() {
    let mut config = stdio(&[]);
    config.tool_timeout_sec = Some(0.5);
    let mcp = start(vec![("t", config)]);
    mcp.wait_for_startup().await;
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    let first = pid_of(&tools, "t").await;
    let started = Instant::now();
    let results = run_calls(tools.clone(), &[("mcp__t__sleep", r#"{"seconds": 30}"#)]).await;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(
        results,
        [(
            "`sleep` did not answer within 0.5 s (tool_timeout_sec of MCP server `t`); the server was stopped and is started again on the next call"
                .to_owned(),
            true
        )]
    );
    assert!(gone(first).await, "the hung server was not stopped");
    assert!(
        matches!(mcp.statuses()[0].state, ServerState::Failed(ref why) if why.contains("took longer than 0.5 s"))
    );
    let second = pid_of(&tools, "t").await;
    assert_ne!(first, second);
    assert_eq!(mcp.statuses()[0].state, ServerState::Ready);
    mcp.shutdown().await;
    assert!(gone(second).await, "shutdown left the server running");
}

/// A crash costs the call that hit it; the next call restarts the server; crashing again
/// right away meets the backoff.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_costs_one_call_then_the_server_restarts_with_backoff() {
    let mcp = start(vec![("t", stdio(&[]))]);
    mcp.wait_for_startup().await;
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    let first = pid_of(&tools, "t").await;
    let results = run_calls(tools.clone(), &[("mcp__t__crash", "{}")]).await;
    assert_eq!(
        results,
        [(
            "the MCP server `t` stopped during the call (exited with status 3: keel-test-mcp: crashing on purpose); it is started again on the next call"
                .to_owned(),
            true
        )]
    );
    assert_eq!(
        mcp.statuses()[0].state,
        ServerState::Failed(
            "exited with status 3: keel-test-mcp: crashing on purpose; it is started again on the next call"
                .into()
        )
    );
    assert!(gone(first).await);
    let second = pid_of(&tools, "t").await;
    assert_ne!(first, second);
    // Two failures in a row (no answer between them): the next restart waits a second.
    let calls = [("mcp__t__crash", "{}"), ("mcp__t__crash", "{}"), ("mcp__t__echo", r#"{"text": "x"}"#)];
    let results = run_calls(tools.clone(), &calls).await;
    assert!(results.iter().all(|r| r.1), "{results:?}");
    assert!(results[2].0.contains("is down (failed: exited with status 3"), "{results:?}");
    assert!(results[2].0.ends_with("keel starts it again in 1 s"), "{results:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        run_calls(tools, &[("mcp__t__echo", r#"{"text": "back"}"#)]).await,
        [("back".to_owned(), false)]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_name_already_taken_is_refused_with_a_warning() {
    let mcp = start(vec![("a.b", stdio(&[])), ("a_b", stdio(&[]))]);
    mcp.wait_for_startup().await;
    let (tools, refused) = mcp.registry(&ToolRegistry::new(), false);
    assert_eq!(tools.len(), 11);
    assert_eq!(refused.len(), 11);
    assert_eq!(
        refused[0],
        "MCP server `a_b`: its tool `echo` is not offered: a tool named `mcp__a_b__echo` is already registered; the new one was refused"
    );
    // Read-only mode offers only the tools the server marks read-only.
    let (read_only, _) = mcp.registry(&ToolRegistry::new(), true);
    assert_eq!(
        read_only.names().collect::<Vec<_>>(),
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
async fn dropping_the_manager_kills_the_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mcp = start(vec![("t", stdio(&["--pid-file", pid_file.to_str().unwrap()]))]);
    mcp.wait_for_startup().await;
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert!(alive(pid));
    drop(mcp);
    assert!(gone(pid).await, "the server outlived its manager");
}

/// A server that says its tools changed is listed again at the next turn boundary.
#[tokio::test(flavor = "multi_thread")]
async fn a_changed_tool_list_is_read_again_between_turns() {
    let mcp = start(vec![("t", stdio(&[]))]);
    mcp.wait_for_startup().await;
    let version = mcp.version();
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    assert!(tools.get("mcp__t__extra").is_none());
    assert_eq!(run_calls(tools, &[("mcp__t__grow", "{}")]).await, [("grown".to_owned(), false)]);
    // The notification arrives with the answer; the list is read when asked (between turns).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mcp.refresh().await {
        assert!(Instant::now() < deadline, "the change was never noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(mcp.version(), version);
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    assert_eq!(run_calls(tools, &[("mcp__t__extra", "{}")]).await, [("the extra tool".to_owned(), false)]);
}

/// An HTTP server that fails a call costs that call; the next call opens a new session.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_server_that_fails_a_call_is_reconnected() {
    let http = McpHttpServer::start().await;
    let mcp = start(vec![("web", ServerConfig::http(http.url()))]);
    mcp.wait_for_startup().await;
    let (tools, _) = mcp.registry(&ToolRegistry::new(), false);
    let results = run_calls(tools.clone(), &[("mcp__web__crash", "{}")]).await;
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].0.starts_with("the MCP server `web` stopped during the call (the request failed: "),
        "{results:?}"
    );
    assert!(matches!(mcp.statuses()[0].state, ServerState::Failed(_)));
    assert_eq!(
        run_calls(tools, &[("mcp__web__echo", r#"{"text": "again"}"#)]).await,
        [("again".to_owned(), false)]
    );
    let initializes = http.requests().iter().filter(|r| r.json()["method"] == "initialize").count();
    assert_eq!(initializes, 2);
}

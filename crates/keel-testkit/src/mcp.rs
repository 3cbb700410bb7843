//! A test MCP server, over stdio ([`serve_stdio`], run by a small example binary of the
//! crate under test, see [`example_binary`]) and over streamable HTTP in-process
//! ([`McpHttpServer`]). Written by hand, not with the SDK keel's client uses, so a
//! protocol mistake on one side is not mirrored on the other.
//!
//! Tools: `echo` (read-only), `sleep`, `crash` (the server exits mid-call), `image`, `resource`,
//! `structured`, `fail` (an error result), `env` (a variable of the server's environment,
//! read-only), `pid` (the server's process id, read-only), `grow` (stdio only: adds a
//! tool `extra` and tells the client its tools changed).
//!
//! Stdio flags: `--delay-start SECS` (answer `initialize` that late), `--fail-start`
//! (exit at once with a message on stderr), `--linger` (stay after stdin closes, as a
//! server that does not notice its client went away), `--pid-file PATH` (write the
//! process id there at start), `--marker TEXT` (ignored: names the process for `ps`),
//! `--bad-tool` (also list a tool `broken` whose schema is a string, not an object).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{MockResponse, MockServer};

/// A 1×1 red PNG (69 bytes).
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// What the server does with one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing (a notification or a response).
    Nothing,
    /// Answer with this JSON-RPC message, after `delay`.
    Reply(Value, Duration),
    /// Exit without answering.
    Crash,
    /// Add the tool `extra`, send `notifications/tools/list_changed`, then answer with
    /// this message (stdio only).
    Grow(Value),
}

/// Whether `grow` was called (stdio: one server per process).
static GROWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Whether the list has a tool with a broken definition (`--bad-tool`).
static BAD_TOOL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn tool(name: &str, description: &str, properties: Value, required: &[&str], read_only: bool) -> Value {
    let mut tool = json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    });
    if read_only {
        tool["annotations"] = json!({"readOnlyHint": true});
    }
    tool
}

/// The tools the server offers.
pub fn tools() -> Value {
    let mut tools = json!([
        tool("echo", "Returns its text.", json!({"text": {"type": "string"}}), &["text"], true),
        tool(
            "sleep",
            "Sleeps, then says so.",
            json!({"seconds": {"type": "number", "description": "How long."}}),
            &["seconds"],
            false
        ),
        tool("crash", "Makes the server exit mid-call.", json!({}), &[], false),
        tool("image", "Returns a picture.", json!({}), &[], true),
        tool("resource", "Returns an embedded resource and a link.", json!({}), &[], true),
        tool("structured", "Returns structured content.", json!({}), &[], true),
        tool("fail", "Returns an error result.", json!({}), &[], false),
        tool(
            "env",
            "A variable of the server's environment.",
            json!({"name": {"type": "string"}}),
            &["name"],
            true
        ),
        tool("pid", "The server's process id.", json!({}), &[], true),
        tool(
            "write",
            "Writes text to a file.",
            json!({"path": {"type": "string"}, "text": {"type": "string"}}),
            &["path", "text"],
            false
        ),
        tool("grow", "Adds a tool.", json!({}), &[], false),
    ]);
    if GROWN.load(std::sync::atomic::Ordering::Relaxed)
        && let Value::Array(list) = &mut tools
    {
        list.push(tool("extra", "A tool added later.", json!({}), &[], true));
    }
    if BAD_TOOL.load(std::sync::atomic::Ordering::Relaxed)
        && let Value::Array(list) = &mut tools
    {
        list.push(
            json!({"name": "broken", "description": "Its schema is not one.", "inputSchema": "a string"}),
        );
    }
    tools
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// The result of a `tools/call`, or the action it causes.
fn call(params: &Value) -> Result<(Value, Duration), Action> {
    let name = params["name"].as_str().unwrap_or_default();
    let args = &params["arguments"];
    let result = match name {
        "echo" => text(args["text"].as_str().unwrap_or_default()),
        "sleep" => {
            let seconds = args["seconds"].as_f64().unwrap_or(0.0).max(0.0);
            return Ok((text(format!("slept {seconds} s")), Duration::from_secs_f64(seconds)));
        }
        "crash" => return Err(Action::Crash),
        "grow" => return Err(Action::Grow(text("grown"))),
        "image" => json!({"content": [
            {"type": "text", "text": "a red dot"},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
        ]}),
        "resource" => json!({"content": [
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "the notes"}},
            {"type": "resource", "resource": {"uri": "file:///logo.png", "mimeType": "image/png", "blob": PNG_BASE64}},
            {"type": "resource_link", "uri": "file:///big.csv", "name": "big.csv", "mimeType": "text/csv"},
        ]}),
        "structured" => json!({"content": [], "structuredContent": {"temperature": 21.5, "unit": "celsius"}}),
        "fail" => json!({"content": [{"type": "text", "text": "it failed on purpose"}], "isError": true}),
        "env" => {
            let name = args["name"].as_str().unwrap_or_default();
            text(std::env::var(name).unwrap_or_else(|_| "(unset)".to_owned()))
        }
        "pid" => text(std::process::id().to_string()),
        "write" => {
            let path = args["path"].as_str().unwrap_or_default();
            match std::fs::write(path, args["text"].as_str().unwrap_or_default()) {
                Ok(()) => text(format!("wrote {path}")),
                Err(e) => {
                    json!({"content": [{"type": "text", "text": format!("cannot write {path}: {e}")}], "isError": true})
                }
            }
        }
        "extra" => text("the extra tool"),
        other => {
            json!({"content": [{"type": "text", "text": format!("unknown tool {other}")}], "isError": true})
        }
    };
    Ok((result, Duration::ZERO))
}

/// What the server does with `message`.
pub fn respond(message: &Value) -> Action {
    let Some(id) = message.get("id").cloned() else { return Action::Nothing };
    let Some(method) = message["method"].as_str() else { return Action::Nothing };
    let params = &message["params"];
    let ok =
        |result: Value, delay| Action::Reply(json!({"jsonrpc": "2.0", "id": id, "result": result}), delay);
    match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            let version = if VERSIONS.contains(&asked) { asked } else { "2025-06-18" };
            ok(
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "keel-test-mcp", "version": "1.0.0"},
                }),
                Duration::ZERO,
            )
        }
        "ping" => ok(json!({}), Duration::ZERO),
        "tools/list" => ok(json!({"tools": tools()}), Duration::ZERO),
        "tools/call" => match call(params) {
            Ok((result, delay)) => ok(result, delay),
            Err(Action::Grow(result)) => Action::Grow(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(action) => action,
        },
        _ => Action::Reply(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("no method {method}")}}),
            Duration::ZERO,
        ),
    }
}

/// The stdio server's settings, from its command line.
#[derive(Debug, Default)]
struct Flags {
    delay_start: Duration,
    fail_start: bool,
    linger: bool,
    pid_file: Option<PathBuf>,
}

fn flags(args: impl IntoIterator<Item = String>) -> Flags {
    let mut flags = Flags::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--delay-start" => {
                let secs = args.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
                flags.delay_start = Duration::from_secs_f64(secs);
            }
            "--fail-start" => flags.fail_start = true,
            "--linger" => flags.linger = true,
            "--pid-file" => flags.pid_file = args.next().map(PathBuf::from),
            "--bad-tool" => BAD_TOOL.store(true, std::sync::atomic::Ordering::Relaxed),
            _ => {}
        }
    }
    flags
}

/// Serves MCP on stdin/stdout until stdin ends; returns the exit code. Flags come from
/// the process's arguments (see the module docs).
pub fn serve_stdio() -> i32 {
    let flags = flags(std::env::args().skip(1));
    if let Some(path) = &flags.pid_file {
        let _ = std::fs::write(path, std::process::id().to_string());
    }
    if flags.fail_start {
        eprintln!("keel-test-mcp: failing at start on purpose");
        return 1;
    }
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let mut first = true;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            eprintln!("keel-test-mcp: not JSON: {line}");
            continue;
        };
        if first && message["method"] == "initialize" {
            std::thread::sleep(flags.delay_start);
            first = false;
        }
        let out = Arc::clone(&out);
        // Each request on its own thread: a sleeping call does not hold up the others.
        std::thread::spawn(move || match respond(&message) {
            Action::Nothing => {}
            Action::Crash => {
                eprintln!("keel-test-mcp: crashing on purpose");
                std::process::exit(3);
            }
            Action::Reply(reply, delay) => {
                std::thread::sleep(delay);
                let mut out = out.lock().unwrap();
                let _ = writeln!(out, "{reply}");
                let _ = out.flush();
            }
            Action::Grow(reply) => {
                GROWN.store(true, std::sync::atomic::Ordering::Relaxed);
                let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                let mut out = out.lock().unwrap();
                let _ = writeln!(out, "{changed}\n{reply}");
                let _ = out.flush();
            }
        });
    }
    if flags.linger {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    0
}

/// The test server over streamable HTTP, in this process (JSON responses, one session).
pub struct McpHttpServer {
    server: MockServer,
}

impl McpHttpServer {
    /// Starts a server on an ephemeral loopback port.
    pub async fn start() -> McpHttpServer {
        let server = MockServer::start().await;
        server.set_handler(|request| match request.method.as_str() {
            "POST" => match respond(&request.json()) {
                Action::Nothing => MockResponse::body(202, "application/json", Vec::new()),
                Action::Reply(reply, delay) => {
                    MockResponse::json(200, &reply).header("mcp-session-id", "test-session").delay(delay)
                }
                Action::Crash => MockResponse::json(500, &json!({"error": "crashed on purpose"})),
                Action::Grow(mut reply) => {
                    reply["result"] = json!({"content": [{"type": "text", "text": "grow works over stdio only"}], "isError": true});
                    MockResponse::json(200, &reply).header("mcp-session-id", "test-session")
                }
            },
            "DELETE" => MockResponse::body(200, "text/plain", Vec::new()),
            _ => MockResponse::body(405, "text/plain", b"no SSE stream here".to_vec()),
        });
        McpHttpServer { server }
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.server.addr())
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<crate::http::HttpRequest> {
        self.server.requests()
    }
}

/// The path of an example binary of the package under test (`target/<profile>/examples/
/// <name>`), brought up to date with cargo once per test process: a test run of one
/// target (`--test NAME`) does not build examples, and a stale one would test old code.
pub fn example_binary(package: &str, name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test> -> target/<profile>
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("a target folder").to_path_buf();
    let path = profile_dir.join("examples").join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let key = format!("{package}/{name}");
    if !built.contains(&key) {
        let target_dir = profile_dir.parent().expect("a target folder");
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo.args(["build", "--quiet", "-p", package, "--example", name, "--target-dir"]).arg(target_dir);
        // What cargo sets for a test process must not reach this build: build scripts
        // that watch it (ring watches CARGO_MANIFEST_DIR) would rebuild, and the next
        // `cargo test` would rebuild them back.
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy();
            let set_for_tests = var.starts_with("CARGO_PKG_")
                || var.starts_with("CARGO_BIN_EXE_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "OUT_DIR",
                ]
                .contains(&var.as_ref());
            if set_for_tests {
                cargo.env_remove(var.as_ref());
            }
        }
        let status = cargo.status();
        match status {
            Ok(status) => assert!(status.success(), "cannot build the example {name} of {package}"),
            Err(e) => assert!(path.exists(), "cannot run cargo to build the example {name}: {e}"),
        }
        built.push(key);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_answered_with_its_id_and_notifications_are_not() {
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}});
        assert_eq!(
            respond(&call),
            Action::Reply(
                json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hi"}]}}),
                Duration::ZERO
            )
        );
        assert_eq!(
            respond(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Action::Nothing
        );
        let crash = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "crash"}});
        assert_eq!(respond(&crash), Action::Crash);
    }
}

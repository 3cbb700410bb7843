//! `keel-bench codex [RUNS]`: keel and OpenAI's Codex CLI on the same scripted task, side
//! by side in one run (not in the default run: Codex is not installed with keel).
//!
//! Codex is found as `$CODEX_BIN` or `codex` on `PATH`. Install it with
//! `npm install @openai/codex` and point `CODEX_BIN` at the native binary the package
//! carries (`node_modules/@openai/codex-linux-x64/vendor/*/bin/codex`): the npm wrapper
//! stays running as a Node parent and adds 0.1–0.15 s.
//!
//! Both get the same workspace, environment (`PATH`, a throwaway `HOME`) and a
//! zero-latency mock server that plays the same six replies: Codex's over the Responses
//! API with its one command tool (`exec_command`; it offers no file tools to a model it
//! does not know), keel's over Chat Completions with its own tools. Codex runs with
//! `danger-full-access` (its sandbox adds ~0.8 s here) and keel with its default
//! sandbox, so the comparison, if anything, favours Codex. Codex is told not to reach
//! the network on its own (no analytics, update check or plugin sync).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_testkit::{MockResponse, MockServer, ResponsesStream};

use crate::measure::{fmt, mb, median, run_measured};
use crate::task::{self, keel_binary};
use crate::trajectory;

/// What one Codex run cost.
struct CodexRun {
    wall: Duration,
    first_request: Duration,
    cpu: Duration,
    peak_rss: u64,
    first_bytes: usize,
    ok: bool,
}

/// The commands Codex is given, one per step; the sixth reply is the answer.
const COMMANDS: [&str; 5] = [
    "ls -R",
    "cat README.md",
    "python3 hello.py",
    "cat > NOTES.md <<'EOF'\n# Notes\n\n- hello.py prints: hello from the demo\n- data/numbers.txt holds 1..20\nEOF",
    "cat NOTES.md",
];

/// The reply to a Responses request that already holds `step` tool results.
fn reply(step: usize) -> MockResponse {
    let stream = match COMMANDS.get(step) {
        Some(command) => {
            let arguments = serde_json::json!({"cmd": command, "yield_time_ms": 10000}).to_string();
            ResponsesStream::new().text(&format!("msg_{step}"), "Next step.", 2).function_call(
                &format!("fc_{step}"),
                &format!("call_{step}"),
                "exec_command",
                &arguments,
                4,
            )
        }
        None => ResponsesStream::new().text(
            "msg_answer",
            "I ran hello.py (it prints a greeting) and wrote NOTES.md with what I found.",
            6,
        ),
    };
    stream.completed(1200, 0, 40, 0).response()
}

/// How many tool results a Responses request body carries.
fn results_in(body: &[u8]) -> usize {
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    request["input"]
        .as_array()
        .map_or(0, |items| items.iter().filter(|item| item["type"] == "function_call_output").count())
}

/// The Codex binary: `$CODEX_BIN`, or `codex` on `PATH`.
fn codex_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CODEX_BIN") {
        return Some(PathBuf::from(path));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join("codex")).find(|p| p.is_file())
}

fn config(base_url: &str) -> String {
    format!(
        "model = \"mock\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\n\
         sandbox_mode = \"danger-full-access\"\ncheck_for_update_on_startup = false\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
         [model_providers.mock]\nname = \"Mock\"\nbase_url = \"{base_url}\"\nenv_key = \"MOCK_API_KEY\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
    )
}

fn one_codex(runtime: &tokio::runtime::Runtime, codex: &Path) -> CodexRun {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    trajectory::workspace(&ws);
    let server = runtime.block_on(MockServer::start());
    server.set_handler(|request| reply(results_in(&request.body)));
    let home = dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), config(&server.base_url())).unwrap();
    let mut command = Command::new(codex);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("CODEX_HOME", &home)
        .env("MOCK_API_KEY", "mock")
        .args(["exec", "--skip-git-repo-check", "-C"])
        .arg(&ws)
        .arg(trajectory::TASK)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let spawned = Instant::now();
    let usage = run_measured(command);
    let requests = server.requests();
    let notes = std::fs::read_to_string(ws.join("NOTES.md")).unwrap_or_default();
    CodexRun {
        wall: usage.wall,
        first_request: requests
            .first()
            .map_or(Duration::ZERO, |r| r.received_at.saturating_duration_since(spawned)),
        cpu: usage.cpu,
        peak_rss: usage.max_rss,
        first_bytes: requests.first().map_or(0, |r| r.body.len()),
        ok: usage.status == 0 && requests.len() == 6 && notes.contains("hello from the demo"),
    }
}

/// Runs keel and Codex alternately, `runs` times each after one warm-up, and prints
/// their medians side by side.
pub fn codex(runs: usize) {
    let Some(codex) = codex_binary().filter(|path| path.is_file()) else {
        println!(
            "\n[codex] skipped: no Codex CLI (set CODEX_BIN to its native binary, from `npm install @openai/codex`)"
        );
        return;
    };
    let keel = keel_binary();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let version = Command::new(&codex)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let _ = (task::one(&runtime, &keel), one_codex(&runtime, &codex));
    let mut keel_runs = Vec::new();
    let mut codex_runs = Vec::new();
    for _ in 0..runs {
        keel_runs.push(task::one(&runtime, &keel));
        codex_runs.push(one_codex(&runtime, &codex));
    }
    let keel_ok = keel_runs.iter().filter(|r| r.ok).count();
    let codex_ok = codex_runs.iter().filter(|r| r.ok).count();
    let k = |f: &dyn Fn(&task::Run) -> Duration| median(&mut keel_runs.iter().map(f).collect::<Vec<_>>());
    let c = |f: &dyn Fn(&CodexRun) -> Duration| median(&mut codex_runs.iter().map(f).collect::<Vec<_>>());
    let (keel_wall, codex_wall) = (k(&|r| r.wall), c(&|r| r.wall));
    println!(
        "\n[codex] keel and {version} on the scripted task, alternating ({runs} runs each; correct: keel {keel_ok}, codex {codex_ok})"
    );
    println!("                            keel          codex");
    println!("  wall time                 {:<13} {}", fmt(keel_wall), fmt(codex_wall));
    println!(
        "  spawn -> first request    {:<13} {}",
        fmt(k(&|r| r.first_request)),
        fmt(c(&|r| r.first_request))
    );
    println!("  CPU, process tree         {:<13} {}", fmt(k(&|r| r.cpu)), fmt(c(&|r| r.cpu)));
    let mut keel_own: Vec<u64> = keel_runs.iter().map(|r| r.own_rss).collect();
    let mut keel_tree: Vec<u64> = keel_runs.iter().map(|r| r.peak_rss).collect();
    let mut codex_rss: Vec<u64> = codex_runs.iter().map(|r| r.peak_rss).collect();
    println!(
        "  peak RSS, largest process {:<13} {}  (keel itself: {})",
        mb(median(&mut keel_tree)),
        mb(median(&mut codex_rss)),
        mb(median(&mut keel_own))
    );
    let keel_bytes = format!("{} B", keel_runs.last().map_or(0, |r| r.first_bytes));
    let codex_bytes = codex_runs.last().map_or(0, |r| r.first_bytes);
    println!("  first request             {keel_bytes:<13} {codex_bytes} B");
    println!(
        "  keel's wall time is {:.2}x Codex's",
        keel_wall.as_secs_f64() / codex_wall.as_secs_f64().max(f64::EPSILON)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_is_the_number_of_tool_results_in_the_input() {
        let body = serde_json::json!({"input": [
            {"type": "message", "role": "user", "content": "task"},
            {"type": "function_call", "call_id": "call_0", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_0", "output": "README.md"},
            {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "# Demo"},
        ]});
        assert_eq!(results_in(body.to_string().as_bytes()), 2);
        assert_eq!(results_in(b"not json"), 0);
    }
}

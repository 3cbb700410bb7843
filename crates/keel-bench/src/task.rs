//! Section 1: the `keel` binary on the scripted task against a zero-latency mock server.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_session::{EventKind, JsonlStore, SessionStore};
use keel_testkit::MockServer;

use crate::measure::{fmt, mb, median, run_measured};
use crate::trajectory;

/// One run of the task by keel.
pub(crate) struct Run {
    pub(crate) wall: Duration,
    pub(crate) first_request: Duration,
    pub(crate) gaps: Vec<Duration>,
    pub(crate) harness_gaps: Vec<Duration>,
    pub(crate) tools: Duration,
    pub(crate) peak_rss: u64,
    pub(crate) cpu: Duration,
    pub(crate) own_cpu: Duration,
    pub(crate) own_rss: u64,
    pub(crate) first_bytes: usize,
    pub(crate) system_bytes: usize,
    pub(crate) tools_bytes: usize,
    pub(crate) all_bytes: usize,
    pub(crate) ok: bool,
}

/// The keel binary: `$KEEL_BIN`, or `target/release/keel` next to this benchmark.
pub fn keel_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KEEL_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("keel")
}

/// One run of the task by `keel`, measured.
pub(crate) fn one(runtime: &tokio::runtime::Runtime, keel: &Path) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    trajectory::workspace(&ws);
    let server = runtime.block_on(MockServer::start());
    server.set_handler(|request| trajectory::response(trajectory::step_of(&request.body)));
    let command = task_command(Command::new(keel), dir.path(), &ws, &server.base_url());
    let spawned = Instant::now();
    let usage = run_measured(command);
    let requests = server.requests();
    let store = JsonlStore::new(dir.path().join("home/sessions"));
    let id = store.list().unwrap().first().map(|s| s.id.clone()).unwrap_or_default();
    let events = store.read(&id).unwrap_or_default();
    // Tool time per step, from the session log.
    let mut tool_ms = vec![0u64; requests.len()];
    let mut step = 0usize;
    for event in &events {
        match &event.kind {
            EventKind::StepStart(s) => step = s.step as usize - 1,
            EventKind::ToolResult(r) => {
                if let Some(slot) = tool_ms.get_mut(step) {
                    *slot += r.duration_ms.unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    let mut gaps = Vec::new();
    let mut harness_gaps = Vec::new();
    for i in 0..requests.len().saturating_sub(1) {
        if let Some(done) = requests[i].responded_at {
            let gap = requests[i + 1].received_at.saturating_duration_since(done);
            gaps.push(gap);
            harness_gaps.push(gap.saturating_sub(Duration::from_millis(tool_ms[i])));
        }
    }
    let first = requests.first().map(|r| r.json()).unwrap_or_default();
    let system_bytes = first["messages"][0]["content"].as_str().map_or(0, str::len);
    let tools_bytes = first.get("tools").map_or(0, |t| t.to_string().len());
    let stats: serde_json::Value = std::fs::read_to_string(dir.path().join("stats.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let own_cpu = Duration::from_nanos(stats["cpu_ns"].as_u64().unwrap_or(0));
    let own_rss = stats["peak_rss_kb"].as_u64().unwrap_or(0) * 1024;
    let ok = usage.status == 0 && requests.len() == 6 && ws.join("NOTES.md").exists();
    Run {
        wall: usage.wall,
        first_request: requests
            .first()
            .map_or(Duration::ZERO, |r| r.received_at.saturating_duration_since(spawned)),
        gaps,
        harness_gaps,
        tools: Duration::from_millis(tool_ms.iter().sum()),
        peak_rss: usage.max_rss,
        cpu: usage.cpu,
        own_cpu,
        own_rss,
        first_bytes: requests.first().map_or(0, |r| r.body.len()),
        system_bytes,
        tools_bytes,
        all_bytes: requests.iter().map(|r| r.body.len()).sum(),
        ok,
    }
}

/// `command` (keel, or a profiler with keel as its program) completed with the task's
/// environment and arguments: a clean environment with its homes under `dir`, the
/// workspace `ws`, the mock server at `base_url`.
pub fn task_command(mut command: Command, dir: &Path, ws: &Path, base_url: &str) -> Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("KEEL_HOME", dir.join("home"))
        .env("KEEL_CONFIG_DIR", dir.join("config"))
        .env("KEEL_STATS_FILE", dir.join("stats.json"))
        .args(["--base-url", base_url, "--model", "mock", "-C"])
        .arg(ws)
        .arg(trajectory::TASK)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Runs the task `runs` times and prints medians.
pub fn task(runs: usize) {
    let keel = keel_binary();
    if !keel.exists() {
        println!(
            "\n[task] skipped: {} not found (cargo build --release -p keel-cli, or set KEEL_BIN)",
            keel.display()
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    // One warm-up run (page cache, python's .pyc).
    let _ = one(&runtime, &keel);
    let results: Vec<Run> = (0..runs).map(|_| one(&runtime, &keel)).collect();
    let ok = results.iter().filter(|r| r.ok).count();
    let pick = |f: &dyn Fn(&Run) -> Duration| median(&mut results.iter().map(f).collect::<Vec<_>>());
    let mut all_gaps: Vec<Duration> = results.iter().flat_map(|r| r.gaps.clone()).collect();
    let mut harness_gaps: Vec<Duration> = results.iter().flat_map(|r| r.harness_gaps.clone()).collect();
    let mut rss: Vec<u64> = results.iter().map(|r| r.peak_rss).collect();
    rss.sort();
    let last = &results[results.len() - 1];
    println!(
        "\n[task] keel binary, 6-request scripted task, zero-latency mock server ({runs} runs, {ok} correct)"
    );
    println!("  wall time                 {}", fmt(pick(&|r| r.wall)));
    println!("  tools' own time           {}", fmt(pick(&|r| r.tools)));
    println!("  spawn -> first request    {}", fmt(pick(&|r| r.first_request)));
    println!(
        "  gap between requests      {}  (minus the tools' own time: {})",
        fmt(median(&mut all_gaps)),
        fmt(median(&mut harness_gaps))
    );
    let mut own_rss: Vec<u64> = results.iter().map(|r| r.own_rss).collect();
    println!(
        "  peak RSS                  {}  (keel itself: {})",
        mb(rss[rss.len() / 2]),
        mb(median(&mut own_rss))
    );
    println!(
        "  CPU (user+sys)            {}  (keel itself: {}; the rest is bash, python3, cat)",
        fmt(pick(&|r| r.cpu)),
        fmt(pick(&|r| r.own_cpu))
    );
    println!(
        "  first request             {} bytes (system prompt {}, tool schemas {})",
        last.first_bytes, last.system_bytes, last.tools_bytes
    );
    println!("  all six requests          {} bytes", last.all_bytes);
}

/// Serves the scripted task on a mock server until killed, answering after
/// `latency_ms` (for the many-sessions section and for profiling keel by hand).
pub fn serve(latency_ms: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let server = MockServer::start().await;
        server.stop_recording();
        let latency = Duration::from_millis(latency_ms);
        server.set_handler(move |request| {
            trajectory::response(trajectory::step_of(&request.body)).delay(latency)
        });
        println!("{}", server.base_url());
        std::future::pending::<()>().await;
    });
}

//! Section `http` (not in the default run): many sessions over HTTP against `keel serve`'s
//! server (keel-server, in a child process, 2 worker threads), the scripted six-step task,
//! the mock model (zero latency, a third process). Each client creates a session, opens
//! its event stream, sends the task and reads until `turn/end`. Prints step latency as
//! the client sees it (`step/start` to `step/end` on the stream), logged events per
//! second, the server's peak RSS and errors, for the JSONL store and, with
//! `KEEL_TEST_DATABASE_URL` set, PostgreSQL.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use keel_agent::{Agent, AgentConfig, SessionContext};
use keel_llm::{HttpClient, ProviderConfig};
use keel_server::{AgentFactory, PrepareError, Prepared, Server, ServerConfig, SessionSpec};
use keel_session::{JsonlStore, SessionStore};
use keel_tools::{AskFn, ToolsConfig, builtin};

use crate::many::InProcessShell;
use crate::measure::{fmt, mb, status_bytes};
use crate::trajectory;

const TOKEN: &str = "bench-token-0123456789abcdef";
/// How soon the bench's server forgets idle sessions.
const IDLE_CLOSE: Duration = Duration::from_secs(2);

struct Factory {
    agent_model: Arc<HttpClient>,
}

impl AgentFactory for Factory {
    fn prepare<'a>(
        &'a self,
        spec: &'a SessionSpec,
        _id: &'a str,
        _new: bool,
        _ask: AskFn,
    ) -> BoxFuture<'a, Result<Prepared, PrepareError>> {
        Box::pin(async move {
            // The stand-in shell first: a registry keeps the first tool of a name.
            let all = builtin(Arc::new(ToolsConfig::default()));
            let mut tools = keel_agent::ToolRegistry::new();
            tools.register(InProcessShell);
            for name in all.names().filter(|n| *n != "shell") {
                if let Some(tool) = all.get(name) {
                    tools.register_dyn(Arc::clone(tool));
                }
            }
            let agent = Agent::builder_shared(self.agent_model.clone())
                .config(AgentConfig { max_steps: 10, ..AgentConfig::default() })
                .tools(tools)
                .build();
            Ok(Prepared { agent, ctx: SessionContext::new(&spec.folder) })
        })
    }
}

/// Child: serves on a free port (printed), sessions in `store` (a folder or a URL).
pub fn child(model_url: &str, store: &str, root: &str) {
    // As `keel serve` does: the soft limit raised to the hard one.
    let _ = keel_server::ops::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let store: Arc<dyn SessionStore> = if store.starts_with("postgres") {
        Arc::new(keel_store_postgres::PgStore::connect(store).unwrap())
    } else {
        Arc::new(JsonlStore::new(store).detached_sync(true))
    };
    let mut config = ProviderConfig::new(model_url, "mock");
    config.life.max_retries = 0;
    let factory = Arc::new(Factory { agent_model: Arc::new(HttpClient::new(config).unwrap()) });
    // `keel serve`'s defaults (turns at once: 128 per core), but sessions are forgotten
    // after 2 s idle, to see memory come back.
    let mut server_config = ServerConfig::new(TOKEN, vec![root.into()]);
    server_config.idle_close = IDLE_CLOSE;
    runtime.block_on(async move {
        let server = Server::new(server_config, store, factory).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("http://{}/v1", listener.local_addr().unwrap());
        server.serve(listener, std::future::pending()).await.unwrap();
    });
}

/// Milliseconds of the day of an event's `time` (`…THH:MM:SS.mmmZ`).
fn ms_of_day(time: &str) -> Option<i64> {
    let t = time.get(11..23)?;
    let h: i64 = t.get(0..2)?.parse().ok()?;
    let m: i64 = t.get(3..5)?.parse().ok()?;
    let s: i64 = t.get(6..8)?.parse().ok()?;
    let ms: i64 = t.get(9..12)?.parse().ok()?;
    Some(((h * 60 + m) * 60 + s) * 1000 + ms)
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    /// Each step, `step/start` to `step/end` by the events' times (ms resolution).
    steps: Vec<Duration>,
    /// Sending the message to seeing `turn/end`.
    turn: Option<Duration>,
    /// Sending the message to seeing its `turn/start` on the stream.
    first: Option<Duration>,
    logged: u64,
    ok: bool,
}

/// One client's session.
async fn client(http: reqwest::Client, base: String, folder: String) -> Seen {
    let mut seen = Seen::default();
    let post = |path: String, body: serde_json::Value| {
        http.post(format!("{base}{path}")).bearer_auth(TOKEN).body(body.to_string()).send()
    };
    let Ok(created) = post("/sessions".into(), serde_json::json!({"folder": folder})).await else {
        return seen;
    };
    let value: serde_json::Value =
        serde_json::from_str(&created.text().await.unwrap_or_default()).unwrap_or_default();
    let Some(id) = value["id"].as_str().map(str::to_owned) else { return seen };
    let Ok(events) = http.get(format!("{base}/sessions/{id}/events")).bearer_auth(TOKEN).send().await else {
        return seen;
    };
    let sent_at = Instant::now();
    let sent = post(format!("/sessions/{id}/messages"), serde_json::json!({"text": trajectory::TASK})).await;
    if !sent.is_ok_and(|r| r.status().as_u16() == 202) {
        return seen;
    }
    let mut body = events.bytes_stream();
    let (mut text, mut step_started) = (String::new(), None);
    loop {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(120), body.next()).await else {
            return seen;
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else { continue };
            let value = serde_json::from_str::<serde_json::Value>(data).unwrap_or_default();
            if block.lines().any(|l| l.starts_with("id:")) {
                seen.logged += 1;
            }
            let time = value["time"].as_str().and_then(ms_of_day);
            match value["type"].as_str() {
                Some("turn/start") => seen.first = Some(sent_at.elapsed()),
                Some("step/start") => step_started = time,
                Some("step/end") => {
                    if let (Some(start), Some(end)) = (step_started.take(), time) {
                        seen.steps.push(Duration::from_millis((end - start).max(0) as u64));
                    }
                }
                Some("turn/end") => {
                    seen.turn = Some(sent_at.elapsed());
                    seen.ok = data.contains(r#""reason":"completed""#);
                    return seen;
                }
                _ => {}
            }
        }
    }
}

fn run(n: usize, store: &str, model_url: &str, label: &str) {
    let exe = std::env::current_exe().unwrap();
    let root = tempfile::tempdir().unwrap();
    for i in 0..n {
        trajectory::workspace(&root.path().join(format!("ws{i}")));
    }
    let mut server = Command::new(&exe)
        .args(["http-child", model_url, store, &root.path().display().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    if let Some(stdout) = server.stdout.as_mut() {
        use std::io::BufRead;
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let base = line.trim().to_owned();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    let results = runtime.block_on(async {
        let http = reqwest::Client::builder()
            .tls_certs_only(Vec::new())
            .pool_max_idle_per_host(2048)
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let folder = root.path().join(format!("ws{i}")).display().to_string();
                tokio::spawn(client(http.clone(), base.clone(), folder))
            })
            .collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.unwrap_or_default());
        }
        out
    });
    let wall = started.elapsed();
    let rss = status_bytes(&server.id().to_string(), "VmHWM:");
    let cpu = cpu_of(server.id());
    // The clients are gone: once the idle sessions are forgotten, what memory came back.
    std::thread::sleep(IDLE_CLOSE * 3);
    let ready = runtime.block_on(async {
        let url = format!("{}/metrics", base.trim_end_matches("/v1"));
        let text = reqwest::get(url).await.ok()?.text().await.ok()?;
        text.lines().find_map(|l| l.strip_prefix("keel_sessions_ready ").map(str::to_owned))
    });
    let rss_after = status_bytes(&server.id().to_string(), "VmRSS:");
    let _ = server.kill();
    let _ = server.wait();
    let mut steps: Vec<Duration> = results.iter().flat_map(|r| r.steps.iter().copied()).collect();
    let mut turns: Vec<Duration> = results.iter().filter_map(|r| r.turn).collect();
    let mut firsts: Vec<Duration> = results.iter().filter_map(|r| r.first).collect();
    let pct = |values: &mut Vec<Duration>, p: f64| {
        values.sort();
        values.get(((values.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
    };
    let events: u64 = results.iter().map(|r| r.logged).sum();
    let cpu_per_step = cpu.map(|cpu| cpu / steps.len().max(1) as u32);
    let errors = results.iter().filter(|r| !r.ok).count();
    println!(
        "  {label}: {n} sessions in {} | message → turn/start on the stream p50 {} | step p50 {} p99 {} ({} steps) | turn p50 {} p99 {} | {:.0} events/s | server peak RSS {} (after sessions closed {}, {} left) | server CPU per step {} | errors {errors}",
        fmt(wall),
        fmt(pct(&mut firsts, 0.5)),
        fmt(pct(&mut steps, 0.5)),
        fmt(pct(&mut steps, 0.99)),
        steps.len(),
        fmt(pct(&mut turns, 0.5)),
        fmt(pct(&mut turns, 0.99)),
        events as f64 / wall.as_secs_f64(),
        mb(rss),
        mb(rss_after),
        ready.unwrap_or_else(|| "?".to_owned()),
        cpu_per_step.map_or("?".to_owned(), fmt),
    );
}

/// The CPU time (user + system) process `pid` has used, from `/proc/<pid>/stat`.
fn cpu_of(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are the
    // 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    Some(Duration::from_millis(ticks * 1000 / hz.max(1)))
}

/// Prints the figures: `n` sessions on JSONL, `n_pg` on PostgreSQL (when configured).
pub fn http(n: usize, n_pg: usize) {
    let exe = std::env::current_exe().unwrap();
    // The clients hold two connections per session.
    let _ = keel_server::ops::raise_open_files_limit();
    let latency_ms: u64 = std::env::var("KEEL_BENCH_MODEL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut mock =
        Command::new(&exe).args(["serve", &latency_ms.to_string()]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    if let Some(stdout) = mock.stdout.as_mut() {
        use std::io::BufRead;
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let model_url = line.trim().to_owned();
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    println!(
        "\n[http] sessions over HTTP: keel-server (2 worker threads, default settings, open files {:?} after raising) + clients + mock at {latency_ms} ms (KEEL_BENCH_MODEL_MS), 3 processes",
        nofile.current
    );
    let dir = tempfile::tempdir().unwrap();
    run(n, &dir.path().join("sessions").display().to_string(), &model_url, "JSONL     ");
    match std::env::var("KEEL_TEST_DATABASE_URL") {
        Ok(url) => run(n_pg, &url, &model_url, "PostgreSQL"),
        Err(_) => println!("  PostgreSQL: skipped (KEEL_TEST_DATABASE_URL is not set)"),
    }
    let _ = mock.kill();
    let _ = mock.wait();
}

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Running the real `keel` binary against the mock server in an isolated home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use keel_session::{Event, JsonlStore, SessionStore};

/// An isolated environment: its own KEEL_HOME, config folder and workspace.
pub struct Env {
    pub root: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        let env = Env { root: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(env.workspace()).unwrap();
        std::fs::create_dir_all(env.root.path().join("config")).unwrap();
        std::fs::write(env.workspace().join("README.md"), "# Demo\nA tiny project.\n").unwrap();
        std::fs::write(env.workspace().join("hello.py"), "print('hello from keel')\n").unwrap();
        env
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    pub fn store(&self) -> JsonlStore {
        JsonlStore::new(self.home().join("sessions"))
    }

    /// The only session's events.
    pub fn session_events(&self) -> Vec<Event> {
        let sessions = self.store().list().unwrap();
        assert_eq!(sessions.len(), 1, "expected one session");
        self.store().read(&sessions[0].id).unwrap()
    }

    /// `keel` with a clean environment pointing at `base_url`.
    pub fn keel(&self, base_url: &str) -> Command {
        let mut command = self.keel_unconfigured();
        command.env("KEEL_BASE_URL", base_url).env("KEEL_MODEL", "mock-model");
        command
    }

    /// `keel` with no model configured at all.
    pub fn keel_unconfigured(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("KEEL_HOME", self.home())
            .env("KEEL_CONFIG_DIR", self.root.path().join("config"))
            .current_dir(self.workspace())
            .stdin(Stdio::null());
        command
    }
}

/// Runs a command off the async runtime (the mock server lives on it).
pub async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `path` exists.
pub async fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Live processes (not zombies) with `arg` as one of their arguments, by host PID: a
/// command's own `$$` is a namespace PID when keel runs it in a PID namespace.
pub fn processes_with_arg(arg: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) == Some("Z");
        if !zombie && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Waits until no live process has `arg` among its arguments; false after `seconds`.
pub async fn gone(arg: &str, seconds: u64) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(seconds) {
        if processes_with_arg(arg).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Whether this machine lets keel give commands a PID namespace (root, or a container
/// that allows it), probed the way keel probes it.
pub fn pid_namespaces() -> bool {
    std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "--mount-proc", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The reply to keel's reading of a task's intent (issue 29) over Chat Completions, when
/// `body` is that request (its one tool is `classify`): the task wants `wants`.
#[allow(dead_code)]
pub fn intent_reply(body: &serde_json::Value, wants: &str) -> Option<keel_testkit::MockResponse> {
    let tools = body["tools"].as_array()?;
    let only_classify = tools.len() == 1 && tools[0]["function"]["name"] == "classify";
    only_classify.then(|| {
        let args = keel_testkit::intent_arguments(wants, false, false);
        keel_testkit::ChatStream::new()
            .tool_call("intent", "classify", &args, 1)
            .finish("tool_calls")
            .response()
    })
}

/// Spawns `keel serve` from `command` (its stderr read here) and waits until it prints its
/// address: the child, `host:port`, and its later stderr lines.
/// The caller waits for the child.
#[allow(clippy::zombie_processes)]
pub fn spawn_serve(mut command: Command) -> (std::process::Child, String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    command.stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    loop {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("keel serve printed its address");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let address = rest.split('/').next().unwrap().trim().to_owned();
            return (child, address, lines);
        }
    }
}

/// The `--json` events a run printed, those of type `kind` (a prefix: `subagent/` takes
/// all of them).
pub fn json_events(stdout: &[u8], kind: &str) -> Vec<serde_json::Value> {
    text(stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["type"].as_str().is_some_and(|t| t.starts_with(kind)))
        .collect()
}

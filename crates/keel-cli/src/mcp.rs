//! MCP servers in the CLI: started with the session, waited for before the first request,
//! their tools added to the session's between turns, reported by `keel mcp list` and
//! `/mcp`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use keel_agent::{SessionContext, ToolRegistry};
use keel_mcp::{McpManager, McpOptions, ServerConfig, ServerState, ServerStatus};
use serde_json::json;

use crate::cli::Cli;
use crate::config::{self, ConfigError};
use crate::exit;
use crate::render::format::clip;

/// A runtime for MCP connections on a thread of its own, living as long as keel: the
/// interactive prompt blocks keel's runtime thread between turns, and the servers' start
/// (and their pings) must go on meanwhile. The launcher's parent-death signal follows the
/// thread that started a server, so that thread must not end before keel.
fn runtime() -> Result<tokio::runtime::Handle, ConfigError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Handle, String>> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("keel-mcp".into()).spawn(move || {
            match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => {
                    let _ = sender.send(Ok(runtime.handle().clone()));
                    runtime.block_on(std::future::pending::<()>());
                }
                Err(e) => {
                    let _ = sender.send(Err(e.to_string()));
                }
            }
        });
        match spawned {
            Ok(_) => receiver.recv().unwrap_or_else(|e| Err(e.to_string())),
            Err(e) => Err(e.to_string()),
        }
    });
    runtime.clone().map_err(|e| ConfigError::new(format!("cannot start the MCP runtime: {e}")))
}

/// Starts the servers `settings` configure (none: `None`). Stdio servers are started
/// through this binary's launcher (`keel __exec --stdio`), so they die with keel even on
/// `kill -9`, in a PID namespace of their own where the system allows it (a process they
/// start with `setsid` dies with them), and a sandboxed one cannot read keel's files.
pub async fn start(settings: &crate::config::Settings) -> Result<Option<McpManager>, ConfigError> {
    start_servers(&settings.mcp_servers, settings.pid_namespace, settings.sandbox.hidden.clone()).await
}

async fn start_servers(
    servers: &BTreeMap<String, ServerConfig>,
    pid_namespace: bool,
    hidden: Vec<std::path::PathBuf>,
) -> Result<Option<McpManager>, ConfigError> {
    if servers.is_empty() {
        return Ok(None);
    }
    let pid_namespace = pid_namespace && keel_sandbox::launch::pid_namespace_available().await;
    let options = McpOptions {
        launcher: std::env::current_exe().ok(),
        pid_namespace,
        hidden,
        runtime: Some(runtime()?),
        ..McpOptions::default()
    };
    let manager = McpManager::start(servers.iter().map(|(n, c)| (n.clone(), c.clone())), options)
        .map_err(|e| ConfigError::new(e.to_string()))?;
    Ok(Some(manager))
}

/// The session's view of the MCP servers: which tools it offers, what was said.
pub struct SessionTools {
    manager: McpManager,
    read_only: bool,
    waited: bool,
    /// The manager's version when the session's tools were last built.
    built: Option<u64>,
    /// Servers whose state was reported.
    reported: BTreeSet<(String, String)>,
    /// Refusals already reported, in order.
    refused: Vec<String>,
}

impl SessionTools {
    /// Tools of `manager` for a session; `read_only` offers only the read-only ones.
    pub fn new(manager: McpManager, read_only: bool) -> SessionTools {
        SessionTools {
            manager,
            read_only,
            waited: false,
            built: None,
            reported: BTreeSet::new(),
            refused: Vec::new(),
        }
    }

    /// The servers.
    pub fn manager(&self) -> &McpManager {
        &self.manager
    }

    /// Before a turn: the first time, waits for the servers still starting (each at most
    /// its startup timeout) and fails if a required one is not ready; then gives `ctx`
    /// `base` plus the tools of every ready server if they changed. Returns lines for the
    /// user (servers that became ready or failed, tools refused).
    pub async fn before_turn(
        &mut self,
        base: &ToolRegistry,
        ctx: &mut SessionContext,
    ) -> Result<Vec<String>, keel_mcp::McpError> {
        if !self.waited {
            self.manager.wait_for_startup().await;
            self.waited = true;
            self.manager.check_required()?;
        }
        self.manager.refresh().await;
        let mut notes = Vec::new();
        for status in self.manager.statuses() {
            let key = (status.name.clone(), state_word(&status.state).to_owned());
            if matches!(status.state, ServerState::Starting { late: false }) || !self.reported.insert(key) {
                continue;
            }
            notes.push(format!("mcp: {}", summary(&status)));
        }
        let version = self.manager.version();
        if self.built != Some(version) {
            let (tools, refused) = self.manager.registry(base, self.read_only);
            ctx.tools = Some(tools);
            self.built = Some(version);
            for line in refused {
                if !self.refused.contains(&line) {
                    notes.push(format!("mcp: {line}"));
                    self.refused.push(line);
                }
            }
        }
        Ok(notes)
    }

    /// The tools refused so far because their name was taken, one line each.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Stops every server (SIGTERM, then SIGKILL).
    pub async fn shutdown(&self) {
        self.manager.shutdown().await;
    }
}

fn state_word(state: &ServerState) -> &'static str {
    match state {
        ServerState::Starting { .. } => "starting",
        ServerState::Ready => "ready",
        ServerState::Failed(_) => "failed",
    }
}

/// One line for a server: `docs ready (3 tools)`, `docs failed: why`.
pub fn summary(status: &ServerStatus) -> String {
    match &status.state {
        ServerState::Ready => {
            let n = status.tools.len();
            format!("{} ready ({n} tool{})", status.name, if n == 1 { "" } else { "s" })
        }
        other => format!("{} {other}", status.name),
    }
}

/// The table of `keel mcp list` and `/mcp`: each server, its transport and state, and
/// its tools (the names the model calls, read-only ones marked).
pub fn table(statuses: &[ServerStatus]) -> String {
    if statuses.is_empty() {
        return format!(
            "no MCP servers configured; add [mcp_servers.NAME] to {} or pass --mcp-config FILE",
            crate::paths::config_file().display()
        );
    }
    let mut lines = Vec::new();
    for status in statuses {
        lines.push(format!("{} · {}", status.name, clip(&status.transport, 100)));
        match &status.state {
            ServerState::Ready => {
                let n = status.tools.len();
                lines.push(format!("  ready · {n} tool{}", if n == 1 { "" } else { "s" }));
            }
            other => lines.push(format!("  {other}")),
        }
        let width = status.tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
        for tool in &status.tools {
            let first_line = tool.description.lines().next().unwrap_or_default();
            let mark = if tool.read_only { " (read-only)" } else { "" };
            lines.push(format!("    {:width$}  {}{mark}", tool.name, clip(first_line, 70)));
        }
        for why in &status.skipped {
            lines.push(format!("    not offered: {}", clip(why, 100)));
        }
    }
    lines.join("\n")
}

/// The servers' states as JSON (the `keel/mcp` line of JSON mode).
pub fn json(statuses: &[ServerStatus], refused: &[String]) -> serde_json::Value {
    let servers: Vec<serde_json::Value> = statuses
        .iter()
        .map(|s| {
            let mut server = json!({
                "name": s.name,
                "state": state_word(&s.state),
                "error": match &s.state { ServerState::Failed(why) => Some(why.as_str()), _ => None },
                "tools": s.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            });
            if !s.skipped.is_empty() {
                server["skipped"] = json!(s.skipped);
            }
            server
        })
        .collect();
    json!({"type": "keel/mcp", "data": {"servers": servers, "refused": refused}})
}

/// `keel mcp list`: starts every configured server, waits for each (at most its startup
/// timeout), prints the table, stops them.
pub async fn list_command(cli: &Cli) -> anyhow::Result<u8> {
    let servers = match config::mcp_servers(cli) {
        Ok(servers) => servers,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let hidden = vec![crate::paths::keel_home(), crate::paths::config_dir()];
    let manager = match start_servers(&servers, true, hidden).await {
        Ok(Some(manager)) => manager,
        Ok(None) => {
            outln!("{}", table(&[]));
            return Ok(exit::OK);
        }
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    manager.wait_for_startup().await;
    let statuses = manager.statuses();
    outln!("{}", table(&statuses));
    manager.shutdown().await;
    let failed = statuses.iter().any(|s| !matches!(s.state, ServerState::Ready));
    Ok(if failed { exit::ERROR } else { exit::OK })
}

//! Every configured server of a session: started together, waited for with each one's
//! startup timeout, reported, and stopped with the manager.

use std::sync::Arc;
use std::time::Duration;

use keel_agent::{DynTool, ToolRegistry};
use tokio::time::Instant;

use crate::config::ServerConfig;
use crate::error::{McpError, McpErrorKind};
use crate::options::McpOptions;
use crate::server::{Server, ServerState};
use crate::tool::dyn_tool;

/// A tool of a server, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolStatus {
    /// The name the model calls it by (`mcp__<server>__<tool>`).
    pub name: String,
    /// The server's own name for it.
    pub remote: String,
    /// The server marks it read-only.
    pub read_only: bool,
    /// Its description.
    pub description: String,
}

/// A server, as reported by [`McpManager::statuses`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name in the configuration.
    pub name: String,
    /// `stdio: <command line>` or `http: <url>`.
    pub transport: String,
    /// Starting, ready or failed (and why).
    pub state: ServerState,
    /// Why it failed, with the kind ([`McpErrorKind::Spawn`], [`McpErrorKind::Variable`],
    /// …) and the error underneath, while `state` is `Failed`.
    pub error: Option<McpError>,
    /// Its tools (those the configuration lets through), once it has listed them.
    pub tools: Vec<ToolStatus>,
    /// Tools it listed that are not offered, each with why (too many, a schema too large).
    pub skipped: Vec<String>,
}

/// The MCP servers of a session. Servers start concurrently as soon as the manager is
/// created; their tools are offered once they are ready. Dropping the manager kills every
/// server process at once; [`McpManager::shutdown`] gives them a moment to stop first.
///
/// ```
/// use keel_agent::{Agent, NullSink, SessionContext, ToolRegistry};
/// use keel_llm::CancellationToken;
/// use keel_mcp::{McpManager, McpOptions, ServerConfig};
/// use keel_testkit::{ScriptedModel, mcp::McpHttpServer, reply};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let server = McpHttpServer::start().await; // any MCP server: ServerConfig::stdio("npx", [...]) too
/// let mcp = McpManager::start([("test".to_owned(), ServerConfig::http(server.url()))], McpOptions::default())?;
/// mcp.wait_for_startup().await; // each server at most its startup timeout
/// let (tools, _refused) = mcp.registry(&ToolRegistry::new(), false);
///
/// let model = ScriptedModel::new([reply().call("mcp__test__echo", r#"{"text": "hi"}"#), reply().text("done")]);
/// let agent = Agent::builder(model).tools(tools).build();
/// let mut session = keel_agent::Session::in_memory(".");
/// let outcome = agent
///     .run_turn(&mut session, &SessionContext::new("."), "echo hi", &NullSink, &CancellationToken::new())
///     .await
///     .unwrap();
/// assert_eq!(outcome.tool_calls, 1);
/// mcp.shutdown().await;
/// # Ok::<(), keel_mcp::McpError>(()) }).unwrap();
/// ```
pub struct McpManager {
    servers: Vec<Arc<Server>>,
    started: Instant,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.servers.iter().map(|s| &s.name)).finish()
    }
}

impl McpManager {
    /// Checks every server's settings, then starts the enabled ones, each in its own
    /// task on [`McpOptions::runtime`] (else the current runtime); returns at once.
    pub fn start(
        servers: impl IntoIterator<Item = (String, ServerConfig)>,
        mut options: McpOptions,
    ) -> Result<McpManager, McpError> {
        let runtime = match options.runtime.take() {
            Some(runtime) => runtime,
            None => tokio::runtime::Handle::try_current().map_err(|e| {
                McpError::new(McpErrorKind::Start, "*", format!("MCP servers need a tokio runtime ({e})"))
            })?,
        };
        options.runtime = Some(runtime.clone());
        let options = Arc::new(options);
        let mut configured = Vec::new();
        for (name, config) in servers {
            config.validate(&name)?;
            if config.is_enabled() {
                configured.push(Server::new(name, config, Arc::clone(&options)));
            }
        }
        for server in &configured {
            let server = Arc::clone(server);
            runtime.spawn(async move { server.start().await });
        }
        Ok(McpManager { servers: configured, started: Instant::now() })
    }

    /// Whether no server is configured (and enabled).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Waits for the servers still starting, each at most its startup timeout counted
    /// from the manager's start. One not ready by then keeps starting; its tools join
    /// once it is ready.
    pub async fn wait_for_startup(&self) {
        let waits = self.servers.iter().map(|server| async move {
            let deadline = self.started + server.config.startup_timeout();
            let mut settled = server.settled();
            if tokio::time::timeout_at(deadline, settled.wait_for(|done| *done)).await.is_err() {
                server.mark_late();
            }
        });
        futures::future::join_all(waits).await;
    }

    /// Fails when a server marked `required` is not ready.
    pub fn check_required(&self) -> Result<(), McpError> {
        for server in self.servers.iter().filter(|s| s.config.required) {
            let (state, why) = server.report();
            if state != ServerState::Ready {
                let error = McpError::new(
                    McpErrorKind::Required,
                    &server.name,
                    format!("it is required (`required = true`) but is not ready: {state}"),
                );
                return Err(match why {
                    Some(why) => error.caused_by(why),
                    None => error,
                });
            }
        }
        Ok(())
    }

    /// Every server's state and tools, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|server| {
                let (state, error) = server.report();
                (server, state, error)
            })
            .map(|(server, state, error)| ServerStatus {
                name: server.name.clone(),
                transport: server.config.describe(),
                state,
                error,
                tools: server
                    .tools()
                    .0
                    .iter()
                    .map(|tool| ToolStatus {
                        name: keel_agent::DynTool::definition(&**tool).name.clone(),
                        remote: tool.remote_name().to_owned(),
                        read_only: keel_agent::DynTool::is_read_only(&**tool),
                        description: keel_agent::DynTool::definition(&**tool).description.clone(),
                    })
                    .collect(),
                skipped: server.skipped(),
            })
            .collect()
    }

    /// A number that changes whenever the tools on offer do (a server became ready,
    /// or its list changed).
    pub fn version(&self) -> u64 {
        self.servers.iter().map(|s| s.tools().1).sum()
    }

    /// The tools of every server that has listed them, in configuration order. A server
    /// that crashed keeps its tools: the next call starts it again.
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.servers.iter().flat_map(|s| s.tools().0.iter().map(dyn_tool).collect::<Vec<_>>()).collect()
    }

    /// `base` plus the servers' tools (only read-only ones with `read_only`). A tool whose
    /// name is taken is left out; the second value says which, one line each.
    pub fn registry(&self, base: &ToolRegistry, read_only: bool) -> (ToolRegistry, Vec<String>) {
        let mut registry = base.clone();
        let mut refused = Vec::new();
        for server in &self.servers {
            for tool in server.tools().0.iter() {
                if read_only && !keel_agent::DynTool::is_read_only(&**tool) {
                    continue;
                }
                if let Err(error) = registry.try_register_dyn(dyn_tool(tool)) {
                    refused.push(format!(
                        "MCP server `{}`: its tool `{}` is not offered: {error}",
                        server.name,
                        tool.remote_name()
                    ));
                }
            }
        }
        (registry, refused)
    }

    /// Lists again the tools of servers that said theirs changed; true if any did.
    pub async fn refresh(&self) -> bool {
        let refreshed = futures::future::join_all(self.servers.iter().map(|s| s.refresh_tools())).await;
        refreshed.into_iter().any(|changed| changed)
    }

    /// Closes every connection and stops every server process (SIGTERM, then SIGKILL
    /// after half a second).
    pub async fn shutdown(&self) {
        let grace = Duration::from_millis(500);
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown(grace))).await;
        for server in &self.servers {
            server.kill();
        }
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        for server in &self.servers {
            server.kill();
        }
    }
}

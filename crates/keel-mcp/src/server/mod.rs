//! One MCP server: its connection, its state (starting, ready, failed: why) and its
//! tools. A server that crashes or hangs costs the call that found out; the next call
//! starts it again, after a backoff when it keeps failing.

mod call;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use keel_agent::{ToolError, ToolErrorKind};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use call::Live;

use crate::config::ServerConfig;
use crate::error::{McpError, McpErrorKind};
use crate::listing::{Listing, list_tools};
use crate::options::McpOptions;
use crate::process::{Groups, StdioProcess};
use crate::tool::{McpTool, Remote};

/// A server's state, as `keel mcp list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Starting (or restarting); `late` once past its startup timeout.
    Starting {
        /// Past its startup timeout: its tools join when it is ready.
        late: bool,
    },
    /// Connected; its tools are offered.
    Ready,
    /// It failed; the text says why. A server that was ready is started again on the
    /// next call of one of its tools.
    Failed(String),
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerState::Starting { late: false } => f.write_str("starting"),
            ServerState::Starting { late: true } => {
                f.write_str("starting (past its startup timeout; its tools join when it is ready)")
            }
            ServerState::Ready => f.write_str("ready"),
            ServerState::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// A client handler that notes when the server says its tools changed.
#[derive(Debug, Clone)]
struct Handler {
    info: ClientConfig,
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::Release);
        std::future::ready(())
    }
}

/// A live connection: the SDK's service and, for stdio, the process.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    process: Option<StdioProcess>,
    generation: u64,
}

impl Connection {
    /// Whether the connection is gone (the process ended, or the transport closed).
    fn is_gone(&self) -> bool {
        self.process.as_ref().is_some_and(|p| p.ended().is_some())
            || self.service.peer().is_transport_closed()
    }
}

/// What is known of the connection, guarded by an async lock held while (re)connecting.
#[derive(Default)]
struct Link {
    connection: Option<Connection>,
    generation: u64,
    /// Failures since the last call that got an answer.
    failures: u32,
    /// No restart before this.
    retry_at: Option<Instant>,
}

/// What reports read, guarded by a plain lock never held across an await.
struct Shared {
    state: ServerState,
    /// Why it failed, with the kind, while `state` is `Failed`.
    error: Option<McpError>,
    tools: Arc<[Arc<McpTool>]>,
    /// Changes whenever `tools` does.
    tools_version: u64,
    /// Tools the server listed that are not offered, each with why.
    skipped: Vec<String>,
}

/// One configured server.
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    options: Arc<McpOptions>,
    link: tokio::sync::Mutex<Link>,
    shared: Mutex<Shared>,
    /// True once the first start ended, either way.
    settled: watch::Sender<bool>,
    tools_changed: Arc<AtomicBool>,
    shutdown: CancellationToken,
    groups: Arc<Groups>,
    weak: Weak<Server>,
}

/// Restarts after this many failures in a row wait `1 s × 2^(n-2)`, at most a minute;
/// the first restart after a failure is immediate.
fn backoff(failures: u32) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    Duration::from_secs(1u64 << (failures - 2).min(6)).min(Duration::from_secs(60))
}

impl Server {
    pub(crate) fn new(name: String, config: ServerConfig, options: Arc<McpOptions>) -> Arc<Server> {
        Arc::new_cyclic(|weak| Server {
            name,
            config,
            options,
            link: tokio::sync::Mutex::new(Link::default()),
            shared: Mutex::new(Shared {
                state: ServerState::Starting { late: false },
                error: None,
                tools: Arc::from(Vec::new()),
                tools_version: 0,
                skipped: Vec::new(),
            }),
            settled: watch::Sender::new(false),
            tools_changed: Arc::new(AtomicBool::new(false)),
            shutdown: CancellationToken::new(),
            groups: Arc::new(Groups::default()),
            weak: weak.clone(),
        })
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The state now.
    pub(crate) fn state(&self) -> ServerState {
        self.shared().state.clone()
    }

    /// The state now, and why it failed if it did (read together).
    pub(crate) fn report(&self) -> (ServerState, Option<McpError>) {
        let shared = self.shared();
        (shared.state.clone(), shared.error.clone())
    }

    /// A state other than `Failed`.
    fn set_state(&self, state: ServerState) {
        let mut shared = self.shared();
        shared.state = state;
        shared.error = None;
    }

    /// The `Failed` state: its text is `error`'s message.
    fn set_failed(&self, error: McpError) {
        let mut shared = self.shared();
        shared.state = ServerState::Failed(error.message.clone());
        shared.error = Some(error);
    }

    fn error_of(&self, kind: McpErrorKind, message: impl Into<String>) -> McpError {
        McpError::new(kind, &self.name, message)
    }

    fn shutting_down(&self) -> McpError {
        self.error_of(McpErrorKind::ShuttingDown, "keel is shutting down")
    }

    /// The tools offered now, and a number that changes when they do.
    /// Tools the server listed that are not offered, each with why.
    pub(crate) fn skipped(&self) -> Vec<String> {
        self.shared().skipped.clone()
    }

    pub(crate) fn tools(&self) -> (Arc<[Arc<McpTool>]>, u64) {
        let shared = self.shared();
        (Arc::clone(&shared.tools), shared.tools_version)
    }

    /// A receiver that turns true once the first start has ended, either way.
    pub(crate) fn settled(&self) -> watch::Receiver<bool> {
        self.settled.subscribe()
    }

    /// Marks a server still starting as late (past its startup timeout).
    pub(crate) fn mark_late(&self) {
        let mut shared = self.shared();
        if shared.state == (ServerState::Starting { late: false }) {
            shared.state = ServerState::Starting { late: true };
        }
    }

    /// The first start: no time limit (a server past its startup timeout joins late),
    /// only shutdown stops it.
    pub(crate) async fn start(&self) {
        let mut link = self.link.lock().await;
        let result = tokio::select! {
            result = self.connect() => result,
            _ = self.shutdown.cancelled() => Err(self.shutting_down()),
        };
        match result {
            Ok((connection, tools)) => self.connected(&mut link, connection, tools),
            Err(error) => {
                link.failures += 1;
                link.retry_at = None;
                self.set_failed(error);
            }
        }
        self.settled.send_replace(true);
    }

    fn connected(&self, link: &mut Link, mut connection: Connection, tools: Listing) {
        link.generation += 1;
        connection.generation = link.generation;
        link.connection = Some(connection);
        link.retry_at = None;
        self.set_tools(tools);
        self.set_state(ServerState::Ready);
    }

    fn set_tools(&self, listing: Listing) {
        let mut made: Vec<Arc<McpTool>> = Vec::new();
        let mut skipped = listing.skipped;
        let offered: Vec<&rmcp::model::Tool> =
            listing.tools.iter().filter(|tool| self.config.offers(&tool.name)).collect();
        for tool in &offered {
            if made.len() == crate::tool::MAX_TOOLS {
                skipped.push(format!(
                    "{} more tools: a server offers at most {} (choose them with enabled_tools)",
                    offered.len() - made.len(),
                    crate::tool::MAX_TOOLS
                ));
                break;
            }
            match McpTool::new(&self.name, tool, self.weak.clone() as Weak<dyn Remote>) {
                Ok(made_tool) => made.push(Arc::new(made_tool)),
                Err(error) => skipped.push(format!("{}: {}", tool.name, error.message)),
            }
        }
        for why in &skipped {
            tracing::warn!(server = %self.name, "MCP tool not offered: {why}");
        }
        let mut shared = self.shared();
        shared.skipped = skipped;
        let same = shared.tools.len() == made.len()
            && shared.tools.iter().zip(&made).all(|(old, new)| old.same_as(new));
        if !same {
            shared.tools = Arc::from(made);
            shared.tools_version += 1;
        }
    }

    fn client_info(&self) -> Handler {
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(self.options.client_name.clone(), self.options.client_version.clone()),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        Handler { info, tools_changed: Arc::clone(&self.tools_changed) }
    }

    /// Starts the process or opens the HTTP session, does the handshake and lists the
    /// tools.
    async fn connect(&self) -> Result<(Connection, Listing), McpError> {
        self.tools_changed.store(false, Ordering::Release);
        let handler = self.client_info();
        if let Some(command) = &self.config.command {
            let (process, stdout, stdin) =
                StdioProcess::spawn(&self.name, &self.config, &self.options, &self.groups).map_err(|e| {
                    self.error_of(McpErrorKind::Spawn, format!("cannot start `{command}`: {e}")).caused_by(e)
                })?;
            let handshake = async {
                let service = handler.serve((stdout, stdin)).await.map_err(|e| {
                    self.error_of(McpErrorKind::Handshake, format!("handshake failed: {e}")).caused_by(e)
                })?;
                let tools = list_tools(&self.name, service.peer()).await?;
                Ok::<_, McpError>((service, tools))
            };
            // A server that exits during the handshake says why on stderr.
            let outcome = tokio::select! {
                outcome = handshake => outcome,
                ended = process.exited() => Err(self.error_of(McpErrorKind::Exited, ended)),
            };
            match outcome {
                Ok((service, tools)) => {
                    Ok((Connection { service, process: Some(process), generation: 0 }, tools))
                }
                Err(error) => {
                    // A broken pipe usually means the process ended: say how instead.
                    let mut error = match process.ended_within(Duration::from_millis(300)).await {
                        Some(ended) => self.error_of(McpErrorKind::Exited, ended),
                        None => error,
                    };
                    error.message = stdio_failure(&process, std::mem::take(&mut error.message)).await;
                    Err(error)
                }
            }
        } else {
            let transport = crate::http::transport(&self.name, &self.config)?;
            let service = handler.serve(transport).await.map_err(|e| {
                self.error_of(McpErrorKind::Handshake, format!("cannot connect: {e}")).caused_by(e)
            })?;
            let tools = list_tools(&self.name, service.peer()).await?;
            Ok((Connection { service, process: None, generation: 0 }, tools))
        }
    }

    /// The server's peer, connecting first when there is no live connection (within the
    /// startup timeout; refused while a backoff runs).
    async fn peer(&self) -> Result<Live, ToolError> {
        let mut link = self.link.lock().await;
        if let Some(connection) = &link.connection {
            if !connection.is_gone() {
                return Ok(Live::of(connection));
            }
            let why = self.describe_end(connection).await;
            self.lost(&mut link, why);
        }
        let now = Instant::now();
        if let Some(at) = link.retry_at.filter(|at| *at > now) {
            return Err(ToolError::new(
                ToolErrorKind::ServerUnavailable,
                format!(
                    "the MCP server `{}` is down ({}); keel starts it again in {} s",
                    self.name,
                    self.state(),
                    (at - now).as_secs().max(1)
                ),
            ));
        }
        self.set_state(ServerState::Starting { late: false });
        let timeout = self.config.startup_timeout();
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(timeout, self.connect()) => outcome,
            _ = self.shutdown.cancelled() => Ok(Err(self.shutting_down())),
        };
        let error = match outcome {
            Ok(Ok((connection, tools))) => {
                self.connected(&mut link, connection, tools);
                if let Some(connection) = &link.connection {
                    return Ok(Live::of(connection));
                }
                self.error_of(McpErrorKind::Handshake, "the connection closed at once")
            }
            Ok(Err(error)) => error,
            Err(_) => self.error_of(
                McpErrorKind::StartupTimeout,
                format!("not ready within its startup timeout ({} s)", timeout.as_secs_f64()),
            ),
        };
        link.failures += 1;
        link.retry_at = Some(Instant::now() + backoff(link.failures));
        let message = format!("the MCP server `{}` could not be started: {}", self.name, error.message);
        self.set_failed(error);
        Err(ToolError::new(ToolErrorKind::ServerUnavailable, message))
    }

    /// How a connection ended, for messages: the process's exit and last stderr lines.
    async fn describe_end(&self, connection: &Connection) -> String {
        match &connection.process {
            Some(process) => {
                let ended = process.ended_within(Duration::from_millis(300)).await;
                stdio_failure(process, ended.unwrap_or_else(|| "closed the connection".to_owned())).await
            }
            None => "the connection closed".to_owned(),
        }
    }

    /// Drops a connection that failed, killing its process, and counts the failure.
    fn lost(&self, link: &mut Link, why: String) {
        link.connection = None;
        link.failures += 1;
        link.retry_at = Some(Instant::now() + backoff(link.failures));
        self.set_failed(
            self.error_of(McpErrorKind::Lost, format!("{why}; it is started again on the next call")),
        );
    }

    /// Lists the tools again if the server said they changed; returns whether it did.
    pub(crate) async fn refresh_tools(&self) -> bool {
        if !self.tools_changed.swap(false, Ordering::AcqRel) {
            return false;
        }
        let peer = {
            let link = self.link.lock().await;
            match &link.connection {
                Some(connection) if !connection.is_gone() => connection.service.peer().clone(),
                _ => return false,
            }
        };
        match tokio::time::timeout(self.config.startup_timeout(), list_tools(&self.name, &peer)).await {
            Ok(Ok(tools)) => {
                self.set_tools(tools);
                true
            }
            _ => false,
        }
    }

    /// Closes the connection and stops the process (SIGTERM, then SIGKILL after
    /// `grace`).
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.shutdown.cancel();
        let connection = self.link.lock().await.connection.take();
        if let Some(mut connection) = connection {
            let _ = connection.service.close_with_timeout(grace).await;
            if let Some(process) = &connection.process {
                process.stop(grace).await;
            }
        }
    }

    /// Kills the server's processes at once (for drop paths that cannot wait).
    pub(crate) fn kill(&self) {
        self.shutdown.cancel();
        self.groups.kill_all();
    }
}

/// Why a stdio server failed: `why`, and the last lines it wrote on stderr.
async fn stdio_failure(process: &StdioProcess, why: String) -> String {
    process.stderr().settled(Duration::from_millis(300)).await;
    let tail = process.stderr().last(3);
    if tail.is_empty() { why } else { format!("{why}: {tail}") }
}

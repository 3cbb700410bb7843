//! Calls of a server's tools: on the servers' runtime, bounded by the tool timeout, and
//! what a failed call does to the connection.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keel_agent::{ToolError, ToolErrorKind, ToolOutput};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RoleClient;
use rmcp::{Peer, ServiceError};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Connection, Server};
use crate::process::StdioProcess;
use crate::tool::Remote;

impl Server {
    /// Calls tool `tool` (the server's own name for it) with `arguments`.
    async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        let Live { peer, generation, exit } = self.peer().await?;
        let timeout = self.config.tool_timeout();
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        // A stdio server that exits mid-call fails the call at once.
        let ended = async move {
            match exit {
                Some(mut exit) => {
                    let _ = exit.wait_for(Option::is_some).await;
                }
                None => std::future::pending().await,
            }
        };
        // Dropping the call's future (abort, timeout) sends the server a cancellation.
        let outcome = tokio::select! {
            result = peer.call_tool(params) => Outcome::Answered(result),
            _ = tokio::time::sleep(timeout) => Outcome::TimedOut,
            _ = cancel.cancelled() => Outcome::Aborted,
            _ = ended => Outcome::Answered(Err(ServiceError::TransportClosed)),
        };
        match outcome {
            Outcome::Answered(Ok(result)) => {
                self.link.lock().await.failures = 0;
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                Ok(crate::content::render(&value))
            }
            Outcome::Answered(Err(ServiceError::McpError(error))) => Err(ToolError::new(
                ToolErrorKind::McpError,
                format!("the MCP server `{}` refused the call: {}", self.name, error.message),
            )),
            Outcome::Answered(Err(error)) => {
                // A process says how it ended; an HTTP server only how the request failed.
                let hint = (self.config.command.is_none()).then(|| format!("the request failed: {error}"));
                let why = self.fail(generation, hint).await;
                let why = if why.is_empty() { error.to_string() } else { why };
                Err(ToolError::new(
                    ToolErrorKind::ServerCrashed,
                    format!(
                        "the MCP server `{}` stopped during the call ({why}); it is started again on the next call",
                        self.name
                    ),
                ))
            }
            Outcome::TimedOut => {
                let secs = timeout.as_secs_f64();
                self.fail(generation, Some(format!("a call of `{tool}` took longer than {secs} s"))).await;
                Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "`{tool}` did not answer within {secs} s (tool_timeout_sec of MCP server `{}`); the server was stopped and is started again on the next call",
                        self.name
                    ),
                ))
            }
            Outcome::Aborted => Err(ToolError::new(
                ToolErrorKind::Aborted,
                "the call was aborted; the server was asked to cancel it",
            )),
        }
    }

    /// Ends connection `generation` after it failed during a call (unless a newer one
    /// replaced it), killing its process; returns what is known of why.
    async fn fail(&self, generation: u64, why: Option<String>) -> String {
        let mut link = self.link.lock().await;
        let Some(connection) = link.connection.take_if(|c| c.generation == generation) else {
            return why.unwrap_or_default();
        };
        let why = match why {
            Some(why) => why,
            None => self.describe_end(&connection).await,
        };
        if let Some(process) = &connection.process {
            process.stop(Duration::from_millis(500)).await;
        }
        drop(connection);
        self.lost(&mut link, why.clone());
        why
    }
}

/// What a call needs of a live connection.
pub(super) struct Live {
    peer: Peer<RoleClient>,
    generation: u64,
    exit: Option<watch::Receiver<Option<String>>>,
}

impl Live {
    pub(super) fn of(connection: &Connection) -> Live {
        Live {
            peer: connection.service.peer().clone(),
            generation: connection.generation,
            exit: connection.process.as_ref().map(StdioProcess::exit_watch),
        }
    }
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum Outcome {
    Answered(Result<rmcp::model::CallToolResult, ServiceError>),
    TimedOut,
    Aborted,
}

impl Remote for Server {
    /// Calls tool `tool` with `arguments` on the servers' runtime (see
    /// [`McpOptions::runtime`]); the call stops when the returned future is dropped.
    fn call_tool(
        self: Arc<Self>,
        tool: String,
        arguments: Map<String, Value>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let Some(runtime) = self.options.runtime.clone() else {
                return self.call(&tool, arguments, &cancel).await;
            };
            let task = AbortOnDrop(runtime.spawn(async move { self.call(&tool, arguments, &cancel).await }));
            match (task).await {
                Ok(result) => result,
                Err(e) => Err(ToolError::msg(format!("the MCP call stopped unexpectedly: {e}"))),
            }
        })
    }
}

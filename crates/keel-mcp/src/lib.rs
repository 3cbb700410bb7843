//! The tools of any MCP server, for keel: each server's tools become [`DynTool`]s named
//! `mcp__<server>__<tool>`, offered beside keel's own.
//!
//! - [`ServerConfig`] reads Codex's `[mcp_servers.NAME]` tables: a stdio server
//!   (`command`, `args`, `env`, `env_vars`, `cwd`) or a streamable-HTTP one (`url`,
//!   `bearer_token_env_var`, `http_headers`), timeouts, tool filters, `required`.
//! - [`McpManager`] starts every server at once, waits for each at most its startup
//!   timeout ([`McpManager::wait_for_startup`]), reports states ([`McpManager::statuses`])
//!   and hands out the tools of the ready ones ([`McpManager::registry`]); a server
//!   ready later joins when the registry is next built (between turns: a turn's tools
//!   are fixed, see `SessionContext::tools`).
//! - A stdio server runs in its own process group with keel's credentials removed from
//!   its environment; through keel's launcher ([`McpOptions::launcher`]) it dies with
//!   keel even on `kill -9`. A server that crashes or hangs costs the one call that
//!   found out; the next call starts it again (with a backoff when it keeps failing).
//! - Arguments are checked against the tool's input schema before they are sent
//!   ([`schema`]), with the same `invalid_arguments` error as keel's typed tools.
//!   Results that are images, audio or resources become text descriptions;
//!   structured content becomes JSON text ([`content`]).
//!
//! Built on the official Rust SDK, `rmcp` (pinned).
//!
//! [`DynTool`]: keel_agent::DynTool

mod config;
pub mod content;
mod error;
mod http;
mod listing;
mod manager;
pub mod name;
mod options;
mod process;
pub mod schema;
mod server;
mod tool;

pub use config::{DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, ServerConfig};
pub use error::{McpError, McpErrorKind};
pub use manager::{McpManager, ServerStatus, ToolStatus};
pub use options::McpOptions;
pub use server::ServerState;
pub use tool::McpTool;

//! Test support for keel: a [`ScriptedModel`] that replays assistant messages and records
//! every request, (in [`http`]) a mock OpenAI-compatible HTTP server, and (in [`mcp`]) a
//! test MCP server over stdio and streamable HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod chat;
pub mod http;
pub mod mcp;
mod scripted;

pub use chat::ChatStream;
pub use http::{HttpRequest, MockResponse, MockServer};
pub use scripted::{RecordedRequest, ReplyBuilder, ScriptedModel, reply};

//! Test support for keel: a [`ScriptedModel`] that replays assistant messages and records
//! every request, (in [`http`]) a mock HTTP server, stream builders for each wire
//! API ([`ChatStream`], [`AnthropicStream`], [`ResponsesStream`]), and (in [`mcp`]) a
//! test MCP server over stdio and streamable HTTP, and (in [`store`]) the conformance
//! suite every session store must pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod anthropic;
pub mod chat;
pub mod http;
pub mod mcp;
pub mod prereq;
pub mod responses;
mod scripted;
pub mod store;

pub use anthropic::AnthropicStream;
pub use chat::ChatStream;
pub use http::{HttpRequest, MockResponse, MockServer};
pub use responses::ResponsesStream;
pub use scripted::{RecordedRequest, ReplyBuilder, ScriptedModel, intent, intent_arguments, reply};

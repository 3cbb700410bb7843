//! Test support for keel: a [`ScriptedModel`] that replays assistant messages and records
//! every request, and (in [`http`]) a mock OpenAI-compatible HTTP server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod chat;
pub mod http;
mod scripted;

pub use chat::ChatStream;
pub use http::{HttpRequest, MockResponse, MockServer};
pub use scripted::{RecordedRequest, ReplyBuilder, ScriptedModel, reply};

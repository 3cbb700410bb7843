//! Test support for keel: a [`ScriptedModel`] that replays assistant messages and records
//! every request, and (in [`http`]) a mock OpenAI-compatible HTTP server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod scripted;

pub use scripted::{RecordedRequest, ReplyBuilder, ScriptedModel, reply};

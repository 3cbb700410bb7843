//! What the binary supplies: how a session's agent is built from its configuration and
//! the client's choices.

use std::path::PathBuf;

use futures::future::BoxFuture;
use keel_agent::{Agent, SessionContext};
use keel_tools::AskFn;
use serde::{Deserialize, Serialize};

/// What a client chose for a session (`POST /v1/sessions`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// The workspace folder; must be under one of the server's roots.
    pub folder: PathBuf,
    /// A model name, instead of the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A configuration profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// `auto`, `ask` or `read-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// A sandbox mode, as `keel --sandbox` takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// An agent and the session's context, made for one session.
#[derive(Debug)]
pub struct Prepared {
    /// The agent (model, tools, hooks; the permission policy asks through the given
    /// [`AskFn`]).
    pub agent: Agent,
    /// The session's context (workspace, artifacts, environment of a new session).
    pub ctx: SessionContext,
}

/// Builds the agent for a session; the binary implements it from its configuration.
pub trait AgentFactory: Send + Sync + 'static {
    /// An agent and context for session `session_id` working as `spec` says, whose
    /// permission policy asks through `ask`. `new_session`: it has no messages yet.
    /// `Err` is a message for the client (a bad model, profile or mode).
    fn prepare<'a>(
        &'a self,
        spec: &'a SessionSpec,
        session_id: &'a str,
        new_session: bool,
        ask: AskFn,
    ) -> BoxFuture<'a, Result<Prepared, String>>;
}

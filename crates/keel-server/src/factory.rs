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

/// Why a session's agent could not be built: who can fix it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrepareErrorKind {
    /// The client's choices do not work (an unknown model or profile, a mode weaker than
    /// the server allows, a configuration they make invalid): 400 `bad_request`.
    Invalid,
    /// The request is fine but the server cannot build the agent now (a resource it
    /// lacks, a model it cannot reach): 503 `unavailable`, with `Retry-After`.
    Unavailable,
}

/// A session's agent that could not be built; its text is the message for the client.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PrepareError {
    /// Who can fix it.
    pub kind: PrepareErrorKind,
    /// What went wrong, for the client.
    pub message: String,
    /// The error underneath; its text is already in `message`, so it is not also
    /// [`std::error::Error::source`] (a chain printed with `{:#}` would say it twice).
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl PrepareError {
    /// An error of `kind`.
    pub fn new(kind: PrepareErrorKind, message: impl Into<String>) -> Self {
        PrepareError { kind, message: message.into(), cause: None }
    }

    /// The client's choices do not work.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(PrepareErrorKind::Invalid, message)
    }

    /// The server cannot build the agent now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(PrepareErrorKind::Unavailable, message)
    }

    /// Keeps `cause`, the error underneath (its text should already be in the message).
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// The error underneath, if one was kept.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Builds the agent for a session; the binary implements it from its configuration.
pub trait AgentFactory: Send + Sync + 'static {
    /// An agent and context for session `session_id` working as `spec` says, whose
    /// permission policy asks through `ask`. `new_session`: it has no messages yet.
    /// `Err` says why, for the client, and whose it is to fix
    /// ([`PrepareErrorKind`]: a bad model, profile or mode is `Invalid`).
    fn prepare<'a>(
        &'a self,
        spec: &'a SessionSpec,
        session_id: &'a str,
        new_session: bool,
        ask: AskFn,
    ) -> BoxFuture<'a, Result<Prepared, PrepareError>>;
}

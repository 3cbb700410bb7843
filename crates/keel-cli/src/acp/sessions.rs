//! The sessions of one ACP connection: ordinary keel sessions in the ordinary store, each
//! with the agent keel's own setup builds for it, run one turn at a time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::Client;
use agent_client_protocol::Error;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{McpServer, SessionMode, SessionModeState};
use keel_agent::{Agent, Session, SessionContext};
use keel_llm::{CancellationToken, ModelClient};
use keel_session::SessionStore;
use keel_tools::{PermissionMode, PermissionPolicy};

use super::bridge::Bridge;
use super::prompt::{failed, invalid, refused};
use super::updates::Translator;
use crate::cli::Cli;
use crate::config::{self, ModelSettings, Settings};
use crate::mcp::SessionTools;
use crate::setup;

/// Most sessions one connection keeps open.
pub const MAX_SESSIONS: usize = 64;

/// A session open in this connection, between turns.
pub struct Live {
    pub session: Session,
    pub agent: Agent,
    pub ctx: SessionContext,
    pub settings: Settings,
    pub workspace: PathBuf,
    pub policy: Arc<PermissionPolicy>,
    pub model: Arc<dyn ModelClient>,
    pub mcp: Option<SessionTools>,
    pub bridge: Arc<Bridge>,
}

/// Where a session of this connection is.
enum Slot {
    /// Between turns.
    Idle(Box<Live>),
    /// A turn runs (the session is with it); a mode chosen meanwhile applies after it.
    Running { cancel: CancellationToken, next_mode: Option<PermissionMode> },
}

/// keel's side of one ACP connection.
pub struct Front {
    /// `keel acp`'s own flags (model, profile, store, …).
    base: Cli,
    /// The config file, read once at start.
    file: config::layer::FileConfig,
    store: Arc<dyn SessionStore>,
    sessions: Mutex<HashMap<String, Slot>>,
    /// The embedded model, loaded by the first session that asks for it and shared.
    local: tokio::sync::OnceCell<Arc<dyn ModelClient>>,
}

/// A session's modes: keel's permission modes.
pub fn modes(current: PermissionMode) -> SessionModeState {
    let mode = |mode: PermissionMode, name: &str, description: &str| {
        SessionMode::new(mode.as_str(), name).description(description.to_owned())
    };
    SessionModeState::new(
        current.as_str(),
        vec![
            mode(PermissionMode::Ask, "Ask", "Reads run; every change or command asks first"),
            mode(
                PermissionMode::Auto,
                "Auto",
                "Every call runs without asking (the rules' deny and ask still hold)",
            ),
            mode(PermissionMode::ReadOnly, "Read-only", "Only reading tools run; others are refused"),
        ],
    )
}

/// The client's MCP servers as keel's: a stdio server's program, arguments and
/// variables; an HTTP server's address and headers. SSE is refused (keel speaks
/// streamable HTTP).
pub fn mcp_servers(servers: &[McpServer]) -> Result<Vec<(String, keel_mcp::ServerConfig)>, Error> {
    servers
        .iter()
        .map(|server| match server {
            McpServer::Stdio(stdio) => Ok((
                stdio.name.clone(),
                keel_mcp::ServerConfig {
                    command: Some(stdio.command.display().to_string()),
                    args: stdio.args.clone(),
                    env: stdio.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect(),
                    ..keel_mcp::ServerConfig::default()
                },
            )),
            McpServer::Http(http) => Ok((
                http.name.clone(),
                keel_mcp::ServerConfig {
                    url: Some(http.url.clone()),
                    http_headers: http.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
                    ..keel_mcp::ServerConfig::default()
                },
            )),
            _ => Err(invalid(
                "keel takes MCP servers over stdio or HTTP, not SSE (mcpCapabilities.sse is false)",
            )),
        })
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Front {
    /// The front for `keel acp` run with `base`'s flags, its sessions in `store`.
    pub fn new(base: Cli, file: config::layer::FileConfig, store: Arc<dyn SessionStore>) -> Arc<Front> {
        Arc::new(Front { base, file, store, sessions: Mutex::new(HashMap::new()), local: Default::default() })
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn SessionStore> {
        Arc::clone(&self.store)
    }

    /// The settings for a session in `workspace` (the default permission mode is `ask`,
    /// as in the terminal: an editor's user is there to answer).
    fn settings(&self, workspace: &Path) -> Result<Settings, Error> {
        let mut cli = self.base.clone();
        cli.command = None;
        cli.cwd = Some(workspace.to_path_buf());
        config::resolve_in(&cli, self.file.clone(), true).map_err(|e| invalid(e.message))
    }

    /// The model the settings name (the embedded one shared by every session).
    async fn model(&self, settings: &mut Settings) -> Result<Arc<dyn ModelClient>, Error> {
        match &settings.model {
            ModelSettings::Local(local) => {
                let model = self
                    .local
                    .get_or_try_init(|| crate::local::load(local, false))
                    .await
                    .map_err(|e| failed(e.message))?
                    .clone();
                settings.fit_profile(&keel_llm::facts::ModelFacts::from_name(&model.info().model), true);
                Ok(model)
            }
            ModelSettings::Remote(_) => setup::model(settings, false).await.map_err(|e| failed(e.message)),
        }
    }

    /// Opens a session for `connection`: `resume` names one in the store (repaired at
    /// once), else a new one in `cwd`. `servers`: the client's MCP servers, beside the
    /// configured ones (a client's server replaces a configured one of its name).
    pub async fn open(
        &self,
        connection: ConnectionTo<Client>,
        cwd: &Path,
        servers: &[McpServer],
        resume: Option<&str>,
    ) -> Result<Box<Live>, Error> {
        if lock(&self.sessions).len() >= MAX_SESSIONS {
            return Err(refused(format!(
                "this connection has {MAX_SESSIONS} sessions open; keel takes no more"
            )));
        }
        if !cwd.is_absolute() {
            return Err(invalid(format!("cwd must be an absolute path, not {}", cwd.display())));
        }
        let workspace = cwd.canonicalize().map_err(|e| invalid(format!("cwd {}: {e}", cwd.display())))?;
        if !workspace.is_dir() {
            return Err(invalid(format!("cwd {} is not a folder", cwd.display())));
        }
        let mut settings = self.settings(&workspace)?;
        settings.mcp_servers.extend(mcp_servers(servers)?);
        let session = self.open_session(&workspace, resume).await?;
        let model = self.model(&mut settings).await?;
        let window = settings.compaction.window.or_else(|| model.context_window());
        let bridge =
            Bridge::new(connection, session.id(), Translator::new(&workspace, window, false), &workspace);
        let policy = setup::policy(&settings, &workspace).map_err(|e| invalid(e.message))?;
        let policy = Arc::new(policy.with_ask(bridge.ask_fn()));
        let (agent, notes) = setup::agent_in(
            Some(&self.store),
            &settings,
            &workspace,
            Arc::clone(&policy),
            Arc::clone(&model),
        );
        notes.iter().for_each(|note| tracing::info!("acp: {note}"));
        let ctx = setup::context(&settings, &workspace, &session);
        let read_only = settings.permission == PermissionMode::ReadOnly;
        let mcp = crate::mcp::start(&settings).await.map_err(|e| invalid(e.message))?;
        let mcp = mcp.map(|manager| SessionTools::new(manager, read_only));
        Ok(Box::new(Live { session, agent, ctx, settings, workspace, policy, model, mcp, bridge }))
    }

    /// The session: created, or opened from the store and repaired.
    async fn open_session(&self, workspace: &Path, resume: Option<&str>) -> Result<Session, Error> {
        let store = self.store();
        let cwd = workspace.display().to_string();
        let resume = resume.map(str::to_owned);
        let opened = tokio::task::spawn_blocking(move || match resume {
            None => store.create(&cwd),
            Some(id) => {
                let mut session = store.open(&id)?;
                session.repair()?;
                Ok(session)
            }
        })
        .await
        .map_err(|e| failed(format!("opening the session: {e}")))?;
        opened.map_err(|e| match e.kind {
            keel_session::SessionErrorKind::NotFound
            | keel_session::SessionErrorKind::Invalid
            | keel_session::SessionErrorKind::Locked => invalid(e.to_string()),
            _ => failed(e.to_string()),
        })
    }

    /// Keeps `live` as an idle session of this connection.
    pub fn keep(&self, live: Box<Live>) {
        let id = live.session.id().to_owned();
        lock(&self.sessions).insert(id, Slot::Idle(live));
    }

    /// Whether session `id` is open in this connection.
    pub fn has(&self, id: &str) -> bool {
        lock(&self.sessions).contains_key(id)
    }

    /// Takes session `id` for a turn, leaving its cancel token in its place.
    pub fn start_turn(&self, id: &str) -> Result<(Box<Live>, CancellationToken), Error> {
        let mut sessions = lock(&self.sessions);
        match sessions.remove(id) {
            None => Err(invalid(format!(
                "no session {id} in this connection (session/new or session/load first)"
            ))),
            Some(running @ Slot::Running { .. }) => {
                sessions.insert(id.to_owned(), running);
                Err(refused(format!("session {id} is running a prompt; wait for it or cancel it")))
            }
            Some(Slot::Idle(live)) => {
                let cancel = CancellationToken::new();
                sessions.insert(id.to_owned(), Slot::Running { cancel: cancel.clone(), next_mode: None });
                Ok((live, cancel))
            }
        }
    }

    /// Gives a session back after its turn, with the mode chosen meanwhile.
    pub fn end_turn(&self, mut live: Box<Live>) {
        let id = live.session.id().to_owned();
        let next = match lock(&self.sessions).get(&id) {
            Some(Slot::Running { next_mode, .. }) => *next_mode,
            _ => None,
        };
        if let Some(mode) = next
            && let Err(error) = set_mode(&self.store, &mut live, mode)
        {
            tracing::warn!(%error, "acp: the mode chosen during the turn could not be applied");
        }
        self.keep(live);
    }

    /// Cancels the turn session `id` runs, if it runs one.
    pub fn cancel(&self, id: &str) {
        if let Some(Slot::Running { cancel, .. }) = lock(&self.sessions).get(id) {
            cancel.cancel();
        }
    }

    /// Session `id`'s permission mode becomes `mode` (after the running turn, if one runs).
    pub fn set_mode(&self, id: &str, mode: PermissionMode) -> Result<(), Error> {
        match lock(&self.sessions).get_mut(id) {
            None => Err(invalid(format!("no session {id} in this connection"))),
            Some(Slot::Running { next_mode, .. }) => {
                *next_mode = Some(mode);
                Ok(())
            }
            Some(Slot::Idle(live)) => set_mode(&self.store, live, mode).map_err(|e| invalid(e.message)),
        }
    }

    /// Closes every idle session (durable, its lock released) and stops their MCP servers.
    pub async fn close_all(&self) {
        let idle: Vec<Box<Live>> = lock(&self.sessions)
            .drain()
            .filter_map(|(_, slot)| match slot {
                Slot::Idle(live) => Some(live),
                Slot::Running { cancel, .. } => {
                    cancel.cancel();
                    None
                }
            })
            .collect();
        for live in idle {
            if let Some(mcp) = &live.mcp {
                mcp.shutdown().await;
            }
            let id = live.session.id().to_owned();
            if let Err(error) = live.session.close() {
                tracing::warn!(%error, session = %id, "acp: closing the session failed");
            }
        }
    }
}

/// Rebuilds a session's policy and agent for `mode`, keeping the rules "always" added
/// (its subagents' sessions still go to `store`).
fn set_mode(
    store: &Arc<dyn SessionStore>,
    live: &mut Live,
    mode: PermissionMode,
) -> Result<(), config::ConfigError> {
    let mut settings = live.settings.clone();
    settings.permission = mode;
    let policy = setup::policy(&settings, &live.workspace)?
        .with_rules(live.policy.rules())
        .with_ask(live.bridge.ask_fn());
    let policy = Arc::new(policy);
    let (agent, _notes) = setup::agent_in(
        Some(store),
        &settings,
        &live.workspace,
        Arc::clone(&policy),
        Arc::clone(&live.model),
    );
    live.agent = agent;
    live.policy = policy;
    live.settings = settings;
    Ok(())
}

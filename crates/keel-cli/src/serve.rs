//! `keel serve`: the HTTP server (keel-server) with keel's configuration: each session's
//! agent is built like `keel`'s own, with the client's model, profile, permission mode
//! and sandbox applied over the configuration.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use futures::future::BoxFuture;
use keel_server::{AgentFactory, PrepareError, Prepared, Server, ServerConfig, SessionSpec};
use keel_tools::AskFn;

use crate::cli::{Cli, ServeArgs};
use crate::config::{self, ModelSettings};
use crate::{exit, paths, setup, signals};

/// Builds a session's agent from the configuration and the client's choices.
struct Factory {
    base: Cli,
    /// The config file, read once when the server started.
    file: config::layer::FileConfig,
    /// The server's own settings, which a client's choices may not weaken.
    server: config::Settings,
    /// The embedded model, loaded by the first session that asks for it and shared by
    /// all (one engine process; their requests take turns).
    local: tokio::sync::OnceCell<Arc<dyn keel_llm::ModelClient>>,
    /// The server's store: its sessions' subagents are sessions there too.
    store: Arc<dyn keel_session::SessionStore>,
}

/// How strict a sandbox is: off < workspace-write < read-only.
fn sandbox_strictness(mode: keel_sandbox::SandboxMode) -> u8 {
    use keel_sandbox::SandboxMode;
    match mode {
        SandboxMode::ReadOnly => 2,
        SandboxMode::WorkspaceWrite => 1,
        _ => 0,
    }
}

/// How strict a permission mode is: auto < ask < read-only.
fn permission_strictness(mode: keel_tools::PermissionMode) -> u8 {
    use keel_tools::PermissionMode;
    match mode {
        PermissionMode::ReadOnly => 2,
        PermissionMode::Ask => 1,
        _ => 0,
    }
}

/// A client's mode weaker than the server's own: which setting, the client's value and
/// the server's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Weaker {
    /// `sandbox` or `permission`.
    setting: &'static str,
    client: &'static str,
    server: &'static str,
}

impl std::fmt::Display for Weaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} `{}` is weaker than this server's `{}`; the server's config must allow it (serve_clients_may_weaken = true)",
            self.setting, self.client, self.server
        )
    }
}

impl std::error::Error for Weaker {}

/// Refuses a client's sandbox or permission mode weaker than the server's own, unless the
/// server's config says clients may weaken them (`serve_clients_may_weaken = true`).
fn check_not_weaker(server: &config::Settings, client: &config::Settings) -> Result<(), Weaker> {
    if server.layer.serve_clients_may_weaken == Some(true) {
        return Ok(());
    }
    if sandbox_strictness(client.sandbox.mode) < sandbox_strictness(server.sandbox.mode) {
        return Err(Weaker {
            setting: "sandbox",
            client: client.sandbox.mode.as_str(),
            server: server.sandbox.mode.as_str(),
        });
    }
    if permission_strictness(client.permission) < permission_strictness(server.permission) {
        return Err(Weaker {
            setting: "permission",
            client: client.permission.as_str(),
            server: server.permission.as_str(),
        });
    }
    Ok(())
}

/// A client's choice the server refuses (400), with the error underneath.
fn invalid(error: impl std::error::Error + Send + Sync + 'static) -> PrepareError {
    PrepareError::invalid(error.to_string()).caused_by(error)
}

/// A model that could not be set up: the client's to fix when its settings are wrong
/// (400), the server's when the model cannot be reached or loaded now (503).
fn model_failure(error: config::ConfigError) -> PrepareError {
    match error.kind {
        config::ConfigErrorKind::Model(_) => PrepareError::unavailable(error.to_string()).caused_by(error),
        _ => invalid(error),
    }
}

impl Factory {
    /// The flags of `keel` for this spec: the server's own, with the client's choices.
    fn cli_for(&self, spec: &SessionSpec) -> Cli {
        let mut cli = self.base.clone();
        cli.command = None;
        cli.cwd = Some(spec.folder.clone());
        if spec.profile.is_some() {
            cli.profile = spec.profile.clone();
        }
        if spec.model.is_some() {
            cli.model = spec.model.clone();
        }
        if spec.permission.is_some() {
            cli.permission = spec.permission.clone();
        }
        if spec.sandbox.is_some() {
            cli.sandbox = spec.sandbox.clone();
        }
        cli
    }
}

impl AgentFactory for Factory {
    fn prepare<'a>(
        &'a self,
        spec: &'a SessionSpec,
        session_id: &'a str,
        new_session: bool,
        ask: AskFn,
    ) -> BoxFuture<'a, Result<Prepared, PrepareError>> {
        // The client's choices that do not work are 400; a model that cannot be reached
        // or loaded now is 503 (ConfigErrorKind::Model).
        Box::pin(async move {
            let cli = self.cli_for(spec);
            let mut settings = config::resolve_in(&cli, self.file.clone(), false).map_err(invalid)?;
            check_not_weaker(&self.server, &settings).map_err(invalid)?;
            let policy = setup::policy(&settings, &spec.folder).map_err(invalid)?.with_ask(ask);
            let model = match &settings.model {
                ModelSettings::Local(local) => {
                    let model = self
                        .local
                        .get_or_try_init(|| crate::local::load(local, false))
                        .await
                        .map_err(model_failure)?
                        .clone();
                    settings.fit_profile(&keel_llm::facts::ModelFacts::from_name(&model.info().model), true);
                    model
                }
                ModelSettings::Remote(_) => {
                    setup::model(&mut settings, false).await.map_err(model_failure)?
                }
            };
            let (agent, _notes) =
                setup::agent_in(Some(&self.store), &settings, &spec.folder, Arc::new(policy), model);
            let mut ctx = keel_agent::SessionContext::new(&spec.folder)
                .artifacts(paths::sessions_dir().join(session_id));
            if settings.environment && new_session {
                let today = keel_session::time::now_rfc3339();
                ctx = ctx.environment(keel_tools::environment::describe(
                    &spec.folder,
                    &today[..10.min(today.len())],
                    settings.tool_profile != keel_tools::profile::ToolProfile::Small,
                ));
            }
            Ok(Prepared { agent, ctx })
        })
    }
}

/// The token: `KEEL_SERVE_TOKEN`, else the one kept in keel's folder (made and printed
/// on first start, readable only by the user).
fn token() -> anyhow::Result<(String, bool)> {
    if let Ok(token) = std::env::var("KEEL_SERVE_TOKEN")
        && !token.trim().is_empty()
    {
        return Ok((token.trim().to_owned(), false));
    }
    let path = paths::keel_home().join("serve-token");
    if let Ok(token) = std::fs::read_to_string(&path)
        && token.trim().len() >= 16
    {
        return Ok((token.trim().to_owned(), false));
    }
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for a token")?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    write_private(&path, &token).with_context(|| format!("cannot write {}", path.display()))?;
    Ok((token, true))
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}

/// Runs the server until Ctrl-C or SIGTERM.
pub async fn run(cli: &Cli, args: ServeArgs) -> anyhow::Result<u8> {
    let open_files = keel_server::ops::raise_open_files_limit();
    let (token, fresh) = token()?;
    let roots: Vec<PathBuf> = if args.roots.is_empty() {
        vec![std::env::current_dir().context("cannot read the current folder")?]
    } else {
        args.roots.clone()
    };
    // The configuration must be usable before anyone connects; it is read once.
    let file = config::load_file().map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let mut own = cli.clone();
    own.command = None;
    let server_settings =
        config::resolve_in(&own, file.clone(), false).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let spec = crate::store::chosen(cli.store.as_deref());
    let crate::store::Opened { store, label: store_label } =
        tokio::task::spawn_blocking(move || crate::store::open(spec.as_deref(), true))
            .await
            .context("opening the store")??;
    let mut config = ServerConfig::new(token.clone(), roots.clone());
    if let Some(max_turns) = args.max_turns {
        config.max_turns = max_turns.max(1);
    }
    config.idle_close = std::time::Duration::from_secs(args.idle_close.max(1));
    config.drain_timeout = std::time::Duration::from_secs(args.drain);
    let factory = Arc::new(Factory {
        base: cli.clone(),
        file,
        server: server_settings,
        local: tokio::sync::OnceCell::new(),
        store: Arc::clone(&store),
    });
    let server = Server::new(config, store, factory).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    errln!("keel serve: listening on http://{address}/v1 (sessions: {store_label})");
    if let Some(limit) = open_files {
        errln!("keel serve: open files up to {limit} (~4 per running session)");
    }
    errln!(
        "keel serve: workspaces under {}",
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    if fresh {
        errln!(
            "keel serve: new token (kept in {}): {token}",
            paths::keel_home().join("serve-token").display()
        );
    } else {
        errln!(
            "keel serve: token from KEEL_SERVE_TOKEN or {}",
            paths::keel_home().join("serve-token").display()
        );
    }
    // Ctrl-C or SIGTERM stops the server gracefully; a second one leaves at once.
    let stop = keel_llm::CancellationToken::new();
    let _signals = signals::during_turn(&stop);
    let shutdown = async move {
        stop.cancelled().await;
        errln!("keel serve: stopping: no new turns; running turns may finish (again to stop at once)");
    };
    server.serve(listener, shutdown).await.context("serving")?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_server::PrepareErrorKind;

    /// A model the server cannot load or reach now is the server's trouble (503, try
    /// again), settings that do not work are the client's (400).
    #[test]
    fn a_model_failure_is_answered_by_its_kind() {
        let unreachable = config::ConfigError {
            kind: config::ConfigErrorKind::Model(keel_llm::ModelErrorKind::Network),
            message: "the model could not be downloaded".into(),
        };
        let prepared = model_failure(unreachable);
        assert_eq!(prepared.kind, PrepareErrorKind::Unavailable);
        assert_eq!(prepared.to_string(), "the model could not be downloaded");
        let wrong = model_failure(config::ConfigError::new("no model name is set"));
        assert_eq!(wrong.kind, PrepareErrorKind::Invalid);
    }
}

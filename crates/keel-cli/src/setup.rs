//! Turning settings into a running agent and an open session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_agent::{Agent, AgentConfig, Session, SessionContext};
use keel_llm::facts::ModelFacts;
use keel_llm::{ModelClient, Preset, ProviderConfig};
use keel_session::SessionStore;
use keel_tools::{PermissionPolicy, ToolsConfig};

use crate::cli::Cli;
use crate::config::{ConfigError, Layer, ModelSettings, Settings};

/// The workspace: `--cwd` or the current folder, canonical.
pub fn workspace(cli: &Cli) -> Result<PathBuf, ConfigError> {
    let dir = match &cli.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| ConfigError::new(format!("cannot read the current folder: {e}")))?,
    };
    let canonical =
        dir.canonicalize().map_err(|e| ConfigError::new(format!("--cwd {}: {e}", dir.display())))?;
    if !canonical.is_dir() {
        return Err(ConfigError::new(format!("--cwd {} is not a folder", dir.display())));
    }
    Ok(canonical)
}

/// Most clients kept for reuse (distinct settings; the oldest goes first).
const KEPT_CLIENTS: usize = 16;

/// A client for `config`, over the wire API it names. Clients are kept by their settings:
/// `keel serve` prepares many sessions with the same ones, and a client holds a
/// connection pool (and for HTTPS the system's CA certificates, read when it is built).
pub fn client(config: &ProviderConfig) -> Result<Arc<dyn ModelClient>, ConfigError> {
    static KEPT: Mutex<Vec<(ProviderConfig, Arc<dyn ModelClient>)>> = Mutex::new(Vec::new());
    let mut kept = match KEPT.lock() {
        Ok(kept) => kept,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some((_, client)) = kept.iter().find(|(settings, _)| settings == config) {
        return Ok(Arc::clone(client));
    }
    let client = config.client().map_err(ConfigError::model)?;
    if kept.len() >= KEPT_CLIENTS {
        kept.remove(0);
    }
    kept.push((config.clone(), Arc::clone(&client)));
    Ok(client)
}

/// The permission policy for the settings: the mode, the deny-list, the rules.
pub fn policy(settings: &Settings, workspace: &Path) -> Result<PermissionPolicy, ConfigError> {
    let configured = crate::permissions::with_kept(&settings.rules, workspace)?;
    let rules = crate::permissions::rules(&configured, workspace)?;
    Ok(PermissionPolicy::new(settings.permission)
        .add_deny_patterns(&settings.deny)
        .map_err(|e| ConfigError::new(format!("a deny pattern in the config is not a valid regex: {e}")))?
        .with_rules(rules))
}

/// The model the settings name: a client for a server, or the embedded model (loaded,
/// and downloaded first if needed, with progress on stderr when `progress`). A server
/// that is not a hosted preset is asked what it knows of its model
/// ([`keel_llm::facts::ask_server`]), and `settings` become what the answer implies
/// ([`Settings::fitted_to_server`]): the window, the profile, the route.
pub async fn model(settings: &mut Settings, progress: bool) -> Result<Arc<dyn ModelClient>, ConfigError> {
    let config = match &settings.model {
        ModelSettings::Remote(config) => config.as_ref().clone(),
        ModelSettings::Local(local) => {
            let model = crate::local::load(local, progress).await?;
            settings.fit_profile(&ModelFacts::from_name(&model.info().model), true);
            return Ok(model);
        }
    };
    let facts = model_facts(&config, &settings.layer).await;
    *settings = settings.clone().fitted_to_server(&facts);
    let ModelSettings::Remote(config) = &settings.model else {
        return Err(ConfigError::new("the settings lost their server while fitting them to it"));
    };
    if settings.templated() {
        let server = keel_local::server::TemplatedServer::new(config.as_ref().clone())
            .map_err(ConfigError::model)?
            .seed(settings.layer.seed);
        return Ok(Arc::new(server));
    }
    client(config)
}

/// What is known of `config`'s model: its server is asked when it is not a hosted
/// preset at its own address and something is left to learn (the window, the size, the
/// route, or what kind of server a custom address is); the model's name fills the rest.
pub async fn model_facts(config: &ProviderConfig, layer: &Layer) -> ModelFacts {
    let named = ModelFacts::from_name(&config.model);
    let preset = Preset::find(&config.provider);
    let hosted = preset.is_some_and(|p| !p.local && p.base_url == config.base_url);
    let unknown = layer.context_window.is_none()
        || preset.is_none()
        || crate::config::route_undecided(config, layer)
        || (layer.tool_profile.is_none() && named.billions.is_none());
    if hosted || !unknown {
        return named;
    }
    // A server's answer holds for the process: `keel serve` prepares many sessions on one.
    static ASKED: Mutex<BTreeMap<(String, String), ModelFacts>> = Mutex::new(BTreeMap::new());
    let key = (config.base_url.clone(), config.model.clone());
    if let Some(facts) = ASKED.lock().ok().and_then(|asked| asked.get(&key).cloned()) {
        return facts.or(named);
    }
    let facts = keel_llm::facts::ask_server(config).await;
    if let Ok(mut asked) = ASKED.lock() {
        if asked.len() >= 64 {
            asked.clear();
        }
        asked.insert(key, facts.clone());
    }
    facts.or(named)
}

/// [`agent_in`] without a store: subagents' sessions are kept in memory only. For runs
/// that keep no sessions (`keel replay`); a front end that keeps its sessions in a store
/// calls [`agent_in`] with it.
pub fn agent(
    settings: &Settings,
    workspace: &Path,
    policy: Arc<PermissionPolicy>,
    model: Arc<dyn ModelClient>,
) -> (Agent, Vec<String>) {
    agent_in(None, settings, workspace, policy, model)
}

/// The agent: the model, built-in tools, policy, system prompt; and notes for the user
/// (an AGENTS.md that was not read, and why). `store` is the store the parent's session
/// is in: the children of its `task` calls are sessions there (none: in memory).
pub fn agent_in(
    store: Option<&Arc<dyn SessionStore>>,
    settings: &Settings,
    workspace: &Path,
    policy: Arc<PermissionPolicy>,
    model: Arc<dyn ModelClient>,
) -> (Agent, Vec<String>) {
    // Shell commands are started through this binary (`keel __exec`), so they die with
    // keel and run in a PID namespace where possible.
    let launcher = std::env::current_exe()
        .ok()
        .map(|program| keel_sandbox::launch::Launcher { program, pid_namespace: settings.pid_namespace });
    if let Some(launcher) = &launcher {
        let sandboxed = settings.sandbox.auto && settings.sandbox.mode != keel_sandbox::SandboxMode::Off;
        launcher.warm_up(sandboxed);
    }
    let aids = settings.aids();
    let tools_config = ToolsConfig {
        extra_roots: settings.allowed_roots.clone(),
        allow_hardlinks: settings.allow_hardlinks,
        env_passthrough: settings.env_passthrough.clone(),
        launcher: launcher.clone(),
        sandbox: settings.sandbox.clone(),
        numbered_lines: settings.line_numbers,
        keep_parsing: settings.keep_parsing,
        web_fetch: settings.layer.web_fetch.clone().unwrap_or_default().config(),
        // As the environment block, which names the folder `.` for the small profile.
        relative_output_paths: aids.small(),
        ..ToolsConfig::default()
    };
    let (system_prompt, mut notes) = crate::prompt::system_prompt(
        workspace,
        &settings.allowed_roots,
        settings.tool_profile,
        settings.always_call,
    );
    let mut config = AgentConfig {
        system_prompt,
        max_steps: settings.max_steps,
        summary_on_step_limit: true,
        tool_first: settings.tool_first,
        always_call: settings.always_call,
        loop_warn_at: settings.loop_limits.0,
        loop_stop_at: settings.loop_limits.1,
        fresh_start: settings.fresh_start,
        context_window: settings.compaction.window,
        compact_at: settings.compaction.at,
        compact_keep: settings.compaction.keep,
        // The aids for small models act on what the task wants, read by the model.
        read_intent: aids.reads_intent(),
        profile: Some(format!("{}: {}", settings.tool_profile.as_str(), settings.profile_why)),
        ..AgentConfig::default()
    };
    // The user's hooks stand where the policy stands, weighing their decisions with it.
    let gate: Arc<dyn keel_agent::Hooks> = if settings.hooks.is_empty() {
        policy
    } else {
        let launch = crate::user_hooks::Launch {
            launcher: launcher.clone(),
            sandbox: settings.sandbox.clone(),
            allowed_roots: settings.allowed_roots.clone(),
            env_passthrough: settings.env_passthrough.clone(),
        };
        Arc::new(crate::user_hooks::UserHooks::new(Arc::clone(&settings.hooks), launch, policy))
    };
    let hooks: Arc<dyn keel_agent::Hooks> = Arc::new(aids.hooks(gate));
    let mut tools = aids.tools(Arc::new(tools_config), &model);
    // Skills: their names and descriptions in the prompt, the rest through the `skill` tool.
    crate::skills::offer(settings, workspace, &mut config.system_prompt, &mut tools, &mut notes);
    // Subagents: `task`, whose children get the tools above, the model and the hooks.
    let parent = (Arc::clone(&model), Arc::clone(&hooks), &config);
    let making = crate::subagents::Making { context, client };
    let store = store.cloned();
    crate::subagents::offer(settings, workspace, parent, store, &mut tools, &mut notes, making);
    (Agent::builder_shared(model).config(config).tools(tools).hooks_shared(hooks).build(), notes)
}

/// The per-session context: the workspace, the session's artifacts folder, and (for a
/// session with no messages yet) the environment block.
pub fn context(settings: &Settings, workspace: &Path, session: &Session) -> SessionContext {
    let mut ctx = SessionContext::new(workspace).artifacts(crate::paths::sessions_dir().join(session.id()));
    if settings.environment && session.messages().is_empty() {
        let today = keel_session::time::now_rfc3339();
        let show_path = settings.tool_profile != keel_tools::profile::ToolProfile::Small;
        ctx = ctx.environment(keel_tools::environment::describe(
            workspace,
            &today[..10.min(today.len())],
            show_path,
        ));
    }
    ctx
}

/// The session store (`--store`, see [`crate::store`]), unless `--no-session`; the agent
/// gets it too ([`agent_in`]), for its subagents' sessions.
pub fn store(cli: &Cli) -> anyhow::Result<Option<Arc<dyn SessionStore>>> {
    if cli.no_session {
        return Ok(None);
    }
    let spec = crate::store::chosen(cli.store.as_deref());
    Ok(Some(crate::store::open(spec.as_deref(), false)?.store))
}

/// Whether `error` is about the session the user named (none by that id, an ambiguous
/// one, none to continue): a usage error, exit 2, as `keel sessions show` answers it.
pub fn names_no_session(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<keel_session::SessionError>().is_some_and(|e| {
            matches!(
                e.kind,
                keel_session::SessionErrorKind::NotFound | keel_session::SessionErrorKind::Invalid
            )
        })
    })
}

/// Opens the session the flags ask for: resumed (`--resume`, `--continue`), or new.
/// A resumed session is repaired at once, and what repair did is reported.
pub fn open_session(
    cli: &Cli,
    store: Option<&dyn SessionStore>,
    workspace: &Path,
) -> anyhow::Result<(Session, Option<String>)> {
    let cwd = workspace.display().to_string();
    let Some(store) = store else { return Ok((Session::in_memory(&cwd), None)) };
    let resume_id = match (&cli.resume, cli.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(store.latest_in(&cwd)?.ok_or_else(|| {
            keel_session::SessionError::new(
                keel_session::SessionErrorKind::NotFound,
                format!("no earlier session in {cwd} to continue; start one with `keel`"),
            )
        })?),
        (None, false) => None,
    };
    match resume_id {
        None => Ok((store.create(&cwd)?, None)),
        Some(id) => {
            let mut session = store.open(&id)?;
            let report = session.repair()?;
            let note = if report.is_clean() {
                format!("resumed session {}", session.id())
            } else {
                format!(
                    "resumed session {} (it was interrupted: {} call(s) closed as outcome unknown, {} as not started)",
                    session.id(),
                    report.outcome_unknown,
                    report.not_started
                )
            };
            Ok((session, Some(note)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31, item 4: `keel serve` built a new HTTP client (a new connection pool) for
    /// every session; clients with the same settings are one now.
    #[test]
    fn clients_with_the_same_settings_are_shared() {
        let config = ProviderConfig::new("http://127.0.0.1:9/v1", "shared-model");
        let first = client(&config).unwrap();
        let again = client(&config.clone()).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the same settings, the same client");
        let other = client(&ProviderConfig::new("http://127.0.0.1:9/v1", "another-model")).unwrap();
        assert!(!Arc::ptr_eq(&first, &other), "other settings, another client");
        assert_eq!(other.info().model, "another-model");
    }
}

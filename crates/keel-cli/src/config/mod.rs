//! Configuration: flags beat environment variables beat the config file (a named
//! profile, then the file's top level).

use std::collections::BTreeMap;
use std::path::PathBuf;

use keel_llm::facts::ModelFacts;
use keel_llm::{Preset, ProviderConfig};
use keel_tools::PermissionMode;
use keel_tools::profile::ToolProfile;

use crate::cli::Cli;
use crate::provider::{pick_provider, provider_config};

pub mod file;
mod fit;
pub mod keys;
pub mod layer;

use file::with_mcp_files;
pub use file::{load_file, mcp_servers};
pub(crate) use layer::env;
use layer::layers;
pub use layer::{ConfigError, ConfigErrorKind, Layer, Price};

/// The embedded model's settings (`--local`).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    /// A GGUF path or known model name; `None` is the default model.
    pub model: Option<String>,
    /// Context size in tokens.
    pub n_ctx: Option<u32>,
    /// CPU threads.
    pub threads: Option<usize>,
    /// Output cap per reply.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// Constrain tool calls with a grammar.
    pub grammar: bool,
    /// Which kernels the engine runs.
    pub kernels: keel_local::engine::kernels::Kernels,
    /// Exactly this CPU variant of the kernels (`KEEL_LOCAL_VARIANT`).
    pub variant: Option<String>,
}

/// Which model runs the agent.
#[derive(Debug, Clone)]
pub enum ModelSettings {
    /// A server, over the wire API its config names.
    Remote(Box<ProviderConfig>),
    /// The embedded model.
    Local(LocalSettings),
}

/// Everything resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The model.
    pub model: ModelSettings,
    /// Step limit per turn.
    pub max_steps: u32,
    /// The permission mode.
    pub permission: PermissionMode,
    /// Extra deny patterns.
    pub deny: Vec<String>,
    /// Extra allowed roots.
    pub allowed_roots: Vec<PathBuf>,
    /// Writes through files with more than one hard link are allowed.
    pub allow_hardlinks: bool,
    /// Variables shell commands get although they look like credentials.
    pub env_passthrough: Vec<String>,
    /// Shell commands run in their own PID namespace when possible.
    pub pid_namespace: bool,
    /// Prices.
    pub pricing: BTreeMap<String, Price>,
    /// The profile used, if any.
    pub profile: Option<String>,
    /// The tools offered.
    pub tool_profile: ToolProfile,
    /// Why that profile (the config, the model's size and who told it).
    pub profile_why: String,
    /// Ask once to finish a turn that only described its change.
    pub finish_check: bool,
    /// Start a stuck turn again once with a fresh context.
    pub fresh_start: bool,
    /// read_file shows line numbers.
    pub line_numbers: bool,
    /// The small profile offers change_file in place of write_file and edit_file.
    pub change_file: bool,
    /// `update_plan` is offered.
    pub plan_tool: bool,
    /// The small profile's answer to a question is written from the tool outputs.
    pub grounded_answers: bool,
    /// Changes that would leave a parsing .py/.json file unparsable are refused.
    pub keep_parsing: bool,
    /// Start sessions with the environment block.
    pub environment: bool,
    /// The first step of a turn must call a tool.
    pub tool_first: bool,
    /// MCP servers by name.
    pub mcp_servers: BTreeMap<String, keel_mcp::ServerConfig>,
    /// Every step must call a tool (with the `answer` tool to finish).
    pub always_call: bool,
    /// Loop detection: warn at, stop at (0: never).
    pub loop_limits: (u32, u32),
    /// The limits of the `task` tool's subagents (`[subagents]`).
    pub subagent_limits: keel_agent::subagent::TaskLimits,
    /// The configured context window, if any, and when and how much to compact.
    pub compaction: Compaction,
    /// The shell sandbox.
    pub sandbox: keel_sandbox::SandboxSettings,
    /// The merged settings the model came from, to build another (`/model`).
    pub layer: Layer,
    /// The config file's profiles (`/model PROFILE`).
    pub profiles: BTreeMap<String, Layer>,
    /// Permission rules from the config file, with their sources.
    pub rules: Vec<crate::permissions::ConfiguredRule>,
    /// The user's hooks (`[hooks]`).
    pub hooks: std::sync::Arc<crate::user_hooks::HookSet>,
}

impl Settings {
    /// The aids the model gets, from the profile and the settings that follow it.
    pub fn aids(&self) -> keel_tools::aids::Aids {
        keel_tools::aids::Aids {
            profile: self.tool_profile,
            finish_check: self.finish_check,
            change_file: self.change_file,
            plan: self.plan_tool,
            grounded_answers: self.grounded_answers,
            always_call: self.always_call,
        }
    }

    /// The model's name, for display and prices.
    pub fn model_name(&self) -> String {
        match &self.model {
            ModelSettings::Remote(client) => client.model.clone(),
            ModelSettings::Local(local) => match &local.model {
                // A known name as it is (`qwen2.5-coder-0.5b` has a dot, not an
                // extension); a file by its name without `.gguf`.
                Some(spec) if keel_local::models::find(spec).is_some() => spec.clone(),
                Some(spec) => {
                    let file = std::path::Path::new(spec).file_name().map(|f| f.to_string_lossy());
                    let file = file.as_deref().unwrap_or(spec);
                    file.strip_suffix(".gguf").unwrap_or(file).to_owned()
                }
                None => keel_local::models::default_model().name.to_owned(),
            },
        }
    }

    /// Sets `tool_first` and `always_call` for the route, unless the config sets them:
    /// on where the route constrains a required call exactly (the embedded engine,
    /// llama-server's templated route), off where a server samples it (llama-server let
    /// Qwen 1.5B run on past its call for thousands of tokens over Chat Completions). The
    /// one place they are decided.
    pub fn follow_route(&mut self, constrained: bool) {
        self.tool_first = self.layer.tool_first.unwrap_or(constrained);
        self.always_call = self.layer.always_call.unwrap_or(constrained);
    }

    /// Chooses the profile again for a model of these `facts` (unless the config sets
    /// one), with the aids that follow it (the finish checks, keep-parsing) unless they
    /// are set.
    pub fn fit_profile(&mut self, facts: &ModelFacts, local_preset: bool) {
        let set = self.layer.tool_profile.as_deref().and_then(ToolProfile::parse);
        let choice = crate::profile_choice::choose(set, facts, local_preset);
        self.tool_profile = choice.profile;
        self.profile_why = choice.why;
        self.follow_profile();
    }

    /// Sets the aids that follow the tool profile, unless the config sets them: the
    /// finish checks and keep-parsing for the small profile, the plan tool for the full.
    pub fn follow_profile(&mut self) {
        let small = self.tool_profile == ToolProfile::Small;
        self.finish_check = self.layer.finish_check.unwrap_or(small);
        self.keep_parsing = self.layer.keep_parsing.unwrap_or(small);
        self.plan_tool = self.layer.plan_tool.unwrap_or(!small);
    }
}

/// When and how much a long session is compacted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compaction {
    /// The context window, when configured.
    pub window: Option<u64>,
    /// Compact past this share of the window (0: never).
    pub at: f64,
    /// Keep about this share verbatim.
    pub keep: f64,
}

impl Compaction {
    fn from_layer(layer: &Layer) -> Result<Compaction, ConfigError> {
        let at = layer.compact_at.unwrap_or(0.8);
        if !(0.0..1.0).contains(&at) {
            return Err(ConfigError::new(format!(
                "compact_at must be a share of the context window below 1, e.g. 0.8, or 0 to never compact (got {at})"
            )));
        }
        let keep = layer.compact_keep.unwrap_or(0.2);
        if !(0.05..=0.5).contains(&keep) || (at > 0.0 && keep >= at) {
            return Err(ConfigError::new(format!(
                "compact_keep must be a share of the window between 0.05 and 0.5, below compact_at (got {keep})"
            )));
        }
        if layer.context_window.is_some_and(|w| w < 1024) {
            return Err(ConfigError::new("context_window must be at least 1024 tokens"));
        }
        Ok(Compaction { window: layer.context_window, at, keep })
    }
}

/// Resolves settings from flags, environment and file. `interactive` picks the default
/// permission mode (ask) versus print mode's (auto).
pub fn resolve(cli: &Cli, interactive: bool) -> Result<Settings, ConfigError> {
    resolve_in(cli, load_file()?, interactive)
}

/// [`resolve`] over a config file already read (`keel serve` reads it once, not per
/// session).
pub fn resolve_in(cli: &Cli, file: layer::FileConfig, interactive: bool) -> Result<Settings, ConfigError> {
    let (layer, profile_name) = layers(cli, &file)?;
    let rules = crate::permissions::configured(&file, profile_name.as_deref());
    let hooks = std::sync::Arc::new(crate::user_hooks::HookSet::compile(&file.hooks)?);
    if cli.local || cli.local_model.is_some() {
        let local = LocalSettings {
            model: cli.local_model.clone().or_else(|| env("KEEL_LOCAL_MODEL")),
            n_ctx: cli.local_ctx,
            threads: cli.threads,
            max_tokens: layer.max_tokens,
            temperature: layer.temperature,
            seed: layer.seed,
            grammar: layer.grammar.unwrap_or(true),
            kernels: match &layer.local_kernels {
                Some(text) => text.parse().map_err(|e| ConfigError::new(format!("local_kernels: {e}")))?,
                None => keel_local::engine::kernels::Kernels::Auto,
            },
            variant: env("KEEL_LOCAL_VARIANT"),
        };
        let mcp = with_mcp_files(file.mcp_servers, cli)?;
        crate::permissions::check_tools(&rules, &mcp)?;
        let mut settings = settings_from(
            Layer { provider: Some("llamacpp".into()), ..layer },
            file.pricing,
            profile_name,
            interactive,
        )?;
        settings.model = ModelSettings::Local(local);
        settings.rules = rules;
        settings.hooks = hooks;
        // The embedded engine constrains every required call.
        settings.follow_route(true);
        settings.mcp_servers = mcp;
        return Ok(settings);
    }
    let mcp = with_mcp_files(file.mcp_servers, cli)?;
    crate::permissions::check_tools(&rules, &mcp)?;
    let mut settings = settings_from(layer, file.pricing, profile_name, interactive)?;
    settings.mcp_servers = mcp;
    settings.rules = rules;
    settings.hooks = hooks;
    settings.profiles = file.profiles;
    Ok(settings)
}

pub(crate) fn settings_from(
    layer: Layer,
    pricing: BTreeMap<String, Price>,
    profile: Option<String>,
    interactive: bool,
) -> Result<Settings, ConfigError> {
    let client = provider_config(&layer)?;
    let sandbox = sandbox_settings(&layer)?;
    let permission = match &layer.permission {
        Some(text) => PermissionMode::parse(text).ok_or_else(|| {
            ConfigError::new(format!("--permission must be auto, ask or read-only (got `{text}`)"))
        })?,
        None if interactive => PermissionMode::Ask,
        None => PermissionMode::Auto,
    };
    if let Some(text) = &layer.tool_profile
        && ToolProfile::parse(text).is_none()
    {
        return Err(ConfigError::new(format!("tool_profile must be small or full (got `{text}`)")));
    }
    // The profile follows the model: its size as its name states it here, what its
    // server says once asked; both through `Settings::fit_profile` (which also sets the
    // finish checks and keep-parsing that follow the profile).
    let local = Preset::find(&client.provider).is_some_and(|p| p.local);
    let named = ModelFacts::from_name(&client.model);
    // llama-server driven like the embedded engine: its calls are constrained, so every
    // step may require one, as with --local.
    let templated = templated_server(&client, &layer);
    let max_steps = layer.max_steps.unwrap_or(50);
    if max_steps == 0 {
        return Err(ConfigError::new("--max-steps must be at least 1"));
    }
    let mut settings = Settings {
        model: ModelSettings::Remote(Box::new(client)),
        max_steps,
        permission,
        deny: layer.deny.clone().unwrap_or_default(),
        allowed_roots: layer.allowed_roots.clone().unwrap_or_default(),
        allow_hardlinks: layer.allow_hardlinks.unwrap_or(false),
        env_passthrough: layer.env_passthrough.clone().unwrap_or_default(),
        pid_namespace: layer.pid_namespace.unwrap_or(true),
        pricing,
        profile,
        tool_profile: ToolProfile::Full,
        profile_why: String::new(),
        finish_check: false,
        // Off by default: on the real-task suite a fresh start did not help the 1.5B
        // model (20/72 with it, 22/72 without), and twice it undid a fixed file.
        fresh_start: layer.fresh_start.unwrap_or(false),
        // On for every model: without them the 1.5B model stopped copying numbers into
        // files and sums (fix-typo, sum-to-file, count-rows: 4 runs gained), but turned
        // from writing people.json to failing jq calls (csv-to-json: 3 of 3 lost), 6
        // runs lost in all; see the issue 17 notes.
        line_numbers: layer.line_numbers.unwrap_or(true),
        // A small model writes a file well in a plain reply and badly inside a JSON
        // string (escapes, line numbers and template tags copied in): see issue 17's notes.
        change_file: layer.change_file.unwrap_or(true),
        // Follows the profile (`follow_profile`): off for small models until the suite
        // shows they gain from it.
        plan_tool: layer.plan_tool.unwrap_or(true),
        // The 1.5B model paraphrased outputs it had just seen; asked plainly, it quoted them.
        grounded_answers: layer.grounded_answers.unwrap_or(true),
        // A small model's broken edit is refused rather than made: its next edits piled
        // onto the broken file (`def mean(values): return …` over a working function).
        keep_parsing: false,
        environment: layer.environment.unwrap_or(true),
        // Decided by the route below (`follow_route`).
        tool_first: false,
        mcp_servers: BTreeMap::new(),
        always_call: false,
        loop_limits: (layer.loop_warn_at.unwrap_or(3), layer.loop_stop_at.unwrap_or(8)),
        subagent_limits: layer.subagents.clone().unwrap_or_default().limits()?,
        compaction: Compaction::from_layer(&layer)?,
        sandbox,
        layer,
        profiles: BTreeMap::new(),
        rules: Vec::new(),
        hooks: std::sync::Arc::default(),
    };
    settings.follow_route(templated);
    settings.fit_profile(&named, local);
    Ok(settings)
}

/// Whether `client` is llama-server driven through `/completion` with keel's template and
/// grammar (`keel_local::server`): the llamacpp preset over Chat Completions with
/// `grammar = true` (left unset, [`crate::setup::model`] decides from the server's
/// template and sets it).
pub fn templated_server(client: &ProviderConfig, layer: &Layer) -> bool {
    client.provider == "llamacpp" && client.api == keel_llm::Api::Chat && layer.grammar.unwrap_or(false)
}

/// Whether the route is still to be chosen: the llamacpp preset over Chat Completions
/// with no `grammar` setting.
pub fn route_undecided(client: &ProviderConfig, layer: &Layer) -> bool {
    client.provider == "llamacpp" && client.api == keel_llm::Api::Chat && layer.grammar.is_none()
}

/// The sandbox settings alone (for `keel sandbox`, which needs no model).
pub fn resolve_sandbox(cli: &Cli) -> Result<keel_sandbox::SandboxSettings, ConfigError> {
    let file = load_file()?;
    sandbox_settings(&layers(cli, &file)?.0)
}

/// The sandbox settings: the chosen mode, or workspace-write where the system enforces it.
fn sandbox_settings(layer: &Layer) -> Result<keel_sandbox::SandboxSettings, ConfigError> {
    use keel_sandbox::{SandboxMode, SandboxSettings};
    let mode = match &layer.sandbox {
        Some(text) => Some(SandboxMode::parse(text).ok_or_else(|| {
            ConfigError::new(format!("sandbox must be workspace-write, read-only or off (got `{text}`)"))
        })?),
        None => None,
    };
    // A network setting the user chose is a sandbox they chose: where the system cannot
    // enforce it, commands are refused, never run with the network on.
    let network_off = layer.network == Some(false);
    if mode == Some(SandboxMode::Off) && network_off {
        return Err(ConfigError::new(
            "--network off needs the sandbox, but sandbox is off: choose one (--sandbox workspace-write or read-only)",
        ));
    }
    Ok(SandboxSettings {
        mode: mode.unwrap_or(SandboxMode::WorkspaceWrite),
        network: layer.network,
        auto: mode.is_none() && !network_off,
        // keel's own files: config (keys), sessions, the serve token.
        hidden: vec![crate::paths::keel_home(), crate::paths::config_dir()],
    })
}

impl Settings {
    /// The layer without what names a model and its server: what another provider's
    /// model keeps of the current settings.
    fn without_model(&self) -> Layer {
        Layer {
            provider: None,
            api: None,
            base_url: None,
            model: None,
            api_key: None,
            thinking: None,
            reasoning_effort: None,
            reasoning_summary: None,
            reasoning_replay: None,
            text_tool_calls: None,
            thoughts_as_reasoning: None,
            ..self.layer.clone()
        }
    }

    /// The configuration `/model ARG` switches to. `ARG` is a profile of the config file
    /// (its provider, server, API and model), a preset with or without a model name
    /// (`anthropic`, `openai gpt-5`: the preset's server, API and key), or a model name
    /// on the current server.
    pub fn switch_model(&self, arg: &str) -> Result<ProviderConfig, ConfigError> {
        let mut words = arg.split_whitespace();
        let (first, second) = (words.next().unwrap_or_default(), words.next());
        let preset = first == "custom" || Preset::find(first).is_some();
        let layer = match (self.profiles.get(first), second) {
            (Some(profile), None) => profile.clone().over(self.without_model()),
            _ if preset && pick_provider(&self.layer).as_deref() != Some(first) => {
                let model = second.map(str::to_owned);
                Layer { provider: Some(first.to_owned()), model, ..self.without_model() }
            }
            _ if preset => {
                Layer { model: second.map(str::to_owned).or(self.layer.model.clone()), ..self.layer.clone() }
            }
            _ => Layer { model: Some(first.to_owned()), ..self.layer.clone() },
        };
        provider_config(&layer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::layer::FileConfig;

    /// A known model's name keeps its dot (`qwen2.5-coder-0.5b` was shown as
    /// `qwen2.5-coder-0`); a file is named without its folder and `.gguf`.
    #[test]
    fn a_local_models_name_is_shown_whole() {
        let named = |model: &str| {
            let layer = Layer { provider: Some("llamacpp".into()), ..Layer::default() };
            let mut settings = settings_from(layer, BTreeMap::new(), None, false).unwrap();
            settings.model = ModelSettings::Local(LocalSettings {
                model: Some(model.into()),
                n_ctx: None,
                threads: None,
                max_tokens: None,
                temperature: None,
                seed: None,
                grammar: true,
                kernels: keel_local::engine::kernels::Kernels::default(),
                variant: None,
            });
            settings.model_name()
        };
        assert_eq!(named("qwen2.5-coder-0.5b"), "qwen2.5-coder-0.5b");
        assert_eq!(named("/models/my.model-q4.gguf"), "my.model-q4");
        assert_eq!(named("plain"), "plain");
    }

    /// Issue 28, item 7: `--network off` was dropped where Landlock is missing (the
    /// default sandbox is not applied there), and the command reached the network.
    #[test]
    fn a_chosen_network_setting_makes_the_sandbox_a_choice() {
        use keel_sandbox::SandboxMode;
        let off = Layer { network: Some(false), ..Layer::default() };
        let settings = sandbox_settings(&off).unwrap();
        assert_eq!(
            (settings.mode, settings.network, settings.auto),
            (SandboxMode::WorkspaceWrite, Some(false), false)
        );
        assert!(sandbox_settings(&Layer::default()).unwrap().auto);
        assert!(sandbox_settings(&Layer { network: Some(true), ..Layer::default() }).unwrap().auto);
        let contradiction = Layer { network: Some(false), sandbox: Some("off".into()), ..Layer::default() };
        assert!(
            sandbox_settings(&contradiction).unwrap_err().message.contains("--network off needs the sandbox")
        );
    }

    #[test]
    fn flags_beat_env_beat_profile_beat_file() {
        let file = Layer {
            provider: Some("llamacpp".into()),
            model: Some("file".into()),
            max_steps: Some(5),
            ..Layer::default()
        };
        let profile = Layer { model: Some("profile".into()), ..Layer::default() };
        let env = Layer { model: Some("env".into()), ..Layer::default() };
        let flags = Layer { model: Some("flag".into()), ..Layer::default() };
        let merged = flags.clone().over(env.clone()).over(profile.clone()).over(file.clone());
        assert_eq!(merged.model.as_deref(), Some("flag"));
        assert_eq!(merged.max_steps, Some(5));
        let merged = Layer::default().over(env).over(profile.clone()).over(file.clone());
        assert_eq!(merged.model.as_deref(), Some("env"));
        let merged = Layer::default().over(profile).over(file);
        assert_eq!(merged.model.as_deref(), Some("profile"));
    }

    #[test]
    fn a_local_preset_needs_no_key_and_defaults_permissions_by_mode() {
        let layer = Layer { provider: Some("llamacpp".into()), ..Layer::default() };
        let print = settings_from(layer.clone(), BTreeMap::new(), None, false).unwrap();
        assert_eq!(print.permission, PermissionMode::Auto);
        assert!(matches!(&print.model, ModelSettings::Remote(c) if c.model == "default"));
        let interactive = settings_from(layer, BTreeMap::new(), None, true).unwrap();
        assert_eq!(interactive.permission, PermissionMode::Ask);
    }

    /// Issue 29: the preset's name decided the profile; a 70B model behind vLLM got every
    /// aid and the same 1.5B model behind `--base-url` none.
    #[test]
    fn the_profile_follows_the_models_size_not_the_preset() {
        let profile = |provider: &str, model: &str, set: Option<&str>| {
            let layer = Layer {
                provider: Some(provider.into()),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: Some(model.into()),
                tool_profile: set.map(str::to_owned),
                ..Layer::default()
            };
            let settings = settings_from(layer, BTreeMap::new(), None, false).unwrap();
            (settings.tool_profile, settings.finish_check)
        };
        assert_eq!(profile("vllm", "meta-llama/Llama-3.1-70B-Instruct", None), (ToolProfile::Full, false));
        assert_eq!(profile("custom", "qwen2.5-coder-1.5b-instruct", None), (ToolProfile::Small, true));
        assert_eq!(
            profile("llamacpp", "default", None),
            (ToolProfile::Small, true),
            "unknown size on a local server"
        );
        assert_eq!(profile("custom", "my-model", None), (ToolProfile::Full, false));
        assert_eq!(profile("custom", "qwen2.5-coder-1.5b", Some("full")), (ToolProfile::Full, false));
    }

    /// Issue 34: the plan tool follows the profile unless the config sets it.
    #[test]
    fn the_plan_tool_follows_the_profile_unless_set() {
        let plan = |model: &str, set: Option<bool>| {
            let layer = Layer {
                provider: Some("custom".into()),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: Some(model.into()),
                plan_tool: set,
                ..Layer::default()
            };
            settings_from(layer, BTreeMap::new(), None, false).unwrap().aids().plan
        };
        assert!(plan("gpt-5", None));
        assert!(!plan("qwen2.5-coder-1.5b-instruct", None));
        assert!(plan("qwen2.5-coder-1.5b-instruct", Some(true)));
        assert!(!plan("gpt-5", Some(false)));
    }

    /// Issue 34: the subagents' limits come from `[subagents]`; a limit of 0 is refused.
    #[test]
    fn subagent_limits_come_from_their_table() {
        use crate::config::layer::SubagentsTable;
        use keel_agent::subagent::TaskLimits;
        let limits = |table: Option<SubagentsTable>| {
            let layer = Layer {
                provider: Some("custom".into()),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: Some("gpt-5".into()),
                subagents: table,
                ..Layer::default()
            };
            settings_from(layer, BTreeMap::new(), None, false).map(|s| s.subagent_limits)
        };
        assert_eq!(limits(None).unwrap(), TaskLimits::default());
        let set = SubagentsTable { max_steps: Some(8), timeout_secs: Some(90), ..SubagentsTable::default() };
        assert_eq!(
            limits(Some(set)).unwrap(),
            TaskLimits { max_steps: 8, timeout: std::time::Duration::from_secs(90), ..TaskLimits::default() }
        );
        let zero = SubagentsTable { tokens: Some(0), ..SubagentsTable::default() };
        assert_eq!(limits(Some(zero)).unwrap_err().to_string(), "[subagents] tokens must be at least 1");
    }

    #[test]
    fn mcp_servers_read_as_codex_writes_them() {
        let file = FileConfig::parse(
            r#"
model = "m"
[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "..." }
startup_timeout_sec = 30
enabled_tools = ["create_issue"]

[mcp_servers.docs]
url = "https://example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"
http_headers = { "X-Team" = "core" }
"#,
            std::path::Path::new("config.toml"),
        )
        .unwrap();
        assert_eq!(file.mcp_servers.keys().collect::<Vec<_>>(), ["docs", "github"]);
        assert_eq!(file.mcp_servers["github"].args, ["-y", "@modelcontextprotocol/server-github"]);
        assert_eq!(file.mcp_servers["docs"].http_headers["X-Team"], "core");
        let json: layer::McpFile =
            serde_json::from_str(r#"{"mcpServers": {"fs": {"command": "npx", "args": ["x"]}}}"#).unwrap();
        assert_eq!(json.mcp_servers["fs"].command.as_deref(), Some("npx"));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let bad = |layer: Layer| settings_from(layer, BTreeMap::new(), None, false).unwrap_err().message;
        assert!(
            bad(Layer { provider: Some("nope".into()), ..Layer::default() })
                .contains("unknown provider `nope`")
        );
        assert!(
            bad(Layer { provider: Some("ollama".into()), ..Layer::default() }).contains("needs a model name")
        );
        let base =
            Layer { base_url: Some("http://x/v1".into()), model: Some("m".into()), ..Layer::default() };
        assert!(
            bad(Layer { permission: Some("yolo".into()), ..base.clone() }).contains("auto, ask or read-only")
        );
        assert!(bad(Layer { max_steps: Some(0), ..base }).contains("at least 1"));
    }
}

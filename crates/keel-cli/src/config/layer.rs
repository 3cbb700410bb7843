//! The layers of settings before they are resolved: the config file (its top level and
//! named profiles), the environment and the flags, merged in that order of precedence.

use std::collections::BTreeMap;
use std::path::PathBuf;

use keel_agent::subagent::TaskLimits;
use serde::Deserialize;

use crate::cli::Cli;

/// Declares [`Layer`] once: the struct, and [`Layer::over`], which takes each setting
/// from the upper layer and else from the one below.
macro_rules! layer {
    ($(#[$meta:meta])* pub struct Layer { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        pub struct Layer {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl Layer {
            /// This layer over `base`: each setting of `self`, else `base`'s.
            pub(crate) fn over(self, base: Layer) -> Layer {
                Layer { $($field: self.$field.or(base.$field),)* }
            }
        }
    };
}

layer! {
    /// One layer of settings (file top level, a profile, env, flags).
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Layer {
        /// Provider preset or `custom`.
        pub provider: Option<String>,
        /// The wire API: `chat`, `responses` or `anthropic` (default: the preset's).
        pub api: Option<String>,
        /// Base URL.
        pub base_url: Option<String>,
        /// Model name.
        pub model: Option<String>,
        /// API key (prefer the environment).
        pub api_key: Option<String>,
        /// Step limit per turn.
        pub max_steps: Option<u32>,
        /// auto | ask | read-only.
        pub permission: Option<String>,
        /// Output cap per reply.
        pub max_tokens: Option<u32>,
        /// Retries of failed requests.
        pub max_retries: Option<u32>,
        /// Seconds without data before a request fails.
        pub idle_timeout_secs: Option<u64>,
        /// Sampling temperature.
        pub temperature: Option<f32>,
        /// Sampling seed.
        pub seed: Option<u64>,
        /// Parse tool calls written as text.
        pub text_tool_calls: Option<bool>,
        /// Keep the text before a tool call as reasoning, not sent back (on for local presets).
        pub thoughts_as_reasoning: Option<bool>,
        /// never | tool_turns | always.
        pub reasoning_replay: Option<String>,
        /// Anthropic extended thinking: off | adaptive | a token budget.
        pub thinking: Option<String>,
        /// Responses `reasoning.effort`: minimal | low | medium | high.
        pub reasoning_effort: Option<String>,
        /// Responses `reasoning.summary`: auto | concise | detailed | none.
        pub reasoning_summary: Option<String>,
        /// Use streaming (default true).
        pub stream: Option<bool>,
        /// Extra shell deny patterns (regular expressions).
        pub deny: Option<Vec<String>>,
        /// Folders outside the workspace the tools may use.
        pub allowed_roots: Option<Vec<PathBuf>>,
        /// Let write_file and edit_file write files with more than one hard link.
        pub allow_hardlinks: Option<bool>,
        /// Variables passed to shell commands although they look like credentials.
        pub env_passthrough: Option<Vec<String>>,
        /// Run each shell command in its own PID namespace when possible (default on).
        pub pid_namespace: Option<bool>,
        /// `small` or `full`: the tools offered (default small for local models).
        pub tool_profile: Option<String>,
        /// Ask once to finish a turn that only described a change or skipped its check, and
        /// refuse changes while the task is a question (default on for local models).
        pub finish_check: Option<bool>,
        /// A turn stuck repeating calls or out of steps starts again once from its task with
        /// a fresh context (default off).
        pub fresh_start: Option<bool>,
        /// read_file shows line numbers (default on).
        pub line_numbers: Option<bool>,
        /// The small profile changes files with change_file (the model says what to change,
        /// a plain request to it writes the file) instead of write_file and edit_file
        /// (default on with the small tool profile).
        pub change_file: Option<bool>,
        /// Offer `update_plan`, the plan the agent keeps (default on with the full tool
        /// profile, off with the small one).
        pub plan_tool: Option<bool>,
        /// With the small profile, a question's final answer is written by a plain request
        /// to the model from the turn's last tool outputs (default on with the small profile).
        pub grounded_answers: Option<bool>,
        /// write_file and edit_file refuse a change that would leave a `.py` or `.json` file
        /// that parses unparsable (default on with the small tool profile).
        pub keep_parsing: Option<bool>,
        /// Start a session with the environment block (default on).
        pub environment: Option<bool>,
        /// The first step of a turn must call a tool (default on for the embedded model).
        pub tool_first: Option<bool>,
        /// Every step must call a tool; the model finishes by calling `answer` (default on
        /// for the embedded model).
        pub always_call: Option<bool>,
        /// Constrain tool calls with a grammar: the embedded model's (default on), and with
        /// the llamacpp preset, llama-server driven through `/completion` with keel's own
        /// rendering of the model's template (default: when that template writes
        /// `<tool_call>`).
        pub grammar: Option<bool>,
        /// The embedded model's kernels: auto (the best this CPU runs; the safe set where
        /// those crashed before), fast or safe.
        pub local_kernels: Option<String>,
        /// Sandbox for shell commands: workspace-write, read-only or off.
        pub sandbox: Option<String>,
        /// `keel serve`: a client may ask for a weaker sandbox or permission mode than the
        /// server's own (default no: only as strict or stricter).
        pub serve_clients_may_weaken: Option<bool>,
        /// Network for sandboxed shell commands: true or false.
        pub network: Option<bool>,
        /// A call repeated this many times in a row gets a note (default 3; 0 never).
        pub loop_warn_at: Option<u32>,
        /// A call repeated this many times in a row stops the turn (default 8; 0 never).
        pub loop_stop_at: Option<u32>,
        /// The model's context window in tokens (default: known models, the server's, or
        /// the embedded model's context).
        pub context_window: Option<u64>,
        /// Whether the model takes images (default: what its server says, else unknown and
        /// images are sent; false refuses a prompt with images before sending it).
        pub images: Option<bool>,
        /// Compact the session when its context passes this share of the window (default
        /// 0.8; 0 never).
        pub compact_at: Option<f64>,
        /// The share of the window a compaction keeps verbatim (default 0.2).
        pub compact_keep: Option<f64>,
        /// Permission rules (`[permissions]`): collected from the top level and the profile,
        /// not overridden by either.
        pub permissions: Option<PermissionsTable>,
        /// `web_fetch`'s private addresses (`[web_fetch]`): a table of a profile replaces
        /// the top level's.
        pub web_fetch: Option<WebFetchTable>,
        /// The limits of the `task` tool's subagents (`[subagents]`): a table of a profile
        /// replaces the top level's.
        pub subagents: Option<SubagentsTable>,
    }
}

/// Per-million-token prices for cost estimates.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million uncached input tokens.
    pub input: f64,
    /// Dollars per million cached input tokens.
    #[serde(default)]
    pub cached: Option<f64>,
    /// Dollars per million output tokens.
    pub output: f64,
}

/// The config file.
#[derive(Debug, Clone, Default)]
pub struct FileConfig {
    /// Profile used when none is named.
    pub profile: Option<String>,
    /// Top-level defaults: the file's keys outside its tables.
    pub defaults: Layer,
    /// Named profiles.
    pub profiles: BTreeMap<String, Layer>,
    /// Prices by model name.
    pub pricing: BTreeMap<String, Price>,
    /// MCP servers by name (Codex's `[mcp_servers.NAME]`).
    pub mcp_servers: BTreeMap<String, keel_mcp::ServerConfig>,
    /// User hooks by event (Claude Code's `hooks`, as `[[hooks.EVENT]]`).
    pub hooks: crate::user_hooks::HooksTable,
}

/// The config file's keys that are not settings of a [`Layer`]: [`FileConfig`] but its
/// `defaults`, read apart from them (a flattened `Layer` would lose every key's line).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileTables {
    /// Profile used when none is named.
    pub(crate) profile: Option<String>,
    /// Named profiles.
    #[serde(default)]
    pub(crate) profiles: BTreeMap<String, Layer>,
    /// Prices by model name.
    #[serde(default)]
    pub(crate) pricing: BTreeMap<String, Price>,
    /// MCP servers by name (Codex's `[mcp_servers.NAME]`).
    #[serde(default)]
    pub(crate) mcp_servers: BTreeMap<String, keel_mcp::ServerConfig>,
    /// User hooks by event (Claude Code's `hooks`, as `[[hooks.EVENT]]`).
    #[serde(default)]
    pub(crate) hooks: crate::user_hooks::HooksTable,
}

/// A file given with `--mcp-config`: `[mcp_servers.NAME]` tables (TOML) or
/// `{"mcpServers": {...}}` (JSON).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpFile {
    /// The servers by name.
    #[serde(default, alias = "mcpServers")]
    pub mcp_servers: BTreeMap<String, keel_mcp::ServerConfig>,
}

/// What kind of problem stopped keel before it could start: it decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The flags, settings or files are wrong: a usage error (exit 2).
    Invalid,
    /// No model is configured at all (no flag, variable, file or key names one): a usage
    /// error (exit 2) that a keel with the embedded model can offer to answer.
    NoModel,
    /// The model could not be built or reached for a reason other than its settings
    /// (the network, the server, the engine): an error (exit 1), its kind kept.
    Model(keel_llm::ModelErrorKind),
}

/// A problem with the configuration or the model it names, with a message that says
/// what to do.
#[derive(Debug)]
pub struct ConfigError {
    /// What kind of problem.
    pub kind: ConfigErrorKind,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl ConfigError {
    /// A usage error: the flags, settings or files are wrong.
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError { kind: ConfigErrorKind::Invalid, message: message.into() }
    }

    /// A model that could not be built: its kind is kept (a configuration problem stays
    /// a usage error).
    pub fn model(error: keel_llm::ModelError) -> ConfigError {
        let kind = match error.kind {
            keel_llm::ModelErrorKind::Config => ConfigErrorKind::Invalid,
            other => ConfigErrorKind::Model(other),
        };
        ConfigError { kind, message: error.message }
    }

    /// The exit code: 2 for a usage error, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            ConfigErrorKind::Invalid | ConfigErrorKind::NoModel => crate::exit::USAGE,
            ConfigErrorKind::Model(_) => crate::exit::ERROR,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

pub(crate) fn env_layer() -> Layer {
    Layer {
        provider: env("KEEL_PROVIDER"),
        api: env("KEEL_API"),
        base_url: env("KEEL_BASE_URL"),
        model: env("KEEL_MODEL"),
        api_key: env("KEEL_API_KEY"),
        max_steps: env("KEEL_MAX_STEPS").and_then(|v| v.parse().ok()),
        permission: env("KEEL_PERMISSION"),
        local_kernels: env("KEEL_LOCAL_KERNELS"),
        ..Layer::default()
    }
}

pub(crate) fn flag_layer(cli: &Cli) -> Result<Layer, ConfigError> {
    Ok(Layer {
        provider: cli.provider.clone(),
        api: cli.api.clone(),
        base_url: cli.base_url.clone(),
        model: cli.model.clone(),
        max_steps: cli.max_steps,
        tool_profile: cli.tool_profile.clone(),
        permission: cli.permission.clone(),
        seed: cli.seed,
        temperature: cli.temperature,
        compact_at: cli.compact_at,
        sandbox: cli.sandbox.clone(),
        network: cli.network.as_deref().map(|text| parse_on_off("--network", text)).transpose()?,
        ..Layer::default()
    })
}

/// Flags over environment over the profile over the file's top level, and the profile's
/// name.
pub(crate) fn layers(cli: &Cli, file: &FileConfig) -> Result<(Layer, Option<String>), ConfigError> {
    let profile_name = cli.profile.clone().or_else(|| env("KEEL_PROFILE")).or(file.profile.clone());
    let profile = match &profile_name {
        Some(name) => match file.profiles.get(name) {
            Some(layer) => layer.clone(),
            None => {
                let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
                return Err(ConfigError::new(format!(
                    "profile `{name}` is not in {} (profiles: {})",
                    crate::paths::config_file().display(),
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                )));
            }
        },
        None => Layer::default(),
    };
    let layer = flag_layer(cli)?.over(env_layer()).over(profile).over(file.defaults.clone());
    Ok((layer, profile_name))
}

pub(crate) fn parse_on_off(name: &str, text: &str) -> Result<bool, ConfigError> {
    match text {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(ConfigError::new(format!("{name} must be on or off (got `{text}`)"))),
    }
}

/// A `[web_fetch]` table: which hosts `web_fetch` may reach at non-public addresses
/// (loopback, private, link-local): a docs server on this machine or the local network.
/// Its unknown keys are answered at their line by the config check (`keys.rs`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WebFetchTable {
    /// Every host may.
    #[serde(default)]
    pub allow_private: Option<bool>,
    /// These hosts may (`localhost`, `docs.lan`, `*.internal`, `192.168.1.20`).
    #[serde(default)]
    pub private_hosts: Option<Vec<String>>,
}

impl WebFetchTable {
    /// The tool's settings: these addresses, the default bounds.
    pub fn config(&self) -> keel_tools::web_fetch::WebFetchConfig {
        keel_tools::web_fetch::WebFetchConfig {
            allow_private: self.allow_private.unwrap_or(false),
            private_hosts: self.private_hosts.clone().unwrap_or_default(),
            ..keel_tools::web_fetch::WebFetchConfig::default()
        }
    }
}

/// A `[subagents]` table: the limits of each child the `task` tool starts, and of all
/// of a session's children together (unset: the defaults of [`TaskLimits`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubagentsTable {
    /// Steps a child's turn may take.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Tokens one child may spend.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Tokens all the children of one session may spend together.
    #[serde(default)]
    pub session_tokens: Option<u64>,
    /// Seconds a child may run.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl SubagentsTable {
    /// The limits this table sets, the defaults for what it leaves out; a limit of 0 is
    /// refused (it would start children that can do nothing).
    pub fn limits(&self) -> Result<TaskLimits, ConfigError> {
        let defaults = TaskLimits::default();
        let zero = [
            ("max_steps", self.max_steps == Some(0)),
            ("tokens", self.tokens == Some(0)),
            ("session_tokens", self.session_tokens == Some(0)),
            ("timeout_secs", self.timeout_secs == Some(0)),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, zero)| *zero) {
            return Err(ConfigError::new(format!("[subagents] {key} must be at least 1")));
        }
        Ok(TaskLimits {
            max_steps: self.max_steps.unwrap_or(defaults.max_steps),
            child_tokens: self.tokens.unwrap_or(defaults.child_tokens),
            session_tokens: self.session_tokens.unwrap_or(defaults.session_tokens),
            timeout: self.timeout_secs.map(std::time::Duration::from_secs).unwrap_or(defaults.timeout),
            ..defaults
        })
    }
}

/// A `[permissions]` table: rules by list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsTable {
    /// Run without asking (in ask mode).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Always ask.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Never run.
    #[serde(default)]
    pub deny: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// Issue 31, item 5: a model that cannot be reached kept only its message and exited
    /// as a usage error; its kind is kept now, and only a configuration problem is one.
    #[test]
    fn a_model_error_keeps_its_kind_and_only_a_setting_is_a_usage_error() {
        use keel_llm::{ModelError, ModelErrorKind};
        let unreachable = ConfigError::model(ModelError::new(ModelErrorKind::Network, "connection refused"));
        assert_eq!(unreachable.kind, ConfigErrorKind::Model(ModelErrorKind::Network));
        assert_eq!(unreachable.message, "connection refused");
        assert_eq!(unreachable.exit_code(), crate::exit::ERROR);
        let misconfigured = ConfigError::model(ModelError::new(ModelErrorKind::Config, "no base URL"));
        assert_eq!(misconfigured.kind, ConfigErrorKind::Invalid);
        assert_eq!(misconfigured.exit_code(), crate::exit::USAGE);
        assert_eq!(ConfigError::new("bad flag").exit_code(), crate::exit::USAGE);
    }

    /// A layer with every setting set, each to the first of `values` its type takes.
    fn every_setting(values: &[toml::Value]) -> Layer {
        let mut table = toml::Table::new();
        for field in crate::config::keys::fields::<Layer>() {
            let fits = values.iter().find(|value| {
                let one = toml::Table::from_iter([((*field).to_owned(), (*value).clone())]);
                toml::Value::Table(one).try_into::<Layer>().is_ok()
            });
            table.insert(
                (*field).to_owned(),
                fits.unwrap_or_else(|| panic!("no value fits `{field}`")).clone(),
            );
        }
        toml::Value::Table(table).try_into().unwrap()
    }

    /// `over` takes every setting from the upper layer when it has one, and from the
    /// lower one when it has none.
    #[test]
    fn over_merges_every_setting() {
        use toml::Value;
        let one = every_setting(&[
            Value::Boolean(true),
            Value::Integer(1024),
            Value::Float(0.5),
            Value::String("one".into()),
            Value::Array(vec![Value::String("one".into())]),
            Value::Table(toml::Table::new()),
        ]);
        let allow =
            toml::Table::from_iter([("allow".to_owned(), Value::Array(vec![Value::String("shell".into())]))]);
        let two = every_setting(&[
            Value::Boolean(false),
            Value::Integer(2048),
            Value::Float(0.25),
            Value::String("two".into()),
            Value::Array(vec![Value::String("two".into())]),
            Value::Table(allow),
        ]);
        let shown = |layer: &Layer| format!("{layer:?}");
        assert_ne!(shown(&one), shown(&two));
        assert_eq!(shown(&one.clone().over(two.clone())), shown(&one));
        assert_eq!(shown(&Layer::default().over(two.clone())), shown(&two));
        assert_eq!(shown(&two.clone().over(Layer::default())), shown(&two));
        assert_eq!(shown(&Layer::default().over(Layer::default())), shown(&Layer::default()));
    }
}

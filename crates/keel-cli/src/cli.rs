//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// keel: a coding agent in your terminal.
///
/// `keel "task"` runs one task and prints the answer. `keel` alone starts an interactive
/// session. Every run is a session you can list, show, resume and fork.
#[derive(Debug, Clone, Parser)]
#[command(name = "keel", version, about, long_about = None)]
pub struct Cli {
    /// The task (print mode). Read from stdin when stdin is not a terminal.
    #[arg(value_name = "TASK")]
    pub task: Option<String>,

    /// The task (same as the positional argument).
    #[arg(short = 'p', long = "print", value_name = "TASK", conflicts_with = "task")]
    pub print: Option<String>,

    /// Attach an image to the task (PNG, JPEG, GIF or WebP, up to 5 MB); repeat for more.
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<std::path::PathBuf>,

    /// Provider preset: anthropic, openai, deepseek, openrouter, ollama, llamacpp, vllm, custom.
    #[arg(long, env = "KEEL_PROVIDER", hide_env_values = true)]
    pub provider: Option<String>,

    /// The wire API: chat (Chat Completions), responses (OpenAI Responses) or anthropic
    /// (Anthropic Messages). Default: the preset's (chat for a custom server).
    #[arg(long, env = "KEEL_API", hide_env_values = true, value_name = "API")]
    pub api: Option<String>,

    /// Base URL of the server, /v1 included (requests go to {base}/chat/completions,
    /// {base}/responses or {base}/messages).
    #[arg(long, env = "KEEL_BASE_URL", hide_env_values = true)]
    pub base_url: Option<String>,

    /// Model name.
    #[arg(long, short = 'm', env = "KEEL_MODEL", hide_env_values = true)]
    pub model: Option<String>,

    /// Named profile from the config file.
    #[arg(long, env = "KEEL_PROFILE", hide_env_values = true)]
    pub profile: Option<String>,

    /// The harness profile: small (fewer tools and arguments, and the aids for small
    /// models) or full; default: from the model's size, as its name states it.
    #[arg(long, env = "KEEL_TOOL_PROFILE", hide_env_values = true)]
    pub tool_profile: Option<String>,

    /// Steps allowed per turn (default 50).
    #[arg(long, env = "KEEL_MAX_STEPS", hide_env_values = true)]
    pub max_steps: Option<u32>,

    /// What runs without asking: auto (print mode default), ask (interactive default), read-only.
    #[arg(long, env = "KEEL_PERMISSION", hide_env_values = true)]
    pub permission: Option<String>,

    /// Run the model inside keel (no account, no server); on first use downloads the
    /// largest Qwen2.5-Coder this machine runs at a usable speed (1.5B, 3B or 7B).
    #[arg(long)]
    pub local: bool,

    /// The GGUF file (or known model name) for --local; implies --local.
    /// (Or set KEEL_LOCAL_MODEL and pass --local.)
    #[arg(long, value_name = "PATH")]
    pub local_model: Option<String>,

    /// Context size of the local model in tokens (default 8192).
    #[arg(long, value_name = "TOKENS")]
    pub local_ctx: Option<u32>,

    /// CPU threads for the local model (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Sampling temperature (default: the model's or server's own; 0.7 for --local).
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,

    /// Compact the session when its context passes this share of the model's window
    /// (default 0.8; 0 never).
    #[arg(long, value_name = "SHARE", env = "KEEL_COMPACT_AT", hide_env_values = true)]
    pub compact_at: Option<f64>,

    /// Sampling seed (the embedded model; sent as `seed` to servers), for repeatable runs.
    #[arg(long, env = "KEEL_SEED", hide_env_values = true)]
    pub seed: Option<u64>,

    /// Sandbox for shell commands: workspace-write (default where the kernel enforces it),
    /// read-only, or off. `keel sandbox` shows what this system enforces.
    #[arg(long, value_name = "MODE", env = "KEEL_SANDBOX", hide_env_values = true)]
    pub sandbox: Option<String>,

    /// Network for sandboxed shell commands: on (default under workspace-write) or off.
    #[arg(long, value_name = "on|off", env = "KEEL_NETWORK", hide_env_values = true)]
    pub network: Option<String>,

    /// Workspace folder (default: the current folder).
    #[arg(long, short = 'C', value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Print one JSON event per line on stdout (see docs/json-events.md).
    #[arg(long)]
    pub json: bool,

    /// Run on a running `keel serve` at this URL (a task: print or JSON mode; none: the
    /// interactive mode); the token comes from KEEL_SERVE_TOKEN.
    #[arg(long, value_name = "URL", env = "KEEL_REMOTE", hide_env_values = true)]
    pub remote: Option<String>,

    /// Keep no session log.
    #[arg(long)]
    pub no_session: bool,

    /// Where sessions live, for every mode: `postgres://user@host:port/db`, or a folder
    /// for JSONL files (default: KEEL_DATABASE_URL, else keel's sessions folder).
    #[arg(long, value_name = "URL|DIR", env = "KEEL_STORE", hide_env_values = true, global = true)]
    pub store: Option<String>,

    /// Resume the latest session of this folder.
    #[arg(long = "continue", short = 'c', conflicts_with_all = ["resume", "no_session"])]
    pub continue_latest: bool,

    /// Resume a session by id (or unique id prefix).
    #[arg(long, value_name = "ID", conflicts_with = "no_session")]
    pub resume: Option<String>,

    /// Add the MCP servers of this file for this run (`[mcp_servers.NAME]` tables, or
    /// JSON `{"mcpServers": …}`); repeatable.
    #[arg(long, value_name = "FILE", global = true)]
    pub mcp_config: Vec<PathBuf>,

    /// Write debug logs to this file (or set KEEL_LOG=debug for stderr).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommand a one-word task was probably meant to be (`sesions`, `model`): within
/// two edits of a subcommand's name, or a prefix of one. A task of several words is a
/// task.
pub fn misspelled_command(task: &str) -> Option<&'static str> {
    use clap::CommandFactory;
    let word = task.trim();
    if word.is_empty() || word.contains(char::is_whitespace) || word.starts_with('-') {
        return None;
    }
    let lower = word.to_lowercase();
    let command = Cli::command();
    let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).chain(["help"]).collect();
    names
        .into_iter()
        .map(|name| (crate::near::distance(&lower, name), name))
        .filter(|(distance, name)| {
            *distance <= if name.len() > 4 { 2 } else { 1 } || (lower.len() >= 3 && name.starts_with(&lower))
        })
        .min()
        .and_then(|(_, name)| match name {
            "sessions" => Some("sessions"),
            "models" => Some("models"),
            "sandbox" => Some("sandbox"),
            "mcp" => Some("mcp"),
            "permissions" => Some("permissions"),
            "skills" => Some("skills"),
            "help" => Some("help"),
            _ => None,
        })
}

/// Subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// List, show, export or fork sessions.
    Sessions {
        #[command(subcommand)]
        action: Option<SessionsAction>,
    },
    /// List or fetch local models (for --local).
    Models {
        #[command(subcommand)]
        action: Option<ModelsAction>,
    },
    /// What the shell sandbox enforces on this system, policy by policy.
    Sandbox,
    /// The permission mode and rules in force, and where each rule came from.
    Permissions,
    /// The skills found (.keel/skills/NAME/SKILL.md, and yours in keel's config folder):
    /// name, folder, description.
    Skills,
    /// MCP servers: `keel mcp list` starts each configured one and shows its state and tools.
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
    },
    /// Serve many sessions over HTTP (REST + server-sent events under /v1).
    Serve(ServeArgs),
    /// Be an Agent Client Protocol agent on stdin and stdout, for editors (Zed, JetBrains,
    /// Neovim, Emacs): `"agent_servers": {"keel": {"command": "keel", "args": ["acp"]}}`.
    Acp,
    /// Run a recorded session again against this keel, the model's replies taken from
    /// the log, and report where the requests or the tools' results now differ.
    Replay(ReplayArgs),
}

/// `keel replay …`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Session id or unique prefix.
    pub session: String,
    /// live: run the tools in a copy of the session's workspace (the default when the
    /// folder is still there); recorded: give each call its recorded result and compare
    /// only the requests.
    #[arg(long, value_enum, value_name = "live|recorded")]
    pub tools: Option<ReplayTools>,
}

/// The formats of `keel sessions export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Markdown: messages as written, reasoning folded, tool output in code blocks.
    Md,
    /// One HTML page: inline CSS, no script, nothing fetched; opens offline.
    Html,
    /// JSON: the events as stored, with the session, per-turn and total usage and cost.
    Json,
}

/// Where `keel replay`'s tool results come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplayTools {
    /// Run the tools, in a copy of the workspace.
    Live,
    /// The recorded results.
    Recorded,
}

/// `keel serve …`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (only this machine by default).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8421")]
    pub listen: String,
    /// Workspaces must be inside this folder; repeatable (default: the current folder).
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Turns running at once over all sessions (default: 128 per CPU core); more wait in
    /// line, first come first served.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,
    /// Forget a session's agent after this many seconds without a turn, a question or a
    /// client (its lock is let go when each turn ends); it is rebuilt on the next request.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub idle_close: u64,
    /// On SIGTERM or Ctrl-C, let running turns finish for this many seconds, then abort
    /// them ("the server is shutting down"); no turn starts meanwhile.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub drain: u64,
}

/// `keel mcp …`.
#[derive(Debug, Clone, Subcommand)]
pub enum McpAction {
    /// Start every configured server, then show its state (ready, failed: why, starting)
    /// and its tools.
    List,
}

/// `keel models …`.
#[derive(Debug, Clone, Subcommand)]
pub enum ModelsAction {
    /// List the models in the cache, and the ones keel can fetch.
    List,
    /// Download a model into the cache (default: the model --local uses).
    Pull {
        /// A known model name.
        name: Option<String>,
    },
    /// Self-test the CPU kernels kept off by default (AMX) with a model on this machine:
    /// they run under `--local` only where this passed.
    Check {
        /// A model file or known name (default: the model --local uses).
        model: Option<String>,
        /// Test this kernel variant instead (any that this CPU runs).
        #[arg(long)]
        variant: Option<String>,
    },
}

/// `keel sessions …`.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsAction {
    /// List sessions, newest first.
    List {
        /// Only sessions of this folder.
        #[arg(long)]
        here: bool,
    },
    /// Print a session's transcript.
    Show {
        /// Session id or unique prefix.
        id: String,
        /// Print the raw JSONL events instead.
        #[arg(long)]
        raw: bool,
    },
    /// Write a session's transcript as Markdown, one self-contained HTML page, or JSON
    /// (the events as stored, with usage and cost per turn).
    Export {
        /// Session id or unique prefix.
        id: String,
        /// md, html or json.
        #[arg(long, value_enum, default_value = "md")]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Branch a session into a new one.
    Fork {
        /// Session id or unique prefix.
        id: String,
        /// Keep the first N turns (as `sessions show` numbers them); default: all of it.
        #[arg(long, value_name = "TURN", conflicts_with = "at_event")]
        at: Option<u32>,
        /// Keep the events up to this seq (as `sessions show --raw` numbers them).
        #[arg(long, value_name = "SEQ")]
        at_event: Option<u64>,
    },
}

#[cfg(test)]
mod tests {
    use super::misspelled_command;

    #[test]
    fn one_word_near_a_command_is_a_typo_and_sentences_are_tasks() {
        for (typo, meant) in [
            ("sesions", "sessions"),
            ("session", "sessions"),
            ("modles", "models"),
            ("model", "models"),
            ("sandbx", "sandbox"),
            ("permisions", "permissions"),
            ("perm", "permissions"),
            ("mpc", "mcp"),
            ("hlep", "help"),
        ] {
            assert_eq!(misspelled_command(typo), Some(meant), "{typo}");
        }
        for task in ["explain sessions", "refactor", "test", "hello", "fix the models", "lint", "-x"] {
            assert_eq!(misspelled_command(task), None, "{task}");
        }
    }
}

//! `keel`: a coding agent in your terminal.

#[macro_use]
mod out;
mod acp;
mod cli;
mod completion;
mod config;
mod custom_commands;
mod doctor;
mod export;
mod first_contact;
mod fold;
mod images;
mod input;
mod interactive;
mod line_editor;
mod local;
mod mcp;
mod model_names;
mod near;
mod paths;
mod permissions;
mod piped;
mod pricing;
mod print_mode;
mod profile_choice;
mod project_rules;
mod prompt;
mod provider;
mod quoted;
mod remote;
mod render;
mod replay;
mod serve;
mod sessions;
mod setup;
mod signals;
mod skills;
mod store;
mod subagents;
mod typing;
mod undo;
mod user_hooks;

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use clap::Parser;

/// Exit codes.
pub mod exit {
    /// The turn completed.
    pub const OK: u8 = 0;
    /// An error (model, session, blocked).
    pub const ERROR: u8 = 1;
    /// Usage or configuration error.
    pub const USAGE: u8 = 2;
    /// The step limit was reached.
    pub const STEP_LIMIT: u8 = 3;
    /// Interrupted (Ctrl-C).
    pub const INTERRUPTED: u8 = 130;
}

fn init_logging(cli: &cli::Cli) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("KEEL_LOG").ok();
    if let Some(path) = &cli.log_file {
        if let Ok(file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let filter = EnvFilter::new(filter.as_deref().unwrap_or("debug"));
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
    } else if let Some(filter) = filter {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    } else if matches!(cli.command, Some(cli::Command::Serve(_))) {
        // A server logs by default: a line per request and per turn, on stderr; JSON
        // lines when stderr is not a terminal (a service manager, a log collector).
        use std::io::IsTerminal;
        let filter = EnvFilter::new("warn,keel_server=info,keel_cli=info,keel_store_postgres=info");
        if std::io::stderr().is_terminal() {
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
        } else {
            let _ = tracing_subscriber::fmt()
                .json()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .try_init();
        }
    }
}

async fn run(mut cli: cli::Cli) -> anyhow::Result<u8> {
    match cli.command.take() {
        Some(cli::Command::Sessions { action }) => return sessions::run(action, cli.store.as_deref()),
        Some(cli::Command::Models { action }) => return local::models_command(action).await,
        Some(cli::Command::Sandbox) => return doctor::run(&cli).await,
        Some(cli::Command::Permissions) => return permissions::command(&cli),
        Some(cli::Command::Mcp { action: None | Some(cli::McpAction::List) }) => {
            return mcp::list_command(&cli).await;
        }
        Some(cli::Command::Serve(args)) => return serve::run(&cli, args).await,
        Some(cli::Command::Acp) => return acp::run(&cli).await,
        Some(cli::Command::Replay(args)) => return replay::run(&cli, args).await,
        Some(cli::Command::Skills) => return skills::command(&cli),
        None => {}
    }
    if let Some(word) = cli.task.as_deref()
        && let Some(command) = cli::misspelled_command(word)
    {
        errln!(
            "keel: `{word}` is not a command; did you mean `keel {command}`? (To send `{word}` to the model as a task: keel -p {word})"
        );
        return Ok(exit::USAGE);
    }
    let mut task = cli.print.take().or(cli.task.take());
    if task.is_none() && !std::io::stdin().is_terminal() {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        task = Some(text);
    } else if let Some(given) = &task
        && piped::piped_stdin()
    {
        let (piped, total) = piped::read_capped(std::io::stdin().lock(), piped::PIPED_BYTES)?;
        task = Some(piped::with_piped(given, &piped, total));
    }
    match task {
        Some(task) if task.trim().is_empty() => {
            errln!("keel: the task is empty");
            Ok(exit::USAGE)
        }
        Some(task) if cli.remote.is_some() => remote::run(&cli, task).await,
        Some(task) => print_mode::run(&cli, task).await,
        None if cli.json => {
            errln!("keel: --json needs a task (an argument or stdin)");
            Ok(exit::USAGE)
        }
        None if cli.remote.is_some() => remote::interactive::run(&cli).await,
        None => interactive::run(&cli).await,
    }
}

/// With `KEEL_STATS_FILE` set, writes this process's own CPU time and peak memory there
/// at exit (tools' processes excluded), for the benchmark.
fn write_stats() {
    let Some(path) = std::env::var_os("KEEL_STATS_FILE") else { return };
    let cpu = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let cpu_ns = cpu.tv_sec as u128 * 1_000_000_000 + cpu.tv_nsec as u128;
    let peak_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .unwrap_or_default();
    let _ = std::fs::write(
        path,
        format!(
            "{{\"cpu_ns\":{cpu_ns},\"peak_rss_kb\":{}}}\n",
            if peak_kb.is_empty() { "0" } else { &peak_kb }
        ),
    );
}

fn main() -> ExitCode {
    // `keel __exec …`: the shell tool's launcher (keel_sandbox::launch), nothing else.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == keel_sandbox::launch::SUBCOMMAND) {
        std::process::exit(keel_sandbox::launch::main(&args[2..]));
    }
    // `keel __engine`: the embedded model's engine process (keel_local::engine).
    #[cfg(feature = "local")]
    if args.get(1).is_some_and(|a| a == keel_local::engine::EngineCommand::SUBCOMMAND) {
        std::process::exit(keel_local::engine::child::main());
    }
    // Keys in keel's environment and memory: no process of the user (but root) may read
    // /proc/<keel>/environ or mem, nor attach a debugger.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    signals::Interrupts::get();
    let cli = cli::Cli::parse();
    init_logging(&cli);
    // The server runs many sessions at once: all cores; everything else one thread.
    let runtime = if matches!(cli.command, Some(cli::Command::Serve(_))) {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            errln!("keel: cannot start: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            errln!("keel: {e:#}");
            exit::ERROR
        }
    };
    // Do not wait for a blocked stdin reader or lingering tasks.
    runtime.shutdown_background();
    write_stats();
    ExitCode::from(code)
}

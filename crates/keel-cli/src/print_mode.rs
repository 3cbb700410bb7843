//! `keel "task"`: one turn; the answer on stdout, progress on stderr.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::{Prompt, Sink, TurnOutcome};
use keel_llm::CancellationToken;
use keel_session::TurnEndReason;
use keel_tools::PermissionMode;
use serde_json::json;

use crate::cli::Cli;
use crate::config;
use crate::exit;
use crate::input::{LineReader, TurnInput, terminal_source};
use crate::mcp::SessionTools;
use crate::render::Terminal;
use crate::render::json::JsonLines;
use crate::{setup, signals};

/// The exit code for how a turn ended.
pub fn exit_code(reason: TurnEndReason) -> u8 {
    match reason {
        TurnEndReason::Completed => exit::OK,
        TurnEndReason::MaxSteps | TurnEndReason::Looping => exit::STEP_LIMIT,
        TurnEndReason::Aborted | TurnEndReason::Interrupted => exit::INTERRUPTED,
        TurnEndReason::Error | TurnEndReason::Blocked => exit::ERROR,
    }
}

/// Redraws the spinner every 100 ms.
pub fn ticker(terminal: Arc<Terminal>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        loop {
            interval.tick().await;
            terminal.tick();
        }
    })
}

/// Runs `task` and returns the exit code.
pub async fn run(cli: &Cli, task: String) -> anyhow::Result<u8> {
    let json = cli.json.then(JsonLines::new);
    let fail = |error: config::ConfigError| -> anyhow::Result<u8> {
        let message = &error.message;
        match &json {
            Some(out) => out.write_value(&json!({"type": "keel/error", "data": {"message": message}})),
            None => errln!("keel: {message}"),
        }
        Ok(error.exit_code())
    };
    let mut settings = match config::resolve(cli, false) {
        Ok(settings) => settings,
        Err(e) if json.is_none() && crate::first_contact::can_offer(&e) => {
            errln!("keel: {}", e.message);
            return match crate::first_contact::ask_local(cli) {
                Some(local) => Box::pin(run(&local, task)).await,
                None => Ok(e.exit_code()),
            };
        }
        Err(e) => return fail(e),
    };
    let workspace = match setup::workspace(cli) {
        Ok(dir) => dir,
        Err(e) => return fail(e),
    };
    let refuse = |message: String| -> anyhow::Result<u8> {
        match &json {
            Some(out) => out.write_value(&json!({"type": "keel/error", "data": {"message": message}})),
            None => errln!("keel: {message}"),
        }
        Ok(exit::USAGE)
    };
    let images = match crate::images::read_all(&cli.images) {
        Ok(images) => images,
        Err(e) => return refuse(format!("--image {e}")),
    };
    // A task that starts with a custom command (`/review src/lib.rs`) is sent as its text.
    let (task, command_notes) = crate::custom_commands::for_task(&workspace, &settings.allowed_roots, task);
    if json.is_none() {
        command_notes.iter().for_each(|note| errln!("keel: {note}"));
    }
    // MCP servers start now, while the model loads.
    let mut mcp = match crate::mcp::start(&settings).await {
        Ok(mcp) => mcp.map(|m| SessionTools::new(m, settings.permission == PermissionMode::ReadOnly)),
        Err(e) => return fail(e),
    };
    let terminal = Arc::new(Terminal::new(false));
    let input = TurnInput::new();
    let policy = match setup::policy(&settings, &workspace) {
        Ok(policy) => policy.with_ask(input.ask_fn(Arc::clone(&terminal), &workspace)),
        Err(e) => return fail(e),
    };
    let model = match setup::model(&mut settings, json.is_none()).await {
        Ok(model) => model,
        Err(e) => return fail(e),
    };
    let prompt = Prompt::text(task).with_images(images);
    if let Err(e) = prompt.check(&*model) {
        return refuse(e.to_string());
    }
    let store = setup::store(cli)?;
    let (agent, notes) = setup::agent_in(store.as_ref(), &settings, &workspace, Arc::new(policy), model);
    let (mut session, note) = match setup::open_session(cli, store.as_deref(), &workspace) {
        Ok(opened) => opened,
        Err(e) if setup::names_no_session(&e) => {
            errln!("keel: {e:#}");
            return Ok(exit::USAGE);
        }
        Err(e) => return Err(e),
    };
    let mut ctx = setup::context(&settings, &workspace, &session);
    if json.is_none() {
        for note in &notes {
            terminal.line(&format!("keel: {note}"));
        }
        if let Some(note) = note {
            terminal.line(&note);
        }
    }
    if let Some(mcp) = &mut mcp {
        // Before the first request: every server that comes up within its startup timeout.
        match mcp.before_turn(agent.tools(), &mut ctx).await {
            Ok(lines) => match &json {
                Some(out) => out.write_value(&crate::mcp::json(&mcp.manager().statuses(), mcp.refused())),
                None => lines.iter().for_each(|line| terminal.line(line)),
            },
            Err(e) => {
                mcp.shutdown().await;
                match &json {
                    Some(out) => {
                        out.write_value(&json!({"type": "keel/error", "data": {"message": e.to_string()}}))
                    }
                    None => errln!("keel: {e}"),
                }
                return Ok(exit::ERROR);
            }
        }
    }

    let cancel = CancellationToken::new();
    let interrupts = signals::during_turn(&cancel);
    let ticker = json.is_none().then(|| ticker(Arc::clone(&terminal)));
    // Typing during the turn steers it (and answers permission questions).
    let reader = terminal_source().map(|source| {
        LineReader::start(source, Arc::clone(&input), ctx.inbox.clone(), Arc::clone(&terminal))
    });
    let started = Instant::now();
    let sink: &dyn Sink = match &json {
        Some(out) => out,
        None => &*terminal,
    };
    let outcome = agent.run_turn(&mut session, &ctx, prompt, sink, &cancel).await;
    drop(reader);
    drop(interrupts);
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    if let Some(mcp) = &mcp {
        mcp.shutdown().await;
    }
    // Durable and released (its lock, its database lease) before keel exits: a
    // `--continue` right after must find the session free.
    let session_id = session.id().to_owned();
    let closed = session.close();
    let outcome: TurnOutcome = outcome?;
    closed.map_err(|e| anyhow::anyhow!("closing session {session_id}: {e}"))?;
    let code = exit_code(outcome.reason);
    match &json {
        Some(out) => out.write_value(&json!({
            "type": "keel/done",
            "data": {
                "session_id": session_id,
                "reason": outcome.reason.as_str(),
                "message": outcome.message,
                "final_text": outcome.final_text,
                "steps": outcome.steps,
                "tool_calls": outcome.tool_calls,
                "usage": outcome.usage,
                "exit_code": code,
            }
        })),
        None => {
            if matches!(
                outcome.reason,
                TurnEndReason::Completed | TurnEndReason::MaxSteps | TurnEndReason::Looping
            ) && !outcome.final_text.is_empty()
            {
                crate::render::print_answer(&outcome.final_text);
            }
            terminal.summary(&outcome, started.elapsed(), &settings.model_name(), &settings, None);
        }
    }
    Ok(code)
}

//! `keel` on a terminal: a line editor, streamed answers, slash commands. The loop and
//! the start-up are here; a turn and `/compact` in [`turn`], the slash commands in
//! [`commands`], `/model` in [`model`], moving between sessions and back in one in
//! [`history`].

mod commands;
mod history;
mod model;
mod turn;

use std::sync::Arc;

use keel_agent::{Agent, SessionContext};
use keel_session::SessionStore;
use reedline::Signal;

use crate::cli::Cli;
use crate::config::{self, Settings};
use crate::exit;
use crate::input::TurnInput;
use crate::mcp::SessionTools;
use crate::model_names::ModelNames;
use crate::render::Terminal;
use crate::render::format::{clip, thousands};
use crate::setup;

use commands::command_names;
use model::server;

struct Repl {
    settings: Settings,
    workspace: std::path::PathBuf,
    agent: Agent,
    /// The permission policy, shared by every agent built for a new model.
    policy: Arc<keel_tools::PermissionPolicy>,
    store: Option<Arc<dyn SessionStore>>,
    session: keel_agent::Session,
    ctx: SessionContext,
    terminal: Arc<Terminal>,
    input: Arc<TurnInput>,
    mcp: Option<SessionTools>,
    /// Typed during the last turn without Enter: put back at the prompt.
    unfinished: String,
    /// The server's model names, for Tab after `/model `.
    models: ModelNames,
    /// `--image` files, attached to the first prompt.
    first_images: Vec<keel_llm::Image>,
}

impl Repl {
    fn say(&self, text: &str) {
        self.terminal.line(text);
    }
}

/// Runs the interactive loop; returns the exit code.
pub async fn run(cli: &Cli) -> anyhow::Result<u8> {
    let mut settings = match config::resolve(cli, true) {
        Ok(settings) => settings,
        Err(e) => {
            errln!("keel: {e}");
            if crate::first_contact::can_offer(&e)
                && let Some(local) = crate::first_contact::ask_local(cli)
            {
                return Box::pin(run(&local)).await;
            }
            return Ok(exit::USAGE);
        }
    };
    let workspace = match setup::workspace(cli) {
        Ok(dir) => dir,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    // MCP servers start now, while the model loads; the first turn waits for them.
    let mcp = match crate::mcp::start(&settings).await {
        Ok(mcp) => mcp,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let terminal = Arc::new(Terminal::new(true));
    let input = TurnInput::new();
    let policy = match setup::policy(&settings, &workspace) {
        Ok(policy) => policy.with_ask(input.ask_fn(Arc::clone(&terminal), &workspace)),
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let model = match setup::model(&mut settings, true).await {
        Ok(model) => model,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let policy = Arc::new(policy);
    let store = setup::store(cli)?;
    let (agent, notes) = setup::agent_in(store.as_ref(), &settings, &workspace, Arc::clone(&policy), model);
    let (session, note) = match setup::open_session(cli, store.as_deref(), &workspace) {
        Ok(opened) => opened,
        Err(e) if setup::names_no_session(&e) => {
            errln!("keel: {e:#}");
            return Ok(exit::USAGE);
        }
        Err(e) => return Err(e),
    };
    let ctx = setup::context(&settings, &workspace, &session);
    let mcp = mcp.map(|m| SessionTools::new(m, settings.permission == keel_tools::PermissionMode::ReadOnly));
    let first_images = match crate::images::read_all(&cli.images) {
        Ok(images) => images,
        Err(e) => {
            errln!("keel: --image {e}");
            return Ok(exit::USAGE);
        }
    };
    let mut repl = Repl {
        settings,
        workspace,
        agent,
        policy,
        store,
        session,
        ctx,
        terminal,
        input,
        mcp,
        unfinished: String::new(),
        models: ModelNames::new(),
        first_images,
    };
    repl.models.serve(server(&repl.settings));
    let profile = repl.settings.profile.as_deref().map(|p| format!(" (profile {p})")).unwrap_or_default();
    repl.say(&format!(
        "keel · {}{profile} · {} · {} · /help for commands",
        repl.settings.model_name(),
        clip(&repl.workspace.display().to_string(), 50),
        match repl.settings.permission {
            keel_tools::PermissionMode::Auto => "auto",
            keel_tools::PermissionMode::Ask => "asks before changes",
            keel_tools::PermissionMode::ReadOnly => "read-only",
        }
    ));
    if repl.settings.tool_profile == keel_tools::profile::ToolProfile::Small {
        let why = &repl.settings.profile_why;
        repl.say(
            &repl.terminal.dim(&format!("small-model profile: {why}; --tool-profile full turns it off")),
        );
    }
    for note in &notes {
        repl.say(&format!("keel: {note}"));
    }
    // keel does not start without a required MCP server.
    if repl.settings.mcp_servers.values().any(|s| s.required && s.is_enabled())
        && let Err(e) = repl.mcp_tools().await
    {
        repl.say(&format!("keel: {e}"));
        if let Some(mcp) = &repl.mcp {
            mcp.shutdown().await;
        }
        return Ok(exit::ERROR);
    }
    if let Some(note) = note {
        let turns = repl.session.projection().turns();
        repl.say(&format!(
            "{note} · {turns} {} · {} tokens",
            if turns == 1 { "turn" } else { "turns" },
            thousands(repl.session.projection().usage().input_tokens)
        ));
        repl.show_last_exchange();
    }

    // Custom commands (`.keel/commands/*.md`): read once; keel's own are never replaced.
    let builtins: Vec<&str> = command_names().into_iter().chain(["/exit"]).collect();
    let (custom, custom_notes) = crate::custom_commands::CustomCommands::load(
        &repl.workspace,
        &repl.settings.allowed_roots,
        &builtins,
    );
    custom_notes.iter().for_each(|note| repl.say(&format!("keel: {note}")));
    let commands = builtins.into_iter().map(str::to_owned).chain(custom.names()).collect();
    let pastes = crate::fold::Pastes::default();
    let completions = crate::line_editor::Completions {
        commands,
        workspace: Some(repl.workspace.clone()),
        models: Some(repl.models.clone()),
    };
    let mut editor = crate::line_editor::editor(completions, &pastes);
    let prompt = crate::line_editor::prompt();
    let mut last_was_ctrl_c = false;
    crate::signals::watch_terminal();
    loop {
        let unfinished = std::mem::take(&mut repl.unfinished);
        if !unfinished.is_empty() {
            editor.run_edit_commands(&[reedline::EditCommand::InsertString(pastes.insert(&unfinished))]);
        }
        let signal = editor.read_line(&prompt);
        match signal {
            Ok(Signal::Success(buffer)) => {
                last_was_ctrl_c = false;
                let line = match crate::line_editor::message(&buffer, &pastes) {
                    Ok(line) => line,
                    Err(why) => {
                        // Put back for mending; nothing is sent.
                        repl.say(&format!("keel: {why}"));
                        editor.run_edit_commands(&[reedline::EditCommand::InsertString(buffer)]);
                        continue;
                    }
                };
                if line.is_empty() {
                    continue;
                }
                match custom.route(&line, commands::HELP) {
                    Some(crate::custom_commands::Route::Say(text)) => {
                        repl.say(&text);
                        continue;
                    }
                    Some(crate::custom_commands::Route::Prompt(expanded)) => {
                        repl.say(&repl.terminal.dim(&expanded.note));
                        if let Err(e) = repl.turn(expanded.text).await {
                            repl.say(&format!("error: {e:#}"));
                        }
                        if crate::signals::Interrupts::get().leaving() {
                            break;
                        }
                        continue;
                    }
                    None => {}
                }
                if line == "/model" {
                    repl.show_models().await;
                    continue;
                }
                if let Some(arg) = line.strip_prefix("/model ") {
                    repl.switch_model(arg.trim()).await;
                    continue;
                }
                if let Some(rest) = line.strip_prefix("/compact")
                    && (rest.is_empty() || rest.starts_with(char::is_whitespace))
                {
                    let focus = Some(rest.trim()).filter(|f| !f.is_empty());
                    if let Err(e) = repl.compact(focus).await {
                        repl.say(&format!("error: {e:#}"));
                    }
                    continue;
                }
                if line.starts_with('/') && !crate::images::opens_with_file(&line) {
                    match repl.command(&line) {
                        Ok(true) => continue,
                        Ok(false) => break,
                        Err(e) => {
                            repl.say(&format!("error: {e:#}"));
                            continue;
                        }
                    }
                }
                if let Err(e) = repl.turn(line).await {
                    repl.say(&format!("error: {e:#}"));
                }
                // SIGTERM or SIGHUP (the terminal closed) ended the turn: leave.
                if crate::signals::Interrupts::get().leaving() {
                    break;
                }
            }
            Ok(Signal::CtrlC) => {
                if last_was_ctrl_c {
                    break;
                }
                last_was_ctrl_c = true;
                repl.say("(Ctrl-C again or Ctrl-D to leave)");
            }
            Ok(Signal::CtrlD) => break,
            Ok(_) => {}
            Err(e) => {
                repl.say(&format!("terminal error: {e}"));
                break;
            }
        }
    }
    let (kept, id) = (repl.session.projection().turns() > 0, repl.session.id().to_owned());
    repl.release_session()?;
    if repl.store.is_some() && kept {
        repl.say(&format!("to come back to this session: keel --resume {id}"));
    }
    if let Some(mcp) = &repl.mcp {
        mcp.shutdown().await;
    }
    if crate::signals::Interrupts::get().leaving() {
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::OK)
}

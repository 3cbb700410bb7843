//! `keel` on a terminal: a line editor, streamed answers, slash commands.

use std::sync::Arc;
use std::time::Instant;

use keel_agent::{Agent, SessionContext};
use keel_llm::CancellationToken;
use keel_session::SessionStore;
use reedline::Signal;

use crate::cli::Cli;
use crate::config::{self, ModelSettings, Settings};
use crate::exit;
use crate::input::{LineReader, TurnInput, terminal_source};
use crate::mcp::SessionTools;
use crate::model_names::ModelNames;
use crate::print_mode::ticker;
use crate::render::format::{clip, thousands};
use crate::render::{Terminal, usage_text};
use crate::{pricing, sessions, setup};

const HELP: &str = "commands:
  /help            this list
  /new             start a new session
  /sessions        recent sessions of this folder
  /resume ID       switch to another session
  /fork            branch the current session and continue in the branch
  /model           the model, and the ones its server offers
  /model NAME      switch the model (same server)
  /model PROVIDER [NAME]  switch to a preset's model (its server, API and key)
  /model PROFILE   switch to a profile of the config file
  /mcp             MCP servers: state and tools
  /compact [FOCUS] summarize the older part of the session now (FOCUS: what to keep)
  /undo [N]        put back the files the last N turns (default 1) wrote or edited (not what shell commands did)
  /rewind [N]      go back N turns (default 1): the files as /undo, the conversation as a fork
  /usage           tokens, cost and context of this session
  /quit            leave (also Ctrl-D, or Ctrl-C twice at the prompt)
While the agent works: Ctrl-C stops the turn; typing a line and Enter steers it.";

/// The slash commands [`HELP`] lists, once each.
fn command_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = HELP
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.starts_with('/'))
        .collect();
    names.dedup();
    names
}

/// What an unknown slash command gets: the nearest command of [`HELP`], or where the
/// list is.
fn unknown_command(name: &str) -> String {
    let names = command_names();
    match crate::near::nearest(name, &names) {
        Some(near) => format!("unknown command {name}; did you mean {near}? (/help lists them)"),
        None => format!("unknown command {name}; /help lists them"),
    }
}

/// What to say when the server's list (`names`, empty when it lists none) lacks `model`.
fn unlisted(model: &str, names: &[String]) -> Option<String> {
    if names.is_empty() || names.iter().any(|n| n == model) {
        return None;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let near = match crate::near::nearest(model, &names) {
        Some(near) => format!(" (did you mean {near}?)"),
        None => String::new(),
    };
    Some(format!(
        "note: the server does not list `{model}`{near}; switching anyway (/model lists its models)"
    ))
}

/// The server a model runs on (`None`: the embedded model).
fn server(settings: &Settings) -> Option<&keel_llm::ProviderConfig> {
    match &settings.model {
        ModelSettings::Remote(config) => Some(config.as_ref()),
        ModelSettings::Local(_) => None,
    }
}

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
}

impl Repl {
    fn say(&self, text: &str) {
        self.terminal.line(text);
    }

    /// Waits for MCP servers before the first turn and adds late joiners' tools to the
    /// session's between turns (a turn's tools are fixed).
    async fn mcp_tools(&mut self) -> Result<(), keel_mcp::McpError> {
        let Some(mcp) = &mut self.mcp else { return Ok(()) };
        for line in mcp.before_turn(self.agent.tools(), &mut self.ctx).await? {
            self.terminal.line(&line);
        }
        Ok(())
    }

    async fn turn(&mut self, text: String) -> anyhow::Result<()> {
        self.mcp_tools().await?;
        let cancel = CancellationToken::new();
        let interrupts = crate::signals::during_turn(&cancel);
        let ticker = ticker(Arc::clone(&self.terminal));
        let reader = terminal_source().map(|source| {
            LineReader::start(
                source,
                Arc::clone(&self.input),
                self.ctx.inbox.clone(),
                Arc::clone(&self.terminal),
            )
        });
        let started = Instant::now();
        let outcome = self.agent.run_turn(&mut self.session, &self.ctx, text, &*self.terminal, &cancel).await;
        // A line typed but not sent carries over to the prompt.
        self.unfinished = reader.map(LineReader::finish).unwrap_or_default();
        drop(interrupts);
        ticker.abort();
        let outcome = outcome?;
        let context = self.agent.context_usage(&self.session, &self.ctx);
        self.terminal.summary(
            &outcome,
            started.elapsed(),
            &self.settings.model_name(),
            &self.settings,
            Some(context),
        );
        Ok(())
    }

    /// `/model`: the current model, and the ones its server offers (`GET /models`) to
    /// switch to with `/model NAME`.
    async fn show_models(&self) {
        let config = match &self.settings.model {
            ModelSettings::Remote(config) => config.clone(),
            ModelSettings::Local(_) => {
                self.say(&format!(
                    "model: {} (local; --local-model PATH at start)",
                    self.settings.model_name()
                ));
                return;
            }
        };
        self.say(&format!("model: {} ({})", config.model, config.provider));
        match keel_llm::list_models(&config).await {
            Ok(names) if names.is_empty() => self.say("the server lists no models"),
            Ok(names) => {
                self.models.learned(&config, &names);
                let shown: Vec<&str> = names.iter().take(60).map(String::as_str).collect();
                let more = names.len().saturating_sub(shown.len());
                let more = if more > 0 { format!(" … and {more} more") } else { String::new() };
                self.say(&format!(
                    "available: {}{more}
/model NAME switches",
                    shown.join(", ")
                ));
            }
            Err(e) => self.say(&format!("cannot list the server's models: {}", e.message)),
        }
    }

    /// `/compact [focus]`: summarizes the older part of the session now (Ctrl-C stops it
    /// and leaves the session unchanged).
    async fn compact(&mut self, focus: Option<&str>) -> anyhow::Result<()> {
        let before = self.agent.context_usage(&self.session, &self.ctx);
        let cancel = CancellationToken::new();
        let interrupts = crate::signals::during_turn(&cancel);
        let ticker = ticker(Arc::clone(&self.terminal));
        let end = self.agent.compact(&mut self.session, &self.ctx, focus, &*self.terminal, &cancel).await;
        drop(interrupts);
        ticker.abort();
        self.session.sync()?;
        match end? {
            None => {
                self.say(&format!("nothing to compact yet (context {})", crate::render::context_text(before)))
            }
            // The terminal sink has said how it ended.
            Some(_) => self.say(&format!(
                "context now {}",
                crate::render::context_text(self.agent.context_usage(&self.session, &self.ctx))
            )),
        }
        Ok(())
    }

    /// Closes the current session (durable, its file lock or database lease released, so
    /// it can be opened again at once) and leaves an unsaved placeholder in its place.
    fn release_session(&mut self) -> anyhow::Result<()> {
        let placeholder = keel_agent::Session::in_memory(&self.workspace.display().to_string());
        let current = std::mem::replace(&mut self.session, placeholder);
        let id = current.id().to_owned();
        current.close().map_err(|e| anyhow::anyhow!("closing session {id}: {e}"))
    }

    fn switch_to(&mut self, session: keel_agent::Session, note: &str) {
        if let Err(e) = self.release_session() {
            self.say(&format!("keel: {e}"));
        }
        self.session = session;
        self.refresh_context();
        self.say(&format!("{note} {}", self.session.id()));
        self.show_last_exchange();
    }

    /// `/undo`: puts back the files of the last turn's write/edit calls and tells the
    /// model at the start of its next turn.
    fn undo(&mut self, arg: Option<&str>) {
        let Some(n) = arg.map_or(Some(1), |a| a.parse::<usize>().ok().filter(|n| *n > 0)) else {
            self.say("usage: /undo [N] (the last N turns' file changes, default 1)");
            return;
        };
        let Some(store) = &self.store else {
            self.say("undo needs the session's log (not kept with --no-session)");
            return;
        };
        let (Ok(events), Some(artifacts)) = (store.read(self.session.id()), self.ctx.artifacts.clone())
        else {
            self.say("cannot read this session's log");
            return;
        };
        let roots =
            match keel_tools::workspace::Roots::new(&self.workspace, &self.settings.allowed_roots, &[]) {
                Ok(roots) => roots,
                Err(e) => return self.say(&format!("cannot undo: {}", e.message)),
            };
        let report = if n == 1 {
            crate::undo::last_turn(&events, &artifacts, &roots)
        } else {
            match crate::undo::last_turns(&events, n) {
                Some(turns) => {
                    crate::undo::restore(&turns, &artifacts, &roots, &format!("the last {n} turns"))
                }
                None => {
                    let turns = self.session.projection().turns();
                    return self.say(&format!("this session has only {turns} turn(s)"));
                }
            }
        };
        for line in &report.lines {
            self.say(line);
        }
        if let Some(note) = report.note {
            self.ctx.inbox.steer(note);
        }
    }

    /// `/rewind [N]`: puts back the files of the last N turns and continues in a fork of
    /// the session made just before them (the session itself stays as it was).
    fn rewind(&mut self, arg: Option<&str>) -> anyhow::Result<()> {
        let Some(n) = arg.map_or(Some(1), |a| a.parse::<usize>().ok().filter(|n| *n > 0)) else {
            self.say("usage: /rewind [N] (N turns, default 1)");
            return Ok(());
        };
        let Some(store) = &self.store else {
            self.say("rewind needs the session's log (not kept with --no-session)");
            return Ok(());
        };
        self.session.sync()?;
        let events = store.read(self.session.id())?;
        let Some(turns) = crate::undo::last_turns(&events, n) else {
            self.say(&format!("this session has only {} turn(s)", self.session.projection().turns()));
            return Ok(());
        };
        let Some(artifacts) = self.ctx.artifacts.clone() else { return Ok(()) };
        let roots = keel_tools::workspace::Roots::new(&self.workspace, &self.settings.allowed_roots, &[])
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let what = if n == 1 { "the last turn".to_owned() } else { format!("the last {n} turns") };
        let report = crate::undo::restore(&turns, &artifacts, &roots, &what);
        let from = self.session.id().to_owned();
        let fork = store.fork(&from, Some(turns.before))?;
        for line in &report.lines {
            self.say(line);
        }
        self.switch_to(fork, &format!("rewound {what}; {from} is kept as it was; continuing in session"));
        Ok(())
    }

    /// Where a resumed conversation was: its last prompt and answer, shortened.
    fn show_last_exchange(&self) {
        let Some(store) = &self.store else { return };
        let Ok(events) = store.read(self.session.id()) else { return };
        let lines = sessions::last_exchange(&events);
        if !lines.is_empty() {
            self.say(&self.terminal.dim("  last exchange:"));
            for line in lines {
                self.say(&self.terminal.dim(&line));
            }
        }
    }

    /// A context for the current session, keeping a model chosen with `/model` and the
    /// MCP tools on offer.
    fn refresh_context(&mut self) {
        let model = self.ctx.model.take();
        let tools = self.ctx.tools.take();
        self.ctx = setup::context(&self.settings, &self.workspace, &self.session);
        self.ctx.model = model;
        self.ctx.tools = tools;
    }

    /// `/model ARG` (see [`Settings::switch_model`]): the next request goes to that
    /// model, with the profile its size calls for: the agent (prompt, tools, the aids and
    /// the model the tools ask) is built again for it, keeping the permission rules
    /// "always" added. What only the old model can read (signed thinking, encrypted
    /// reasoning) stays in the log and is not sent to the new one.
    async fn switch_model(&mut self, arg: &str) {
        if let ModelSettings::Local(_) = &self.settings.model {
            return self.say("the local model is chosen at start (--local-model PATH)");
        }
        let config = match self.settings.switch_model(arg) {
            Ok(config) => config,
            Err(e) => return self.say(&format!("cannot switch: {e}")),
        };
        // A server that lists its models is asked; a name it does not list is likely a
        // typo (or an alias it still takes): said, not refused.
        if let Ok(names) = keel_llm::list_models(&config).await {
            self.models.learned(&config, &names);
            if let Some(note) = unlisted(&config.model, &names) {
                self.say(&note);
            }
        }
        let mut next = self.settings.clone();
        next.model = ModelSettings::Remote(Box::new(config));
        let client = match setup::model(&mut next, false).await {
            Ok(client) => client,
            Err(e) => return self.say(&format!("cannot switch: {e}")),
        };
        let (agent, _notes) = setup::agent(&next, &self.workspace, Arc::clone(&self.policy), client);
        self.agent = agent;
        self.settings = next;
        self.ctx.model = None;
        self.models.serve(server(&self.settings));
        if let ModelSettings::Remote(config) = &self.settings.model {
            self.say(&format!(
                "model: {} ({}, {} API) · profile {} ({})",
                config.model,
                config.provider,
                config.api.as_str(),
                self.settings.tool_profile.as_str(),
                self.settings.profile_why
            ));
        }
    }

    fn command(&mut self, line: &str) -> anyhow::Result<bool> {
        let mut parts = line.splitn(2, char::is_whitespace);
        let name = parts.next().unwrap_or_default();
        let arg = parts.next().map(str::trim).filter(|a| !a.is_empty());
        match (name, arg) {
            ("/help", _) => self.say(HELP),
            ("/quit" | "/exit", _) => return Ok(false),
            ("/new", _) => match self.store.clone() {
                Some(store) => {
                    let cwd = self.workspace.display().to_string();
                    self.release_session()?;
                    let fresh = store.create(&cwd)?;
                    self.switch_to(fresh, "new session");
                }
                None => {
                    self.session = keel_agent::Session::in_memory(&self.workspace.display().to_string());
                    self.refresh_context();
                    self.say("new session (not saved: --no-session)");
                }
            },
            ("/sessions", _) => match &self.store {
                Some(store) => self.say(&sessions::table(
                    store.as_ref(),
                    Some(&self.workspace.display().to_string()),
                    10,
                )?),
                None => self.say("sessions are not saved (--no-session)"),
            },
            ("/resume", Some(id)) => match self.store.clone() {
                Some(store) => {
                    let current = self.session.id().to_owned();
                    self.release_session()?;
                    match store.open(id) {
                        Ok(mut session) => {
                            session.repair()?;
                            self.switch_to(session, "resumed session");
                        }
                        Err(e) => {
                            self.say(&format!("cannot resume {id}: {e}"));
                            if let Ok(back) = store.open(&current) {
                                self.session = back;
                            }
                        }
                    }
                }
                None => self.say("sessions are not saved (--no-session)"),
            },
            ("/resume", None) => self.say("usage: /resume ID (see /sessions)"),
            ("/fork", _) => match &self.store {
                Some(store) => {
                    self.session.sync()?;
                    let fork = store.fork(self.session.id(), None)?;
                    self.switch_to(fork, "forked into session");
                }
                None => self.say("sessions are not saved (--no-session)"),
            },
            ("/mcp", _) => match &self.mcp {
                Some(mcp) => {
                    self.say(&crate::mcp::table(&mcp.manager().statuses()));
                    for line in mcp.refused() {
                        self.say(&format!("mcp: {line}"));
                    }
                }
                None => self.say(&crate::mcp::table(&[])),
            },
            ("/undo", arg) => self.undo(arg),
            ("/rewind", arg) => self.rewind(arg)?,
            ("/usage", _) => {
                let usage = self.session.projection().usage();
                let cost = pricing::cost(&self.settings.pricing, &self.settings.model_name(), &usage)
                    .map(|c| format!(" · ${c:.4}"))
                    .unwrap_or_default();
                let context = self.agent.context_usage(&self.session, &self.ctx);
                self.say(&format!(
                    "session {} · {} turns · {}{cost} · context {}",
                    self.session.id(),
                    self.session.projection().turns(),
                    usage_text(&usage),
                    crate::render::context_text(context)
                ));
            }
            _ => self.say(&unknown_command(name)),
        }
        Ok(true)
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
    let (agent, notes) = setup::agent(&settings, &workspace, Arc::clone(&policy), model);
    let store = setup::store(cli)?;
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
            "{note} · {} turns · {} tokens",
            turns,
            thousands(repl.session.projection().usage().input_tokens)
        ));
        repl.show_last_exchange();
    }

    let commands = command_names().into_iter().chain(["/exit"]).map(str::to_owned).collect();
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
                if line.starts_with('/') {
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

#[cfg(test)]
mod tests {
    use super::unknown_command;

    /// Issue 32, item 8: `/model NAME` checks the server's list when it has one.
    #[test]
    fn a_model_the_server_does_not_list_is_said_with_the_nearest() {
        let names = vec!["qwen2.5-coder:1.5b".to_owned(), "llama3.2:3b".to_owned()];
        assert_eq!(
            super::unlisted("qwen2.5-coder:1.5", &names).as_deref(),
            Some(
                "note: the server does not list `qwen2.5-coder:1.5` (did you mean qwen2.5-coder:1.5b?); switching anyway (/model lists its models)"
            )
        );
        assert_eq!(super::unlisted("llama3.2:3b", &names), None);
        assert_eq!(super::unlisted("anything", &[]), None, "a server that lists nothing is not asked");
    }

    /// Issue 32, item 8: a misspelled command is answered with the one meant.
    #[test]
    fn a_misspelled_command_gets_the_nearest_one() {
        assert_eq!(
            unknown_command("/modle"),
            "unknown command /modle; did you mean /model? (/help lists them)"
        );
        assert_eq!(
            unknown_command("/rewnid"),
            "unknown command /rewnid; did you mean /rewind? (/help lists them)"
        );
        assert_eq!(unknown_command("/xyzzy"), "unknown command /xyzzy; /help lists them");
    }
}

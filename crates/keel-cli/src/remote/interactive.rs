//! `keel --remote URL` without a task: the interactive mode against a running `keel serve`.
//! Each line is a turn of one server session (made at the first line, or the one
//! `--resume` / `--continue` names); answers stream, tool lines and diffs show as in a
//! local run, the server's permission questions are asked here, Ctrl-C stops the turn on
//! the server. Files live on the server, so the commands that act on local files or
//! the local model (`/undo`, `/model`, `/compact`, …) are not offered.

use std::sync::Arc;
use std::time::Instant;

use reedline::Signal;

use super::{Remote, TurnFailure, one_turn, session};
use crate::cli::Cli;
use crate::exit;
use crate::render::Terminal;

const HELP: &str = "commands (keel --remote):
  /help      this list
  /session   the server session's id (keel --remote URL --resume ID comes back to it)
  /quit      leave (also Ctrl-D, or Ctrl-C twice at the prompt)
While the agent works: Ctrl-C stops the turn on the server.";

/// The session this run talks to, once known.
struct Current {
    id: String,
    /// The seq of its last event seen.
    after: Option<u64>,
    /// Turns this run made in it.
    turns: u32,
}

/// Runs the interactive mode against the server `cli.remote` names.
pub async fn run(cli: &Cli) -> anyhow::Result<u8> {
    let url = cli.remote.as_deref().unwrap_or_default();
    let remote = match Remote::new(url) {
        Ok(remote) => remote,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::ERROR);
        }
    };
    let terminal = Arc::new(Terminal::new(true));
    // A session named by --resume or --continue is looked up now; a new one is made by
    // the first line, so leaving at once leaves nothing on the server.
    let mut current = None;
    if cli.resume.is_some() || cli.continue_latest {
        match session(&remote, cli).await {
            Ok((id, after)) => {
                terminal.line(&format!("keel: resumed session {id} on {url}"));
                current = Some(Current { id, after, turns: 0 });
            }
            Err(e) => {
                errln!("keel: {e}");
                return Ok(exit::ERROR);
            }
        }
    }
    terminal.line(&format!("keel · remote {url} · /help for commands"));
    let commands = ["/help", "/session", "/quit", "/exit"].map(str::to_owned).to_vec();
    // The files are on the server: commands only.
    let pastes = crate::fold::Pastes::default();
    let completions = crate::line_editor::Completions { commands, workspace: None, models: None };
    let mut editor = crate::line_editor::editor(completions, &pastes);
    let prompt = crate::line_editor::prompt();
    let mut last_was_ctrl_c = false;
    crate::signals::watch_terminal();
    loop {
        match editor.read_line(&prompt) {
            Ok(Signal::Success(buffer)) => {
                last_was_ctrl_c = false;
                let line = match crate::line_editor::message(&buffer, &pastes) {
                    Ok(line) => line,
                    Err(why) => {
                        // Put back for mending; nothing is sent.
                        terminal.line(&format!("keel: {why}"));
                        editor.run_edit_commands(&[reedline::EditCommand::InsertString(buffer)]);
                        continue;
                    }
                };
                match line.as_str() {
                    "" => continue,
                    "/quit" | "/exit" => break,
                    "/help" => terminal.line(HELP),
                    "/session" => terminal.line(&match &current {
                        Some(current) => format!("session {}", current.id),
                        None => "no session yet: the first message makes one".to_owned(),
                    }),
                    command if command.starts_with('/') => terminal.line(&format!(
                        "keel: {} is not available with --remote (/help lists what is)",
                        command.split_whitespace().next().unwrap_or(command)
                    )),
                    _ => turn(&remote, cli, &terminal, &mut current, line).await,
                }
                if crate::signals::Interrupts::get().leaving() {
                    break;
                }
            }
            Ok(Signal::CtrlC) => {
                if last_was_ctrl_c {
                    break;
                }
                last_was_ctrl_c = true;
                terminal.line("(Ctrl-C again or Ctrl-D to leave)");
            }
            Ok(Signal::CtrlD) => break,
            Ok(_) => {}
            Err(e) => {
                terminal.line(&format!("terminal error: {e}"));
                break;
            }
        }
    }
    if let Some(current) = current.filter(|c| c.turns > 0) {
        terminal.line(&format!("to come back to this session: keel --remote {url} --resume {}", current.id));
    }
    if crate::signals::Interrupts::get().leaving() {
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::OK)
}

/// One line as a turn; failures are said and the prompt comes back.
async fn turn(
    remote: &Remote,
    cli: &Cli,
    terminal: &Arc<Terminal>,
    current: &mut Option<Current>,
    text: String,
) {
    let made_now = current.is_none();
    if current.is_none() {
        match session(remote, cli).await {
            Ok((id, after)) => *current = Some(Current { id, after, turns: 0 }),
            Err(e) => return terminal.line(&format!("keel: {e}")),
        }
    }
    let Some(session) = current.as_mut() else { return };
    let started = Instant::now();
    match one_turn(remote, &session.id, session.after, text, None, terminal).await {
        Ok(turn) => {
            session.turns += 1;
            session.after = turn.last_seq.or(session.after);
            match turn.end.clone() {
                Some(end) => terminal.summary_with_cost(&turn.outcome(end), started.elapsed(), None, None),
                None => terminal.line("keel: the turn did not end"),
            }
        }
        Err(TurnFailure::Refused(e)) => {
            terminal.line(&format!("keel: {e}"));
            if made_now {
                // The session was made for this message: a refused message leaves none.
                remote.delete_session(&session.id).await;
                *current = None;
            }
        }
        Err(TurnFailure::Failed(e)) => {
            session.turns += 1;
            terminal.line(&format!("keel: {e}"));
        }
    }
}

/// Asks the server's permission question here: the call whole, then one answer line.
/// Returns the answer for the server (`allow`, `always`, `deny` or `stop`) and, for a
/// line of other words, those words (a no with what to do instead, as in a local run).
pub(super) async fn ask(terminal: &Terminal, tool: &str, arguments: &str) -> (&'static str, Option<String>) {
    terminal.stop_spinner();
    let request = keel_tools::AskRequest::new(tool, arguments);
    let question = crate::render::approval::Question {
        request: &request,
        folder: "the server's workspace",
        width: crate::render::width(),
        color: terminal.color(),
        roots: None,
    };
    for line in crate::render::approval::question(&question) {
        terminal.line(&line);
    }
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    let Ok(Ok(line)) = read.await else { return ("deny", None) };
    match line.trim().to_lowercase().as_str() {
        "y" | "yes" => ("allow", None),
        "a" | "always" => ("always", None),
        "s" | "stop" => ("stop", None),
        "" | "n" | "no" => ("deny", None),
        _ => ("deny", Some(line.trim().to_owned())),
    }
}

//! The slash commands: their list (`/help`), the nearest one for a misspelling, and the
//! ones that need no model (sessions, MCP, usage; `/undo` and `/rewind` are in
//! [`super::history`], `/model` in [`super::model`], `/compact` in [`super::turn`]).

use crate::pricing;
use crate::render::usage_text;
use crate::sessions;

use super::Repl;

pub(super) const HELP: &str = "commands:
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
pub(super) fn command_names() -> Vec<&'static str> {
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

impl Repl {
    /// Runs a slash command that needs no model; `false` to leave.
    pub(super) fn command(&mut self, line: &str) -> anyhow::Result<bool> {
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
                let turns = self.session.projection().turns();
                self.say(&format!(
                    "session {} · {turns} {} · {}{cost} · context {}",
                    self.session.id(),
                    if turns == 1 { "turn" } else { "turns" },
                    usage_text(&usage),
                    crate::render::context_text(context)
                ));
            }
            _ => self.say(&unknown_command(name)),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::unknown_command;

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

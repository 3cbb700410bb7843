//! Moving between sessions and back in one: switching the session in use (`/new`,
//! `/resume`, `/fork`), showing where a resumed one was, and `/undo` and `/rewind`.

use super::Repl;
use crate::{sessions, setup};

impl Repl {
    /// Closes the current session (durable, its file lock or database lease released, so
    /// it can be opened again at once) and leaves an unsaved placeholder in its place.
    pub(super) fn release_session(&mut self) -> anyhow::Result<()> {
        let placeholder = keel_agent::Session::in_memory(&self.workspace.display().to_string());
        let current = std::mem::replace(&mut self.session, placeholder);
        let id = current.id().to_owned();
        current.close().map_err(|e| anyhow::anyhow!("closing session {id}: {e}"))
    }

    pub(super) fn switch_to(&mut self, session: keel_agent::Session, note: &str) {
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
    pub(super) fn undo(&mut self, arg: Option<&str>) {
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
    pub(super) fn rewind(&mut self, arg: Option<&str>) -> anyhow::Result<()> {
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
    pub(super) fn show_last_exchange(&self) {
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
    pub(super) fn refresh_context(&mut self) {
        let model = self.ctx.model.take();
        let tools = self.ctx.tools.take();
        self.ctx = setup::context(&self.settings, &self.workspace, &self.session);
        self.ctx.model = model;
        self.ctx.tools = tools;
    }
}

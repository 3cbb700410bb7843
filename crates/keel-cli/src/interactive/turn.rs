//! What runs the agent from the prompt: a turn (with typing read as steering or answers,
//! and Ctrl-C), and `/compact`.

use std::sync::Arc;
use std::time::Instant;

use keel_agent::Prompt;
use keel_llm::CancellationToken;

use crate::input::{LineReader, terminal_source};
use crate::print_mode::ticker;

use super::Repl;

impl Repl {
    /// Waits for MCP servers before the first turn and adds late joiners' tools to the
    /// session's between turns (a turn's tools are fixed).
    pub(super) async fn mcp_tools(&mut self) -> Result<(), keel_mcp::McpError> {
        let Some(mcp) = &mut self.mcp else { return Ok(()) };
        for line in mcp.before_turn(self.agent.tools(), &mut self.ctx).await? {
            self.terminal.line(&line);
        }
        Ok(())
    }

    /// The prompt for `text`: the `--image` files not yet sent and the image files the
    /// text names by path. `None` (after saying why) when a named image cannot be sent.
    fn prompt_with_images(&mut self, text: String) -> Option<Prompt> {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let mut images = self.first_images.clone();
        // A model that takes no images gets the paths as text: "shrink ./logo.png" is a task
        // about a file then, not a picture to look at.
        let takes_images = self.agent.model().accepts_images() != Some(false);
        let pasted = if takes_images { crate::images::pasted_in(&text, home.as_deref()) } else { Vec::new() };
        for pasted in pasted {
            match pasted.image {
                Ok(image) => {
                    let name = pasted.path.file_name().unwrap_or(pasted.path.as_os_str()).to_string_lossy();
                    self.say(&self.terminal.dim(&format!("attached {name} ({})", image.describe())));
                    images.push(image);
                }
                Err(e) => {
                    self.say(&format!("keel: cannot attach {e}; nothing was sent"));
                    return None;
                }
            }
        }
        let prompt = Prompt::text(text).with_images(images);
        if let Err(e) = prompt.check(&**self.agent.model()) {
            self.say(&format!("keel: {e}; nothing was sent"));
            return None;
        }
        // The --image files go with the first prompt that is sent, not one refused.
        self.first_images.clear();
        Some(prompt)
    }

    pub(super) async fn turn(&mut self, text: String) -> anyhow::Result<()> {
        let Some(prompt) = self.prompt_with_images(text) else { return Ok(()) };
        self.mcp_tools().await?;
        let cancel = CancellationToken::new();
        let interrupts = crate::signals::during_turn(&cancel);
        let ticker = ticker(Arc::clone(&self.terminal));
        self.input.keep_commands();
        let reader = terminal_source().map(|source| {
            LineReader::start(
                source,
                Arc::clone(&self.input),
                self.ctx.inbox.clone(),
                Arc::clone(&self.terminal),
            )
        });
        let started = Instant::now();
        let outcome =
            self.agent.run_turn(&mut self.session, &self.ctx, prompt, &*self.terminal, &cancel).await;
        // A line typed but not sent, or a slash command typed, carries over to the prompt.
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

    /// `/compact [focus]`: summarizes the older part of the session now (Ctrl-C stops it
    /// and leaves the session unchanged).
    pub(super) async fn compact(&mut self, focus: Option<&str>) -> anyhow::Result<()> {
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
}

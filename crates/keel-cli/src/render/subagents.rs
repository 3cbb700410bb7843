//! Subagents on the terminal: a line when a child starts (its agent and session), and
//! while children run, the status line says what each is doing (`↳ task explorer: step 3
//! · read_file src/lib.rs`).

use keel_agent::SubagentUpdate;

use super::Terminal;
use super::format::{clip, short_args};

/// A running child, as the status line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Child {
    call_id: String,
    agent: String,
    doing: String,
}

/// The status line's text for the running `children`; `None` without any.
pub(super) fn live(children: &[Child]) -> Option<String> {
    match children {
        [] => None,
        [one] => Some(format!("↳ task {}: {}", one.agent, one.doing)),
        many => {
            let each: Vec<String> = many.iter().map(|c| format!("{} {}", c.agent, c.doing)).collect();
            Some(format!("↳ {} tasks: {}", many.len(), each.join(" │ ")))
        }
    }
}

impl Terminal {
    /// Shows a child's news.
    pub(super) fn subagent(&self, call_id: &str, update: &SubagentUpdate) {
        match update {
            SubagentUpdate::Started { session_id, agent, description } => {
                let about = description.as_deref().map(|d| format!(": {}", clip(d, 60))).unwrap_or_default();
                self.line(&self.paint("2", &format!("    ↳ task {agent}{about} · session {session_id}")));
                let child = Child { call_id: call_id.into(), agent: agent.clone(), doing: "starting".into() };
                self.with(|state| state.children.push(child));
            }
            SubagentUpdate::Tool { step, name, arguments, .. } => {
                let doing = format!("step {step} · {name} {}", short_args(name, arguments));
                self.with(|state| {
                    if let Some(child) = state.children.iter_mut().find(|c| c.call_id == call_id) {
                        child.doing = doing.trim_end().to_owned();
                    }
                });
            }
            SubagentUpdate::Finished { .. } => {
                self.with(|state| state.children.retain(|c| c.call_id != call_id));
            }
        }
        self.with(|state| state.live = live(&state.children));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(agent: &str, doing: &str) -> Child {
        Child { call_id: agent.into(), agent: agent.into(), doing: doing.into() }
    }

    #[test]
    fn one_status_line_names_each_running_child() {
        assert_eq!(live(&[]), None);
        assert_eq!(
            live(&[child("explorer", "step 3 · read_file src/lib.rs")]).as_deref(),
            Some("↳ task explorer: step 3 · read_file src/lib.rs")
        );
        assert_eq!(
            live(&[child("a", "step 1 · grep \"x\""), child("b", "starting")]).as_deref(),
            Some("↳ 2 tasks: a step 1 · grep \"x\" │ b starting")
        );
    }
}

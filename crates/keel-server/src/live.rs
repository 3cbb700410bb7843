//! A session this server has ready: its agent, context, fan-out hub, running turn and
//! pending permission question. The session's log is held (its lock or lease taken) only
//! while a turn runs, so between turns any node or process may run it. A turn runs in a
//! task of its own, so a client that leaves never stops or wedges it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_agent::{Agent, SessionContext};
use keel_llm::CancellationToken;
use keel_session::Session;
use keel_tools::{AskAnswer, AskFn, AskRequest};
use tokio::sync::oneshot;

use crate::error::ApiError;
use crate::factory::{Prepared, SessionSpec};
use crate::hub::Hub;

/// A permission question waiting for a client's answer.
#[derive(Debug)]
pub struct Question {
    /// Its number (unique in the server).
    pub id: u64,
    /// The tool.
    pub tool: String,
    /// The raw arguments.
    pub arguments: String,
    /// The `ask` rule that made the call ask, if one did.
    pub rule: Option<String>,
    /// Why keel asks when no rule made it (a user's hook asked, with this reason).
    pub reason: Option<String>,
    answer: oneshot::Sender<AskAnswer>,
}

impl Question {
    /// The `permission/ask` event clients are sent: `rule` and `reason` only when set.
    pub fn event(&self) -> serde_json::Value {
        let mut data = serde_json::json!({"id": self.id, "tool": self.tool, "arguments": self.arguments});
        if let Some(rule) = &self.rule {
            data["rule"] = serde_json::json!(rule);
        }
        if let Some(reason) = &self.reason {
            data["reason"] = serde_json::json!(reason);
        }
        serde_json::json!({"type": "permission/ask", "data": data})
    }
}

/// A session this server has ready.
pub struct Live {
    /// The session id.
    pub id: String,
    /// The client's choices.
    pub spec: SessionSpec,
    pub(crate) agent: Agent,
    pub(crate) ctx: SessionContext,
    /// Clients' fan-out.
    pub hub: Arc<Hub>,
    /// The running turn's cancel token.
    turn: Mutex<Option<CancellationToken>>,
    question: Arc<Mutex<Option<Question>>>,
    /// When a request last touched the session or its turn ended.
    used: Mutex<Instant>,
}

/// Runs `f` on what `mutex` guards, poisoned or not.
pub(crate) fn locked<T, R>(mutex: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
    match mutex.lock() {
        Ok(mut guard) => f(&mut guard),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

impl Live {
    /// A ready session from what the factory prepared, with its hub and question slot.
    pub(crate) fn new(
        id: String,
        spec: SessionSpec,
        prepared: Prepared,
        hub: Arc<Hub>,
        question: Arc<Mutex<Option<Question>>>,
    ) -> Live {
        Live {
            id,
            spec,
            agent: prepared.agent,
            ctx: prepared.ctx,
            hub,
            turn: Mutex::new(None),
            question,
            used: Mutex::new(Instant::now()),
        }
    }

    pub(crate) fn touch(&self) {
        locked(&self.used, |used| *used = Instant::now());
    }

    /// Idle for `max`: no turn, no question, no client streaming, untouched that long.
    pub(crate) fn idle(&self, max: Duration) -> bool {
        !self.running()
            && self.question().is_none()
            && self.hub.clients() == 0
            && locked(&self.used, |used| used.elapsed() >= max)
    }

    /// Whether a turn is running here.
    pub fn running(&self) -> bool {
        locked(&self.turn, |t| t.is_some())
    }

    /// Marks a turn as running; `false` when one runs already.
    pub(crate) fn begin_turn(&self, cancel: CancellationToken) -> bool {
        locked(&self.turn, |turn| {
            if turn.is_some() {
                return false;
            }
            *turn = Some(cancel);
            true
        })
    }

    /// Marks the turn as ended.
    pub(crate) fn end_turn(&self) {
        self.touch();
        locked(&self.turn, |turn| *turn = None);
    }

    /// The pending permission question's `permission/ask` event.
    pub fn question(&self) -> Option<serde_json::Value> {
        locked(&self.question, |q| q.as_ref().map(Question::event))
    }

    /// Answers the pending question `id` (any, when `None`).
    pub fn answer(&self, id: Option<u64>, answer: AskAnswer) -> Result<(), ApiError> {
        let question = locked(&self.question, |q| match q {
            Some(pending) if id.is_none_or(|id| id == pending.id) => Ok(q.take()),
            Some(pending) => Err(ApiError::conflict(
                "no_question",
                format!("question {} is not pending (question {} is)", id.unwrap_or_default(), pending.id),
            )),
            None => Err(ApiError::conflict("no_question", "no permission question is pending")),
        })?;
        if let Some(question) = question {
            let _ = question.answer.send(answer);
        }
        Ok(())
    }

    /// Queues steering input for the running turn.
    pub fn steer(&self, text: String) -> Result<(), ApiError> {
        if !self.running() {
            return Err(ApiError::conflict("no_turn", "no turn is running; send a message instead"));
        }
        self.ctx.inbox.steer(text);
        Ok(())
    }

    /// Aborts the running turn.
    pub fn abort(&self) -> Result<(), ApiError> {
        self.abort_because(None)
    }

    /// Aborts the running turn, which ends with `reason` (default: "aborted by the user").
    pub(crate) fn abort_because(&self, reason: Option<&str>) -> Result<(), ApiError> {
        match locked(&self.turn, |t| t.clone()) {
            Some(cancel) => {
                if let Some(reason) = reason {
                    self.ctx.inbox.set_abort_reason(reason);
                }
                cancel.cancel();
                Ok(())
            }
            None => Err(ApiError::conflict("no_turn", "no turn is running")),
        }
    }
}

/// The permission question asked through the hub, answered by `…/permission`.
pub(crate) fn ask_fn(hub: Arc<Hub>, slot: Arc<Mutex<Option<Question>>>, timeout: Duration) -> AskFn {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    Arc::new(move |request: AskRequest| {
        let hub = Arc::clone(&hub);
        let slot = Arc::clone(&slot);
        Box::pin(async move {
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            let (answer, answered) = oneshot::channel();
            let question = Question {
                id,
                tool: request.tool,
                arguments: request.arguments,
                rule: request.rule,
                reason: request.reason,
                answer,
            };
            let event = question.event();
            locked(&slot, |q| *q = Some(question));
            hub.publish_value(&event);
            let answer = tokio::time::timeout(timeout, answered).await;
            locked(&slot, |q| {
                if q.as_ref().is_some_and(|q| q.id == id) {
                    *q = None;
                }
            });
            match answer {
                Ok(Ok(answer)) => answer,
                // No answer in time (or the session went away): the call is denied.
                _ => AskAnswer::Deny,
            }
        })
    })
}

/// Runs one turn on `session` (held for it); the session comes back to be closed, with
/// whether its log was written to the end.
pub(crate) async fn run_turn(
    live: &Live,
    mut session: Session,
    text: keel_agent::Prompt,
    cancel: &CancellationToken,
) -> (Session, bool) {
    tracing::info!(session = %live.id, "turn started");
    let outcome = live.agent.run_turn(&mut session, &live.ctx, text, &*live.hub, cancel).await;
    if let Err(e) = &outcome {
        tracing::warn!(session = %live.id, error = %e, "a turn stopped: the log could not be written");
        let dropped = live.hub.abandon_pending();
        tracing::debug!(session = %live.id, dropped, "events never committed were not shown");
        // The next turn opens the session afresh from the store (repaired), so the
        // client may send its message again as soon as the store is back.
        let message = format!("{e}; the turn stopped (send the message again when the store is back)");
        live.hub.publish_value(&serde_json::json!({"type": "keel/error", "data": {"message": message}}));
    }
    (session, outcome.is_ok())
}

#[cfg(test)]
mod question_tests {
    use super::*;

    /// A question asked because of a rule or a user's hook says so to the client; one
    /// asked by the mode alone carries only what it always did.
    #[test]
    fn a_question_tells_its_rule_and_reason_only_when_it_has_them() {
        let question = |rule: Option<&str>, reason: Option<&str>| Question {
            id: 7,
            tool: "shell".into(),
            arguments: r#"{"command":"rm -r build"}"#.into(),
            rule: rule.map(str::to_owned),
            reason: reason.map(str::to_owned),
            answer: oneshot::channel().0,
        };
        let args = r#"{"command":"rm -r build"}"#;
        assert_eq!(
            question(None, None).event(),
            serde_json::json!({"type": "permission/ask", "data": {"id": 7, "tool": "shell", "arguments": args}})
        );
        assert_eq!(
            question(Some("shell(rm *)"), Some("deletes files")).event()["data"],
            serde_json::json!({"id": 7, "tool": "shell", "arguments": args, "rule": "shell(rm *)", "reason": "deletes files"})
        );
    }
}

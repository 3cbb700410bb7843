//! One session's line to the client: the loop's sink (events → `session/update`) and the
//! permission policy's way to ask (`session/request_permission`).

use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
    SessionNotification, SessionUpdate, ToolCallUpdate, ToolCallUpdateFields,
};
use keel_agent::{AgentEvent, Sink};
use keel_llm::CancellationToken;
use keel_tools::rules::{PermissionRules, RuleKind, RuleVerdict};
use keel_tools::{AskAnswer, AskFn, AskRequest};

use super::updates::Translator;

/// The ids of the four answers keel offers at a permission question.
pub mod answer {
    /// Run this call.
    pub const ALLOW_ONCE: &str = "allow_once";
    /// Run it, and calls the offered rules allow, for the rest of this run.
    pub const ALLOW_ALWAYS: &str = "allow_always";
    /// Do not run it; the turn goes on.
    pub const REJECT_ONCE: &str = "reject_once";
    /// Do not run it, nor calls like it, for the rest of this run.
    pub const REJECT_ALWAYS: &str = "reject_always";
}

/// Where a "reject always" rule comes from, as `keel permissions` would name it.
const REJECTED_SOURCE: &str = "this session (reject always, ACP)";

/// A session's connection to the client.
pub struct Bridge {
    connection: ConnectionTo<Client>,
    session_id: SessionId,
    translator: Mutex<Translator>,
    /// The running turn's cancel token: a question waits for the answer or the cancel.
    turn: Mutex<Option<CancellationToken>>,
    /// Calls the user rejected "always": denied without asking again.
    rejected: Mutex<PermissionRules>,
}

/// A lock even if a thread panicked holding it (the data stays usable).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Bridge {
    /// A bridge for session `session_id` over `connection`, translating with `translator`.
    pub fn new(
        connection: ConnectionTo<Client>,
        session_id: &str,
        translator: Translator,
        workspace: &std::path::Path,
    ) -> Arc<Bridge> {
        Arc::new(Bridge {
            connection,
            session_id: SessionId::new(session_id.to_owned()),
            translator: Mutex::new(translator),
            turn: Mutex::new(None),
            rejected: Mutex::new(PermissionRules::new(workspace)),
        })
    }

    /// Sends one update (a client that went away is not the turn's concern).
    pub fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::debug!(%error, "acp: an update could not be sent");
        }
    }

    /// The turn now running (`None` after it), whose cancel ends a pending question.
    pub fn set_turn(&self, cancel: Option<CancellationToken>) {
        *lock(&self.turn) = cancel;
    }

    /// The tools the session's turns offer, for the kinds of their calls (see
    /// [`Translator::set_tools`]).
    pub fn set_tools(&self, tools: keel_agent::ToolRegistry) {
        lock(&self.translator).set_tools(tools);
    }

    /// The last reply's finish reason and the provider's word for it (for the stop reason).
    pub fn last_finish(&self) -> Option<(keel_llm::FinishReason, Option<String>)> {
        lock(&self.translator).last_finish()
    }

    /// The permission policy's way to ask: a `session/request_permission` to the client.
    pub fn ask_fn(self: &Arc<Self>) -> AskFn {
        let bridge = Arc::clone(self);
        Arc::new(move |request| {
            let bridge = Arc::clone(&bridge);
            Box::pin(async move { bridge.ask(request).await })
        })
    }

    async fn ask(&self, request: AskRequest) -> AskAnswer {
        if let RuleVerdict::Deny(_) = lock(&self.rejected).verdict(&request.tool, &request.arguments) {
            return AskAnswer::Deny;
        }
        let call_id = lock(&self.translator).waiting_call(&request.tool, &request.arguments);
        let question = question(&self.session_id, call_id, &request);
        let cancel = lock(&self.turn).clone().unwrap_or_default();
        let sent = self.connection.send_request(question).block_task();
        let outcome = tokio::select! {
            answered = sent => answered,
            () = cancel.cancelled() => return AskAnswer::DenyAndStop,
        };
        match outcome {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => self.chosen(&selected.option_id.0, &request),
                _ => AskAnswer::DenyAndStop,
            },
            Err(error) => {
                tracing::warn!(%error, "acp: the permission question failed; the call is denied");
                AskAnswer::Deny
            }
        }
    }

    /// The answer the client chose, as keel's.
    fn chosen(&self, option: &str, request: &AskRequest) -> AskAnswer {
        match option {
            answer::ALLOW_ONCE => AskAnswer::Allow,
            answer::ALLOW_ALWAYS => AskAnswer::AllowAlways,
            answer::REJECT_ALWAYS => {
                let rules = always_rules(request);
                if let Err(error) = lock(&self.rejected).add(RuleKind::Deny, &rules, REJECTED_SOURCE) {
                    tracing::warn!(%error, "acp: a reject-always rule did not parse");
                }
                AskAnswer::Deny
            }
            _ => AskAnswer::Deny,
        }
    }
}

/// The rules an "always" answer applies to: the policy's suggestion, else the whole tool.
fn always_rules(request: &AskRequest) -> Vec<String> {
    if request.suggested.is_empty() { vec![request.tool.clone()] } else { request.suggested.clone() }
}

/// The question for the client: the call (by its announced id when there is one) and
/// keel's four answers.
pub fn question(
    session_id: &SessionId,
    call_id: Option<String>,
    request: &AskRequest,
) -> RequestPermissionRequest {
    let arguments: serde_json::Value = serde_json::from_str(&request.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(request.arguments.clone()));
    let mut title = request.tool.clone();
    if let Some(rule) = &request.rule {
        title.push_str(&format!(" (asks by the rule `{rule}`)"));
    } else if let Some(reason) = &request.reason {
        title.push_str(&format!(" ({reason})"));
    }
    let fields = ToolCallUpdateFields::new().title(title).raw_input(arguments);
    let call_id = call_id.unwrap_or_else(|| format!("ask-{}", request.tool));
    let rules = always_rules(request).join(", ");
    let options = vec![
        PermissionOption::new(answer::ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            answer::ALLOW_ALWAYS,
            format!("Always allow {rules}"),
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(answer::REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            answer::REJECT_ALWAYS,
            format!("Always reject {rules}"),
            PermissionOptionKind::RejectAlways,
        ),
    ];
    RequestPermissionRequest::new(session_id.clone(), ToolCallUpdate::new(call_id, fields), options)
}

impl Sink for Bridge {
    fn emit(&self, event: &AgentEvent<'_>) {
        let updates = {
            let mut translator = lock(&self.translator);
            match event {
                AgentEvent::Model(delta) => translator.delta(delta).into_iter().collect(),
                AgentEvent::Logged(logged) => translator.logged(logged),
                AgentEvent::ToolStarted { call, .. } => vec![translator.started(&call.id)],
                _ => Vec::new(),
            }
        };
        updates.into_iter().for_each(|update| self.send(update));
    }
}

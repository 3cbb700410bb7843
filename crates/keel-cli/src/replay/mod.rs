//! `keel replay SESSION [--tools live|recorded]`: a recorded session as a regression test
//! of the keel that runs it now. The model is the log ([`model::LogModel`] answers each
//! request with the reply recorded for it); keel does everything else as it does today:
//! the system prompt, the tools, the requests it derives, the hooks' nudges, the
//! compactions, and (with `--tools live`) the tools themselves, in a copy of the session's
//! workspace. Where the requests or the tools' results differ from the recorded ones is
//! reported, first difference first. Exit 0: nothing differs; 1: something does; 2: a
//! usage error. Nothing is written to the session or its store; no request leaves.

mod compare;
mod model;
mod script;
mod settings;
mod tools;
mod workspace;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_agent::{AgentEvent, Session, SessionContext};
use keel_llm::CancellationToken;
use keel_session::{Event, EventKind, ToolResultData, TurnEndReason};
use keel_tools::PermissionPolicy;

use crate::cli::{ReplayArgs, ReplayTools};
use crate::exit;
use compare::{Difference, Paths};
use model::{Found, LogModel};
use script::{Action, CallKind, ModelCall, Script};

/// Most differences printed.
const SHOWN: usize = 10;

/// What one replay found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The differences, in the recording's order.
    pub differences: Vec<Difference>,
    /// Model requests answered from the log.
    pub requests: usize,
    /// Tool results compared.
    pub results: usize,
    /// Turns replayed.
    pub turns: usize,
    /// The user interrupted the replay.
    pub interrupted: bool,
}

/// How the replay's tools run, and where.
pub struct Tools {
    /// Run for real in a copy (`true`), or answered from the recording.
    pub live: bool,
    /// The folder keel works in: the copy, or (tools not run) a folder with only the
    /// project's `AGENTS.md`.
    pub workspace: PathBuf,
    /// The replayed session's artifacts folder.
    pub artifacts: PathBuf,
    /// The recorded session's artifacts folder (its undo records).
    pub recorded_artifacts: PathBuf,
}

/// Replays `events` with `settings` (see [`settings::resolve`]) and compares.
pub async fn replay(
    events: Vec<Event>,
    settings: &crate::config::Settings,
    model_info: keel_llm::ModelInfo,
    tools: &Tools,
    user_cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    let script = script::read(&events);
    let original = script.header.as_ref().map(|h| h.cwd.clone()).unwrap_or_default();
    let paths = Paths::new([
        (tools.workspace.display().to_string(), original.clone()),
        (tools.artifacts.display().to_string(), tools.recorded_artifacts.display().to_string()),
    ]);
    let window = settings::window(settings, &model_info);
    let model = LogModel::new(model_info, window, Arc::from(events), paths.clone());
    let configured = crate::permissions::with_kept(&settings.rules, Path::new(&original))?;
    let rules = crate::permissions::rules(&configured, &tools.workspace)?;
    let policy = PermissionPolicy::new(settings.permission)
        .add_deny_patterns(&settings.deny)
        .map_err(|e| anyhow::anyhow!("a deny pattern in the config is not a valid regex: {e}"))?
        .with_rules(rules)
        .with_ask(tools::ask_from_log(&script.calls, &script.order));
    let (agent, notes) =
        crate::setup::agent(settings, &tools.workspace, Arc::new(policy), Arc::new(model.clone()));
    for note in notes {
        errln!("keel: {note}");
    }
    let results = tools::results(&script.calls);
    let mcp: Vec<_> = script
        .request
        .iter()
        .flat_map(|h| h.tools.iter())
        .filter(|t| t.name.starts_with(keel_mcp::name::PREFIX))
        .cloned()
        .collect();
    let registry = tools::registry(agent.tools(), &mcp, &results, !tools.live);
    let mut ctx = SessionContext::new(&tools.workspace).artifacts(&tools.artifacts).tools(registry);
    if let Some(environment) = &script.environment {
        ctx = ctx.environment(environment.clone());
    }
    let mut session = Session::in_memory(&tools.workspace.display().to_string());
    let logged: Mutex<Vec<Event>> = Mutex::new(Vec::new());
    let sink = |event: &AgentEvent<'_>| {
        if let AgentEvent::Logged(event) = event
            && let Ok(mut logged) = logged.lock()
        {
            logged.push((*event).clone());
        }
    };
    let mut outcome = Outcome::default();
    for action in &script.actions {
        if user_cancel.is_cancelled() {
            outcome.interrupted = true;
            break;
        }
        let cancel = user_cancel.child_token();
        match action {
            Action::Turn(turn) => {
                outcome.turns += 1;
                let recorded = (turn.reason, turn.end);
                model.begin(calls(&turn.calls, tools.live), recorded, cancel.clone(), ctx.inbox.clone());
                for text in &turn.steers_before {
                    ctx.inbox.steer(text.clone());
                }
                let prompt = keel_agent::Prompt::text(turn.prompt.clone()).with_images(turn.images.clone());
                let done = agent.run_turn(&mut session, &ctx, prompt, &sink, &cancel).await?;
                let before = outcome.differences.len();
                outcome.differences.extend(model.finish());
                let now = done.reason;
                if let Some(recorded) =
                    turn.reason.filter(|r| *r != now && outcome.differences.len() == before)
                {
                    outcome.differences.push(Difference {
                        at: turn.end,
                        what: "the turn ended otherwise".to_owned(),
                        recorded: recorded.as_str().to_owned(),
                        now: format!(
                            "{}{}",
                            now.as_str(),
                            done.message.map(|m| format!(": {m}")).unwrap_or_default()
                        ),
                    });
                }
            }
            Action::Compact(compaction) => {
                let end = compaction.first().map(|c| c.at).unwrap_or_default();
                model.begin(calls(compaction, tools.live), (None, end), cancel.clone(), ctx.inbox.clone());
                agent.compact(&mut session, &ctx, None, &sink, &cancel).await?;
                outcome.differences.extend(model.finish());
            }
        }
    }
    if user_cancel.is_cancelled() {
        outcome.interrupted = true;
    }
    outcome.requests = model.served();
    let logged = logged.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (results, differing) = compare_results(&script, &logged, &paths, &mut outcome.differences);
    outcome.results = results;
    for found in model.take_found() {
        match found {
            Found::Plain(difference) => outcome.differences.push(difference),
            Found::Message { at, found, counts } => {
                let explained = [&found.recorded, &found.now].into_iter().flatten().any(|(_, message)| {
                    matches!(message, keel_llm::Message::ToolResult(r) if differing.contains(&r.call_id))
                });
                if !explained {
                    outcome.differences.push(compare::message_difference(at, &found, counts, &paths));
                }
            }
        }
    }
    outcome.differences.sort_by_key(|d| d.at.seq);
    Ok(outcome)
}

/// The recorded requests a replay makes: a tool's own requests only when its tools run.
fn calls(calls: &[ModelCall], live: bool) -> Vec<ModelCall> {
    calls
        .iter()
        .filter(|call| live || !matches!(&call.kind, CallKind::Aside(aside) if aside.call_id.is_some()))
        .cloned()
        .collect()
}

/// Compares each recorded tool result with the replay's; returns how many were compared
/// and the calls whose results differ (or that did not run).
fn compare_results(
    script: &Script,
    logged: &[Event],
    paths: &Paths,
    differences: &mut Vec<Difference>,
) -> (usize, std::collections::HashSet<String>) {
    let now: std::collections::HashMap<&str, &ToolResultData> = logged
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(result) => Some((result.call_id.as_str(), result)),
            _ => None,
        })
        .collect();
    let stopped = |turn: u32| {
        script.actions.iter().any(|a| {
            matches!(a, Action::Turn(t) if t.turn == turn
                && matches!(t.reason, Some(TurnEndReason::Aborted | TurnEndReason::Interrupted)))
        })
    };
    let mut compared = 0;
    let mut differing = std::collections::HashSet::new();
    for id in &script.order {
        let Some(call) = script.calls.get(id) else { continue };
        let Some(recorded) = &call.result else { continue };
        let what = || {
            let args = crate::render::format::short_args(&call.name, &call.arguments);
            format!("result of {} {args} ({id})", call.name).replace("  ", " ")
        };
        let Some(result) = now.get(id.as_str()) else {
            differing.insert(id.clone());
            // A call after an earlier difference in its turn is its consequence.
            let earlier = differences.iter().any(|d| d.at.turn == call.at.turn && d.at.seq < call.at.seq);
            if !stopped(call.at.turn) && !earlier {
                differences.push(Difference::note(call.at, format!("{}: the call did not run now", what())));
            }
            continue;
        };
        compared += 1;
        // A call cut short by an abort or a crash is not comparable.
        if stopped(call.at.turn)
            && matches!(recorded.error_code.as_deref(), Some("aborted" | "interrupted" | "not_started"))
        {
            continue;
        }
        let side = |r: &ToolResultData, content: String| match (&r.error_code, r.is_error) {
            (Some(code), true) => format!("({code}) {content}"),
            (None, true) => format!("(error) {content}"),
            _ => content,
        };
        let (a, b) = (side(recorded, recorded.content.clone()), side(result, paths.text(&result.content)));
        if let Some(difference) = compare::text(call.at, &what(), &a, &b) {
            differing.insert(id.clone());
            differences.push(difference);
        }
    }
    (compared, differing)
}

/// `keel replay`: reads the session, sets the replay up, runs it, reports.
pub async fn run(cli: &crate::cli::Cli, args: ReplayArgs) -> anyhow::Result<u8> {
    let spec = crate::store::chosen(cli.store.as_deref());
    let store = crate::store::open(spec.as_deref(), false)?.store;
    let events = match store.read(&args.session) {
        Ok(events) => events,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let script = script::read(&events);
    let Some(header) = script.header.clone() else {
        errln!("keel: session {} has no header: not a session log", args.session);
        return Ok(exit::USAGE);
    };
    let original = PathBuf::from(&header.cwd);
    let live = match args.tools {
        Some(ReplayTools::Live) if !original.is_dir() => {
            errln!(
                "keel: the session's workspace {} is not there any more; replay with --tools recorded",
                header.cwd
            );
            return Ok(exit::USAGE);
        }
        Some(mode) => mode == ReplayTools::Live,
        None => original.is_dir(),
    };
    let (mut settings, model_info) = match settings::resolve(cli, script.request.as_ref()) {
        Ok(resolved) => resolved,
        Err(e) => {
            errln!("keel: {}", e.message);
            return Ok(e.exit_code());
        }
    };
    if !settings.allowed_roots.is_empty() {
        // What runs (tools, the user's hooks) reaches the copy and nothing else of the user's.
        errln!("note: allowed_roots are not used: a replay reaches only its copy of the workspace");
        settings.allowed_roots.clear();
    }
    let name = original.file_name().map_or_else(|| "workspace".into(), |n| n.to_string_lossy().into_owned());
    let scratch = workspace::Scratch::new(&name)?;
    let tools = Tools {
        live,
        workspace: scratch.workspace.clone(),
        artifacts: scratch.artifacts.clone(),
        recorded_artifacts: crate::paths::sessions_dir().join(&header.id),
    };
    errln!("{}", intro(&script, &model_info));
    if live {
        if let Err(e) = scratch.copy_from(&original) {
            errln!("keel: cannot copy the workspace: {e}; replay with --tools recorded");
            return Ok(exit::ERROR);
        }
        let rewound =
            workspace::rewind(&scratch.workspace, &original, &tools.recorded_artifacts, &script.writes);
        errln!("{}", where_tools_run(&header.cwd, &scratch.workspace, &rewound, script.shells));
    } else if original.is_dir() {
        scratch.copy_instructions(&original)?;
        errln!("tools do not run: each call gets its recorded result (--tools recorded)");
    } else {
        errln!(
            "the session's workspace {} is not there any more: each call gets its recorded result",
            header.cwd
        );
    }
    if !script.switched.is_empty() {
        errln!(
            "note: the session switched models ({}); the replay runs with the settings of {}",
            script.switched.join(", "),
            script.request.as_ref().map_or("the first", |h| h.model.as_str())
        );
    }
    let user_cancel = CancellationToken::new();
    let _interrupts = crate::signals::during_turn(&user_cancel);
    let outcome = replay(events, &settings, model_info, &tools, &user_cancel).await?;
    drop(scratch);
    outln!("{}", report(&outcome));
    Ok(if outcome.interrupted {
        exit::INTERRUPTED
    } else if outcome.differences.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

fn intro(script: &Script, model: &keel_llm::ModelInfo) -> String {
    let turns = script.actions.iter().filter(|a| matches!(a, Action::Turn(_))).count();
    let id = script.header.as_ref().map_or("", |h| h.id.as_str());
    format!(
        "replaying session {id}: {turns} turn{}, {} tool call{}, the model's replies as {} ({}) gave them",
        if turns == 1 { "" } else { "s" },
        script.order.len(),
        if script.order.len() == 1 { "" } else { "s" },
        model.model,
        model.provider
    )
}

fn where_tools_run(original: &str, copy: &Path, rewound: &workspace::Rewound, shells: usize) -> String {
    let mut text = format!("tools run in a copy of {original} ({}), deleted afterwards", copy.display());
    let back = rewound.restored + rewound.removed;
    if back > 0 {
        text.push_str(&format!(
            "; {back} file{} the session changed put back as {} before it",
            if back == 1 { "" } else { "s" },
            if back == 1 { "it was" } else { "they were" }
        ));
    }
    if shells > 0 {
        text.push_str(&format!(
            "; what its {shells} shell command{} changed is as it is now",
            if shells == 1 { "" } else { "s" }
        ));
    }
    for failed in &rewound.failed {
        text.push_str(&format!("\n  not put back: {failed}"));
    }
    text
}

/// The verdict and the first differences.
pub fn report(outcome: &Outcome) -> String {
    let counts = format!(
        "{} model request{}, {} tool result{}",
        outcome.requests,
        if outcome.requests == 1 { "" } else { "s" },
        outcome.results,
        if outcome.results == 1 { "" } else { "s" }
    );
    if outcome.differences.is_empty() {
        let end = if outcome.interrupted { " until interrupted" } else { "" };
        return format!("no differences: {counts} as recorded{end}");
    }
    let total = outcome.differences.len();
    let mut out = format!("{total} difference{} ({counts} replayed):", if total == 1 { "" } else { "s" });
    for difference in outcome.differences.iter().take(SHOWN) {
        out.push('\n');
        out.push_str(&difference.render());
    }
    if total > SHOWN {
        out.push_str(&format!("\n… {} more", total - SHOWN));
    }
    if outcome.interrupted {
        out.push_str("\n(interrupted)");
    }
    out
}

#[cfg(test)]
mod tests;

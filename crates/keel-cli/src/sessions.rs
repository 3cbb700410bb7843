//! `keel sessions`: list, show, export, fork.

use keel_llm::ContentBlock;
use keel_session::{Event, EventKind, SessionStore};

use crate::cli::SessionsAction;
use crate::exit;
use crate::render::format::{clip, short_args, short_result, thousands};

fn home_relative(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && path.starts_with(&home) => format!("~{}", &path[home.len()..]),
        _ => path.to_owned(),
    }
}

/// A table of sessions (optionally only those of `cwd`), at most `limit` rows.
pub fn table(store: &dyn SessionStore, cwd: Option<&str>, limit: usize) -> anyhow::Result<String> {
    let sessions: Vec<_> = store.list()?.into_iter().filter(|s| cwd.is_none_or(|c| s.cwd == c)).collect();
    if sessions.is_empty() {
        return Ok("no sessions yet".to_owned());
    }
    let mut out = format!(
        "{:<22} {:<16} {:>5} {:>9}  {:<28} {}\n",
        "ID", "CREATED (UTC)", "TURNS", "TOKENS", "FOLDER", "FIRST PROMPT"
    );
    for s in sessions.iter().take(limit) {
        let created = s.created.get(..16).unwrap_or(&s.created).replace('T', " ");
        let tokens = thousands(s.usage.input_tokens + s.usage.output_tokens);
        let prompt = s.first_prompt.as_deref().map(|p| clip(p, 50)).unwrap_or_default();
        let fork = s.parent.as_ref().map(|p| format!(" (fork of {} @{})", p.id, p.seq)).unwrap_or_default();
        let child = s.spawned_by.as_ref().map(child_mark).unwrap_or_default();
        out.push_str(&format!(
            "{:<22} {:<16} {:>5} {:>9}  {:<28} {prompt}{fork}{child}\n",
            s.id,
            created,
            s.turns,
            tokens,
            clip(&home_relative(&s.cwd), 28)
        ));
    }
    if sessions.len() > limit {
        out.push_str(&format!("… {} more\n", sessions.len() - limit));
    }
    Ok(out.trim_end().to_owned())
}

/// How the list marks a child session (a subagent's): the parent that started it and
/// the agent (` ↳ child of ID (general)`).
fn child_mark(link: &keel_session::SpawnRef) -> String {
    let agent = if link.agent.is_empty() { String::new() } else { format!(" ({})", link.agent) };
    format!(" ↳ child of {}{agent}", link.id)
}

/// A readable transcript of a session.
pub fn transcript(events: &[Event]) -> String {
    let mut out = String::new();
    for event in events {
        match &event.kind {
            EventKind::SessionHeader(h) => {
                out.push_str(&format!("session {} · {} · {}\n", h.id, h.created, h.cwd));
                if let Some(parent) = &h.parent {
                    out.push_str(&format!("forked from {} at seq {}\n", parent.id, parent.seq));
                }
                if let Some(link) = &h.spawned_by {
                    out.push_str(&format!(
                        "started by session {}'s task call (seq {}, agent {})\n",
                        link.id, link.seq, link.agent
                    ));
                }
            }
            EventKind::RequestHeader(h) => {
                out.push_str(&format!("· model {} ({}), {} tools\n", h.model, h.provider, h.tools.len()))
            }
            EventKind::TurnStart(t) => out.push_str(&format!("\n── turn {} ──\n", t.turn)),
            EventKind::UserMessage(u) => {
                let source = match u.source {
                    keel_session::InputSource::Prompt => String::new(),
                    other => format!(" ({other:?})").to_lowercase(),
                };
                out.push_str(&format!("> {}{source}\n", u.text.trim_end().replace('\n', "\n  ")));
            }
            EventKind::AssistantMessage(m) => {
                for block in &m.content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            out.push_str(&format!("{}\n", text.trim_end()))
                        }
                        ContentBlock::Thinking { text, .. } if !text.trim().is_empty() => {
                            out.push_str(&format!("  (thinking) {}\n", clip(text, 120)));
                        }
                        ContentBlock::RedactedThinking { .. } => out.push_str("  (thinking, redacted)\n"),
                        ContentBlock::ToolCall(call) => {
                            out.push_str(&format!(
                                "  → {} {}\n",
                                call.name,
                                short_args(&call.name, &call.arguments)
                            ));
                        }
                        _ => {}
                    }
                }
                if m.interrupted {
                    out.push_str("  (reply interrupted)\n");
                }
            }
            EventKind::ToolResult(r) => {
                let mark = if r.is_error { "✗" } else { "✓" };
                out.push_str(&format!(
                    "    {mark} {} {}\n",
                    r.name,
                    short_result(&r.name, &r.content, r.is_error)
                ));
            }
            EventKind::TurnEnd(t) => {
                let tokens = thousands(t.usage.input_tokens + t.usage.output_tokens);
                let message = t.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
                out.push_str(&format!("── {} · {tokens} tokens{message}\n", t.reason.as_str()));
            }
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

/// The last exchange of a session, shortened, to show where a resumed conversation was:
/// the user's last prompt and the answer that followed it.
pub fn last_exchange(events: &[Event]) -> Vec<String> {
    let prompt = events.iter().rposition(
        |e| matches!(&e.kind, EventKind::UserMessage(u) if u.source == keel_session::InputSource::Prompt),
    );
    let Some(at) = prompt else { return Vec::new() };
    let EventKind::UserMessage(user) = &events[at].kind else { return Vec::new() };
    let mut lines = vec![format!("  you: {}", clip(&user.text, 200))];
    let answer = events[at..].iter().rev().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => {
            let text = m.text();
            (!text.trim().is_empty()).then_some(text)
        }
        _ => None,
    });
    match answer {
        Some(text) => {
            let shown: Vec<&str> = text.trim().lines().filter(|l| !l.trim().is_empty()).collect();
            for line in shown.iter().take(4) {
                lines.push(format!("  keel: {}", clip(line, 200)));
            }
            if shown.len() > 4 {
                lines.push(format!("  keel: … ({} more lines)", shown.len() - 4));
            }
        }
        None => lines.push("  keel: (no answer)".to_owned()),
    }
    lines
}

/// Runs a sessions subcommand; returns the exit code.
pub fn run(action: Option<SessionsAction>, store: Option<&str>) -> anyhow::Result<u8> {
    let spec = crate::store::chosen(store);
    let store = crate::store::open(spec.as_deref(), false)?.store;
    let store = store.as_ref();
    match action.unwrap_or(SessionsAction::List { here: false }) {
        SessionsAction::List { here } => {
            let cwd = std::env::current_dir()?.canonicalize()?.display().to_string();
            outln!("{}", table(store, here.then_some(cwd.as_str()), 50)?);
        }
        SessionsAction::Show { id, raw } => {
            let events = match store.read(&id) {
                Ok(events) => events,
                Err(e) => {
                    errln!("keel: {e}");
                    return Ok(exit::USAGE);
                }
            };
            if raw {
                for event in &events {
                    outln!("{}", serde_json::to_string(event)?);
                }
            } else {
                let text = transcript(&events);
                if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                    outln!("{}", crate::render::safe::plain(&text));
                } else {
                    outln!("{text}");
                }
            }
        }
        SessionsAction::Export { id, format, output } => {
            let events = match store.read(&id) {
                Ok(events) => events,
                Err(e) => {
                    errln!("keel: {e}");
                    return Ok(exit::USAGE);
                }
            };
            let text = crate::export::render(&events, format, &crate::export::prices());
            crate::export::write(&text, output.as_deref())?;
        }
        SessionsAction::Fork { id, at, at_event } => {
            let at = match (at, at_event) {
                (Some(turn), _) => match store
                    .read(&id)
                    .map_err(anyhow::Error::from)
                    .and_then(|events| end_of_turn(&events, turn))
                {
                    Ok(seq) => Some(seq),
                    Err(e) => {
                        errln!("keel: {e:#}");
                        return Ok(exit::USAGE);
                    }
                },
                (None, seq) => seq,
            };
            return fork(store, &id, at);
        }
    }
    Ok(exit::OK)
}

/// The seq of the event that ends turn `turn` (as `sessions show` numbers turns).
fn end_of_turn(events: &[Event], turn: u32) -> anyhow::Result<u64> {
    let ends = || {
        events.iter().filter_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some((end.turn, e.seq)),
            _ => None,
        })
    };
    match ends().find(|(number, _)| *number == turn) {
        Some((_, seq)) => Ok(seq),
        None => {
            let last = ends().map(|(number, _)| number).max().unwrap_or(0);
            anyhow::bail!("this session has no finished turn {turn} (its turns: 1 to {last})")
        }
    }
}

/// Forks `id` up to `at` and says how to continue it.
fn fork(store: &dyn SessionStore, id: &str, at: Option<u64>) -> anyhow::Result<u8> {
    match store.fork(id, at) {
        Ok(fork) => {
            outln!("{}", fork.id());
            errln!("forked {id} → {}; continue it with: keel --resume {}", fork.id(), fork.id());
        }
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    }
    Ok(exit::OK)
}

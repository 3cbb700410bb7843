//! The store conformance suite: what every [`SessionStore`] must do, whatever keeps the
//! events (JSONL files, PostgreSQL). Run it with [`store_conformance!`](crate::store_conformance):
//!
//! ```ignore
//! fn harness() -> Option<MyHarness> { Some(MyHarness::new()) } // None: skipped
//! keel_testkit::store_conformance!(harness());
//! ```
//!
//! Each check is also a public function taking a [`StoreHarness`].

use std::time::{Duration, Instant};

use keel_llm::{AssistantMessage, ContentBlock, FinishReason, ToolCall, Usage};
use keel_session::{
    EventKind, ParentRef, Session, SessionErrorKind, SessionStore, StepEnd, StepStart, ToolCallStarted,
    ToolResultData, TurnEnd, TurnEndReason, TurnStart, UserInput, validate,
};

/// A store under test, and the corners of it a check may reach.
pub trait StoreHarness: Sync {
    /// The store.
    fn store(&self) -> &dyn SessionStore;

    /// A second handle on the same sessions, as another process or machine opens them
    /// (for the one-writer check). `None`: only the one handle is checked.
    fn other(&self) -> Option<Box<dyn SessionStore>> {
        None
    }

    /// Simulates a crash in the middle of writing one more event of session `id` (a torn
    /// tail). Returns `false` when the store cannot be torn (it writes in transactions).
    fn tear_tail(&self, _id: &str) -> bool {
        false
    }
}

/// Generates one `#[test]` per conformance check. `$make` is an expression giving
/// `Option<impl StoreHarness>`, evaluated in each test; `None` skips (the maker prints
/// why).
#[macro_export]
macro_rules! store_conformance {
    ($make:expr) => {
        $crate::store_conformance!(@tests $make;
            append_and_reopen, torn_tail, repair_on_open, fork, list, one_writer,
            dropped_writer_releases, concurrent_sessions, unknown_ids, delete, images, latest_skips_children);
    };
    (@tests $make:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                if let Some(harness) = $make {
                    $crate::store::$check(&harness);
                }
            }
        )*
    };
}

fn user(text: &str) -> EventKind {
    EventKind::UserMessage(UserInput {
        text: text.into(),
        source: Default::default(),
        reason: None,
        images: Vec::new(),
    })
}

fn assistant(content: Vec<ContentBlock>, finish_reason: FinishReason) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        content,
        finish_reason,
        usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
        ..AssistantMessage::default()
    })
}

/// Appends one complete turn (prompt, a tool call and its result, an answer): 11 events.
pub fn record_turn(session: &mut Session, prompt: &str) {
    let turn = session.projection().turns() + 1;
    let call_id = format!("call_{turn}");
    session.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
    session.append(user(prompt)).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 1 })).unwrap();
    let call = ToolCall::new(call_id.clone(), "read_file", r#"{"path":"a.txt"}"#);
    session.append(assistant(vec![ContentBlock::ToolCall(call)], FinishReason::ToolUse)).unwrap();
    let seq = session
        .append(EventKind::ToolCall(ToolCallStarted {
            call_id: call_id.clone(),
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
            effect: None,
        }))
        .unwrap();
    session
        .append(EventKind::ToolResult(ToolResultData {
            call_id,
            name: "read_file".into(),
            source_seq: seq,
            content: "hello \u{1F600} \"quoted\" \\ back".into(),
            is_error: false,
            error_code: None,
            concludes_turn: false,
            duration_ms: Some(1),
            change: None,
            images: Vec::new(),
        }))
        .unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 1, interrupted: false })).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 2 })).unwrap();
    let answer = ContentBlock::Text { text: format!("answer to {prompt}") };
    session.append(assistant(vec![answer], FinishReason::Stop)).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 2, interrupted: false })).unwrap();
    session
        .append(EventKind::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
            message: None,
            usage: Usage::default(),
        }))
        .unwrap();
}

/// Appends the start of a turn that crashed while a tool ran: two calls asked for, one
/// `tool/call` logged. Returns the seq of that `tool/call`.
pub fn record_crashed_turn(session: &mut Session, prompt: &str) -> u64 {
    let turn = session.projection().turns() + 1;
    session.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
    session.append(user(prompt)).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 1 })).unwrap();
    let calls = vec![
        ContentBlock::ToolCall(ToolCall::new("x1", "shell", r#"{"command":"make"}"#)),
        ContentBlock::ToolCall(ToolCall::new("x2", "grep", r#"{"pattern":"a"}"#)),
    ];
    session.append(assistant(calls, FinishReason::ToolUse)).unwrap();
    session
        .append(EventKind::ToolCall(ToolCallStarted {
            call_id: "x1".into(),
            name: "shell".into(),
            arguments: r#"{"command":"make"}"#.into(),
            effect: None,
        }))
        .unwrap()
}

fn check_seqs(events: &[keel_session::Event]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64, "seqs must run 0, 1, 2, … without gaps");
    }
}

/// Events appended and synced are all there, in order, after close and reopen; appends
/// continue the seqs.
pub fn append_and_reopen(h: &dyn StoreHarness) {
    let store = h.store();
    let mut session = store.create("/work/reopen").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    session.sync().unwrap();
    let next = session.next_seq();
    let messages = session.messages().to_vec();
    session.close().unwrap();

    let mut reopened = store.open(&id).unwrap();
    assert_eq!(reopened.id(), id);
    assert_eq!(reopened.next_seq(), next);
    assert_eq!(reopened.messages(), &messages[..]);
    assert!(!reopened.projection().needs_repair());
    record_turn(&mut reopened, "second");
    reopened.close().unwrap();

    let events = store.read(&id).unwrap();
    assert_eq!(events.len() as u64, next + 11);
    check_seqs(&events);
    match &events[0].kind {
        EventKind::SessionHeader(header) => {
            assert_eq!(header.id, id);
            assert_eq!(header.cwd, "/work/reopen");
            assert_eq!(header.parent, None);
        }
        other => panic!("the first event must be the header, got {other:?}"),
    }
    let reread = store.open(&id).unwrap();
    assert_eq!(reread.messages().len(), messages.len() * 2);
    validate(reread.messages()).unwrap();
    reread.close().unwrap();
}

/// A crash in the middle of writing the last event loses that event only; the session
/// opens, and appends after it make a valid log.
pub fn torn_tail(h: &dyn StoreHarness) {
    let store = h.store();
    let mut session = store.create("/work/torn").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    let next = session.next_seq();
    session.close().unwrap();
    if !h.tear_tail(&id) {
        eprintln!("torn_tail: not applicable (the store writes in transactions)");
        return;
    }
    let mut reopened = store.open(&id).unwrap();
    assert_eq!(reopened.next_seq(), next, "the torn event is dropped, nothing else");
    record_turn(&mut reopened, "second");
    reopened.close().unwrap();
    let events = store.read(&id).unwrap();
    assert_eq!(events.len() as u64, next + 11);
    check_seqs(&events);
}

/// A session whose last turn was cut by a crash opens as it was; repair closes it
/// (outcome unknown for the started call, not started for the other), once.
pub fn repair_on_open(h: &dyn StoreHarness) {
    let store = h.store();
    let mut session = store.create("/work/repair").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    record_crashed_turn(&mut session, "crash here");
    let next = session.next_seq();
    session.close().unwrap();

    let mut reopened = store.open(&id).unwrap();
    assert_eq!(reopened.next_seq(), next);
    assert!(reopened.projection().needs_repair());
    let report = reopened.repair().unwrap();
    assert_eq!((report.outcome_unknown, report.not_started), (1, 1));
    assert!(report.closed_step && report.closed_turn);
    validate(reopened.messages()).unwrap();
    let repaired = reopened.next_seq();
    reopened.close().unwrap();

    let mut again = store.open(&id).unwrap();
    assert!(!again.projection().needs_repair(), "repair is durable");
    assert!(again.repair().unwrap().is_clean(), "repair is idempotent");
    assert_eq!(again.next_seq(), repaired);
    again.close().unwrap();
    let events = store.read(&id).unwrap();
    check_seqs(&events);
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::TurnEnd(TurnEnd { reason: TurnEndReason::Interrupted, .. }))
    ));
}

/// A fork copies the parent's events up to the fork point with their seqs, cites the
/// parent, closes an open turn, and leaves the parent as it was.
pub fn fork(h: &dyn StoreHarness) {
    let store = h.store();
    let mut parent = store.create("/work/fork").unwrap();
    let id = parent.id().to_owned();
    record_turn(&mut parent, "first");
    let at = record_crashed_turn(&mut parent, "second");
    parent.repair().unwrap();
    let parent_len = parent.next_seq();
    parent.close().unwrap();

    let child = store.fork(&id, Some(at)).unwrap();
    let child_id = child.id().to_owned();
    assert_ne!(child_id, id);
    validate(child.messages()).unwrap();
    child.close().unwrap();
    let events = store.read(&child_id).unwrap();
    check_seqs(&events);
    match &events[0].kind {
        EventKind::SessionHeader(header) => {
            assert_eq!(header.parent, Some(ParentRef { id: id.clone(), seq: at }));
            assert_eq!(header.cwd, "/work/fork");
        }
        other => panic!("the first event must be the header, got {other:?}"),
    }
    let parent_events = store.read(&id).unwrap();
    assert_eq!(parent_events.len() as u64, parent_len, "the parent is unchanged");
    for seq in 1..=at as usize {
        assert_eq!(events[seq].kind, parent_events[seq].kind, "event {seq} is copied");
    }

    let whole = store.fork(&id, None).unwrap();
    assert_eq!(whole.next_seq(), parent_len);
    whole.close().unwrap();
    let err = store.fork(&id, Some(parent_len + 100)).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Invalid);
    let err = store.fork("no-such-session", None).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::NotFound);
}

/// Listing shows every session with its folder, first prompt, turns and size.
pub fn list(h: &dyn StoreHarness) {
    let store = h.store();
    let mut a = store.create("/work/list-a").unwrap();
    record_turn(&mut a, "prompt of a");
    let a_id = a.id().to_owned();
    a.close().unwrap();
    let b = store.create("/work/list-b").unwrap();
    let b_id = b.id().to_owned();
    b.close().unwrap();
    let all = store.list().unwrap();
    let a_sum = all.iter().find(|s| s.id == a_id).expect("a is listed");
    let b_sum = all.iter().find(|s| s.id == b_id).expect("b is listed");
    assert_eq!(a_sum.cwd, "/work/list-a");
    assert_eq!(a_sum.first_prompt.as_deref(), Some("prompt of a"));
    assert_eq!((a_sum.turns, a_sum.events), (1, 12));
    assert_eq!(b_sum.cwd, "/work/list-b");
    assert_eq!((b_sum.turns, b_sum.events, b_sum.first_prompt.clone()), (0, 1, None));
    assert!(!a_sum.created.is_empty());
}

/// While a session is open for writing, nobody else can open it (this handle or
/// another); once closed, anyone can.
pub fn one_writer(h: &dyn StoreHarness) {
    let store = h.store();
    let session = store.create("/work/one").unwrap();
    let id = session.id().to_owned();
    let err = store.open(&id).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Locked, "{err}");
    let other = h.other();
    if let Some(other) = &other {
        let err = other.open(&id).unwrap_err();
        assert_eq!(err.kind, SessionErrorKind::Locked, "{err}");
        // Reading does not need the lock.
        assert_eq!(other.read(&id).unwrap().len(), 1);
    }
    session.close().unwrap();
    let reopened = store.open(&id).unwrap();
    reopened.close().unwrap();
    if let Some(other) = &other {
        let mut theirs = other.open(&id).unwrap();
        record_turn(&mut theirs, "from the other");
        assert_eq!(store.open(&id).unwrap_err().kind, SessionErrorKind::Locked);
        theirs.close().unwrap();
    }
}

/// A writer dropped without `close` (a task that panicked, a lost client) releases the
/// session soon, and what it synced is there.
pub fn dropped_writer_releases(h: &dyn StoreHarness) {
    let store = h.store();
    let mut session = store.create("/work/dropped").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    session.sync().unwrap();
    let next = session.next_seq();
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(10);
    let reopened = loop {
        match store.open(&id) {
            Ok(session) => break session,
            Err(e) if e.kind == SessionErrorKind::Locked && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("a dropped writer must release the session: {e}"),
        }
    };
    assert_eq!(reopened.next_seq(), next);
    reopened.close().unwrap();
}

/// Many sessions written at once from several threads stay separate and complete.
pub fn concurrent_sessions(h: &dyn StoreHarness) {
    let store = h.store();
    let ids: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                scope.spawn(move || {
                    let mut session = store.create(&format!("/work/c{i}")).unwrap();
                    for turn in 0..5 {
                        record_turn(&mut session, &format!("s{i} t{turn}"));
                        session.sync().unwrap();
                    }
                    let id = session.id().to_owned();
                    session.close().unwrap();
                    id
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "ids are unique");
    for (i, id) in ids.iter().enumerate() {
        let events = store.read(id).unwrap();
        assert_eq!(events.len(), 1 + 5 * 11);
        check_seqs(&events);
        let session = store.open(id).unwrap();
        assert_eq!(session.projection().first_prompt(), Some(format!("s{i} t0").as_str()));
        validate(session.messages()).unwrap();
        session.close().unwrap();
    }
}

/// Ids that name no session are refused with a clear kind, not a panic or a new
/// session.
pub fn unknown_ids(h: &dyn StoreHarness) {
    let store = h.store();
    let session = store.create("/work/closed").unwrap();
    let id = session.id().to_owned();
    session.close().unwrap();
    let err = store.open("").unwrap_err();
    assert!(matches!(err.kind, SessionErrorKind::Invalid | SessionErrorKind::NotFound), "{err}");
    let err = store.open("zz-no-such-session").unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::NotFound, "{err}");
    assert_eq!(store.read(&id).unwrap().len(), 1);
}

/// A session can be deleted once nobody writes it; then it is gone from every view.
pub fn delete(h: &dyn StoreHarness) {
    let store = h.store();
    let mut session = store.create("/work/delete").unwrap();
    record_turn(&mut session, "doomed");
    let id = session.id().to_owned();
    assert_eq!(store.delete(&id).unwrap_err().kind, SessionErrorKind::Locked, "an open session stays");
    session.close().unwrap();
    store.delete(&id).unwrap();
    assert_eq!(store.read(&id).unwrap_err().kind, SessionErrorKind::NotFound);
    assert_eq!(store.open(&id).unwrap_err().kind, SessionErrorKind::NotFound);
    assert!(store.list().unwrap().iter().all(|s| s.id != id));
    assert_eq!(store.delete(&id).unwrap_err().kind, SessionErrorKind::NotFound);
}

/// Images are kept by the store beside the log: the log names them by hash, opening,
/// reading and forking give their bytes back, and a deleted session's go with it.
pub fn images(h: &dyn StoreHarness) {
    let store = h.store();
    let image = keel_llm::Image::from_base64(crate::mcp::PNG_BASE64).unwrap();
    let mut session = store.create("/work/images").unwrap();
    let id = session.id().to_owned();
    session.append(EventKind::TurnStart(TurnStart { turn: 1 })).unwrap();
    let input = UserInput {
        text: "look".into(),
        source: Default::default(),
        reason: None,
        images: vec![image.clone()],
    };
    session.append(EventKind::UserMessage(input)).unwrap();
    session
        .append(EventKind::AssistantMessage(AssistantMessage {
            content: vec![ContentBlock::Text { text: "a dot".into() }],
            ..AssistantMessage::default()
        }))
        .unwrap();
    session
        .append(EventKind::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed,
            message: None,
            usage: Usage::default(),
        }))
        .unwrap();
    session.close().unwrap();

    let read = store.read(&id).unwrap();
    // What a follower polls: the events after a seq, as `read` has them (bytes and all).
    let after: Vec<_> = read.iter().filter(|e| e.seq > 1).cloned().collect();
    assert_eq!(store.read_after(&id, 1).unwrap(), after, "read_after is read's tail");
    assert_eq!(
        read.iter().flat_map(|e| e.kind.images()).collect::<Vec<_>>(),
        [&image],
        "read gives the bytes back"
    );
    let reopened = store.open(&id).unwrap();
    let keel_llm::Message::User(user) = &reopened.messages()[0] else { panic!("no user message") };
    assert_eq!(user.images, std::slice::from_ref(&image), "open gives the bytes back");
    reopened.close().unwrap();

    let fork = store.fork(&id, None).unwrap();
    let fork_id = fork.id().to_owned();
    fork.close().unwrap();
    store.delete(&id).unwrap();
    let forked = store.read(&fork_id).unwrap();
    assert_eq!(
        forked.iter().flat_map(|e| e.kind.images()).collect::<Vec<_>>(),
        [&image],
        "a fork keeps its own copy when the original is deleted"
    );
}

/// `latest_in` (what `--continue` resumes) is the workspace's last changed session that
/// is not a subagent's child, even when a child changed after it.
pub fn latest_skips_children(h: &dyn StoreHarness) {
    let store = h.store();
    let cwd = format!("/work/latest-{}", keel_session::new_session_id());
    let mut parent = store.create(&cwd).unwrap();
    let parent_id = parent.id().to_owned();
    record_turn(&mut parent, "parent");
    parent.close().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let spawn = keel_session::SpawnRef {
        id: parent_id.clone(),
        seq: 2,
        call_id: "t1".into(),
        agent: "general".into(),
    };
    let mut child = store.create_spawned(&cwd, spawn).unwrap();
    record_turn(&mut child, "child");
    child.close().unwrap();
    assert_eq!(store.latest_in(&cwd).unwrap(), Some(parent_id));
}

//! Nudges judged end to end through `run_task`, with a stand-in for keel (a shell
//! script): it answers, is nudged, then changes the workspace. The workspace copied at
//! the nudge and the final one are both verified, so a nudge is seen to help, to hurt
//! or to change nothing; a stand-in that gets ahead of the stop is never judged on the
//! later state.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use keel_evals::nudge::Verdict;
use keel_evals::run::{RunRecord, RunSettings, run_task};
use keel_evals::task::Task;

/// The prompt (the last argument) says what to do after the nudge: "then fixed" or
/// "then broken" writes that into state.txt after waiting (as a model request would)
/// until keel-evals has copied the workspace; "racing" writes a tool call and "broken"
/// at once, without waiting.
const FAKE_KEEL: &str = r#"#!/bin/bash
while [ $# -gt 0 ]; do [ "$1" = -C ] && ws=$2; prompt=$1; shift; done
echo '{"seq":1,"time":"t","type":"user/message","data":{"text":"task"}}'
echo '{"seq":2,"time":"t","type":"step/start","data":{"step":1}}'
echo '{"seq":3,"time":"t","type":"assistant/message","data":{"content":[{"type":"text","text":"ok"}]}}'
echo '{"seq":4,"time":"t","type":"user/message","data":{"text":"Check it.","source":"hook","reason":"finish_check/not_verified"}}'
case "$prompt" in
  *racing*)
    echo '{"seq":5,"time":"t","type":"tool/call","data":{"call_id":"c1","name":"shell","arguments":"{}"}}'
    echo broken > "$ws/state.txt";;
  *)
    for i in $(seq 500); do [ -d "$ws/../nudges/4/project" ] && break; sleep 0.01; done
    echo '{"seq":5,"time":"t","type":"tool/call","data":{"call_id":"c1","name":"shell","arguments":"{}"}}'
    case "$prompt" in *fixed*) echo fixed > "$ws/state.txt";; *broken*) echo broken > "$ws/state.txt";; esac;;
esac
echo '{"seq":6,"time":"t","type":"tool/result","data":{"call_id":"c1","name":"shell","source_seq":5,"content":""}}'
echo '{"type":"keel/done","data":{"reason":"completed","final_text":"ok","tool_calls":1}}'
"#;

/// Passes when state.txt says "fixed" and the answer says "ok".
const VERIFY: &str = r#"grep -qx fixed state.txt || { echo "state: $(cat state.txt)"; exit 1; }
grep -qx ok "$KEEL_EVAL_ANSWER" || { echo "answer: $(cat "$KEEL_EVAL_ANSWER")"; exit 1; }
"#;

fn task(root: &Path, name: &str, state: &str, prompt: &str) -> Task {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("files")).unwrap();
    std::fs::write(dir.join("files/state.txt"), format!("{state}\n")).unwrap();
    std::fs::write(dir.join("task.toml"), format!("prompt = \"{prompt}\"\ncategory = \"test\"\n")).unwrap();
    std::fs::write(dir.join("verify.sh"), VERIFY).unwrap();
    Task::load(&dir).unwrap()
}

fn run(name: &str, state: &str, prompt: &str) -> RunRecord {
    let dir = tempfile::tempdir().unwrap();
    let keel = dir.path().join("keel");
    std::fs::write(&keel, FAKE_KEEL).unwrap();
    std::fs::set_permissions(&keel, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = RunSettings {
        keel,
        keel_args: vec![],
        max_steps: 5,
        timeout: Duration::from_secs(30),
        out_dir: dir.path().join("out"),
        scratch: dir.path().join("scratch"),
        keep: false,
        config: None,
    };
    let record = run_task(&task(&dir.path().join("tasks"), name, state, prompt), 1, &settings).unwrap();
    assert_eq!(record.reason, "completed", "{record:?}");
    assert_eq!(record.nudges, 1, "{record:?}");
    assert_eq!(record.nudge_verdicts.len(), 1, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].reason, "finish_check/not_verified");
    assert!(record.nudge_verdicts[0].stopped_ms < 2_000, "{record:?}");
    assert!(
        std::fs::read_dir(dir.path().join("scratch")).unwrap().next().is_none(),
        "the copies are removed"
    );
    record
}

#[test]
fn a_nudge_that_led_from_a_failing_state_to_a_pass_helped() {
    let record = run("helped", "broken", "then fixed");
    assert!(record.passed, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].verdict, Verdict::Helped, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].passed_at_nudge, Some(false));
    assert!(record.nudge_verdicts[0].note.contains("state: broken"), "{record:?}");
    assert_eq!((record.nudges_helped, record.nudges_hurt), (1, 0));
}

#[test]
fn a_nudge_that_led_from_a_passing_state_to_a_failure_hurt() {
    // The state at the nudge passes only with the answer the turn had then ("ok").
    let record = run("hurt", "fixed", "then broken");
    assert!(!record.passed, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].verdict, Verdict::Hurt, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].passed_at_nudge, Some(true));
    assert_eq!((record.nudges_helped, record.nudges_hurt), (0, 1));
}

#[test]
fn a_nudge_that_changed_no_outcome_is_neutral() {
    let record = run("neutral", "fixed", "then fixed");
    assert!(record.passed, "{record:?}");
    assert_eq!(record.nudge_verdicts[0].verdict, Verdict::Neutral, "{record:?}");
    assert_eq!((record.nudges_helped, record.nudges_hurt), (0, 0));
}

#[test]
fn a_keel_that_got_ahead_of_the_stop_is_never_judged_on_its_later_state() {
    for _ in 0..5 {
        let record = run("racing", "fixed", "racing");
        let nudge = &record.nudge_verdicts[0];
        match nudge.verdict {
            Verdict::Unchecked => assert!(nudge.note.contains("ran a tool"), "{record:?}"),
            // Stopped before it wrote the tool call: the copy holds the state before.
            _ => {
                assert_eq!((nudge.verdict, nudge.passed_at_nudge), (Verdict::Hurt, Some(true)), "{record:?}")
            }
        }
        assert_eq!(record.nudges_hurt, u32::from(nudge.verdict == Verdict::Hurt));
    }
}

//! Whether a nudge helped or hurt: the workspace as it was when keel added the nudge
//! (copied while keel was stopped, verified later) against the run's final state.
//!
//! A nudge is input keel added on its own: a `user/message` with `source: "hook"`,
//! whose `reason` says what evidence the hook acted on (`finish_check/gave_up: …`).

use serde::{Deserialize, Serialize};

/// A nudge as read from the event stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nudge {
    /// The event's `seq`.
    pub seq: u64,
    /// The event's `reason` (empty when it carried none).
    pub reason: String,
    /// The answer the turn would have ended with had keel not nudged: the text of the
    /// last assistant message, or the content of a concluding tool's result.
    pub answer: String,
}

/// What a nudge did to the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The state failed verification at the nudge, and the run passed.
    Helped,
    /// The state passed verification at the nudge, and the run failed.
    Hurt,
    /// Neither: the nudge did not change the outcome.
    #[default]
    Neutral,
    /// The state at the nudge could not be checked (see the note).
    Unchecked,
}

impl Verdict {
    /// The verdict of a nudge whose state did (`at_nudge`) or did not pass, in a run
    /// whose final state did (`at_end`) or did not.
    pub fn of(at_nudge: bool, at_end: bool) -> Verdict {
        match (at_nudge, at_end) {
            (false, true) => Verdict::Helped,
            (true, false) => Verdict::Hurt,
            _ => Verdict::Neutral,
        }
    }
}

/// One nudge of a run, judged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NudgeVerdict {
    /// The nudge event's `seq`.
    pub seq: u64,
    /// Its reason.
    pub reason: String,
    /// What it did.
    pub verdict: Verdict,
    /// Whether the state at the nudge passed verification (none when unchecked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_at_nudge: Option<bool>,
    /// How long keel was stopped while its workspace was copied, in milliseconds.
    #[serde(default)]
    pub stopped_ms: u64,
    /// What verify.sh printed on the state at the nudge (its tail), or why that state
    /// could not be checked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl NudgeVerdict {
    /// A nudge judged from the verification of its state (`at_nudge`) and the run's
    /// outcome (`at_end`).
    pub fn judged(
        nudge: &Nudge,
        at_nudge: bool,
        at_end: bool,
        stopped_ms: u64,
        note: String,
    ) -> NudgeVerdict {
        NudgeVerdict {
            seq: nudge.seq,
            reason: nudge.reason.clone(),
            verdict: Verdict::of(at_nudge, at_end),
            passed_at_nudge: Some(at_nudge),
            stopped_ms,
            note,
        }
    }

    /// A nudge whose state could not be checked, and why.
    pub fn unchecked(nudge: &Nudge, stopped_ms: u64, why: String) -> NudgeVerdict {
        NudgeVerdict {
            seq: nudge.seq,
            reason: nudge.reason.clone(),
            verdict: Verdict::Unchecked,
            passed_at_nudge: None,
            stopped_ms,
            note: why,
        }
    }
}

/// How many of `verdicts` helped and how many hurt.
pub fn counts(verdicts: &[NudgeVerdict]) -> (u32, u32) {
    let count = |v: Verdict| verdicts.iter().filter(|n| n.verdict == v).count() as u32;
    (count(Verdict::Helped), count(Verdict::Hurt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nudge_helps_when_it_turns_a_failure_into_a_pass_and_hurts_the_other_way() {
        assert_eq!(Verdict::of(false, true), Verdict::Helped);
        assert_eq!(Verdict::of(true, false), Verdict::Hurt);
        assert_eq!(Verdict::of(true, true), Verdict::Neutral);
        assert_eq!(Verdict::of(false, false), Verdict::Neutral);
    }

    #[test]
    fn verdicts_are_counted_and_unchecked_ones_are_neither() {
        let nudge = Nudge { seq: 7, reason: "finish_check/not_verified".into(), answer: String::new() };
        let verdicts = [
            NudgeVerdict::judged(&nudge, false, true, 3, String::new()),
            NudgeVerdict::judged(&nudge, true, false, 3, String::new()),
            NudgeVerdict::judged(&nudge, true, false, 3, String::new()),
            NudgeVerdict::judged(&nudge, true, true, 3, String::new()),
            NudgeVerdict::unchecked(&nudge, 0, "copy failed".into()),
        ];
        assert_eq!(counts(&verdicts), (1, 2));
        let json = serde_json::to_value(&verdicts[4]).unwrap_or_default();
        assert_eq!(json["verdict"], "unchecked");
        assert!(json.get("passed_at_nudge").is_none(), "{json}");
        let back: NudgeVerdict =
            serde_json::from_value(serde_json::json!({"seq": 7, "reason": "r", "verdict": "hurt"})).unwrap();
        assert_eq!((back.verdict, back.stopped_ms, back.passed_at_nudge), (Verdict::Hurt, 0, None));
    }
}

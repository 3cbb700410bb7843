//! Summaries of runs: per task and overall, as a table and as JSON, and the comparison
//! of two suite records.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::nudge::Verdict;
use crate::run::RunRecord;

/// A whole suite run, as written to `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRecord {
    /// A name for this configuration ("baseline", "grammar", …).
    pub label: String,
    /// The keel arguments used.
    pub keel_args: Vec<String>,
    /// When it started (seconds since the epoch).
    pub started_unix: u64,
    /// Every run.
    pub runs: Vec<RunRecord>,
    /// Per task, then overall.
    pub summary: Summary,
}

/// Figures over a set of runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Runs counted.
    pub runs: u32,
    /// Runs that passed.
    pub passed: u32,
    /// Mean steps per run.
    pub steps: f64,
    /// Mean tool calls per run.
    pub tool_calls: f64,
    /// Mean failed tool results per run.
    pub tool_errors: f64,
    /// Mean text calls recovered per run.
    pub text_calls: f64,
    /// Mean prompt tokens per run.
    pub input_tokens: f64,
    /// Mean generated tokens per run.
    pub output_tokens: f64,
    /// Mean wall seconds per run.
    pub seconds: f64,
    /// Nudges over all runs (a total, not a mean).
    #[serde(default)]
    pub nudges: u32,
    /// Of those, nudges that turned a failing state into a passing run.
    #[serde(default)]
    pub nudges_helped: u32,
    /// Of those, nudges that turned a passing state into a failing run.
    #[serde(default)]
    pub nudges_hurt: u32,
    /// Of those, nudges whose state could not be checked (neither helped nor hurt).
    #[serde(default)]
    pub nudges_unchecked: u32,
}

impl Figures {
    /// Figures over `runs`.
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Figures {
        let mut f = Figures::default();
        for r in runs {
            f.runs += 1;
            f.passed += u32::from(r.passed);
            f.steps += f64::from(r.steps);
            f.tool_calls += f64::from(r.tool_calls);
            f.tool_errors += f64::from(r.tool_errors);
            f.text_calls += f64::from(r.text_calls);
            f.input_tokens += r.input_tokens as f64;
            f.output_tokens += r.output_tokens as f64;
            f.seconds += r.seconds;
            f.nudges += r.nudges;
            f.nudges_helped += r.nudges_helped;
            f.nudges_hurt += r.nudges_hurt;
            f.nudges_unchecked +=
                r.nudge_verdicts.iter().filter(|n| n.verdict == Verdict::Unchecked).count() as u32;
        }
        if f.runs > 0 {
            let n = f64::from(f.runs);
            for value in [
                &mut f.steps,
                &mut f.tool_calls,
                &mut f.tool_errors,
                &mut f.text_calls,
                &mut f.input_tokens,
                &mut f.output_tokens,
                &mut f.seconds,
            ] {
                *value = (*value / n * 10.0).round() / 10.0;
            }
        }
        f
    }

    /// Share of runs that passed, 0 to 1.
    pub fn pass_rate(&self) -> f64 {
        if self.runs == 0 { 0.0 } else { f64::from(self.passed) / f64::from(self.runs) }
    }
}

/// Figures per task, per set of tasks and over all runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Per task name.
    pub tasks: BTreeMap<String, Figures>,
    /// Per task set ("original", "grown", …); empty in records made before sets existed.
    #[serde(default)]
    pub sets: BTreeMap<String, Figures>,
    /// Over every run.
    pub overall: Figures,
    /// Every nudge that turned a passing state into a failing run.
    #[serde(default)]
    pub hurt_nudges: Vec<HurtNudge>,
    /// How long keel was stopped while its workspace was copied at nudges, in all and
    /// at most once, in milliseconds.
    #[serde(default)]
    pub nudges_stopped_ms: u64,
    /// The longest of those stops.
    #[serde(default)]
    pub nudges_stopped_ms_max: u64,
}

/// A nudge that hurt: where it was and why keel sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HurtNudge {
    /// Task name.
    pub task: String,
    /// Run number.
    pub run: u32,
    /// The nudge event's `seq` in the run's stream.
    pub seq: u64,
    /// The nudge's reason.
    pub reason: String,
}

impl Summary {
    /// Summarizes `runs`.
    pub fn of(runs: &[RunRecord]) -> Summary {
        let mut by_task: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
        for r in runs {
            by_task.entry(r.task.clone()).or_default().push(r);
        }
        Summary {
            tasks: by_task.into_iter().map(|(task, rs)| (task, Figures::of(rs))).collect(),
            sets: by_set(runs),
            overall: Figures::of(runs),
            hurt_nudges: runs
                .iter()
                .flat_map(|r| {
                    r.nudge_verdicts.iter().filter(|n| n.verdict == Verdict::Hurt).map(|n| HurtNudge {
                        task: r.task.clone(),
                        run: r.run,
                        seq: n.seq,
                        reason: n.reason.clone(),
                    })
                })
                .collect(),
            nudges_stopped_ms: runs.iter().flat_map(|r| &r.nudge_verdicts).map(|n| n.stopped_ms).sum(),
            nudges_stopped_ms_max: runs
                .iter()
                .flat_map(|r| &r.nudge_verdicts)
                .map(|n| n.stopped_ms)
                .max()
                .unwrap_or(0),
        }
    }
}

/// Figures per task set.
fn by_set(runs: &[RunRecord]) -> BTreeMap<String, Figures> {
    let mut grouped: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        grouped.entry(r.set.clone()).or_default().push(r);
    }
    grouped.into_iter().map(|(set, rs)| (set, Figures::of(rs))).collect()
}

/// "grown 3/6 (50.0%), original 4/6 (66.7%)".
fn set_rates(sets: &BTreeMap<String, Figures>) -> String {
    let parts: Vec<String> = sets
        .iter()
        .map(|(set, f)| format!("{set} {}/{} ({:.1}%)", f.passed, f.runs, f.pass_rate() * 100.0))
        .collect();
    parts.join(", ")
}

/// One line for a finished run.
pub fn run_line(r: &RunRecord) -> String {
    let mark = if r.passed { "pass" } else { "FAIL" };
    let mut line = format!(
        "{mark} {:<22} #{}  {:>2} steps {:>2} calls {:>2} errors {:>6.1} s  {}",
        r.task, r.run, r.steps, r.tool_calls, r.tool_errors, r.seconds, r.reason
    );
    if !r.passed && !r.verify_output.is_empty() {
        let first = r.verify_output.lines().next().unwrap_or_default();
        let _ = write!(line, "  ({})", first.chars().take(90).collect::<String>());
    }
    if r.restarts > 0 {
        line.push_str("  (started again)");
    }
    if r.nudges > 0 {
        let _ = write!(line, "  (nudged {}: helped {}, hurt {})", r.nudges, r.nudges_helped, r.nudges_hurt);
    }
    if let Some(error) = &r.error {
        let _ = write!(line, "  [error: {}]", error.lines().next().unwrap_or_default());
    }
    line
}

/// The table printed at the end of a suite run.
pub fn table(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>7} {:>6} {:>6} {:>7} {:>6} {:>8} {:>7} {:>7}",
        "task", "passed", "steps", "calls", "errors", "text", "in tok", "out tok", "secs"
    );
    let mut row = |name: &str, f: &Figures| {
        let _ = writeln!(
            out,
            "{:<24} {:>7} {:>6.1} {:>6.1} {:>7.1} {:>6.1} {:>8.0} {:>7.0} {:>7.1}",
            name,
            format!("{}/{}", f.passed, f.runs),
            f.steps,
            f.tool_calls,
            f.tool_errors,
            f.text_calls,
            f.input_tokens,
            f.output_tokens,
            f.seconds
        );
    };
    for (task, figures) in &summary.tasks {
        row(task, figures);
    }
    for (set, figures) in &summary.sets {
        row(&format!("set {set}"), figures);
    }
    row("overall", &summary.overall);
    let _ = writeln!(out, "pass rate: {:.1}%", summary.overall.pass_rate() * 100.0);
    if !summary.sets.is_empty() {
        let _ = writeln!(out, "pass rate by set: {}", set_rates(&summary.sets));
    }
    let nudges = |f: &Figures| format!("{} (helped {}, hurt {})", f.nudges, f.nudges_helped, f.nudges_hurt);
    let mut line = format!("nudges: {}", nudges(&summary.overall));
    if !summary.sets.is_empty() {
        let sets: Vec<String> = summary.sets.iter().map(|(set, f)| format!("{set} {}", nudges(f))).collect();
        let _ = write!(line, "; by set: {}", sets.join(", "));
    }
    let _ = writeln!(out, "{line}");
    let overall = &summary.overall;
    if overall.nudges > 0 {
        let _ = writeln!(
            out,
            "nudges checked: {} of {}; keel stopped {} ms in all, {} ms at most",
            overall.nudges - overall.nudges_unchecked.min(overall.nudges),
            overall.nudges,
            summary.nudges_stopped_ms,
            summary.nudges_stopped_ms_max
        );
    }
    for hurt in &summary.hurt_nudges {
        let _ = writeln!(out, "  hurt: {} #{} (event {}): {}", hurt.task, hurt.run, hurt.seq, hurt.reason);
    }
    out
}

/// How many runs started a stuck turn again, and how many of those passed.
pub fn restarts_line(runs: &[RunRecord]) -> String {
    let restarted: Vec<&RunRecord> = runs.iter().filter(|r| r.restarts > 0).collect();
    let passed = restarted.iter().filter(|r| r.passed).count();
    format!(
        "started again (fresh_start): {} of {} runs, {passed} of them passed",
        restarted.len(),
        runs.len()
    )
}

/// Task by task, the pass counts of two suite records, and what changed.
pub fn compare(before: &SuiteRecord, after: &SuiteRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<24} {:>12} {:>12}", "task", before.label, after.label);
    let mut names: Vec<&String> = before.summary.tasks.keys().chain(after.summary.tasks.keys()).collect();
    names.sort();
    names.dedup();
    let cell = |record: &SuiteRecord, name: &str| {
        record.summary.tasks.get(name).map_or("-".to_owned(), |f| format!("{}/{}", f.passed, f.runs))
    };
    for name in names {
        let (b, a) = (cell(before, name), cell(after, name));
        let moved = match (before.summary.tasks.get(name), after.summary.tasks.get(name)) {
            (Some(x), Some(y)) if x.pass_rate() < y.pass_rate() => "  +",
            (Some(x), Some(y)) if x.pass_rate() > y.pass_rate() => "  -",
            _ => "",
        };
        let _ = writeln!(out, "{name:<24} {b:>12} {a:>12}{moved}");
    }
    // Per set from the runs themselves, so a record made before sets existed counts as
    // the original set.
    let (sets_before, sets_after) = (by_set(&before.runs), by_set(&after.runs));
    let mut sets: Vec<&String> = sets_before.keys().chain(sets_after.keys()).collect();
    sets.sort();
    sets.dedup();
    let set_cell = |figures: &BTreeMap<String, Figures>, set: &str| {
        figures.get(set).map_or("-".to_owned(), |f| format!("{:.1}%", f.pass_rate() * 100.0))
    };
    for set in sets {
        let (b, a) = (set_cell(&sets_before, set), set_cell(&sets_after, set));
        let _ = writeln!(out, "{:<24} {b:>12} {a:>12}", format!("pass rate, {set}"));
    }
    let hurt = |r: &SuiteRecord| {
        let f = Figures::of(&r.runs);
        format!("{}/{}/{}", f.nudges, f.nudges_helped, f.nudges_hurt)
    };
    let _ = writeln!(out, "{:<24} {:>12} {:>12}", "nudges/helped/hurt", hurt(before), hurt(after));
    let rate = |r: &SuiteRecord| format!("{:.1}%", r.summary.overall.pass_rate() * 100.0);
    let _ = writeln!(out, "{:<24} {:>12} {:>12}", "pass rate", rate(before), rate(after));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(task: &str, passed: bool, steps: u32) -> RunRecord {
        RunRecord {
            task: task.into(),
            set: "original".into(),
            passed,
            steps,
            seconds: 10.0,
            ..RunRecord::default()
        }
    }

    fn record(label: &str, runs: Vec<RunRecord>) -> SuiteRecord {
        let summary = Summary::of(&runs);
        SuiteRecord { label: label.into(), keel_args: vec![], started_unix: 0, runs, summary }
    }

    #[test]
    fn figures_are_means_and_pass_rate_counts_runs() {
        let runs = vec![run("a", true, 2), run("a", false, 4), run("b", true, 3)];
        let summary = Summary::of(&runs);
        assert_eq!(summary.tasks["a"].passed, 1);
        assert_eq!(summary.tasks["a"].steps, 3.0);
        assert_eq!(summary.overall.runs, 3);
        assert!((summary.overall.pass_rate() - 2.0 / 3.0).abs() < 1e-9);
        let text = table(&summary);
        assert!(text.contains("pass rate: 66.7%"), "{text}");
    }

    #[test]
    fn each_set_has_its_own_pass_count() {
        let mut runs = vec![run("a", true, 2), run("a", false, 4), run("b", true, 3), run("c", false, 1)];
        runs[3].set = "grown".into();
        let summary = Summary::of(&runs);
        assert_eq!(summary.sets.keys().collect::<Vec<_>>(), ["grown", "original"]);
        assert_eq!((summary.sets["original"].passed, summary.sets["original"].runs), (2, 3));
        assert_eq!((summary.sets["grown"].passed, summary.sets["grown"].runs), (0, 1));
        let text = table(&summary);
        assert!(text.contains("pass rate: 50.0%"), "{text}");
        assert!(text.contains("pass rate by set: grown 0/1 (0.0%), original 2/3 (66.7%)"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("set grown") && l.contains("0/1")), "{text}");
    }

    #[test]
    fn a_record_without_sets_reads_as_the_original_set() {
        let mut new = record("new", vec![run("a", true, 2), run("c", true, 1)]);
        new.runs[1].set = "grown".into();
        new.summary = Summary::of(&new.runs);
        let json = serde_json::to_value(&new).unwrap();
        assert_eq!(json["runs"][1]["set"], "grown");
        assert_eq!(json["summary"]["sets"]["grown"]["passed"], 1);

        // A summary.json written before sets existed: no `set` in its runs, no `sets`.
        let mut old = serde_json::to_value(record("old", vec![run("a", false, 2)])).unwrap();
        old["runs"][0].as_object_mut().unwrap().remove("set");
        old["summary"].as_object_mut().unwrap().remove("sets");
        let old: SuiteRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.runs[0].set, "original");
        assert!(old.summary.sets.is_empty());
        let text = compare(&old, &new);
        assert!(text.contains("pass rate, original"), "{text}");
        let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_owned();
        assert_eq!(
            line("pass rate, grown").split_whitespace().collect::<Vec<_>>(),
            ["pass", "rate,", "grown", "-", "100.0%"]
        );
        assert_eq!(
            line("pass rate, original").split_whitespace().collect::<Vec<_>>(),
            ["pass", "rate,", "original", "0.0%", "100.0%"]
        );
    }

    #[test]
    fn nudges_are_totalled_per_set_and_every_hurt_one_is_listed() {
        use crate::nudge::{Nudge, NudgeVerdict};
        let nudge = |seq: u64, reason: &str| Nudge { seq, reason: reason.into(), answer: String::new() };
        let mut runs = vec![run("a", false, 2), run("a", true, 4), run("c", true, 1)];
        runs[0].run = 2;
        runs[0].nudge_verdicts = vec![
            NudgeVerdict::judged(
                &nudge(9, "finish_check/gave_up: git add failed"),
                true,
                false,
                4,
                String::new(),
            ),
            NudgeVerdict::unchecked(&nudge(12, "change_check"), 0, "copy failed".into()),
        ];
        runs[1].nudge_verdicts =
            vec![NudgeVerdict::judged(&nudge(5, "finish_check/not_verified"), false, true, 7, String::new())];
        runs[2].set = "grown".into();
        runs[2].nudge_verdicts =
            vec![NudgeVerdict::judged(&nudge(3, "change_check"), true, true, 2, String::new())];
        for r in &mut runs {
            r.nudges = r.nudge_verdicts.len() as u32;
            (r.nudges_helped, r.nudges_hurt) = crate::nudge::counts(&r.nudge_verdicts);
        }
        let summary = Summary::of(&runs);
        let figures = |f: &Figures| (f.nudges, f.nudges_helped, f.nudges_hurt);
        assert_eq!(figures(&summary.overall), (4, 1, 1));
        assert_eq!(figures(&summary.sets["original"]), (3, 1, 1));
        assert_eq!(figures(&summary.sets["grown"]), (1, 0, 0));
        assert_eq!(
            summary.hurt_nudges,
            [HurtNudge {
                task: "a".into(),
                run: 2,
                seq: 9,
                reason: "finish_check/gave_up: git add failed".into()
            }]
        );
        let text = table(&summary);
        assert!(
            text.contains("nudges: 4 (helped 1, hurt 1); by set: grown 1 (helped 0, hurt 0), original 3 (helped 1, hurt 1)"),
            "{text}"
        );
        assert!(text.contains("  hurt: a #2 (event 9): finish_check/gave_up: git add failed"), "{text}");
        assert!(text.contains("nudges checked: 3 of 4; keel stopped 13 ms in all, 7 ms at most"), "{text}");
        assert!(run_line(&runs[0]).ends_with("(nudged 2: helped 0, hurt 1)"), "{}", run_line(&runs[0]));

        let json = serde_json::to_value(record("new", runs)).unwrap();
        assert_eq!(json["summary"]["sets"]["original"]["nudges_hurt"], 1);
        assert_eq!(json["summary"]["hurt_nudges"][0]["task"], "a");
        assert_eq!(json["runs"][1]["nudge_verdicts"][0]["verdict"], "helped");
        assert_eq!(json["runs"][1]["nudges_helped"], 1);
    }

    #[test]
    fn a_record_made_before_nudges_were_judged_loads() {
        let mut old = serde_json::to_value(record("old", vec![run("a", true, 2)])).unwrap();
        for key in ["nudges_helped", "nudges_hurt", "nudge_verdicts"] {
            old["runs"][0].as_object_mut().unwrap().remove(key);
        }
        for key in ["nudges", "nudges_helped", "nudges_hurt", "nudges_unchecked"] {
            old["summary"]["overall"].as_object_mut().unwrap().remove(key);
        }
        for key in ["hurt_nudges", "nudges_stopped_ms", "nudges_stopped_ms_max"] {
            old["summary"].as_object_mut().unwrap().remove(key);
        }
        let old: SuiteRecord = serde_json::from_value(old).unwrap();
        assert_eq!((old.runs[0].nudges_helped, old.runs[0].nudges_hurt), (0, 0));
        assert!(old.summary.hurt_nudges.is_empty());
        let text = compare(&old, &old);
        assert!(
            text.lines().any(|l| l.split_whitespace().eq(["nudges/helped/hurt", "0/0/0", "0/0/0"])),
            "{text}"
        );
    }

    #[test]
    fn restarted_runs_are_counted_with_their_passes() {
        let mut runs = vec![run("a", true, 2), run("a", false, 4), run("b", true, 3)];
        runs[1].restarts = 1;
        runs[2].restarts = 1;
        assert_eq!(restarts_line(&runs), "started again (fresh_start): 2 of 3 runs, 1 of them passed");
        assert!(run_line(&runs[2]).ends_with("(started again)"), "{}", run_line(&runs[2]));
    }
}

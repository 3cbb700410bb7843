//! Runs broken down two more ways than by task: a task beside its twin in another
//! language, and each tool by the runs that called it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::record::RunRecord;

/// Passed of run, per task.
fn passes(runs: &[RunRecord]) -> BTreeMap<&str, (u32, u32)> {
    let mut by_task: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for r in runs {
        let entry = by_task.entry(r.task.as_str()).or_default();
        entry.0 += u32::from(r.passed);
        entry.1 += 1;
    }
    by_task
}

/// "twins: zh-blank-lines 1/3 vs en-blank-lines 3/3; …": each pair of twins once, the
/// task that names its twin first. `None` when no run's task has a twin.
pub fn twins_line(runs: &[RunRecord]) -> Option<String> {
    let by_task = passes(runs);
    let mut pairs: Vec<(&str, &str)> = runs
        .iter()
        .filter_map(|r| Some((r.task.as_str(), r.twin.as_deref()?)))
        .filter(|(task, twin)| {
            // Named from both sides, the pair is shown once, in name order.
            let named_back = runs.iter().any(|r| r.task == *twin && r.twin.as_deref() == Some(task));
            !named_back || task < twin
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    if pairs.is_empty() {
        return None;
    }
    let cell = |task: &str| match by_task.get(task) {
        Some((passed, runs)) => format!("{task} {passed}/{runs}"),
        None => format!("{task} not run"),
    };
    let shown: Vec<String> = pairs.iter().map(|(a, b)| format!("{} vs {}", cell(a), cell(b))).collect();
    Some(format!("twins: {}", shown.join("; ")))
}

/// Per tool: how many calls, in how many runs, how many of those runs passed; most
/// called first. Empty when no run called a tool.
pub fn tools_table(runs: &[RunRecord]) -> String {
    #[derive(Default)]
    struct Use {
        calls: u32,
        runs: u32,
        passed: u32,
    }
    let mut tools: BTreeMap<&str, Use> = BTreeMap::new();
    for r in runs {
        for (tool, calls) in &r.tools {
            let entry = tools.entry(tool.as_str()).or_default();
            entry.calls += calls;
            entry.runs += 1;
            entry.passed += u32::from(r.passed);
        }
    }
    let mut rows: Vec<(&str, Use)> = tools.into_iter().collect();
    rows.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(b.0)));
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{:<24} {:>6} {:>6} {:>14}", "tool", "calls", "runs", "runs passed");
    for (tool, used) in rows {
        let _ = writeln!(out, "{tool:<24} {:>6} {:>6} {:>14}", used.calls, used.runs, used.passed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run(task: &str, twin: Option<&str>, passed: bool, tools: &[(&str, u32)]) -> RunRecord {
        RunRecord {
            task: task.into(),
            twin: twin.map(str::to_owned),
            passed,
            tools: tools.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect(),
            ..RunRecord::default()
        }
    }

    #[test]
    fn twins_are_shown_once_side_by_side() {
        let runs = [
            run("zh-a", Some("en-a"), false, &[]),
            run("zh-a", Some("en-a"), true, &[]),
            run("en-a", Some("zh-a"), true, &[]),
            run("en-a", Some("zh-a"), true, &[]),
            run("de-b", Some("en-b"), true, &[]),
            run("other", None, true, &[]),
        ];
        assert_eq!(
            twins_line(&runs).as_deref(),
            Some("twins: de-b 1/1 vs en-b not run; en-a 2/2 vs zh-a 1/2")
        );
        assert_eq!(twins_line(&runs[5..]), None);
    }

    #[test]
    fn tools_are_counted_by_calls_runs_and_passing_runs() {
        let runs = [
            run("a", None, true, &[("read_file", 2), ("change_file", 1)]),
            run("b", None, false, &[("read_file", 1), ("shell", 3)]),
            run("c", None, true, &[("shell", 1)]),
        ];
        let expected = "\
tool                      calls   runs    runs passed
shell                         4      2              1
read_file                     3      2              1
change_file                   1      1              1
";
        assert_eq!(tools_table(&runs), expected);
        assert_eq!(tools_table(&[]), "");
    }
}

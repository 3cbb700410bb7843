//! Several records of one configuration as one: the runs of a suite made in parts (run 1
//! in one sitting, runs 2 and 3 in another, with `--first-run`), counted together.

use crate::report::{SuiteRecord, Summary};

/// Why records cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no records to merge")]
    Empty,
    /// The records ran keel differently: their figures do not belong together.
    #[error("`{first}` ran keel with [{first_args}] but `{other}` with [{other_args}]")]
    DifferentArguments {
        /// The first record's label and arguments.
        first: String,
        /// Its keel arguments, joined.
        first_args: String,
        /// The record that differs.
        other: String,
        /// Its keel arguments, joined.
        other_args: String,
    },
    /// Two records hold the same run of the same task: it would count twice.
    #[error("run {run} of `{task}` is in more than one record")]
    Duplicate {
        /// The task.
        task: String,
        /// The run number.
        run: u32,
    },
}

/// The records as one: the first one's label, the earliest start, every run (ordered
/// by run number, then as they were recorded), the summary counted again.
pub fn merge(records: Vec<SuiteRecord>) -> Result<SuiteRecord, MergeError> {
    let mut records = records.into_iter();
    let mut merged = records.next().ok_or(MergeError::Empty)?;
    for record in records {
        if record.keel_args != merged.keel_args {
            return Err(MergeError::DifferentArguments {
                first: merged.label.clone(),
                first_args: merged.keel_args.join(" "),
                other: record.label,
                other_args: record.keel_args.join(" "),
            });
        }
        merged.started_unix = merged.started_unix.min(record.started_unix);
        for run in record.runs {
            if merged.runs.iter().any(|r| r.task == run.task && r.run == run.run) {
                return Err(MergeError::Duplicate { task: run.task, run: run.run });
            }
            merged.runs.push(run);
        }
    }
    merged.runs.sort_by_key(|r| r.run);
    merged.summary = Summary::of(&merged.runs);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunRecord;
    use pretty_assertions::assert_eq;

    fn record(label: &str, args: &[&str], started: u64, runs: &[(&str, u32, bool)]) -> SuiteRecord {
        let runs: Vec<RunRecord> = runs
            .iter()
            .map(|(task, run, passed)| RunRecord {
                task: (*task).into(),
                run: *run,
                passed: *passed,
                ..RunRecord::default()
            })
            .collect();
        SuiteRecord {
            label: label.into(),
            keel_args: args.iter().map(|a| (*a).to_owned()).collect(),
            started_unix: started,
            summary: Summary::of(&runs),
            runs,
        }
    }

    #[test]
    fn runs_made_in_parts_count_together() {
        let first = record("server", &["--local"], 20, &[("a", 1, true), ("b", 1, false)]);
        let later = record("server-2", &["--local"], 10, &[("a", 3, false), ("a", 2, true), ("b", 2, true)]);
        let merged = merge(vec![first, later]).unwrap();
        let order: Vec<(&str, u32)> = merged.runs.iter().map(|r| (r.task.as_str(), r.run)).collect();
        assert_eq!(order, [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]);
        assert_eq!((merged.label.as_str(), merged.started_unix), ("server", 10));
        assert_eq!((merged.summary.overall.passed, merged.summary.overall.runs), (3, 5));
        assert_eq!(merged.summary.tasks["a"].passed, 2);
    }

    #[test]
    fn records_that_do_not_belong_together_are_refused() {
        let a = || record("a", &["--local"], 0, &[("t", 1, true)]);
        let other = record("b", &["--provider", "llamacpp"], 0, &[("t", 2, true)]);
        assert_eq!(
            merge(vec![a(), other]).unwrap_err().to_string(),
            "`a` ran keel with [--local] but `b` with [--provider llamacpp]"
        );
        assert_eq!(merge(vec![a(), a()]).unwrap_err(), MergeError::Duplicate { task: "t".into(), run: 1 });
        assert_eq!(merge(Vec::new()).unwrap_err(), MergeError::Empty);
    }
}

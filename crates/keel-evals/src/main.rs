//! `keel-evals`: runs keel on the real-task suite and reports pass rates.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use keel_evals::report::{self, SuiteRecord, Summary};
use keel_evals::run::{RunSettings, run_task};
use keel_evals::task::Task;

/// Runs keel on small real tasks with a real model.
#[derive(Debug, Parser)]
#[command(name = "keel-evals")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the suite: `keel-evals run --runs 3 -- --local` (arguments after `--` go to keel).
    Run {
        /// The keel binary (default: target/release/keel next to this program).
        #[arg(long)]
        keel: Option<PathBuf>,
        /// Runs per task (run N uses seed N).
        #[arg(long, default_value_t = 1)]
        runs: u32,
        /// The number of the first run (and its seed): `--first-run 2 --runs 2` makes runs
        /// 2 and 3, to be merged with a record of run 1 (`keel-evals merge`).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        first_run: u32,
        /// Only these tasks (comma-separated names).
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<String>,
        /// Steps allowed per task.
        #[arg(long, default_value_t = 15)]
        max_steps: u32,
        /// Seconds before a run is interrupted and failed.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// A name for this configuration in the record.
        #[arg(long, default_value = "run")]
        label: String,
        /// Where the record and every run's events go (default evals/results/LABEL).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Keep each run's workspace (under the output folder).
        #[arg(long)]
        keep: bool,
        /// The tasks folder.
        #[arg(long)]
        tasks_dir: Option<PathBuf>,
        /// A keel config.toml for every run (settings without a flag, e.g.
        /// `always_call = true`); copied into each run's config folder.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Arguments for keel.
        #[arg(last = true)]
        keel_args: Vec<String>,
    },
    /// Check the tasks themselves: verification fails before and passes after solve.sh.
    Check {
        /// The tasks folder.
        #[arg(long)]
        tasks_dir: Option<PathBuf>,
    },
    /// Merge records of one configuration made in parts (`--first-run`) into one.
    Merge {
        /// Where the merged record goes (a summary.json; its folder is made).
        #[arg(long)]
        out: PathBuf,
        /// The records (summary.json files).
        #[arg(required = true)]
        records: Vec<PathBuf>,
    },
    /// Compare two records (summary.json files), task by task.
    Compare {
        /// The record before.
        before: PathBuf,
        /// The record after.
        after: PathBuf,
    },
}

fn load_record(path: &PathBuf) -> anyhow::Result<SuiteRecord> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| path.display().to_string())
}

/// The table of a record, then its restarts, twins and tools.
fn print_report(record: &SuiteRecord) {
    print!("{}", report::table(&record.summary));
    println!("{}", report::restarts_line(&record.runs));
    if let Some(twins) = keel_evals::breakdown::twins_line(&record.runs) {
        println!("{twins}");
    }
    print!("{}", keel_evals::breakdown::tools_table(&record.runs));
}

fn default_keel() -> PathBuf {
    let here = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("keel")));
    here.filter(|p| p.is_file()).unwrap_or_else(|| PathBuf::from("keel"))
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            // The whole chain: `path: what went wrong`.
            eprintln!("keel-evals: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Check { tasks_dir } => {
            let tasks = Task::load_all(&tasks_dir.unwrap_or_else(keel_evals::default_tasks_dir))?;
            let scratch = std::env::temp_dir().join(format!("keel-evals-check-{}", std::process::id()));
            let mut bad = 0;
            for task in &tasks {
                match keel_evals::check_task(task, &scratch.join(&task.name))? {
                    None => println!("ok   {}", task.name),
                    Some(problem) => {
                        bad += 1;
                        println!("BAD  {}: {problem}", task.name);
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&scratch);
            println!("{} tasks, {bad} with problems", tasks.len());
            Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Merge { out, records } => {
            let records = records.iter().map(load_record).collect::<anyhow::Result<Vec<_>>>()?;
            let merged = keel_evals::merge::merge(records)?;
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
            }
            let json = serde_json::to_string_pretty(&merged)?;
            std::fs::write(&out, json).with_context(|| out.display().to_string())?;
            print_report(&merged);
            println!("record: {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { before, after } => {
            print!("{}", report::compare(&load_record(&before)?, &load_record(&after)?));
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            keel,
            runs,
            first_run,
            tasks,
            max_steps,
            timeout,
            label,
            out,
            keep,
            tasks_dir,
            config,
            keel_args,
        } => {
            let mut all = Task::load_all(&tasks_dir.unwrap_or_else(keel_evals::default_tasks_dir))?;
            if !tasks.is_empty() {
                for name in &tasks {
                    if !all.iter().any(|t| &t.name == name) {
                        anyhow::bail!("no task named `{name}`");
                    }
                }
                all.retain(|t| tasks.contains(&t.name));
            }
            let out_dir =
                out.unwrap_or_else(|| keel_evals::default_tasks_dir().join("../results").join(&label));
            let settings = RunSettings {
                keel: keel.unwrap_or_else(default_keel),
                keel_args: keel_args.clone(),
                max_steps,
                timeout: Duration::from_secs(timeout),
                scratch: if keep {
                    out_dir.join("workspaces")
                } else {
                    std::env::temp_dir().join(format!("keel-evals-{}", std::process::id()))
                },
                out_dir: out_dir.clone(),
                keep,
                config,
            };
            let started_unix =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            eprintln!("{} tasks x {runs} runs, keel {}", all.len(), keel_args.join(" "));
            let mut record =
                SuiteRecord { label, keel_args, started_unix, runs: Vec::new(), summary: Summary::default() };
            let path = out_dir.join("summary.json");
            for run in first_run..first_run.saturating_add(runs) {
                for task in &all {
                    let result = run_task(task, run, &settings)?;
                    println!("{}", report::run_line(&result));
                    record.runs.push(result);
                    record.summary = Summary::of(&record.runs);
                    // Written after every run, so an interrupted suite keeps what it measured.
                    let json = serde_json::to_string_pretty(&record)?;
                    std::fs::write(&path, json).with_context(|| path.display().to_string())?;
                }
            }
            println!();
            print_report(&record);
            println!("record: {}", path.display());
            if !keep {
                let _ = std::fs::remove_dir_all(&settings.scratch);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

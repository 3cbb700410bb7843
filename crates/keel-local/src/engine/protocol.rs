//! What keel and its engine process say to each other: one JSON object a line, keel's on
//! the engine's stdin, the engine's on its stdout (the engine's own stdout is moved to
//! stderr before llama.cpp loads, so nothing else can land there).
//!
//! keel sends a [`Hello`] first. For [`Hello::Serve`] the engine answers
//! [`FromEngine::Loaded`] (or [`FromEngine::Failed`] and exits); then keel sends jobs one
//! at a time, and each job ends with exactly one of `Done`, `Cancelled` or `Failed`,
//! after any number of `Text` and `Restarted`. [`Hello::Probe`] is answered with one
//! [`FromEngine::Probed`].

use std::path::PathBuf;
use std::time::Duration;

use keel_llm::FinishReason;
use serde::{Deserialize, Serialize};

use super::kernels::Kernels;

/// The longest line either side accepts: a prompt of a full context is well under it.
pub const MAX_LINE: usize = 16 << 20;

/// Moves what `available` holds of the current line into `line`: returns how many bytes
/// it took and whether the line ended (its newline is dropped). A line over `max` bytes
/// is an error. Both sides read lines with it, over their own buffered readers.
pub(crate) fn take_line(line: &mut Vec<u8>, available: &[u8], max: usize) -> std::io::Result<(usize, bool)> {
    let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
        Some(end) => (end + 1, true),
        None => (available.len(), false),
    };
    if line.len() + taken > max + usize::from(ended) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line is longer than {max} bytes"),
        ));
    }
    line.extend_from_slice(&available[..taken]);
    if ended {
        line.pop();
    }
    Ok((taken, ended))
}

/// keel's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Hello {
    /// Load a model and serve jobs.
    Serve(Start),
    /// Report the CPU and the kernels this build has, then exit.
    Probe {
        /// The kernel set to report the choice for.
        kernels: Kernels,
    },
}

/// What to load and how to sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// The GGUF file.
    pub model: PathBuf,
    /// Context size asked for.
    pub n_ctx: u32,
    /// CPU threads.
    pub threads: usize,
    /// Text temperature unless a job sets its own.
    pub temperature: f32,
    /// Temperature inside a tool call.
    pub call_temperature: f32,
    /// Sampling seed.
    pub seed: u32,
    /// Reuse the KV cache across jobs.
    pub reuse_cache: bool,
    /// Where evaluated prompt prefixes are kept between processes.
    pub prefix_cache: Option<PathBuf>,
    /// Which kernels to run.
    pub kernels: Kernels,
    /// Run exactly this CPU variant (gated or not), for a self-test of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Where the engine remembers kernel verdicts (see [`super::kernels::KernelMemory`]).
    pub memory: Option<PathBuf>,
}

/// keel's lines after the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToEngine {
    /// Generate a reply.
    Job(JobSpec),
    /// Stop job `id` between two tokens (ignored when that job is no longer running).
    Cancel {
        /// The job.
        id: u64,
    },
}

/// One reply to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Numbers jobs, so a late cancel never stops the next one.
    pub id: u64,
    /// The rendered prompt.
    pub prompt: String,
    /// Output cap.
    pub max_tokens: u32,
    /// The call grammar (GBNF), when calls may be made under one.
    pub grammar: Option<String>,
    /// The reply must be calls: sample under the grammar from the first token.
    pub require_call: bool,
    /// This job's text temperature.
    pub temperature: Option<f32>,
}

/// The engine's lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromEngine {
    /// The model is loaded.
    Loaded(Loaded),
    /// Text to show as it arrives.
    Text {
        /// The piece (whole characters only).
        text: String,
    },
    /// What was shown of this reply is void: it is being sampled again.
    Restarted {
        /// Why.
        reason: String,
    },
    /// The job finished.
    Done {
        /// The whole reply, calls included.
        text: String,
        /// Why generation stopped.
        finish: FinishReason,
        /// What it cost.
        stats: JobStats,
    },
    /// The job stopped on a cancel; the engine waits for the next.
    Cancelled,
    /// The job (or, before `Loaded`, loading) failed.
    Failed {
        /// A `keel_llm::ModelErrorKind` name.
        kind: String,
        /// For a human.
        message: String,
    },
    /// The answer to [`Hello::Probe`].
    Probed(Probe),
}

/// What the engine reports once loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loaded {
    /// The beginning-of-sequence text the template may start with ("" when none).
    pub bos: String,
    /// The end-of-sequence text.
    pub eos: String,
    /// The context size the model got.
    pub n_ctx: u32,
    /// The kernels running.
    pub kernels: KernelReport,
    /// The key of this CPU, build and model in the kernel memory.
    pub memory_key: String,
}

/// Which kernels run, and why those.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelReport {
    /// The kernel set asked for.
    pub asked: Kernels,
    /// The CPU variant of llama.cpp's kernels loaded (`haswell`, `zen4`, `armv8.2_1`, …).
    pub variant: String,
    /// What that variant was compiled for (`AVX2`, `AVX512`, `AMX_INT8`, …).
    pub features: Vec<String>,
    /// Whether weights are repacked for the faster matrix kernels.
    pub repack: bool,
    /// Why the safe set runs although the fast one was asked for (it crashed here before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_because: Option<String>,
    /// Faster variants this CPU runs that were kept off, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_off: Vec<String>,
}

impl KernelReport {
    /// `zen4 (AVX2 AVX512 …), repack on`.
    pub fn describe(&self) -> String {
        let features =
            if self.features.is_empty() { String::new() } else { format!(" ({})", self.features.join(" ")) };
        format!("{}{features}, repack {}", self.variant, if self.repack { "on" } else { "off" })
    }
}

/// What one job cost, as the engine measured it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct JobStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Of those, reused from the previous job's cache.
    pub reused_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Microseconds evaluating the prompt.
    pub prompt_us: u64,
    /// Microseconds generating.
    pub generation_us: u64,
    /// A tool call was sampled under the grammar.
    pub constrained: bool,
}

impl JobStats {
    /// Time evaluating the prompt.
    pub fn prompt_time(&self) -> Duration {
        Duration::from_micros(self.prompt_us)
    }

    /// Time generating.
    pub fn generation_time(&self) -> Duration {
        Duration::from_micros(self.generation_us)
    }
}

/// The CPU and the kernels this build carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The CPU's name.
    pub cpu: String,
    /// Its flags that decide which kernels run.
    pub cpu_flags: Vec<String>,
    /// Every variant in this build, best first, with its score here (0: this CPU cannot
    /// run it).
    pub variants: Vec<VariantScore>,
    /// What the kernel set asked for would load.
    pub chosen: KernelReport,
}

/// One CPU variant of the kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantScore {
    /// Its name.
    pub name: String,
    /// llama.cpp's own score of it on this CPU (higher is faster; 0 cannot run).
    pub score: i32,
    /// Kept off unless a self-test passed here (kernels known to crash somewhere).
    pub gated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn lines_round_trip() {
        let lines = [
            FromEngine::Text { text: "héllo\n".into() },
            FromEngine::Done {
                text: "x".into(),
                finish: FinishReason::Length,
                stats: JobStats {
                    prompt_tokens: 3,
                    generated_tokens: 1,
                    prompt_us: 7,
                    ..JobStats::default()
                },
            },
            FromEngine::Failed { kind: "server".into(), message: "no".into() },
            FromEngine::Cancelled,
        ];
        for line in lines {
            let text = serde_json::to_string(&line).unwrap();
            assert!(!text.contains('\n'), "{text}");
            assert_eq!(serde_json::from_str::<FromEngine>(&text).unwrap(), line);
        }
        let job = ToEngine::Cancel { id: 4 };
        assert_eq!(serde_json::to_string(&job).unwrap(), r#"{"type":"cancel","id":4}"#);
    }

    #[test]
    fn a_report_describes_itself() {
        let report = KernelReport {
            asked: Kernels::Auto,
            variant: "zen4".into(),
            features: vec!["AVX2".into(), "AVX512".into()],
            repack: true,
            safe_because: None,
            kept_off: Vec::new(),
        };
        assert_eq!(report.describe(), "zen4 (AVX2 AVX512), repack on");
    }
}

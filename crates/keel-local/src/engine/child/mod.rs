//! The engine process: what `keel __engine` runs.
//!
//! It writes llama.cpp's libraries out of the binary (once per build, into keel's cache),
//! loads them, registers the best CPU kernels this machine runs (or the safe set), loads
//! the model and serves keel's jobs over stdin and stdout ([`super::protocol`]). A
//! program that embeds keel's engine calls [`main`] when its first argument is
//! [`super::EngineCommand::SUBCOMMAND`].

mod error;
mod libs;
mod llama;
mod prefix_cache;
mod sampling;
mod worker;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use keel_llm::ModelErrorKind;

use super::kernels::{CpuId, KernelMemory, Kernels, memory_key};
use super::protocol::{FromEngine, Hello, JobSpec, Loaded, MAX_LINE, Probe, Start, ToEngine};
use crate::grammar::CallStyle;
use error::EngineError;

/// The build id of the embedded libraries (a hash of them all).
pub const BUILD_ID: &str = libs::BUILD_ID;

/// Runs the engine on this process's stdin and stdout; returns the exit code.
pub fn main() -> i32 {
    let mut out = match protocol_out() {
        Ok(out) => out,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "keel engine: cannot set up its output: {e}");
            return 2;
        }
    };
    let mut input = BufReader::new(std::io::stdin());
    let hello =
        match read_line(&mut input, MAX_LINE).map(|line| line.map(|l| serde_json::from_slice::<Hello>(&l))) {
            Ok(Some(Ok(hello))) => hello,
            Ok(Some(Err(e))) => {
                out.send(&failed(ModelErrorKind::Config, format!("the engine got a bad first line: {e}")));
                return 2;
            }
            Ok(None) | Err(_) => return 2,
        };
    match hello {
        Hello::Probe { kernels } => match probe(kernels) {
            Ok(probe) => i32::from(!out.send(&FromEngine::Probed(probe))),
            Err(e) => {
                out.send(&engine_failed(e));
                1
            }
        },
        Hello::Serve(start) => serve(&start, input, out),
    }
}

/// The protocol's output: the real stdout, kept aside; fd 1 itself then points at stderr,
/// so nothing llama.cpp prints can land in the protocol.
fn protocol_out() -> std::io::Result<Out> {
    let stdout = rustix::io::dup(std::io::stdout())?;
    rustix::stdio::dup2_stdout(std::io::stderr())?;
    Ok(Out { file: File::from(stdout) })
}

/// Writes protocol lines.
struct Out {
    file: File,
}

impl Out {
    /// Writes `message` as one line; false when keel is gone.
    fn send(&mut self, message: &FromEngine) -> bool {
        let Ok(mut line) = serde_json::to_vec(message) else { return false };
        line.push(b'\n');
        self.file.write_all(&line).is_ok()
    }
}

fn failed(kind: ModelErrorKind, message: String) -> FromEngine {
    FromEngine::Failed { kind: kind.as_str().to_owned(), message }
}

/// An engine failure as keel hears of it: its model error kind and its text.
fn engine_failed(error: EngineError) -> FromEngine {
    failed(error.model_error_kind(), error.message)
}

/// One line without its newline, at most `max` bytes; `None` at the end.
fn read_line(reader: &mut impl BufRead, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (taken, ended) = super::protocol::take_line(&mut line, available, max)?;
        reader.consume(taken);
        if ended {
            return Ok(Some(line));
        }
    }
}

fn probe(kernels: Kernels) -> Result<Probe, EngineError> {
    let dir = libs::extract()?;
    let api = llama::open(&dir, &libs::core())?;
    let variants = libs::survey(api, &dir)?;
    let effective = if kernels == Kernels::Auto { Kernels::Fast } else { kernels };
    let mut chosen = libs::choose(api, &dir, effective, &[], None)?;
    chosen.asked = kernels;
    let cpu = CpuId::this_machine();
    Ok(Probe { cpu: cpu.name, cpu_flags: cpu.flags, variants, chosen })
}

/// Loads the model with the kernels `start` asks for (the safe set where the fast one
/// crashed before, for [`Kernels::Auto`]), reports it, and serves jobs until keel closes
/// stdin.
fn serve(start: &Start, input: BufReader<std::io::Stdin>, mut out: Out) -> i32 {
    let loaded = match load(start) {
        Ok(loaded) => loaded,
        Err(e) => {
            out.send(&engine_failed(e));
            return 1;
        }
    };
    let (api, report, key) = loaded;
    let style = match crate::gguf::read_meta(&start.model) {
        Ok(meta) => meta.chat_template().map(CallStyle::of_template).unwrap_or(CallStyle::Bare),
        Err(e) => {
            out.send(&failed(ModelErrorKind::Config, e.to_string()));
            return 1;
        }
    };
    let model = match llama::Model::load(api, &start.model, report.repack) {
        Ok(model) => model,
        Err(e) => {
            out.send(&engine_failed(e));
            return 1;
        }
    };
    let mut engine = match worker::Engine::new(api, &model, start, style) {
        Ok(engine) => engine,
        Err(e) => {
            out.send(&engine_failed(e));
            return 1;
        }
    };
    let loaded = Loaded {
        bos: engine.bos().to_owned(),
        eos: engine.eos(),
        n_ctx: engine.n_ctx(),
        kernels: report,
        memory_key: key,
    };
    if !out.send(&FromEngine::Loaded(loaded)) {
        return 0;
    }
    let control = Arc::new(Control { cancelled_up_to: AtomicU64::new(0), closed: AtomicBool::new(false) });
    let (jobs_tx, jobs) = std::sync::mpsc::channel::<JobSpec>();
    let reader_control = Arc::clone(&control);
    let spawned = std::thread::Builder::new()
        .name("keel-engine-input".into())
        .spawn(move || read_jobs(input, &jobs_tx, &reader_control));
    if let Err(e) = spawned {
        out.send(&failed(ModelErrorKind::Server, format!("cannot start the engine's reader: {e}")));
        return 1;
    }
    while let Ok(job) = jobs.recv() {
        let mut channel = JobChannel { out: &mut out, control: &control, job: job.id };
        engine.serve(&job, &mut channel);
    }
    0
}

/// Opens llama.cpp and registers the kernels; returns the API, what was loaded, and the
/// key of this CPU, build and model in the kernel memory.
fn load(start: &Start) -> Result<(&'static llama::Api, super::protocol::KernelReport, String), EngineError> {
    let dir = libs::extract()?;
    let api = llama::open(&dir, &libs::core())?;
    let key = memory_key(&CpuId::this_machine(), BUILD_ID, &start.model);
    let verdict = start.memory.as_ref().and_then(|path| KernelMemory::at(path).get(&key)).unwrap_or_default();
    let (effective, safe_because) = match (start.kernels, &verdict.crashed) {
        (Kernels::Auto, Some(what)) => {
            (Kernels::Safe, Some(format!("the fast kernels crashed here before ({what})")))
        }
        (Kernels::Auto, None) => (Kernels::Fast, None),
        (kernels, _) => (kernels, None),
    };
    let mut report = libs::choose(api, &dir, effective, &verdict.passed, start.variant.as_deref())?;
    report.asked = start.kernels;
    report.safe_because = safe_because;
    llama::init(api);
    Ok((api, report, key))
}

/// What the input thread tells the job loop.
struct Control {
    /// Jobs up to this id are cancelled.
    cancelled_up_to: AtomicU64,
    /// keel closed stdin (it is gone, or done).
    closed: AtomicBool,
}

/// Reads keel's lines: jobs go to the loop, cancels are noted, the end closes.
fn read_jobs(
    mut input: BufReader<std::io::Stdin>,
    jobs: &std::sync::mpsc::Sender<JobSpec>,
    control: &Control,
) {
    while let Ok(Some(line)) = read_line(&mut input, MAX_LINE) {
        match serde_json::from_slice::<ToEngine>(&line) {
            Ok(ToEngine::Job(job)) => {
                if jobs.send(job).is_err() {
                    break;
                }
            }
            Ok(ToEngine::Cancel { id }) => {
                control.cancelled_up_to.fetch_max(id, Ordering::SeqCst);
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "keel engine: ignoring a bad line from keel: {e}");
            }
        }
    }
    control.closed.store(true, Ordering::SeqCst);
}

/// One job's view of the output and the controls.
struct JobChannel<'a> {
    out: &'a mut Out,
    control: &'a Control,
    job: u64,
}

impl worker::Channel for JobChannel<'_> {
    fn send(&mut self, message: FromEngine) -> bool {
        self.out.send(&message)
    }

    fn cancelled(&self) -> bool {
        self.control.closed.load(Ordering::SeqCst)
            || self.control.cancelled_up_to.load(Ordering::SeqCst) >= self.job
    }
}

//! keel's benchmark. Prints figures; never fails on timing.
//!
//! `cargo build --release -p keel-cli && cargo run --release -p keel-bench` prints every
//! section; name sections (`task`, `loop`, `many`, `stream`, `reopen`, `shell`) to run
//! only those.
//! `many-real` (not in the default run) repeats `many` with real shell processes;
//! `http [N] [N_PG]` (not in the default run) runs sessions over HTTP against keel-server.
//! `codex [RUNS]` (not in the default run) runs keel and the Codex CLI on the task side by
//! side (`CODEX_BIN`).
//! `hot-code [FILE]` (not a figure) rewrites the list of functions the linker places
//! first in `keel` (crates/keel-cli/hot-code.txt), from a callgrind run of the task.
//! See docs/performance.md for what each figure means and the latest results.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod codex;
mod hot_code;
mod http;
#[cfg(feature = "local")]
mod local;
mod many;
mod measure;
mod sections;
mod shellcost;
mod stream;
mod task;
mod trajectory;

fn main() {
    let which: Vec<String> = std::env::args().skip(1).collect();
    match which.first().map(String::as_str) {
        Some("reopen-child") => return sections::reopen_child(&which[1], &which[2]),
        Some("noop") => return println!("{}", measure::peak_rss()),
        Some("serve") => return task::serve(which.get(1).and_then(|ms| ms.parse().ok()).unwrap_or(0)),
        Some("hot-code") => return hot_code::hot_code(which.get(1).map(String::as_str)),
        Some("http-child") => return http::child(&which[1], &which[2], &which[3]),
        #[cfg(feature = "local")]
        Some(keel_local::engine::EngineCommand::SUBCOMMAND) => {
            std::process::exit(keel_local::engine::child::main())
        }
        Some("many-child") => {
            let n = which.get(2).and_then(|n| n.parse().ok()).unwrap_or(1);
            return many::child(&which[1], n, which.get(3).is_some_and(|v| v == "real"));
        }
        _ => {}
    }
    let wants = |name: &str| which.is_empty() || which.iter().any(|w| w == name);
    println!("keel-bench (medians; figures, not thresholds)");
    if which.is_empty() {
        println!(
            "reference (issue #6, same task shape, 2 cores): Codex CLI 0.42 s wall / 0.10-0.15 s to 1st request / ~47 ms gaps / 143 MB / 0.30 s CPU / ~40 KB 1st request;"
        );
        println!(
            "  pi 0.82 s / 0.71 s / ~12 ms / 179 MB / 1.04 s / 6.2 KB; openai-python loop 0.82 s / 0.48 s / ~5 ms / 64 MB / 0.77 s / 1.3 KB"
        );
    }
    if wants("task") {
        task::task(10);
    }
    if wants("loop") {
        sections::loop_cpu();
    }
    if wants("many") {
        many::many(1000, false);
    }
    if which.iter().any(|w| w == "http") {
        let n = |i: usize, default: usize| which.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
        http::http(n(1, 1000), n(2, 1000));
    }
    if which.iter().any(|w| w == "codex") {
        let runs = which.iter().skip_while(|w| *w != "codex").nth(1).and_then(|n| n.parse().ok());
        codex::codex(runs.unwrap_or(10));
    }
    if which.iter().any(|w| w == "many-real") {
        many::many(1000, true);
    }
    if wants("stream") {
        stream::stream();
    }
    #[cfg(feature = "local")]
    if which.iter().any(|w| w == "local") {
        local::local();
    }
    if wants("reopen") {
        sections::reopen();
    }
    if wants("shell") {
        shellcost::shell_cost();
    }
}

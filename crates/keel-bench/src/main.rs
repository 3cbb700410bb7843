//! keel's benchmark. Prints figures; never fails on timing.
//!
//! `cargo run --release -p keel-bench` prints every section; `-- loop` or `-- reopen`
//! runs one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod measure;
mod sections;

fn main() {
    let which: Vec<String> = std::env::args().skip(1).collect();
    match which.first().map(String::as_str) {
        Some("reopen-child") => return sections::reopen_child(&which[1], &which[2]),
        Some("noop") => return println!("{}", measure::peak_rss()),
        _ => {}
    }
    let wants = |name: &str| which.is_empty() || which.iter().any(|w| w == name);
    println!("keel-bench (medians; figures, not thresholds)");
    if wants("loop") {
        sections::loop_cpu();
    }
    if wants("reopen") {
        sections::reopen();
    }
}

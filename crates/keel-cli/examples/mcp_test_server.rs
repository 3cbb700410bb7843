//! The test MCP server over stdio (`keel_testkit::mcp`), for this crate's tests:
//! `cargo test` builds examples, and the tests configure keel to start this one.

fn main() {
    std::process::exit(keel_testkit::mcp::serve_stdio());
}

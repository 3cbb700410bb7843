//! The scripted task every harness is measured on: list the files, read README.md, run
//! `python3 hello.py`, write NOTES.md, `cat NOTES.md`, answer.

use std::path::Path;

use keel_testkit::{ChatStream, MockResponse};

/// The task text given to the agent.
pub const TASK: &str = "Look around this project, run hello.py, and write what you learn to NOTES.md.";

/// Creates the workspace: README.md, hello.py, data/numbers.txt.
pub fn workspace(dir: &Path) {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("README.md"),
        "# Demo\n\nA tiny project: hello.py prints a greeting; data/numbers.txt holds numbers.\n",
    )
    .unwrap();
    std::fs::write(dir.join("hello.py"), "print('hello from the demo')\n").unwrap();
    std::fs::write(dir.join("data/numbers.txt"), (1..=20).map(|i| format!("{i}\n")).collect::<String>())
        .unwrap();
}

fn call(id: &str, name: &str, args: &str) -> MockResponse {
    ChatStream::new()
        .text("Next step.", 2)
        .tool_call(id, name, args, 4)
        .finish("tool_calls")
        .usage(1200, 40)
        .response()
}

/// Response `n` (0-based) of the six.
pub fn response(n: usize) -> MockResponse {
    match n {
        0 => call("call_1", "list_files", "{}"),
        1 => call("call_2", "read_file", r#"{"path": "README.md"}"#),
        2 => call("call_3", "shell", r#"{"command": "python3 hello.py"}"#),
        3 => call(
            "call_4",
            "write_file",
            r##"{"path": "NOTES.md", "content": "# Notes\n\n- hello.py prints: hello from the demo\n- data/numbers.txt holds 1..20\n"}"##,
        ),
        4 => call("call_5", "shell", r#"{"command": "cat NOTES.md"}"#),
        _ => ChatStream::new()
            .text("I ran hello.py (it prints a greeting) and wrote NOTES.md with what I found.", 6)
            .finish("stop")
            .usage(1500, 30)
            .response(),
    }
}

/// How many assistant messages a request body already holds = which response is due.
/// Counted on the bytes (keel writes compact JSON) so the mock server stays cheap.
pub fn step_of(body: &[u8]) -> usize {
    let needle = br#""role":"assistant""#;
    body.windows(needle.len()).filter(|w| w == needle).count()
}

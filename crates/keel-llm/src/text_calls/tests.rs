use super::*;
use pretty_assertions::assert_eq;

const TOOLS: &[&str] = &["read_file", "shell", "write_file"];

fn text(t: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text { text: t.into() }]
}

fn call(name: &str, args: &str, n: usize) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall::new(format!("call_text_{n}"), name, args))
}

fn extract(t: &str) -> Option<Vec<ContentBlock>> {
    let mut content = text(t);
    extract_text_tool_calls(&mut content, TOOLS).then_some(content)
}

#[test]
fn qwen_tags_one_or_several() {
    assert_eq!(
        extract("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>"),
        Some(vec![call("read_file", r#"{"path":"a.rs"}"#, 0)])
    );
    assert_eq!(
        extract(
            "<tool_call>{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}</tool_call>\n<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"b\"}}</tool_call>"
        ),
        Some(vec![call("shell", r#"{"command":"ls"}"#, 0), call("read_file", r#"{"path":"b"}"#, 1)])
    );
}

#[test]
fn prose_around_tags_is_kept_as_text() {
    assert_eq!(
        extract(
            "I'll list it.\n<tool_call>{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}</tool_call>"
        ),
        Some(vec![
            ContentBlock::Text { text: "I'll list it.".into() },
            call("shell", r#"{"command":"ls"}"#, 0)
        ])
    );
}

#[test]
fn fenced_bare_and_doubled_braces() {
    let expected = Some(vec![call("shell", r#"{"command":"ls -la"}"#, 0)]);
    assert_eq!(
        extract("```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}\n```"),
        expected
    );
    assert_eq!(extract("{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}"), expected);
    assert_eq!(extract("{{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}}"), expected);
    assert_eq!(extract("```\n{\"name\":\"shell\",\"parameters\":{\"command\":\"ls -la\"}}\n```"), expected);
    assert_eq!(
        extract("{\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}"),
        Some(vec![call("shell", r#"{"command":"ls -la"}"#, 0)])
    );
}

#[test]
fn unbalanced_braces_are_forgiven() {
    let expected = Some(vec![call("shell", r#"{"command":"python3 hello.py"}"#, 0)]);
    // Seen from Qwen2.5-Coder 1.5B through llama-server: doubled opening, tripled closing.
    assert_eq!(
        extract("{{\"name\": \"shell\", \"arguments\": {\"command\": \"python3 hello.py\"}}}}"),
        expected
    );
    assert_eq!(
        extract("{\"name\": \"shell\", \"arguments\": {\"command\": \"python3 hello.py\"}}}"),
        expected
    );
    assert_eq!(
        extract("{{\"name\": \"shell\", \"arguments\": {\"command\": \"python3 hello.py\"}}\n}"),
        expected
    );
}

#[test]
fn python_literals_and_single_quotes() {
    assert_eq!(
        extract("{'name': 'write_file', 'arguments': {'path': 'a.txt', 'content': 'it\\'s\\n'}}"),
        Some(vec![call("write_file", r#"{"path":"a.txt","content":"it's\n"}"#, 0)])
    );
    assert_eq!(
        extract(
            "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\", \"quiet\": True}}\n</tool_call>"
        ),
        Some(vec![call("shell", r#"{"command":"ls","quiet":true}"#, 0)])
    );
    // A raw newline inside a string (invalid JSON) is kept as a newline.
    assert_eq!(
        extract(
            "{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.py\", \"content\": \"x = 1\nprint(x)\n\"}}"
        ),
        Some(vec![call("write_file", r#"{"path":"a.py","content":"x = 1\nprint(x)\n"}"#, 0)])
    );
}

#[test]
fn invented_text_after_a_leading_call_is_dropped() {
    assert_eq!(
        extract(
            "{\"name\": \"shell\", \"arguments\": {\"command\": \"python3 hello.py\"}}\n[exit code: 0]\nHello, keel!"
        ),
        Some(vec![call("shell", r#"{"command":"python3 hello.py"}"#, 0)])
    );
    assert_eq!(
        extract(
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nThe file says hello."
        ),
        Some(vec![call("read_file", r#"{"path":"a"}"#, 0)])
    );
}

#[test]
fn several_calls_in_fences_lines_lists_or_a_tools_block() {
    let two = Some(vec![call("shell", r#"{"command":"ls"}"#, 0), call("read_file", r#"{"path":"a"}"#, 1)]);
    assert_eq!(
        extract(
            "```json\n{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}\n```\n\n```json\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}\n```"
        ),
        two
    );
    assert_eq!(
        extract(
            "{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}"
        ),
        two
    );
    assert_eq!(
        extract(
            "[{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}, {\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}]"
        ),
        two
    );
    assert_eq!(
        extract(
            "<tools>\n{\"function\": {\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}}\n{\"function\": {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}}\n</tools>"
        ),
        two
    );
    assert_eq!(
        extract(
            "{{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}}\n{{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}}"
        ),
        two
    );
    assert_eq!(
        extract(
            "<tools>\n  <function name=\"shell\" arguments='{\"command\": \"ls\"}'/>\n  <function name=\"read_file\" arguments='{\"path\": \"a\"}'/>\n</tools>"
        ),
        two
    );
    assert_eq!(
        extract(
            "<tools>\n    <shell command=\"ls\" timeout_secs=\"120\"/>\n    <read_file path=\"a\"></read_file>\n</tools>"
        ),
        Some(vec![
            call("shell", r#"{"command":"ls","timeout_secs":120}"#, 0),
            call("read_file", r#"{"path":"a"}"#, 1)
        ])
    );
    assert_eq!(
        extract("<shell command=\"python3 hello.py\" timeout_secs=\"30\"></shell>"),
        Some(vec![call("shell", r#"{"command":"python3 hello.py","timeout_secs":30}"#, 0)])
    );
}

#[test]
fn a_call_to_a_tool_that_does_not_exist_is_still_a_call() {
    // The loop answers it with the list of real tools.
    assert_eq!(
        extract("<tools>{\"name\": \"git\", \"arguments\": {\"command\": \"status\"}}</tools>"),
        Some(vec![call("git", r#"{"command":"status"}"#, 0)])
    );
    assert_eq!(
        extract("{\"name\": \"list_directory\", \"arguments\": {}}"),
        Some(vec![call("list_directory", "{}", 0)])
    );
    // Without arguments, an unknown name is not enough to call it a call.
    assert_eq!(extract("{\"name\": \"Ada\", \"age\": 36}"), None);
}

#[test]
fn an_example_inside_an_explanation_stays_text() {
    assert_eq!(extract("Run this:\n```json\n{\"name\": \"shell\", \"arguments\": {}}\n```"), None);
    assert_eq!(
        extract(
            "To read a file you would call {\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}} with its path."
        ),
        None
    );
    assert_eq!(extract("Here is the fix:\n```python\nprint('hi')\n```"), None);
}

#[test]
fn anything_else_stays_text() {
    assert_eq!(extract("{\"path\": \"a\"}"), None);
    assert_eq!(extract("<tool_call>{\"name\": \"shell\", </tool_call>"), None);
    assert_eq!(extract("The answer is 42."), None);
    assert_eq!(extract("<b>bold</b> text"), None);
    assert_eq!(extract("[1, 2, 3]"), None);
    assert_eq!(extract("{}"), None);
}

#[test]
fn native_calls_win() {
    let mut content = vec![
        ContentBlock::Text { text: "{\"name\":\"shell\",\"arguments\":{}}".into() },
        call("read_file", "{}", 0),
    ];
    assert!(!extract_text_tool_calls(&mut content, TOOLS));
}

#[test]
fn unclosed_tag_at_the_end_still_parses() {
    assert_eq!(
        extract("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}"),
        Some(vec![call("read_file", r#"{"path":"x"}"#, 0)])
    );
}

#[test]
fn text_before_a_call_becomes_reasoning_and_a_plain_answer_stays() {
    let call = || ContentBlock::ToolCall(ToolCall::new("call_1", "read_file", r#"{"path":"app.py"}"#));
    let text = |t: &str| ContentBlock::Text { text: t.into() };
    let mut reply = vec![text("I read app.py first. \n"), call()];
    super::thoughts_as_reasoning(&mut reply);
    assert_eq!(
        reply,
        vec![ContentBlock::Thinking { text: "I read app.py first.".into(), signature: None }, call()]
    );

    let mut answer = vec![text("app.py prints Hi now.")];
    super::thoughts_as_reasoning(&mut answer);
    assert_eq!(answer, vec![text("app.py prints Hi now.")]);
}

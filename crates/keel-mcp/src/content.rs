//! An MCP tool result as keel's text result: text as it is, images, audio and binary
//! resources described in a line, embedded text resources with their URI, structured
//! content as JSON text.

use keel_agent::ToolOutput;
use keel_llm::{Image, MAX_IMAGES_PER_MESSAGE};
use serde_json::Value;

/// A result's text is cut past this many bytes (at a character boundary), with a note.
pub const MAX_RESULT_BYTES: usize = 100_000;

/// The text the model gets for a `tools/call` result (the result as JSON, the way the
/// server sent it).
pub fn render(result: &Value) -> ToolOutput {
    let blocks = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut images = Vec::new();
    let mut parts: Vec<String> = blocks.iter().map(|b| block(b, &mut images)).collect();
    if let Some(structured) = result.get("structuredContent") {
        // Servers are asked to repeat structured content as JSON text; say it once.
        let repeated = blocks.iter().any(|b| {
            b.get("text").and_then(Value::as_str).and_then(|t| serde_json::from_str::<Value>(t).ok()).as_ref()
                == Some(structured)
        });
        if !repeated {
            parts.push(structured.to_string());
        }
    }
    let mut text = parts.join("\n");
    if text.is_empty() {
        text = "(no output)".to_owned();
    }
    let text = cut(text);
    let mut output = if result.get("isError").and_then(Value::as_bool) == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    };
    output.images = images;
    output
}

/// One content block as text; an image that can be sent goes to `images` too (the text
/// line says where it stands among the blocks), one that cannot says why.
fn block(block: &Value, images: &mut Vec<Image>) -> String {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    match str_of("type") {
        "text" => str_of("text").to_owned(),
        "image" => {
            let line = format!("[image: {}, {}", or_unknown(str_of("mimeType")), size(str_of("data")));
            if images.len() >= MAX_IMAGES_PER_MESSAGE {
                return format!("{line}; not shown: at most {MAX_IMAGES_PER_MESSAGE} images per result]");
            }
            match Image::from_base64(str_of("data")) {
                Ok(image) => {
                    images.push(image);
                    format!("{line}; image {} below]", images.len())
                }
                Err(why) => format!("{line}; not shown: {why}]"),
            }
        }
        "audio" => format!("[audio: {}, {}]", or_unknown(str_of("mimeType")), size(str_of("data"))),
        "resource" => resource(block.get("resource").unwrap_or(&Value::Null)),
        "resource_link" => {
            let mime =
                block.get("mimeType").and_then(Value::as_str).map(|m| format!(", {m}")).unwrap_or_default();
            format!("[resource link: {} ({}{mime})]", str_of("uri"), str_of("name"))
        }
        other => format!("[{} content]", or_unknown(other)),
    }
}

fn resource(resource: &Value) -> String {
    let str_of = |key: &str| resource.get(key).and_then(Value::as_str);
    let uri = str_of("uri").unwrap_or_default();
    match (str_of("text"), str_of("blob")) {
        (Some(text), _) => format!("[resource: {uri}]\n{text}"),
        (None, Some(blob)) => {
            format!(
                "[resource: {uri}, {}, {}]",
                or_unknown(str_of("mimeType").unwrap_or_default()),
                size(blob)
            )
        }
        (None, None) => format!("[resource: {uri}]"),
    }
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() { "unknown type" } else { text }
}

/// The decoded size of base64 `data`, e.g. `69 bytes` or `1.2 KB`.
fn size(data: &str) -> String {
    let data = data.trim_end_matches('=');
    let bytes = data.len() * 3 / 4;
    if bytes < 1024 { format!("{bytes} bytes") } else { format!("{:.1} KB", bytes as f64 / 1024.0) }
}

fn cut(mut text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let total = text.len();
    let mut end = MAX_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n[… cut: the result had {total} bytes, only the first {end} are shown]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn images_resources_and_structured_content_become_text() {
        let png = keel_testkit::mcp::PNG_BASE64;
        let result = json!({"content": [
            {"type": "text", "text": "a red dot"},
            {"type": "image", "data": png, "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "the notes"}},
            {"type": "resource", "resource": {"uri": "file:///logo.png", "mimeType": "image/png", "blob": png}},
            {"type": "resource_link", "uri": "file:///big.csv", "name": "big.csv", "mimeType": "text/csv"},
        ]});
        let image = Image::from_base64(png).unwrap();
        assert_eq!(
            render(&result),
            ToolOutput {
                images: vec![image],
                ..ToolOutput::text(
                    "a red dot\n[image: image/png, 69 bytes; image 1 below]\n[audio: audio/wav, 3 bytes]\n\
                     [resource: file:///notes.txt]\nthe notes\n[resource: file:///logo.png, image/png, 69 bytes]\n\
                     [resource link: file:///big.csv (big.csv, text/csv)]"
                )
            }
        );
        let structured = json!({"content": [], "structuredContent": {"t": 21.5}});
        assert_eq!(render(&structured), ToolOutput::text(r#"{"t":21.5}"#));
        let repeated =
            json!({"content": [{"type": "text", "text": "{\"t\": 21.5}"}], "structuredContent": {"t": 21.5}});
        assert_eq!(render(&repeated), ToolOutput::text("{\"t\": 21.5}"));
        assert_eq!(render(&json!({"content": [], "isError": true})), ToolOutput::error("(no output)"));
    }

    #[test]
    fn an_image_that_cannot_be_sent_says_why_and_extra_images_are_counted() {
        let bmp = json!({"content": [{"type": "image", "data": "Qk0AAAA=", "mimeType": "image/bmp"}]});
        assert_eq!(
            render(&bmp),
            ToolOutput::text(
                "[image: image/bmp, 5 bytes; not shown: not an image keel can send: only PNG, JPEG, GIF and WebP are accepted]"
            )
        );
        let png = keel_testkit::mcp::PNG_BASE64;
        let many: Vec<Value> = (0..MAX_IMAGES_PER_MESSAGE + 1)
            .map(|_| json!({"type": "image", "data": png, "mimeType": "image/png"}))
            .collect();
        let output = render(&json!({"content": many}));
        assert_eq!(output.images.len(), MAX_IMAGES_PER_MESSAGE);
        assert!(
            output
                .content
                .ends_with(&format!("not shown: at most {MAX_IMAGES_PER_MESSAGE} images per result]"))
        );
    }

    #[test]
    fn a_huge_result_is_cut_with_a_note() {
        let text = "é".repeat(MAX_RESULT_BYTES);
        let output = render(&json!({"content": [{"type": "text", "text": text}]}));
        assert!(output.content.len() < MAX_RESULT_BYTES + 100);
        assert!(
            output.content.ends_with("only the first 100000 are shown]"),
            "{}",
            &output.content[99_990..]
        );
    }
}

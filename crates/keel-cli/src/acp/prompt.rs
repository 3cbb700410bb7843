//! What crosses the protocol's edge: a prompt's blocks as keel's input, a turn's end as
//! ACP's stop reason, and keel's refusals as JSON-RPC errors.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource, StopReason};
use agent_client_protocol::{Error, ErrorCode};
use keel_agent::Prompt;
use keel_llm::{FinishReason, Image, MAX_IMAGES_PER_MESSAGE};
use keel_session::TurnEndReason;

/// Most bytes of one prompt's text (a JSON-RPC message is bounded too, by the transport).
pub const MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;

/// A JSON-RPC error with `code` and a message for the user.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::new(code, message)
}

/// The client's request does not work (unknown session, refused content, …): -32602.
pub fn invalid(message: impl Into<String>) -> Error {
    error(ErrorCode::INVALID_PARAMS, message)
}

/// The request is well formed but cannot be done now (a prompt while one runs): -32600.
pub fn refused(message: impl Into<String>) -> Error {
    error(ErrorCode::INVALID_REQUEST, message)
}

/// keel failed where the client can do nothing about it (the log, the model): -32603.
pub fn failed(message: impl Into<String>) -> Error {
    error(ErrorCode::INTERNAL_ERROR, message)
}

/// A prompt's blocks as one user message: text as it is, a resource link as a mention,
/// an embedded text resource as a fenced block naming it, images as images (the format
/// read from their bytes, bounded). Audio and binary resources are refused with an error
/// (keel does not advertise them), never dropped silently.
pub fn prompt(blocks: &[ContentBlock]) -> Result<Prompt, Error> {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(format!("[@{}]({})", link.name, link.uri)),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(resource) => {
                    parts.push(format!("{}:\n```\n{}\n```", resource.uri, resource.text));
                }
                _ => return Err(invalid("keel takes no binary resources in a prompt; send text or a link")),
            },
            ContentBlock::Image(image) => {
                if images.len() == MAX_IMAGES_PER_MESSAGE {
                    return Err(invalid(format!(
                        "at most {MAX_IMAGES_PER_MESSAGE} images fit in one prompt"
                    )));
                }
                let n = images.len() + 1;
                images.push(Image::from_base64(&image.data).map_err(|e| invalid(format!("image {n}: {e}")))?);
            }
            ContentBlock::Audio(_) => {
                return Err(invalid(
                    "keel does not take audio in a prompt (promptCapabilities.audio is false)",
                ));
            }
            _ => return Err(invalid("a prompt block of a kind keel does not know")),
        }
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() && images.is_empty() {
        return Err(invalid("the prompt is empty"));
    }
    if text.len() > MAX_PROMPT_BYTES {
        return Err(invalid(format!(
            "the prompt has {} bytes; keel takes at most {MAX_PROMPT_BYTES}",
            text.len()
        )));
    }
    Ok(Prompt::text(text).with_images(images))
}

/// How a turn's end reads in ACP. `cancelled`: the client cancelled it (then the answer
/// is always `cancelled`, as the protocol requires); `last_finish`: the last reply's
/// finish reason and the provider's own word for it. A turn that ended in an error is
/// not a stop reason: `None` (the prompt is answered with an error).
pub fn stop_reason(
    reason: TurnEndReason,
    cancelled: bool,
    last_finish: Option<(FinishReason, Option<&str>)>,
) -> Option<StopReason> {
    if cancelled {
        return Some(StopReason::Cancelled);
    }
    Some(match reason {
        TurnEndReason::Completed => match last_finish {
            Some((FinishReason::Length, _)) => StopReason::MaxTokens,
            Some((_, Some(raw))) if is_refusal(raw) => StopReason::Refusal,
            _ => StopReason::EndTurn,
        },
        TurnEndReason::MaxSteps | TurnEndReason::Looping => StopReason::MaxTurnRequests,
        TurnEndReason::Blocked => StopReason::Refusal,
        TurnEndReason::Aborted | TurnEndReason::Interrupted => StopReason::Cancelled,
        TurnEndReason::Error => return None,
    })
}

/// A provider's finish reason that means the model refused (OpenAI's `content_filter`,
/// Anthropic's `refusal`).
fn is_refusal(raw: &str) -> bool {
    matches!(raw, "content_filter" | "refusal")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{ImageContent, ResourceLink, TextContent};
    use pretty_assertions::assert_eq;

    fn text(blocks: &[ContentBlock]) -> Result<String, Error> {
        prompt(blocks).map(|p| p.text)
    }

    #[test]
    fn text_links_and_images_make_one_message() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("look at")),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///w/main.rs")),
        ];
        assert_eq!(text(&blocks).unwrap(), "look at\n\n[@main.rs](file:///w/main.rs)");
        let png = keel_testkit::mcp::PNG_BASE64;
        let with_image = vec![
            ContentBlock::Text(TextContent::new("what is this?")),
            ContentBlock::Image(ImageContent::new(png, "image/png")),
        ];
        assert_eq!(
            prompt(&with_image).unwrap(),
            Prompt::text("what is this?").with_images(vec![Image::from_base64(png).unwrap()])
        );
        let not_an_image = vec![ContentBlock::Image(ImageContent::new("aGk=", "image/png"))];
        let refused = prompt(&not_an_image).unwrap_err();
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(
            refused.message,
            "image 1: not an image keel can send: only PNG, JPEG, GIF and WebP are accepted"
        );
        assert_eq!(
            prompt(&[ContentBlock::Text(TextContent::new("  "))]).unwrap_err().message,
            "the prompt is empty"
        );
        let huge = vec![ContentBlock::Text(TextContent::new("x".repeat(MAX_PROMPT_BYTES + 1)))];
        assert_eq!(prompt(&huge).unwrap_err().code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn turn_ends_map_onto_stop_reasons() {
        use TurnEndReason as R;
        let cases = [
            (R::Completed, false, None, Some(StopReason::EndTurn)),
            (R::Completed, false, Some((FinishReason::Length, None)), Some(StopReason::MaxTokens)),
            (
                R::Completed,
                false,
                Some((FinishReason::Unknown, Some("content_filter"))),
                Some(StopReason::Refusal),
            ),
            (R::MaxSteps, false, None, Some(StopReason::MaxTurnRequests)),
            (R::Looping, false, None, Some(StopReason::MaxTurnRequests)),
            (R::Blocked, false, None, Some(StopReason::Refusal)),
            (R::Aborted, false, None, Some(StopReason::Cancelled)),
            (R::Blocked, true, None, Some(StopReason::Cancelled)),
            (R::Error, false, None, None),
        ];
        for (reason, cancelled, finish, expected) in cases {
            assert_eq!(stop_reason(reason, cancelled, finish), expected, "{reason:?} cancelled={cancelled}");
        }
    }
}

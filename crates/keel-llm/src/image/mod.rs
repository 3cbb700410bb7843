//! Images in user messages and tool results.
//!
//! An [`Image`] is its bytes plus what the log keeps of it: the media type (read from
//! the bytes, never from a file name), its SHA-256 and its size. The log holds only that
//! reference; the bytes are kept beside the session by its store and put back when the
//! session is read (see `keel_session`). An image whose bytes could not be found again
//! has `data: None`, and every encoder sends a short note in its place.

mod size;

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest image keel accepts, in bytes (the wire APIs' 5 MB; Anthropic measures its
/// 5 MB on the base64 text, so its encoder sends an image over 3.75 MB as a note).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// The most images one message may carry.
pub const MAX_IMAGES_PER_MESSAGE: usize = 16;

/// The most image bytes one request carries (about 21 MB once base64-encoded: under the
/// wire APIs' request limits with the text beside it). Older images beyond it are sent as
/// notes, so a long session with many screenshots does not grow a request the provider
/// refuses — and refuses again on every later request.
pub const MAX_REQUEST_IMAGE_BYTES: u64 = 16 * 1024 * 1024;

/// Tokens assumed for an image whose size in pixels is unknown (the wire APIs scale
/// large images down to about this).
const DEFAULT_IMAGE_TOKENS: u64 = 1_600;

/// The image formats every wire API that takes images accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImageType {
    /// PNG.
    #[serde(rename = "image/png")]
    Png,
    /// JPEG.
    #[serde(rename = "image/jpeg")]
    Jpeg,
    /// GIF (the first frame is what models see).
    #[serde(rename = "image/gif")]
    Gif,
    /// WebP.
    #[serde(rename = "image/webp")]
    Webp,
}

impl ImageType {
    /// The format of `bytes`, read from their signature.
    pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageType::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageType::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageType::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(ImageType::Webp)
        } else {
            None
        }
    }

    /// The MIME type, e.g. `image/png`.
    pub fn media_type(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Gif => "image/gif",
            ImageType::Webp => "image/webp",
        }
    }

    /// The usual file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            ImageType::Png => "png",
            ImageType::Jpeg => "jpg",
            ImageType::Gif => "gif",
            ImageType::Webp => "webp",
        }
    }
}

/// Why bytes were refused as an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// Nothing at all.
    #[error("the image is empty")]
    Empty,
    /// Larger than [`MAX_IMAGE_BYTES`].
    #[error("the image is {bytes} bytes; the limit is {max} bytes (scale it down or crop it)", max = MAX_IMAGE_BYTES)]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Not PNG, JPEG, GIF or WebP.
    #[error("not an image keel can send: only PNG, JPEG, GIF and WebP are accepted")]
    UnknownFormat,
    /// Base64 text that does not decode.
    #[error("the image's base64 data does not decode")]
    Base64,
}

/// An image: its reference (what the log keeps) and, when at hand, its bytes.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The format, read from the bytes.
    pub media_type: ImageType,
    /// SHA-256 of the bytes, lowercase hex: the name the store keeps them under.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Width and height in pixels, when the header says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pixels: Option<(u32, u32)>,
    /// The bytes; `None` when they could not be found again (never in the log itself).
    #[serde(skip)]
    pub data: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("media_type", &self.media_type)
            .field("sha256", &self.sha256)
            .field("bytes", &self.bytes)
            .field("pixels", &self.pixels)
            .field("data", &self.data.as_ref().map(|d| d.len()))
            .finish()
    }
}

impl Image {
    /// An image from its bytes: format sniffed, size bounded, hash computed.
    pub fn from_bytes(data: impl Into<Arc<[u8]>>) -> Result<Image, ImageError> {
        let data: Arc<[u8]> = data.into();
        if data.is_empty() {
            return Err(ImageError::Empty);
        }
        if data.len() > MAX_IMAGE_BYTES {
            return Err(ImageError::TooLarge { bytes: data.len() });
        }
        let media_type = ImageType::sniff(&data).ok_or(ImageError::UnknownFormat)?;
        Ok(Image {
            media_type,
            sha256: sha256_hex(&data),
            bytes: data.len() as u64,
            pixels: size::pixels(media_type, &data),
            data: Some(data),
        })
    }

    /// An image from base64 text (an MCP tool's image content), bounded before decoding.
    pub fn from_base64(text: &str) -> Result<Image, ImageError> {
        let text = text.trim();
        let decoded_len = text.len() / 4 * 3;
        if decoded_len > MAX_IMAGE_BYTES + 3 {
            return Err(ImageError::TooLarge { bytes: decoded_len });
        }
        let data = base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| ImageError::Base64)?;
        Image::from_bytes(data)
    }

    /// True when `data` are these bytes (the hash matches): how a store checks what it
    /// read back.
    pub fn matches(&self, data: &[u8]) -> bool {
        data.len() as u64 == self.bytes && sha256_hex(data) == self.sha256
    }

    /// The bytes, base64-encoded, when at hand.
    pub fn base64(&self) -> Option<String> {
        self.data.as_ref().map(|data| base64::engine::general_purpose::STANDARD.encode(data))
    }

    /// A `data:` URL of the bytes, when at hand.
    pub fn data_url(&self) -> Option<String> {
        self.base64().map(|b64| format!("data:{};base64,{b64}", self.media_type.media_type()))
    }

    /// The file name a store keeps the bytes under: `<sha256>.<ext>`.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.sha256, self.media_type.extension())
    }

    /// What a model is told in place of an image it cannot be shown.
    pub fn missing_note(&self) -> String {
        format!(
            "[an image ({}, {} bytes) whose file is no longer beside the session]",
            self.media_type.media_type(),
            self.bytes
        )
    }

    /// What a model that takes no images is told in place of one.
    pub fn omitted_note(&self) -> String {
        format!("[an image ({}, {}) this model cannot see]", self.media_type.media_type(), self.describe())
    }

    /// What a model is told in place of an image a provider refused (it was withdrawn
    /// from the conversation: see [`withdraw_images`]).
    pub fn refused_note(&self) -> String {
        format!(
            "[an image ({}, {}) withdrawn: the provider refused it]",
            self.media_type.media_type(),
            self.describe()
        )
    }

    /// A rough count of the tokens the image costs a model.
    pub fn estimated_tokens(&self) -> u64 {
        match self.pixels {
            Some((w, h)) => (u64::from(w) * u64::from(h) / 750).clamp(85, DEFAULT_IMAGE_TOKENS),
            None => DEFAULT_IMAGE_TOKENS,
        }
    }

    /// A one-line description for people: `PNG 640×480, 12 KB`.
    pub fn describe(&self) -> String {
        let kind = self.media_type.extension().to_uppercase();
        let size = if self.bytes >= 1024 * 1024 {
            format!("{:.1} MB", self.bytes as f64 / (1024.0 * 1024.0))
        } else {
            format!("{} KB", self.bytes.div_ceil(1024))
        };
        match self.pixels {
            Some((w, h)) => format!("{kind} {w}×{h}, {size}"),
            None => format!("{kind}, {size}"),
        }
    }
}

/// `messages` with every image replaced by a note in its message's text, or `None` when
/// none carries an image: what a model that takes no images is sent (a tool's screenshot,
/// or history from before a switch to a text-only model).
pub fn without_images(messages: &[crate::Message]) -> Option<Vec<crate::Message>> {
    use crate::Message;
    let has_images = |m: &Message| match m {
        Message::User(user) => !user.images.is_empty(),
        Message::ToolResult(result) => !result.images.is_empty(),
        Message::Assistant(_) => false,
    };
    if !messages.iter().any(has_images) {
        return None;
    }
    let noted = |text: &mut String, images: Vec<Image>| {
        for image in images {
            text.push('\n');
            text.push_str(&image.omitted_note());
        }
    };
    let mut out = messages.to_vec();
    for message in &mut out {
        match message {
            Message::User(user) => noted(&mut user.content, std::mem::take(&mut user.images)),
            Message::ToolResult(result) => noted(&mut result.content, std::mem::take(&mut result.images)),
            Message::Assistant(_) => {}
        }
    }
    Some(out)
}

/// The SHA-256 of every image in `messages` whose bytes are at hand (what a request
/// sends as images), each once, in order.
pub fn images_sent(messages: &[crate::Message]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for image in messages.iter().flat_map(images_of) {
        if image.data.is_some() && !out.contains(&image.sha256) {
            out.push(image.sha256.clone());
        }
    }
    out
}

/// Replaces every image named in `sha256` by [`Image::refused_note`] in its message's
/// text; returns how many were replaced. The one edit both the loop (the request it
/// tries again) and the session's fold (an `images/withdrawn` event) make, so the two
/// cannot differ.
pub fn withdraw_images(messages: &mut [crate::Message], sha256: &[String]) -> usize {
    use crate::Message;
    let mut withdrawn = 0;
    for message in messages {
        let (text, images) = match message {
            Message::User(user) => (&mut user.content, &mut user.images),
            Message::ToolResult(result) => (&mut result.content, &mut result.images),
            Message::Assistant(_) => continue,
        };
        if !images.iter().any(|image| sha256.contains(&image.sha256)) {
            continue;
        }
        for image in std::mem::take(images) {
            if sha256.contains(&image.sha256) {
                text.push('\n');
                text.push_str(&image.refused_note());
                withdrawn += 1;
            } else {
                images.push(image);
            }
        }
    }
    withdrawn
}

/// The images a message carries.
fn images_of(message: &crate::Message) -> &[Image] {
    match message {
        crate::Message::User(user) => &user.images,
        crate::Message::ToolResult(result) => &result.images,
        crate::Message::Assistant(_) => &[],
    }
}

/// `messages` with the oldest images replaced by notes until the rest fit in `budget`
/// bytes, or `None` when all fit. The newest images are the ones the model needs.
pub fn within_image_budget(messages: &[crate::Message], budget: u64) -> Option<Vec<crate::Message>> {
    use crate::Message;
    let images_of = |m: &Message| -> u64 {
        match m {
            Message::User(user) => user.images.iter().map(|i| i.bytes).sum(),
            Message::ToolResult(result) => result.images.iter().map(|i| i.bytes).sum(),
            Message::Assistant(_) => 0,
        }
    };
    if messages.iter().map(images_of).sum::<u64>() <= budget {
        return None;
    }
    let mut out = messages.to_vec();
    let mut kept = 0u64;
    for message in out.iter_mut().rev() {
        let (text, images) = match message {
            Message::User(user) => (&mut user.content, &mut user.images),
            Message::ToolResult(result) => (&mut result.content, &mut result.images),
            Message::Assistant(_) => continue,
        };
        let mut left_out = Vec::new();
        for image in std::mem::take(images) {
            if kept + image.bytes <= budget {
                kept += image.bytes;
                images.push(image);
            } else {
                left_out.push(image);
            }
        }
        for image in left_out {
            text.push_str(&format!(
                "\n[an earlier image ({}) left out to keep the request within its size]",
                image.describe()
            ));
        }
    }
    Some(out)
}

/// A 1×1 PNG for tests, with its bytes; and one whose bytes are gone.
#[cfg(test)]
pub(crate) fn test_images() -> (Image, Image) {
    let image = Image::from_bytes(tests::PNG_1X1.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let hollow = Image { data: None, ..image.clone() };
    (image, hollow)
}

/// SHA-256 of `data`, lowercase hex.
fn sha256_hex(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG.
    pub(crate) const PNG_1X1: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00,
        0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0, 0x1F, 0x00, 0x05,
        0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42,
        0x60, 0x82,
    ];

    #[test]
    fn an_image_is_read_from_its_bytes_not_its_name() {
        let image = Image::from_bytes(PNG_1X1.to_vec()).unwrap();
        assert_eq!(image.media_type, ImageType::Png);
        assert_eq!(image.pixels, Some((1, 1)));
        assert_eq!(image.bytes, PNG_1X1.len() as u64);
        assert_eq!(image.sha256.len(), 64);
        assert!(image.matches(PNG_1X1));
        assert!(!image.matches(&PNG_1X1[1..]));
        assert!(image.data_url().unwrap().starts_with("data:image/png;base64,iVBORw0KGgo"));
    }

    #[test]
    fn what_is_not_an_image_is_refused_with_its_reason() {
        assert_eq!(Image::from_bytes(Vec::new()), Err(ImageError::Empty));
        assert_eq!(Image::from_bytes(b"%PDF-1.7".to_vec()), Err(ImageError::UnknownFormat));
        let mut big = PNG_1X1.to_vec();
        big.resize(MAX_IMAGE_BYTES + 1, 0);
        assert_eq!(Image::from_bytes(big), Err(ImageError::TooLarge { bytes: MAX_IMAGE_BYTES + 1 }));
    }

    #[test]
    fn a_model_without_images_gets_notes_in_their_place() {
        let image = Image::from_bytes(PNG_1X1.to_vec()).unwrap();
        let messages =
            vec![crate::Message::User(crate::UserMessage { content: "look".into(), images: vec![image] })];
        let Some(stripped) = without_images(&messages) else { panic!("images were there") };
        assert_eq!(
            stripped,
            [crate::Message::User(crate::UserMessage::text(
                "look\n[an image (image/png, PNG 1×1, 1 KB) this model cannot see]"
            ))]
        );
        assert_eq!(without_images(&stripped), None);
    }

    #[test]
    fn the_oldest_images_give_way_when_a_request_would_carry_too_many_bytes() {
        let image = Image::from_bytes(PNG_1X1.to_vec()).unwrap();
        let message = |text: &str| {
            crate::Message::User(crate::UserMessage { content: text.into(), images: vec![image.clone()] })
        };
        let messages = vec![message("first"), message("second"), message("third")];
        assert_eq!(within_image_budget(&messages, 3 * 70), None);
        let Some(fitted) = within_image_budget(&messages, 2 * 70) else { panic!("over the budget") };
        let crate::Message::User(first) = &fitted[0] else { panic!() };
        assert_eq!(first.images.len(), 0);
        assert_eq!(
            first.content,
            "first\n[an earlier image (PNG 1×1, 1 KB) left out to keep the request within its size]"
        );
        assert_eq!(fitted[1..], messages[1..]);
    }

    #[test]
    fn withdrawn_images_become_notes_where_they_were_and_others_stay() {
        let image = Image::from_bytes(PNG_1X1.to_vec()).unwrap();
        let mut other = image.clone();
        other.sha256 = "f".repeat(64);
        let hollow = Image { data: None, sha256: "e".repeat(64), ..image.clone() };
        let mut messages = vec![
            crate::Message::User(crate::UserMessage {
                content: "look".into(),
                images: vec![image.clone(), other.clone(), hollow.clone()],
            }),
            crate::Message::ToolResult(crate::ToolResultMessage {
                call_id: "c".into(),
                name: "screenshot".into(),
                content: "[image 1 below]".into(),
                is_error: false,
                images: vec![image.clone()],
            }),
        ];
        assert_eq!(images_sent(&messages), [image.sha256.clone(), other.sha256.clone()]);
        assert_eq!(withdraw_images(&mut messages, std::slice::from_ref(&image.sha256)), 2);
        let note = "[an image (image/png, PNG 1×1, 1 KB) withdrawn: the provider refused it]";
        assert_eq!(
            messages,
            [
                crate::Message::User(crate::UserMessage {
                    content: format!("look\n{note}"),
                    images: vec![other.clone(), hollow],
                }),
                crate::Message::ToolResult(crate::ToolResultMessage {
                    call_id: "c".into(),
                    name: "screenshot".into(),
                    content: format!("[image 1 below]\n{note}"),
                    is_error: false,
                    images: Vec::new(),
                }),
            ]
        );
        assert_eq!(withdraw_images(&mut messages, std::slice::from_ref(&image.sha256)), 0);
        assert_eq!(images_sent(&messages), [other.sha256]);
    }

    #[test]
    fn base64_images_decode_within_bounds() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG_1X1);
        assert_eq!(Image::from_base64(&b64).unwrap().bytes, PNG_1X1.len() as u64);
        assert_eq!(Image::from_base64("not base64!"), Err(ImageError::Base64));
        let huge = "A".repeat(MAX_IMAGE_BYTES / 3 * 4 + 100);
        assert!(matches!(Image::from_base64(&huge), Err(ImageError::TooLarge { .. })));
    }

    #[test]
    fn the_log_form_is_the_reference_without_the_bytes() {
        let image = Image::from_bytes(PNG_1X1.to_vec()).unwrap();
        let json = serde_json::to_value(&image).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"media_type": "image/png", "sha256": image.sha256, "bytes": 70, "pixels": [1, 1]})
        );
        let back: Image = serde_json::from_value(json).unwrap();
        assert_eq!(back, Image { data: None, ..image });
    }
}

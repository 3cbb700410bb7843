//! An image's size in pixels, read from its header (for the token estimate and for
//! people). Every reader is bounded by the bytes it is given and gives up rather than
//! guess.

use super::ImageType;

/// Width and height of `data`, when its header says.
pub(crate) fn pixels(kind: ImageType, data: &[u8]) -> Option<(u32, u32)> {
    let size = match kind {
        ImageType::Png => png(data),
        ImageType::Gif => gif(data),
        ImageType::Jpeg => jpeg(data),
        ImageType::Webp => webp(data),
    }?;
    (size.0 > 0 && size.1 > 0).then_some(size)
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn be16(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?)))
}

fn le16(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?)))
}

fn le24(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at + 3)?;
    Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
}

/// The IHDR chunk follows the signature.
fn png(data: &[u8]) -> Option<(u32, u32)> {
    (data.get(12..16)? == b"IHDR").then_some(())?;
    Some((be32(data, 16)?, be32(data, 20)?))
}

/// The logical screen size follows the signature.
fn gif(data: &[u8]) -> Option<(u32, u32)> {
    Some((le16(data, 6)?, le16(data, 8)?))
}

/// The first start-of-frame marker's size; markers are walked by their lengths.
fn jpeg(data: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        if *data.get(at)? != 0xFF {
            return None;
        }
        let marker = *data.get(at + 1)?;
        match marker {
            // Fill bytes, and markers without a length.
            0xFF => at += 1,
            0x01 | 0xD0..=0xD7 => at += 2,
            // Start of frame (baseline, progressive, …), not DHT/JPG/DAC.
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                return Some((be16(data, at + 7)?, be16(data, at + 5)?));
            }
            // Start of scan or end of image before a frame: nothing to read.
            0xD9 | 0xDA => return None,
            _ => at += 2 + usize::try_from(be16(data, at + 2)?).ok()?,
        }
    }
}

/// The first chunk says which of the three WebP layouts this is.
fn webp(data: &[u8]) -> Option<(u32, u32)> {
    match data.get(12..16)? {
        b"VP8 " => Some((le16(data, 26)? & 0x3FFF, le16(data, 28)? & 0x3FFF)),
        b"VP8L" => {
            let bits = u32::from_le_bytes(data.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(data, 24)? + 1, le24(data, 27)? + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_from_each_format_header() {
        let mut gif = b"GIF89a".to_vec();
        gif.extend([0x80, 0x02, 0xE0, 0x01]);
        assert_eq!(pixels(ImageType::Gif, &gif), Some((640, 480)));

        // SOI, an APP0 segment of 4 bytes, then SOF0 with height 300 and width 400.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0x2C, 0x01,
            0x90,
        ];
        assert_eq!(pixels(ImageType::Jpeg, &jpeg), Some((400, 300)));

        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend([0u8; 8]);
        webp.extend([0x7F, 0x02, 0x00, 0xDF, 0x01, 0x00]);
        assert_eq!(pixels(ImageType::Webp, &webp), Some((640, 480)));
    }

    #[test]
    fn a_cut_or_odd_header_gives_no_size_rather_than_a_guess() {
        assert_eq!(pixels(ImageType::Png, b"\x89PNG\r\n\x1a\n"), None);
        assert_eq!(pixels(ImageType::Jpeg, &[0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF]), None);
        assert_eq!(pixels(ImageType::Jpeg, &[0xFF, 0xD8, 0x00]), None);
        assert_eq!(pixels(ImageType::Webp, b"RIFF\0\0\0\0WEBPXXXX"), None);
        assert_eq!(pixels(ImageType::Gif, b"GIF89a\0\0\0\0"), None);
    }
}

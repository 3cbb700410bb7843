//! Reading a GGUF file's metadata (the key/value header) without loading the weights.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::LocalError;

/// A metadata value we keep (big arrays such as the vocabulary are skipped).
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// Any integer type.
    Int(i64),
    /// f32 or f64.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array; only its length is kept.
    Array(u64),
}

/// The metadata of a GGUF file.
#[derive(Debug, Clone, Default)]
pub struct GgufMeta {
    /// Format version (2 or 3).
    pub version: u32,
    /// Key/value pairs.
    pub values: BTreeMap<String, MetaValue>,
}

impl GgufMeta {
    /// A string value.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.values.get(key) {
            Some(MetaValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// An integer value.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.values.get(key) {
            Some(MetaValue::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// The model's chat template (`tokenizer.chat_template`).
    pub fn chat_template(&self) -> Option<&str> {
        self.str("tokenizer.chat_template")
    }

    /// The architecture (`general.architecture`).
    pub fn architecture(&self) -> Option<&str> {
        self.str("general.architecture")
    }

    /// The context length the model was trained for.
    pub fn context_length(&self) -> Option<i64> {
        self.architecture().and_then(|arch| self.int(&format!("{arch}.context_length")))
    }

    /// The human name (`general.name`).
    pub fn name(&self) -> Option<&str> {
        self.str("general.name")
    }
}

struct Reader<R> {
    inner: R,
}

impl<R: Read + Seek> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.inner.read_exact(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> std::io::Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn string(&mut self, limit: u64) -> std::io::Result<Option<String>> {
        let len = self.u64()?;
        if len > limit {
            self.inner.seek(SeekFrom::Current(len as i64))?;
            return Ok(None);
        }
        let mut buf = vec![0u8; len as usize];
        self.inner.read_exact(&mut buf)?;
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    fn skip(&mut self, bytes: u64) -> std::io::Result<()> {
        self.inner.seek(SeekFrom::Current(bytes as i64)).map(|_| ())
    }

    fn value(&mut self, kind: u32) -> Result<MetaValue, LocalError> {
        let bad = |what: String| LocalError::NotGguf(what);
        Ok(match kind {
            0 => MetaValue::Int(i64::from(self.bytes::<1>()?[0])),
            1 => MetaValue::Int(i64::from(self.bytes::<1>()?[0] as i8)),
            2 => MetaValue::Int(i64::from(u16::from_le_bytes(self.bytes()?))),
            3 => MetaValue::Int(i64::from(i16::from_le_bytes(self.bytes()?))),
            4 => MetaValue::Int(i64::from(self.u32()?)),
            5 => MetaValue::Int(i64::from(i32::from_le_bytes(self.bytes()?))),
            6 => MetaValue::Float(f64::from(f32::from_le_bytes(self.bytes()?))),
            7 => MetaValue::Bool(self.bytes::<1>()?[0] != 0),
            8 => match self.string(16 * 1024 * 1024)? {
                Some(s) => MetaValue::Str(s),
                None => MetaValue::Array(0),
            },
            9 => {
                let item = self.u32()?;
                let count = self.u64()?;
                let size = match item {
                    0 | 1 | 7 => Some(1),
                    2 | 3 => Some(2),
                    4..=6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                match size {
                    Some(size) => self.skip(size * count)?,
                    None if item == 8 => {
                        for _ in 0..count {
                            let len = self.u64()?;
                            self.skip(len)?;
                        }
                    }
                    None => return Err(bad(format!("unsupported array item type {item}"))),
                }
                MetaValue::Array(count)
            }
            10 => MetaValue::Int(self.u64()? as i64),
            11 => MetaValue::Int(i64::from_le_bytes(self.bytes()?)),
            12 => MetaValue::Float(f64::from_le_bytes(self.bytes()?)),
            other => return Err(bad(format!("unknown metadata type {other}"))),
        })
    }
}

/// Reads the metadata of the GGUF file at `path`. A file that is not GGUF (or is cut
/// short) is a clear error.
pub fn read_meta(path: &Path) -> Result<GgufMeta, LocalError> {
    let file =
        File::open(path).map_err(|e| LocalError::Io(format!("cannot open {}: {e}", path.display())))?;
    let mut reader = Reader { inner: BufReader::with_capacity(1 << 16, file) };
    let not_gguf =
        |detail: &str| LocalError::NotGguf(format!("{} is not a GGUF model file ({detail})", path.display()));
    let magic = reader.bytes::<4>().map_err(|_| not_gguf("too short"))?;
    if &magic != b"GGUF" {
        return Err(not_gguf("wrong magic bytes"));
    }
    let version = reader.u32().map_err(|_| not_gguf("truncated header"))?;
    if !(2..=3).contains(&version) {
        return Err(not_gguf(&format!("unsupported GGUF version {version}")));
    }
    let _tensors = reader.u64().map_err(|_| not_gguf("truncated header"))?;
    let count = reader.u64().map_err(|_| not_gguf("truncated header"))?;
    let mut values = BTreeMap::new();
    for _ in 0..count {
        let key = reader.string(64 * 1024).map_err(|_| not_gguf("truncated metadata"))?.unwrap_or_default();
        let kind = reader.u32().map_err(|_| not_gguf("truncated metadata"))?;
        let value = reader.value(kind).map_err(|e| match e {
            LocalError::Io(_) => not_gguf("truncated metadata"),
            other => other,
        })?;
        values.insert(key, value);
    }
    Ok(GgufMeta { version, values })
}

/// Builds a small GGUF file (metadata only), for tests.
pub fn write_test_file(path: &Path, entries: &[(&str, MetaValue)]) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (key, value) in entries {
        out.extend_from_slice(&(key.len() as u64).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        match value {
            MetaValue::Int(i) => {
                out.extend_from_slice(&11u32.to_le_bytes());
                out.extend_from_slice(&i.to_le_bytes());
            }
            MetaValue::Float(f) => {
                out.extend_from_slice(&12u32.to_le_bytes());
                out.extend_from_slice(&f.to_le_bytes());
            }
            MetaValue::Bool(b) => {
                out.extend_from_slice(&7u32.to_le_bytes());
                out.push(u8::from(*b));
            }
            MetaValue::Str(s) => {
                out.extend_from_slice(&8u32.to_le_bytes());
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            MetaValue::Array(n) => {
                out.extend_from_slice(&9u32.to_le_bytes());
                out.extend_from_slice(&8u32.to_le_bytes());
                out.extend_from_slice(&n.to_le_bytes());
                for i in 0..*n {
                    let item = format!("tok{i}");
                    out.extend_from_slice(&(item.len() as u64).to_le_bytes());
                    out.extend_from_slice(item.as_bytes());
                }
            }
        }
    }
    std::fs::write(path, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_was_written_and_skips_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_test_file(
            &path,
            &[
                ("general.architecture", MetaValue::Str("qwen2".into())),
                ("qwen2.context_length", MetaValue::Int(32768)),
                ("tokenizer.ggml.tokens", MetaValue::Array(3)),
                ("tokenizer.chat_template", MetaValue::Str("{{ messages }}".into())),
            ],
        )
        .unwrap();
        let meta = read_meta(&path).unwrap();
        assert_eq!(meta.architecture(), Some("qwen2"));
        assert_eq!(meta.context_length(), Some(32768));
        assert_eq!(meta.chat_template(), Some("{{ messages }}"));
        assert_eq!(meta.values.get("tokenizer.ggml.tokens"), Some(&MetaValue::Array(3)));
    }

    #[test]
    fn non_gguf_and_truncated_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello world").unwrap();
        let err = read_meta(&text).unwrap_err().to_string();
        assert!(err.contains("is not a GGUF model file (wrong magic bytes)"), "{err}");
        let short = dir.path().join("short.gguf");
        std::fs::write(&short, b"GGUF\x03\x00\x00\x00").unwrap();
        assert!(read_meta(&short).unwrap_err().to_string().contains("truncated header"));
        assert!(read_meta(&dir.path().join("missing.gguf")).unwrap_err().to_string().contains("cannot open"));
    }
}

//! Telling binary files from text, as the tools that read text must.

/// A NUL byte in the first 8 KiB means binary.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

//! Recording entries as kept in either database: zstd-compressed JSON.

use super::{NewRecord, StoredRecord};

/// `records` numbered after the `last` entry already kept.
pub fn numbered(last: u64, records: &[NewRecord]) -> Vec<StoredRecord> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| StoredRecord {
            seq: last + 1 + i as u64,
            kind: r.kind.clone(),
            body: r.body.clone(),
        })
        .collect()
}

/// Compression level of recording entries (fast; JSON shrinks 5-10×).
const RECORD_LEVEL: i32 = 3;

thread_local! {
    /// One compressor per thread, kept: making one per entry costs more
    /// than compressing a small entry.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

pub fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(zstd::bulk::Compressor::new(RECORD_LEVEL)?);
        }
        cell.as_mut().expect("made above").compress(bytes)
    })
}

/// An entry as read back: a damaged one comes back as what could be read
/// of it, so `verify` names it rather than the whole read failing.
pub fn unpack(seq: i64, kind: String, size: i64, packed: Vec<u8>) -> StoredRecord {
    let body = match zstd::bulk::decompress(&packed, size.clamp(0, 1 << 30) as usize) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(damaged recording entry: {e})"),
    };
    StoredRecord {
        seq: seq as u64,
        kind,
        body,
    }
}

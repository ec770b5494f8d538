//! The secret values an export must never carry, gathered from what the
//! host knows holds secrets: the values of its environment that look like
//! credentials (provider keys, tokens), and the small files the host's
//! registry of secrets names as credentials (the bridge's and MCP
//! sign-ins' tokens, the store's password, the user's credential stores,
//! what the operator kept). Each value found there is overwritten in the
//! bytes before they leave (see `export::withhold`).

use std::path::Path;

use crate::kept::{Item, Kind};

/// Values shorter than this are not searched for (they would match by
/// chance), as the plugin HTTP gate does.
pub const MIN_LEN: usize = 6;
/// A credential file bigger than this is not read.
const MAX_FILE: u64 = 64 * 1024;
/// Pieces of a credential file shorter than this are not taken (words
/// like `password` or `region`); keys and tokens are longer.
const MIN_PIECE: usize = 12;

/// Every secret value known now.
pub fn known() -> Vec<Vec<u8>> {
    let mut values = from_environment();
    let mut budget = Budget {
        files: MAX_FILES,
        bytes: MAX_BYTES,
    };
    for entry in crate::kept::current().entries() {
        let credential = matches!(
            entry.item,
            Item::BridgeTokens | Item::StorePassword | Item::CredentialStore | Item::OperatorNamed
        );
        if entry.kind == Kind::Secret && credential {
            from_path(&entry.path, &mut values, 0, &mut budget);
        }
    }
    values.sort();
    values.dedup();
    // Longest first: a secret containing another is overwritten whole.
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values
}

/// What one gathering may read at most.
struct Budget {
    files: usize,
    bytes: u64,
}

/// Files read at most in one gathering, and bytes.
const MAX_FILES: usize = 512;
const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The values of variables whose name ends in KEY, TOKEN, SECRET,
/// PASSWORD or CREDENTIALS.
fn from_environment() -> Vec<Vec<u8>> {
    const MARKS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIALS"];
    std::env::vars_os()
        .filter(|(name, _)| {
            let name = name.to_string_lossy().to_ascii_uppercase();
            MARKS.iter().any(|m| name.ends_with(m))
        })
        .map(|(_, value)| value.into_encoded_bytes())
        .filter(|value| value.len() >= MIN_LEN)
        .collect()
}

/// Gather from `path`, a file or a folder (two levels down), following
/// links (credential stores are often links into a dotfiles folder or a
/// mounted secret) but reading regular files only.
fn from_path(path: &Path, values: &mut Vec<Vec<u8>>, depth: usize, budget: &mut Budget) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if meta.is_dir() && depth < 2 {
        let Ok(dir) = std::fs::read_dir(path) else {
            return;
        };
        for entry in dir.flatten() {
            if budget.files == 0 {
                return;
            }
            from_path(&entry.path(), values, depth + 1, budget);
        }
    } else if meta.is_file()
        && meta.len() <= MAX_FILE
        && meta.len() <= budget.bytes
        && budget.files > 0
        && !public(path)
        && let Some(bytes) = read_regular(path)
    {
        budget.files -= 1;
        budget.bytes -= bytes.len() as u64;
        pieces(&bytes, values);
    }
}

/// The bytes of `path` if it is (still, once opened) a small regular
/// file; never blocking on a FIFO or a device put in its place.
fn read_regular(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Files in credential stores that hold nothing secret: public keys, the
/// hosts ssh knows and ssh's own settings.
fn public(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let in_ssh = path
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == ".ssh");
    name.ends_with(".pub") || name.starts_with("known_hosts") || (in_ssh && name == "config")
}

/// The whole (trimmed) content of a one-line file, and every piece of a
/// file between quotes, spaces and separators that is long enough to be
/// a key or a token. Binary files (a NUL in them) give nothing: their
/// bytes would match by chance, and could not be pasted anywhere.
fn pieces(bytes: &[u8], values: &mut Vec<Vec<u8>>) {
    if bytes.contains(&0) {
        return;
    }
    let printable = |piece: &[u8]| piece.iter().all(|b| b.is_ascii_graphic());
    let trimmed = bytes.trim_ascii();
    if trimmed.len() >= MIN_LINE && printable(trimmed) {
        values.push(trimmed.to_vec());
    }
    let separators = |b: &u8| b.is_ascii_whitespace() || b"\"'=:,;{}[]".contains(b);
    for piece in bytes.split(separators) {
        if piece.len() >= MIN_PIECE && printable(piece) {
            values.push(piece.to_vec());
        }
    }
}

/// A one-line file shorter than this is not taken whole (a word such as
/// `default` in a tool's settings would be withheld everywhere).
const MIN_LINE: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_file_gives_its_keys_and_tokens_not_its_words() {
        let mut values = Vec::new();
        pieces(
            b"[default]\naws_access_key_id = AKIAEXAMPLE1234\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG\n",
            &mut values,
        );
        assert!(values.contains(&b"AKIAEXAMPLE1234".to_vec()));
        assert!(values.contains(&b"wJalrXUtnFEMI/K7MDENG".to_vec()));
        assert!(!values.contains(&b"default".to_vec()));
        let mut values = Vec::new();
        pieces(
            b"{\"access_token\":\"eyJhbGciOiJIUzI1NiJ9.abc\"}",
            &mut values,
        );
        assert!(values.contains(&b"eyJhbGciOiJIUzI1NiJ9.abc".to_vec()));
        let mut values = Vec::new();
        pieces(b"hunter22\n", &mut values);
        assert_eq!(values, vec![b"hunter22".to_vec()]);
        let mut values = Vec::new();
        pieces(b"default\n", &mut values);
        pieces(b"SQLite format 3\0\x01\x02longbinarypieceXYZ", &mut values);
        assert!(values.is_empty(), "{values:?}");
    }
}

//! The bridge's bearer token: a fresh random one at every start, in a file
//! only the user can read, in a directory only the user can change
//! (`$XDG_RUNTIME_DIR/sandcrab/serve.token`, else
//! `~/.config/sandcrab/tokens/serve.token`).
//!
//! A client never sends the token to a server before the server proved it
//! holds it: [`proof`] is a keyed hash of the client's random challenge and
//! of the address the client reached, so a process squatting the port (or
//! relaying to the real bridge from another address) cannot answer it.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "{path} is owned by user {owner}, not by you (user {you}): someone else may have planted it; delete it, or keep the token in a private directory with --token-file"
    )]
    NotYours { path: PathBuf, owner: u32, you: u32 },
    #[error(
        "{path} can be changed by other users (mode {mode:o}): the token must be kept in a directory only you can write; use --token-file in a private directory (or `chmod go-w {path}` if it is yours)"
    )]
    SharedDirectory { path: PathBuf, mode: u32 },
    #[error("{path} is readable by others (mode {mode:o}): run `chmod 600 {path}` or delete it")]
    Readable { path: PathBuf, mode: u32 },
    #[error(
        "{}",
        if reason.kind() == std::io::ErrorKind::NotFound {
            format!("no bridge is running here: its token file {} does not exist (start one with `sandcrab serve -w DIR`, or pass --token-file)", path.display())
        } else {
            format!("cannot read the bridge's token from {}: {reason} (pass --token-file)", path.display())
        }
    )]
    Unreadable {
        path: PathBuf,
        /// Why (kept out of the error chain: the message says it).
        reason: std::io::Error,
    },
    #[error("cannot write the token to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The default token file of `sandcrab serve` (`name` = `serve.token`) or
/// of `sandcrab mcp serve --http` (`mcp.token`): in
/// `$XDG_RUNTIME_DIR/sandcrab/`, else `~/.config/sandcrab/tokens/`.
pub fn default_file(name: &str) -> Option<PathBuf> {
    let dir = match crate::user_files::runtime_dir() {
        Some(run) => run,
        None => crate::user_files::config_tokens_dir()?,
    };
    Some(dir.join(name))
}

/// The directories where every sandcrab keeps its tokens by default
/// (with and without `$XDG_RUNTIME_DIR`: another sandcrab may have been
/// started the other way): no confined program may read them.
pub fn default_dirs() -> Vec<PathBuf> {
    crate::user_files::runtime_dir()
        .into_iter()
        .chain(crate::user_files::config_tokens_dir())
        .collect()
}

/// A new token for this start, written to `file` (0600) in a private
/// directory (created 0700 if missing). Earlier tokens stop working.
pub fn issue(file: &Path) -> Result<String, TokenError> {
    // Whoever holds it drives the bridge: no confined program reads it.
    crate::kept::extend(crate::kept::Item::BridgeTokens, file, "--token-file");
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| TokenError::Write {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        check_private_dir(dir)?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(file) {
        check_owner(file, &meta)?;
    }
    let token = random_token();
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    let write_err = |source| TokenError::Write {
        path: file.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(&tmp);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(write_err)?;
    writeln!(out, "{token}").map_err(write_err)?;
    std::fs::rename(&tmp, file).map_err(write_err)?;
    Ok(token)
}

/// Read the token a running bridge uses (for `sandcrab agent …`), after
/// checking that the file and its directory are the user's own.
pub fn read(file: &Path) -> Result<String, TokenError> {
    let unreadable = |reason| TokenError::Unreadable {
        path: file.to_path_buf(),
        reason,
    };
    if let Some(dir) = file.parent() {
        check_private_dir(dir)?;
    }
    let meta = std::fs::symlink_metadata(file).map_err(unreadable)?;
    check_owner(file, &meta)?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Readable {
            path: file.to_path_buf(),
            mode,
        });
    }
    let bytes = crate::safe_fs::read_regular(file, MAX_TOKEN_FILE, crate::safe_fs::Links::Refuse)
        .map_err(unreadable)?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// The proof that a server holds `token`: a keyed hash of the client's
/// `challenge` and of `reached`, the server address the client connected to.
pub fn proof(token: &str, challenge: &str, reached: &SocketAddr) -> String {
    let key = blake3::derive_key("sandcrab bridge proof v1", token.as_bytes());
    let mut hasher = blake3::Hasher::new_keyed(&key);
    hasher.update(challenge.as_bytes());
    hasher.update(b"\0");
    hasher.update(reached.to_string().as_bytes());
    hasher.finalize().to_hex().to_string()
}

/// A new random challenge (hex).
pub fn challenge() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_token() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = rand::rng();
    (0..43)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn you() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn check_owner(path: &Path, meta: &std::fs::Metadata) -> Result<(), TokenError> {
    if meta.uid() != you() {
        return Err(TokenError::NotYours {
            path: path.to_path_buf(),
            owner: meta.uid(),
            you: you(),
        });
    }
    Ok(())
}

/// `dir` is the user's and only the user can change what is in it; every
/// directory above it is the user's or root's and, if others may write it,
/// sticky (as /tmp is), so nobody else can swap `dir` out.
fn check_private_dir(dir: &Path) -> Result<(), TokenError> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let dir = dir
        .canonicalize()
        .map_err(|reason| TokenError::Unreadable {
            path: dir.to_path_buf(),
            reason,
        })?;
    let meta = std::fs::metadata(&dir).map_err(|reason| TokenError::Unreadable {
        path: dir.clone(),
        reason,
    })?;
    check_owner(&dir, &meta)?;
    if meta.mode() & 0o022 != 0 {
        return Err(TokenError::SharedDirectory {
            path: dir.clone(),
            mode: meta.mode() & 0o7777,
        });
    }
    for above in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(above) else {
            continue;
        };
        if meta.uid() != you() && meta.uid() != 0 {
            return Err(TokenError::NotYours {
                path: above.to_path_buf(),
                owner: meta.uid(),
                you: you(),
            });
        }
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.mode() & 0o022 != 0 && !sticky {
            return Err(TokenError::SharedDirectory {
                path: above.to_path_buf(),
                mode: meta.mode() & 0o7777,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_fresh_private_token_at_every_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/serve.token");
        let a = issue(&file).unwrap();
        assert_eq!(a.len(), 43);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read(&file).unwrap(), a);
        let b = issue(&file).unwrap();
        assert_ne!(a, b, "the token rotates per start");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read(&file).unwrap_err().to_string().contains("chmod 600"));
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = issue(&shared.join("serve.token")).unwrap_err().to_string();
        assert!(err.contains("changed by other users"), "{err}");
    }

    #[test]
    fn a_proof_binds_the_token_the_challenge_and_the_address() {
        let here: SocketAddr = "127.0.0.1:9990".parse().unwrap();
        let there: SocketAddr = "127.0.0.2:9990".parse().unwrap();
        let p = proof("t", "c", &here);
        assert_eq!(p, proof("t", "c", &here));
        assert_ne!(p, proof("u", "c", &here));
        assert_ne!(p, proof("t", "d", &here));
        assert_ne!(p, proof("t", "c", &there));
    }
}

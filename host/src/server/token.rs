//! The bridge's bearer token: random, created at first start in a file
//! only the user can read (`$XDG_RUNTIME_DIR/sandcrab/serve.token`, else
//! `~/.config/sandcrab/serve.token`), reused afterwards.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The default token file.
pub fn default_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .or_else(|| {
            std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        })?;
    Some(base.join("sandcrab").join("serve.token"))
}

/// The token in `file`, creating the file (0600) with a new one if needed.
pub fn load_or_create(file: &Path) -> anyhow::Result<String> {
    if let Ok(text) = std::fs::read_to_string(file) {
        let mode = std::fs::metadata(file)?.permissions().mode();
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "{} is readable by others (mode {:o}): run `chmod 600 {}` or delete it",
                file.display(),
                mode & 0o777,
                file.display()
            );
        }
        let token = text.trim().to_string();
        if token.len() >= 32 {
            return Ok(token);
        }
    }
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let token: String = {
        use rand::Rng;
        let mut rng = rand::rng();
        (0..43)
            .map(|_| {
                const ALPHABET: &[u8] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                ALPHABET[rng.random_range(0..ALPHABET.len())] as char
            })
            .collect()
    };
    let tmp = file.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    writeln!(out, "{token}")?;
    std::fs::rename(&tmp, file).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(token)
}

/// Read the token a running bridge uses (for `sandcrab agent …`).
pub fn read(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| {
        format!(
            "cannot read the bridge's token from {} (is `sandcrab serve` running? pass --token-file)",
            file.display()
        )
    })?;
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/serve.token");
        let a = load_or_create(&file).unwrap();
        assert_eq!(a.len(), 43);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(&file).unwrap(), a);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            load_or_create(&file)
                .unwrap_err()
                .to_string()
                .contains("chmod 600")
        );
    }
}

//! Where the user's own sandcrab files are: one answer for each place,
//! honouring the XDG variables, for the loaders, for the registry of what
//! the host keeps ([`crate::kept`]) and for every message that tells the
//! operator which file to edit.

use std::path::PathBuf;

/// An XDG base directory: `$VAR` when it is absolute, else `~/FALLBACK`.
fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home().map(|h| h.join(fallback)))
}

/// The user's home directory (`$HOME`, when absolute).
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// sandcrab's configuration folder: `$XDG_CONFIG_HOME/sandcrab`, else
/// `~/.config/sandcrab` (the configuration file, trust records, tokens).
pub fn config_dir() -> Option<PathBuf> {
    Some(xdg("XDG_CONFIG_HOME", ".config")?.join("sandcrab"))
}

/// The user's configuration file: `config_dir()/config.toml`.
pub fn config_file() -> Option<PathBuf> {
    Some(config_dir()?.join("config.toml"))
}

/// sandcrab's data folder: `$XDG_DATA_HOME/sandcrab`, else
/// `~/.local/share/sandcrab` (sessions, checkpoints, input history, the
/// host's keys).
pub fn data_dir() -> Option<PathBuf> {
    Some(xdg("XDG_DATA_HOME", ".local/share")?.join("sandcrab"))
}

/// Write a small file of what sandcrab learned (in the data folder):
/// its folder created private (0700) first. A failure only means it is
/// learned again next time, so callers may ignore it.
pub fn write_private(file: &std::path::Path, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::write(file, text)
}

/// The host's own keys (`data_dir()/keys`).
pub fn keys_dir() -> Option<PathBuf> {
    Some(data_dir()?.join("keys"))
}

/// sandcrab's cache folder: `$XDG_CACHE_HOME/sandcrab`, else
/// `~/.cache/sandcrab` (compiled components).
pub fn cache_dir() -> Option<PathBuf> {
    Some(xdg("XDG_CACHE_HOME", ".cache")?.join("sandcrab"))
}

/// The key that binds the compiled code in the cache folder `cache` to
/// this user: a file beside that folder (`components.key` for
/// `components`), never inside it.
pub fn cache_key_file(cache: &std::path::Path) -> PathBuf {
    cache.with_extension("key")
}

/// `$XDG_RUNTIME_DIR/sandcrab`, when `$XDG_RUNTIME_DIR` is an absolute
/// directory (bridge tokens, preferred to the configuration folder).
pub fn runtime_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .map(|p| p.join("sandcrab"))
}

/// Where tokens live beside the configuration: `config_dir()/tokens`.
pub fn config_tokens_dir() -> Option<PathBuf> {
    Some(config_dir()?.join("tokens"))
}

/// [`config_file`] as a message names it (`~` for the home directory).
pub fn config_file_shown() -> String {
    let Some(file) = config_file() else {
        return "~/.config/sandcrab/config.toml".into();
    };
    match home().and_then(|home| file.strip_prefix(&home).ok().map(|rest| rest.to_path_buf())) {
        Some(rest) => format!("~/{}", rest.display()),
        None => file.display().to_string(),
    }
}

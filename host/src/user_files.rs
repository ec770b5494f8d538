//! Where the user's own sandcrab files are: one answer, honouring
//! `XDG_CONFIG_HOME`, for the loader and for every message that tells the
//! operator which file to edit.

use std::path::PathBuf;

/// The user's configuration file: `$XDG_CONFIG_HOME/sandcrab/config.toml`,
/// else `~/.config/sandcrab/config.toml`.
pub fn config_file() -> Option<PathBuf> {
    let dir = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(dir.join("sandcrab").join("config.toml"))
}

/// [`config_file`] as a message names it (`~` for the home directory).
pub fn config_file_shown() -> String {
    let Some(file) = config_file() else {
        return "~/.config/sandcrab/config.toml".into();
    };
    match std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|home| file.strip_prefix(&home).ok().map(|rest| rest.to_path_buf()))
    {
        Some(rest) => format!("~/{}", rest.display()),
        None => file.display().to_string(),
    }
}

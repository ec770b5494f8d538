//! The user's credential stores: where the programs and tools people use
//! every day keep keys, tokens and passwords. Relative to the home
//! directory; the operator adds more with `[policy] kept_paths`.

/// Credential stores beneath `$HOME`, kept secret from every tool and
/// program whatever the workspace.
pub const CREDENTIAL_STORES: &[&str] = &[
    // SSH keys and agent configuration; GnuPG keys.
    ".ssh",
    ".gnupg",
    // Cloud providers.
    ".aws",
    ".azure",
    ".config/gcloud",
    ".oci",
    // Machine and git credentials.
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    // Container registries and clusters.
    ".docker/config.json",
    ".kube",
    // Forges and package registries.
    ".config/gh",
    ".config/glab-cli",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings-security.xml",
    // Desktop keyrings and password stores.
    ".local/share/keyrings",
    ".password-store",
    // Browser profiles (cookies, saved passwords).
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    // Other agents' keys.
    ".config/openai",
    ".claude/.credentials.json",
    ".codex/auth.json",
];

/// Files beneath `$HOME` that the user's own programs run or obey when
/// they next start: kept read-only, so a model working in the home folder
/// cannot plant code for the user's next shell, git, editor or login.
pub const STARTUP_FILES: &[&str] = &[
    // Shells.
    ".profile",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".config/fish",
    ".inputrc",
    // Git's own configuration (hooks, fsmonitor, aliases for every
    // repository).
    ".gitconfig",
    ".config/git",
    // Editors and terminals that run their start files.
    ".vimrc",
    ".vim",
    ".config/nvim",
    ".emacs",
    ".emacs.d",
    ".config/emacs",
    ".tmux.conf",
    ".config/tmux",
    // Logins and desktops.
    ".pam_environment",
    ".xprofile",
    ".xinitrc",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    // Where the user's own programs are found first.
    ".local/bin",
    "bin",
];

/// The sockets of the credential agents this session reaches: the one
/// `$SSH_AUTH_SOCK` names, gpg-agent's, the desktop keyring's, and the
/// session bus (whose secret service hands out stored passwords), in
/// `$XDG_RUNTIME_DIR` or where the environment says.
pub fn credential_agents() -> Vec<std::path::PathBuf> {
    use std::path::PathBuf;
    let mut agents: Vec<PathBuf> = Vec::new();
    if let Some(sock) = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from) {
        agents.push(sock);
    }
    if let Some(bus) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .and_then(|a| {
            a.split(';')
                .filter_map(|part| part.strip_prefix("unix:"))
                .flat_map(|opts| opts.split(','))
                .find_map(|kv| kv.strip_prefix("path=").map(PathBuf::from))
        })
    {
        agents.push(bus);
    }
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        for name in [
            "gnupg",
            "keyring",
            "bus",
            "ssh-agent.socket",
            "gcr",
            "openssh_agent",
        ] {
            agents.push(run.join(name));
        }
    }
    agents.retain(|p| p.is_absolute());
    agents
}

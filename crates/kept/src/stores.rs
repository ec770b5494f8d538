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
/// cannot plant code for the user's next shell, git, editor, build or
/// login.
pub const STARTUP_FILES: &[&str] = &[
    // Shells (and what Debian's `.bashrc` sources).
    ".profile",
    ".bashrc",
    ".bash_aliases",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".oh-my-zsh",
    ".config/fish",
    ".inputrc",
    // Git's and Mercurial's own configuration (hooks, fsmonitor, aliases
    // for every repository).
    ".gitconfig",
    ".config/git",
    ".hgrc",
    ".config/hg",
    // Editors and terminals that run their start files and plugins.
    ".vimrc",
    ".vim",
    ".config/nvim",
    ".local/share/nvim",
    ".emacs",
    ".emacs.d",
    ".config/emacs",
    ".tmux.conf",
    ".tmux",
    ".config/tmux",
    ".vscode",
    ".vscode-server",
    ".config/Code",
    // Logins and desktops.
    ".pam_environment",
    ".xprofile",
    ".xsession",
    ".xsessionrc",
    ".xinitrc",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    // Where the user's own programs are found first, and the toolchains
    // and package settings their builds run.
    ".local/bin",
    "bin",
    ".local/lib",
    ".cargo/bin",
    ".cargo/env",
    ".cargo/config",
    ".cargo/config.toml",
    ".rustup",
    ".pyenv",
    ".nvm",
    "go/bin",
    ".config/pip",
    ".pip",
    ".pythonrc",
    ".ipython",
    ".gemrc",
    ".irbrc",
    ".curlrc",
    ".wgetrc",
    ".docker/cli-plugins",
    ".config/direnv",
];

/// Stores the environment moves elsewhere, by the tool's own variable:
/// the file or folder it names (`""`), or what in that folder. A variable
/// may name several, separated by `:` (as `KUBECONFIG` does).
const SECRETS_NAMED_BY: &[(&str, &[&str])] = &[
    ("GNUPGHOME", &[""]),
    ("PASSWORD_STORE_DIR", &[""]),
    ("AWS_SHARED_CREDENTIALS_FILE", &[""]),
    ("AWS_CONFIG_FILE", &[""]),
    ("AZURE_CONFIG_DIR", &[""]),
    ("CLOUDSDK_CONFIG", &[""]),
    ("GOOGLE_APPLICATION_CREDENTIALS", &[""]),
    ("KUBECONFIG", &[""]),
    ("DOCKER_CONFIG", &["config.json"]),
    ("GH_CONFIG_DIR", &[""]),
    ("NETRC", &[""]),
    ("NPM_CONFIG_USERCONFIG", &[""]),
    ("CARGO_HOME", &["credentials", "credentials.toml"]),
];

/// Start files the environment moves elsewhere (see [`SECRETS_NAMED_BY`]).
const STARTUP_NAMED_BY: &[(&str, &[&str])] = &[
    ("GIT_CONFIG_GLOBAL", &[""]),
    ("ZDOTDIR", &[".zshrc", ".zshenv", ".zprofile", ".zlogin"]),
    ("BASH_ENV", &[""]),
    ("ENV", &[""]),
    ("INPUTRC", &[""]),
    ("PYTHONSTARTUP", &[""]),
    ("PYTHONUSERBASE", &[""]),
    ("PIP_CONFIG_FILE", &[""]),
    ("CARGO_HOME", &["bin", "env", "config", "config.toml"]),
    ("RUSTUP_HOME", &[""]),
    ("PYENV_ROOT", &[""]),
    ("NVM_DIR", &[""]),
    ("GOBIN", &[""]),
    ("GOPATH", &["bin"]),
];

/// One of the user's stores or start files, and what named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPlace {
    pub item: super::Item,
    pub path: std::path::PathBuf,
    /// `default`, or `$VARIABLE`.
    pub source: String,
}

/// Every credential store and start file of the user: the names beneath
/// the home folder `home` (those under `.config` and `.local/share` also
/// where `$XDG_CONFIG_HOME` and `$XDG_DATA_HOME` move them), and those the
/// environment (read through `env`) names.
pub fn user_places(
    home: &std::path::Path,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<UserPlace> {
    use super::Item;
    let mut places = Vec::new();
    let moved = [
        (".config/", env_folder(env, "XDG_CONFIG_HOME", home)),
        (".local/share/", env_folder(env, "XDG_DATA_HOME", home)),
    ];
    for (item, names) in [
        (Item::CredentialStore, CREDENTIAL_STORES),
        (Item::StartupFile, STARTUP_FILES),
    ] {
        for name in names {
            places.push(UserPlace {
                item,
                path: home.join(name),
                source: "default".into(),
            });
            for (prefix, folder) in &moved {
                if let (Some(rest), Some(folder)) = (name.strip_prefix(prefix), folder) {
                    places.push(UserPlace {
                        item,
                        path: folder.join(rest),
                        source: format!("default, moved by ${}", moved_by(prefix)),
                    });
                }
            }
        }
    }
    for (item, named) in [
        (Item::CredentialStore, SECRETS_NAMED_BY),
        (Item::StartupFile, STARTUP_NAMED_BY),
    ] {
        for (var, inside) in named {
            let Some(value) = env(var) else { continue };
            for base in std::env::split_paths(&value) {
                if !places_a_store(&base, home) {
                    continue;
                }
                for name in *inside {
                    places.push(UserPlace {
                        item,
                        path: if name.is_empty() {
                            base.clone()
                        } else {
                            base.join(name)
                        },
                        source: format!("${var}"),
                    });
                }
            }
        }
    }
    places
}

fn moved_by(prefix: &str) -> &'static str {
    if prefix == ".config/" {
        "XDG_CONFIG_HOME"
    } else {
        "XDG_DATA_HOME"
    }
}

/// The folder an XDG variable names, when it is absolute and not the
/// default already.
fn env_folder(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    var: &str,
    home: &std::path::Path,
) -> Option<std::path::PathBuf> {
    let folder = std::path::PathBuf::from(env(var)?);
    let default = home.join(if var == "XDG_CONFIG_HOME" {
        ".config"
    } else {
        ".local/share"
    });
    (places_a_store(&folder, home) && folder != default).then_some(folder)
}

/// Whether a path the environment names can be kept: absolute, and not
/// the home folder or a folder that holds it (keeping that would keep
/// everything).
fn places_a_store(path: &std::path::Path, home: &std::path::Path) -> bool {
    path.is_absolute() && !home.starts_with(path) && path.components().count() > 2
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::Path;

    fn kept(places: &[UserPlace], path: &str) -> Option<super::super::Item> {
        places
            .iter()
            .find(|p| p.path == Path::new(path))
            .map(|p| p.item)
    }

    #[test]
    fn xdg_folders_and_the_tools_own_variables_move_what_is_kept() {
        use super::super::Item::{CredentialStore, StartupFile};
        let env = |var: &str| -> Option<OsString> {
            match var {
                "XDG_CONFIG_HOME" => Some("/home/u/.xdg".into()),
                "KUBECONFIG" => Some("/home/u/k1:/srv/k2".into()),
                "CARGO_HOME" => Some("/opt/cargo".into()),
                "GNUPGHOME" => Some("/".into()),
                "AWS_CONFIG_FILE" => Some("relative/aws".into()),
                _ => None,
            }
        };
        let places = user_places(Path::new("/home/u"), &env);
        assert_eq!(kept(&places, "/home/u/.config/gh"), Some(CredentialStore));
        assert_eq!(kept(&places, "/home/u/.xdg/gh"), Some(CredentialStore));
        assert_eq!(kept(&places, "/home/u/.xdg/git"), Some(StartupFile));
        assert_eq!(
            kept(&places, "/home/u/.xdg/git/credentials"),
            Some(CredentialStore)
        );
        assert_eq!(kept(&places, "/home/u/k1"), Some(CredentialStore));
        assert_eq!(kept(&places, "/srv/k2"), Some(CredentialStore));
        assert_eq!(
            kept(&places, "/opt/cargo/credentials.toml"),
            Some(CredentialStore)
        );
        assert_eq!(kept(&places, "/opt/cargo/bin"), Some(StartupFile));
        assert_eq!(kept(&places, "/home/u/.bash_aliases"), Some(StartupFile));
        // A variable naming the root, or a relative path, keeps nothing.
        assert!(!places.iter().any(|p| p.path == Path::new("/")));
        assert!(!places.iter().any(|p| p.path.is_relative()));
    }
}

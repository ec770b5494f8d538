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

//! `[trust.signers.NAME]` in the operator's file: the keys whose
//! signatures the operator trusts, and which plugins each may sign.
//!
//! ```toml
//! [trust.signers.acme]
//! key = "ssh-ed25519 AAAAC3Nza… release@acme.example"
//! plugins = ["acme-*", "hello"]   # names, or a prefix ending in '*'
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One signer as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerToml {
    /// An OpenSSH public key line (`ssh-ed25519 AAAA… comment`).
    pub key: String,
    /// The plugins this key may sign: exact names, `PREFIX*`, or `*`.
    pub plugins: Vec<String>,
}

/// A signer whose key parsed.
#[derive(Debug, Clone)]
pub struct Signer {
    /// The name the operator gave it.
    pub name: String,
    pub key: ssh_key::PublicKey,
    pub plugins: Vec<String>,
}

impl Signer {
    /// Whether this signer may sign the plugin `name`.
    pub fn may_sign(&self, name: &str) -> bool {
        self.plugins.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => p == name,
        })
    }

    /// `acme (SHA256:…)`: how receipts and the lockfile name it.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, fingerprint(self.key.key_data()))
    }
}

/// The key a signer label (`NAME (SHA256:…)`) names: its fingerprint,
/// so a signer the operator renamed is still the same signer.
pub fn key_of_label(label: &str) -> &str {
    label
        .rsplit_once(" (")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(label)
}

/// The SHA-256 fingerprint of a key, as `ssh-keygen -l` prints it.
pub fn fingerprint(key: &ssh_key::public::KeyData) -> String {
    key.fingerprint(ssh_key::HashAlg::Sha256).to_string()
}

/// A signer that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    #[error(
        "[trust.signers.{name}] key: not an OpenSSH public key ({reason}); paste the line of the .pub file, e.g. `ssh-ed25519 AAAA… name`"
    )]
    BadKey { name: String, reason: String },
    #[error(
        "[trust.signers.{name}] plugins: name at least one plugin (a name, `PREFIX*`, or `*`); a signer that may sign nothing is a mistake"
    )]
    NoScope { name: String },
    #[error("[trust.signers.{name}] plugins: '{pattern}' is not a plugin name, `PREFIX*` or `*`")]
    BadScope { name: String, pattern: String },
}

/// Every signer the operator trusts.
#[derive(Debug, Clone, Default)]
pub struct Signers {
    signers: Vec<Signer>,
}

impl Signers {
    /// Parse the `[trust.signers]` table.
    pub fn from_toml(table: &BTreeMap<String, SignerToml>) -> Result<Signers, SignerError> {
        let mut signers = Vec::new();
        for (name, s) in table {
            let key = ssh_key::PublicKey::from_openssh(s.key.trim()).map_err(|e| {
                SignerError::BadKey {
                    name: name.clone(),
                    reason: e.to_string(),
                }
            })?;
            let supported = matches!(
                key.algorithm(),
                ssh_key::Algorithm::Ed25519
                    | ssh_key::Algorithm::Ecdsa {
                        curve: ssh_key::EcdsaCurve::NistP256
                    }
            );
            if !supported {
                return Err(SignerError::BadKey {
                    name: name.clone(),
                    reason: format!(
                        "{} keys are not checked here; sign with an ssh-ed25519 (or ecdsa-sha2-nistp256) key",
                        key.algorithm()
                    ),
                });
            }
            if s.plugins.is_empty() {
                return Err(SignerError::NoScope { name: name.clone() });
            }
            for pattern in &s.plugins {
                let stem = pattern.strip_suffix('*').unwrap_or(pattern);
                let ok = stem
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
                if !ok {
                    return Err(SignerError::BadScope {
                        name: name.clone(),
                        pattern: pattern.clone(),
                    });
                }
            }
            signers.push(Signer {
                name: name.clone(),
                key,
                plugins: s.plugins.clone(),
            });
        }
        Ok(Signers { signers })
    }

    /// The signer whose key is `key`.
    pub fn by_key(&self, key: &ssh_key::public::KeyData) -> Option<&Signer> {
        self.signers.iter().find(|s| s.key.key_data() == key)
    }

    /// Whether any signer is named.
    pub fn is_empty(&self) -> bool {
        self.signers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEKWOub35sBugnv6nMdI2qjqCkCgd28fhaPD4Q8GBTBP t@x";

    #[test]
    fn a_signer_signs_only_its_scope() {
        let table = BTreeMap::from([(
            "acme".to_string(),
            SignerToml {
                key: KEY.into(),
                plugins: vec!["acme-*".into(), "hello".into()],
            },
        )]);
        let signers = Signers::from_toml(&table).unwrap();
        let acme = &signers.signers[0];
        assert!(acme.may_sign("acme-lint") && acme.may_sign("hello"));
        assert!(!acme.may_sign("hello2") && !acme.may_sign("other"));
        assert!(
            acme.label().starts_with("acme (SHA256:"),
            "{}",
            acme.label()
        );
    }

    #[test]
    fn bad_signers_are_named() {
        for (key, plugins, says) in [
            (
                "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDQ6g8zWgdgyg5zdNAxCKLyqeVvTs0GBJB3Td8Kdlw2+IXZAKUb62mUT31GebeACVtxzqNJdKxgvfSWWxn7J3vkVbBugNxl0HjvI8Lkoom5t5b1RENqLsyUsyAU+YY3kcxLqG8nYCW9IJu0ZkvqtYkB9gpyjBCRkdlNOVeZMvR/Zw== t@x",
                vec!["x".to_string()],
                "not checked here",
            ),
            (
                "ssh-ed25519 nope",
                vec!["x".to_string()],
                "not an OpenSSH public key",
            ),
            (KEY, vec![], "name at least one plugin"),
            (KEY, vec!["Acme/*".to_string()], "'Acme/*'"),
        ] {
            let table = BTreeMap::from([(
                "s".to_string(),
                SignerToml {
                    key: key.into(),
                    plugins,
                },
            )]);
            let err = Signers::from_toml(&table).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("[trust.signers.s]"),
                "{err}"
            );
        }
    }
}
